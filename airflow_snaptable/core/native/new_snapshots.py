"""What landed in a table after a baseline (core/incremental.py finds it; sensors and triggers report it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NewSnapshots:
    """What landed in a table after a baseline: the change range ``(from, to]`` to process next.

    ``Table.changes(from_snapshot_id, to_snapshot_id)`` reads exactly these changes.

    - ``from_snapshot_id``: the baseline (a given id, or a consumer's next snapshot - 1).
    - ``to_snapshot_id``: the latest snapshot when anything is new, else ``from_snapshot_id``.
    - ``latest_snapshot_id``: the table's latest snapshot when checked (0: no snapshot; below
      the baseline after a rollback).
    - ``snapshot_ids`` / ``commit_kinds``: every snapshot in the range and its kind;
      ``matching_snapshot_ids``: those whose kind was asked for.
    - ``added_records`` / ``deleted_records``: net record counts of the range (None when not computed).
    """

    table: str
    from_snapshot_id: int
    to_snapshot_id: int
    latest_snapshot_id: int
    snapshot_ids: list[int] = field(default_factory=list)
    commit_kinds: list[str] = field(default_factory=list)
    matching_snapshot_ids: list[int] = field(default_factory=list)
    added_records: int | None = None
    deleted_records: int | None = None

    @property
    def found(self) -> bool:
        """True when a snapshot of a requested kind is new."""
        return bool(self.matching_snapshot_ids)

    def to_dict(self) -> dict[str, Any]:
        """The range as JSON (a sensor's XCom, a trigger's event payload)."""
        doc: dict[str, Any] = {
            "table": self.table,
            "from_snapshot_id": self.from_snapshot_id,
            "to_snapshot_id": self.to_snapshot_id,
            "snapshot_ids": list(self.snapshot_ids),
            "commit_kinds": list(self.commit_kinds),
            "matching_snapshot_ids": list(self.matching_snapshot_ids),
        }
        if self.added_records is not None:
            doc["added_records"] = self.added_records
            doc["deleted_records"] = self.deleted_records
        return doc
