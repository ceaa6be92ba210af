"""A reader's position in an Iceberg table: the data sequence number of the last snapshot of a ref
(``main`` unless a sensor names another branch or tag) it saw.

Iceberg's snapshot ids are random 64-bit numbers; a position must grow with every commit, so
``NewSnapshotSensor`` and the triggers count in sequence numbers (format version 2 and later; a
version 1 table has none, and sensing it raises UnsupportedOperationError). Sequence numbers along
``main`` increase but need not be contiguous (commits to other branches take numbers too): the
new snapshots are ``main``'s ancestors numbered above the position. They are complete only if
``main`` still holds the state at the position (or, from position 0, its first commit): when expiry
has removed it, the range is an error, never a silent skip, as on this package's tables.
"""

from __future__ import annotations

from airflow_snaptable.core.errors import InvalidArgumentError, SnapshotNotFoundError, UnsupportedOperationError
from airflow_snaptable.core.formats.iceberg.retention import MAIN, ancestors
from airflow_snaptable.core.formats.iceberg.snapshots import snapshot_of
from airflow_snaptable.core.native.new_snapshots import NewSnapshots


class IcebergPositions:
    """``latest_id`` / ``earliest_id`` of a ref's history as positions (what the triggers ask); ``main`` by default."""

    def __init__(self, table, ref: str | None = None):
        self.table = table
        self.ref = MAIN if ref is None else ref

    def history(self) -> list:
        """The ref's retained ancestry, oldest first (pyiceberg snapshots); empty for a table without snapshots."""
        metadata = self.table.refresh().metadata
        if metadata.format_version < 2:
            raise UnsupportedOperationError(
                f"{self.table.uri} is an Iceberg format version 1 table: it has no sequence numbers to count new "
                "snapshots by (upgrade it with the table property format-version=2)"
            )
        if self.ref not in metadata.refs:
            if self.ref == MAIN:
                return []
            raise InvalidArgumentError(f"{self.table.uri} has no ref {self.ref!r} (refs: {', '.join(sorted(metadata.refs))})")
        return list(reversed(ancestors(metadata, metadata.refs[self.ref].snapshot_id)))

    def latest_id(self) -> int | None:
        history = self.history()
        return history[-1].sequence_number if history else None

    def earliest_id(self) -> int | None:
        history = self.history()
        return history[0].sequence_number if history else None


def new_snapshots(table, baseline: int, kinds_wanted, with_changes: bool, checked_through: int | None, ref: str | None = None):
    """core/incremental.py ``find_new_snapshots`` on an Iceberg table (positions: sequence numbers along ``ref``)."""
    history = IcebergPositions(table, ref).history()
    latest = history[-1].sequence_number if history else 0
    if latest <= baseline or latest == checked_through:
        return NewSnapshots(table.uri, baseline, baseline, latest)
    new = [s for s in history if s.sequence_number > baseline]
    first = history[0]
    # The state at the position must still be the ref's (as on this package's tables, the changes after it are
    # read from it), or the position is 0 and nothing of its history ever expired (the first commit is number 1).
    # Parent ids cannot tell: expiry clears the parent of the oldest snapshot it keeps.
    complete = len(new) < len(history) or (baseline == 0 and first.sequence_number == 1)
    if not complete:
        raise SnapshotNotFoundError(
            f"snapshots of {table.uri} after position {baseline} have expired (the oldest retained snapshot of "
            f"{ref or MAIN} is "
            f"{first.snapshot_id}, sequence number {first.sequence_number}): the changes after it cannot be read "
            "completely"
        )
    snapshots = [snapshot_of(s) for s in new]
    ids = [s.sequence_number for s in new]
    kinds = [s.commit_kind.value for s in snapshots]
    matching = [i for i, k in zip(ids, kinds) if kinds_wanted is None or k in kinds_wanted]
    added = deleted = None
    if matching and with_changes:
        added = sum(int(s.summary.get("added-records", 0) or 0) for s in snapshots)
        deleted = sum(int(s.summary.get("deleted-records", 0) or 0) for s in snapshots)
    return NewSnapshots(table.uri, baseline, latest, latest, ids, kinds, matching, added, deleted)
