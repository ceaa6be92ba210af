"""A table's lineage since a mark: what counts as new follows parents, never id arithmetic or clocks.

A mark (a triggered job's ``lastSnapshot``, an event trigger's position) names a snapshot of one
table. What is new since it is the chain of parents from the table's current snapshot back to it:

- **The table**: a table dropped and re-created at the same name or location is another table, and
  a mark of the old one says nothing about it (it starts fresh). Iceberg's identity is its
  ``table-uuid``; ours and Paimon's is the first schema file's digest (written once, when the
  table is created: its creation time and columns), read only to compare with a mark.
- **The snapshot**: ours and Paimon's ids are consecutive, but a rollback lets later commits reuse
  ids, so an id alone cannot say the mark is still in the lineage. A snapshot's identity is its
  base manifest list (unique to the commit attempt, core/native/commit_lineage.py): the mark is
  on the current lineage when the snapshot under its id is still that commit; then the snapshots
  after it are exactly the ids above it. Iceberg's ids are random: the walk follows
  ``parent-snapshot-id`` from the current snapshot and stops at the mark, or below the mark's
  sequence number (the table's commit order, assigned by the catalog, never a writer's clock:
  a skewed clock cannot hide commits), where the mark is known not to be an ancestor.
- **Rolled back past the mark**: the mark's commit is no longer in the lineage; what is new is
  then every commit not in the mark's ancestry, which the mark alone cannot bound: callers treat
  it as a change (a triggered job is due; a watcher re-reads from its last position still in the lineage).

Cost: ours and Paimon: one snapshot read (the mark's id) plus the latest id hint; Iceberg: the walk
is in the metadata the table was opened with, bounded by the commits since the mark.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from airflow_snaptable.core.errors import SnapshotNotFoundError

ICEBERG = "iceberg"
#: The first schema file of ours and Paimon's tables (both write ``schema/schema-<id>`` from 0).
FIRST_SCHEMA = "schema/schema-0"
SCHEMA_DIR = "schema"
#: How a position left the lineage (:meth:`Lineage.moved`).
NEW_TABLE = "new-table"
ROLLED_BACK = "rolled-back"


def table_identity(table: Any) -> str | None:
    """What tells this table apart from another one created later at the same name or location (the
    module). None when it cannot be told (an unreadable first schema): callers then compare nothing."""
    if getattr(table, "format", None) == ICEBERG:
        uuid = getattr(table.iceberg.metadata, "table_uuid", None)
        return None if uuid is None else str(uuid)
    storage = table.storage
    try:
        data = storage.read_bytes(FIRST_SCHEMA)
    except FileNotFoundError:
        names = sorted(n for n in storage.list_names(SCHEMA_DIR) if n.startswith("schema-") and n[7:].isdigit())
        if not names:
            return None
        first = min(names, key=lambda n: int(n[7:]))
        try:
            data = storage.read_bytes(f"{SCHEMA_DIR}/{first}")
        except FileNotFoundError:
            return None
    return "schema-" + hashlib.sha256(data).hexdigest()[:32]


@dataclass(frozen=True)
class Mark:
    """One snapshot of one table, as recorded: ``{"id", "snapshot", "sequenceNumber", "table"}``.

    ``snapshot``: ours and Paimon's commit identity (its base manifest list); ``sequenceNumber``:
    Iceberg's; ``table``: :func:`table_identity`. Each is None in marks written before it existed
    (then only what is there is compared). ``id`` 0: the table had no snapshot.
    """

    id: int
    snapshot: str | None = None
    sequence_number: int | None = None
    table: str | None = None

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"id": self.id}
        if self.snapshot is not None:
            doc["snapshot"] = self.snapshot
        if self.sequence_number is not None:
            doc["sequenceNumber"] = self.sequence_number
        if self.table is not None:
            doc["table"] = self.table
        return doc

    @classmethod
    def from_dict(cls, doc: Any) -> "Mark | None":
        """A stored mark, or None if it is not one (never recorded, or damaged)."""
        if not isinstance(doc, dict) or isinstance(doc.get("id"), bool) or not isinstance(doc.get("id"), int):
            return None
        snapshot, sequence, table = doc.get("snapshot"), doc.get("sequenceNumber"), doc.get("table")
        return cls(doc["id"], snapshot if isinstance(snapshot, str) else None,
                   sequence if isinstance(sequence, int) and not isinstance(sequence, bool) else None,
                   table if isinstance(table, str) else None)


@dataclass(frozen=True)
class Since:
    """What the lineage holds after a mark."""

    #: The mark is of another table (dropped and re-created): nothing else below is meaningful.
    new_table: bool = False
    #: The mark's commit is no longer in the current lineage (a rollback past it).
    rolled_back: bool = False
    #: Ours and Paimon: the ids after the mark, oldest first (consecutive); Iceberg: None.
    ids: range | None = None
    #: Iceberg: the snapshots after the mark, newest first (pyiceberg's); others: None.
    snapshots: list | None = None

    @property
    def count(self) -> int:
        if self.ids is not None:
            return len(self.ids)
        return len(self.snapshots or [])


class Lineage:
    """The lineage questions of one opened table (the module); reads are cached for the table's life."""

    def __init__(self, table: Any):
        self.table = table
        self._identity: tuple[str | None] | None = None
        self._commits: dict[int, str | None] = {}

    @property
    def is_iceberg(self) -> bool:
        return getattr(self.table, "format", None) == ICEBERG

    def identity(self) -> str | None:
        if self._identity is None:
            self._identity = (table_identity(self.table),)
        return self._identity[0]

    def mark(self, snapshot_id: int | None = None) -> Mark:
        """The mark of ``snapshot_id`` (default: the table's latest/current snapshot)."""
        if self.is_iceberg:
            metadata = self.table.iceberg.metadata
            chosen = metadata.current_snapshot_id if snapshot_id is None else snapshot_id
            snapshot = None if chosen is None else metadata.snapshot_by_id(chosen)
            if snapshot is None:  # none yet, or a commit newer than the metadata the table was opened with
                return Mark(chosen or 0, table=self.identity())
            sequence = snapshot.sequence_number
            return Mark(snapshot.snapshot_id, sequence_number=sequence if sequence else None, table=self.identity())
        manager = self.table.snapshot_manager
        chosen = manager.latest_id() if snapshot_id is None else snapshot_id
        if not chosen:
            return Mark(0, table=self.identity())
        return Mark(chosen, snapshot=self.commit_of(chosen), table=self.identity())

    def since(self, mark: Mark, latest_id: int | None = None) -> Since:
        """What is new after ``mark`` (ours and Paimon: up to ``latest_id``, default the latest)."""
        if not self.is_iceberg and mark.id and mark.snapshot is not None and self.commit_of(mark.id) == mark.snapshot:
            # The mark's own commit is still under its id (a commit's identity is unique to its table): the ids
            # above it are its descendants, without reading the table's identity.
            latest = (self.table.snapshot_manager.latest_id() or 0) if latest_id is None else latest_id
            return Since(ids=range(mark.id + 1, max(latest, mark.id) + 1))
        if mark.table is not None:
            current = self.identity()
            if current is not None and current != mark.table:
                return Since(new_table=True)
        if self.is_iceberg:
            return self._iceberg_since(mark)
        latest = (self.table.snapshot_manager.latest_id() or 0) if latest_id is None else latest_id
        if mark.id == 0:
            return Since(ids=range(1, latest + 1)) if latest else Since(ids=range(0))
        if mark.snapshot is not None:
            found = self.commit_of(mark.id)
            if found is not None and found != mark.snapshot:
                return Since(rolled_back=True)  # the id holds a later commit: a rollback discarded the mark
        if latest < mark.id:
            return Since(rolled_back=True)
        return Since(ids=range(mark.id + 1, latest + 1))

    def commit_of(self, snapshot_id: int) -> str | None:
        """The commit under ``snapshot_id`` (None: not there, e.g. expired); read once per Lineage."""
        if snapshot_id not in self._commits:
            manager = self.table.snapshot_manager
            try:
                self._commits[snapshot_id] = manager.identity(manager.snapshot(snapshot_id))
            except (SnapshotNotFoundError, FileNotFoundError):
                self._commits[snapshot_id] = None
        return self._commits[snapshot_id]

    def moved(self, position: Mark) -> str | None:
        """Whether a reader's ``position`` left the lineage: :data:`NEW_TABLE`, :data:`ROLLED_BACK` or None.

        ``position.id`` is a snapshot id (ours and Paimon) or a sequence number (Iceberg's positions,
        core/formats/iceberg/positions.py: numbers along the lineage, which a rollback never reuses, so
        only the table is compared). Ours and Paimon: the commit under the id being the position's own
        says both (a commit's identity is unique to its table), without reading the table's identity.
        """
        if not self.is_iceberg and position.id and position.snapshot is not None:
            found = self.commit_of(position.id)
            if found == position.snapshot:
                return None
            if found is not None or (self.table.snapshot_manager.latest_id() or 0) < position.id:
                if position.table is not None and self.identity() not in (None, position.table):
                    return NEW_TABLE
                return ROLLED_BACK
        if position.table is not None and self.identity() not in (None, position.table):
            return NEW_TABLE
        return None

    def _iceberg_since(self, mark: Mark) -> Since:
        metadata = self.table.iceberg.metadata
        by_id = {s.snapshot_id: s for s in metadata.snapshots}
        found, snapshot_id = [], metadata.current_snapshot_id
        bound = mark.sequence_number
        if bound is None and mark.id in by_id and by_id[mark.id].sequence_number:
            bound = by_id[mark.id].sequence_number
        while snapshot_id is not None and len(found) <= len(by_id):
            if snapshot_id == mark.id:
                return Since(snapshots=found)
            snapshot = by_id.get(snapshot_id)
            if snapshot is None:
                break  # the rest of the lineage expired
            if bound is not None and snapshot.sequence_number is not None and snapshot.sequence_number <= bound:
                # Committed no later than the mark, and not the mark: below it already (the mark expired)
                # or beside it (the mark is off the lineage). A child's sequence number is above its parent's.
                break
            found.append(snapshot)
            snapshot_id = snapshot.parent_snapshot_id
        if mark.id != 0 and mark.id in by_id:
            return Since(rolled_back=True)  # the mark is in the metadata but not on the current lineage
        return Since(snapshots=found)  # the mark expired (or the table had none): all the lineage left is new
