"""A table's life as a small data model: what ``snaptable timeline`` and the Airflow UI plugin draw.

:func:`build_timeline` reads a :class:`~airflow_snaptable.core.table.Table` once and returns a
:class:`Timeline` (plain values, JSON-ready with :meth:`Timeline.to_dict`); the pictures are
core/timeline/render.py's. What it holds:

- every retained snapshot, and every expired snapshot a tag still holds (a tag file keeps a copy
  of its snapshot), in commit-time order, with its kind, commit time and total records;
- the tags, with their source (manual / periodic / savepoint) and whether their snapshot expired;
- the consumers and the snapshot each reads next (``latest + 1`` once it has read everything);
- the snapshots the next expiry would remove: a dry run of the real expiry under the table's
  options (``Table.expire_snapshots(dry_run=True)``), never a re-implementation of its rules;
- rollbacks, as far as the metadata shows them. A rollback that keeps history commits a snapshot
  whose summary names its target (``rollback_to``): drawn as an arc back to the target. Paimon's
  default rollback discards the later snapshots and lets their ids be reused: it leaves no record,
  so it cannot be drawn. What can be seen are its traces, drawn as gaps: ids missing between the
  snapshots shown (expired ones below the earliest, or a hole an interrupted rollback left), and
  a tag whose copy of a snapshot differs from the snapshot now under that id (the id was reused).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_snaptable.core.formats.describe import ICEBERG_FORMAT, file_counts
from airflow_snaptable.core.errors import SnapTableError
from airflow_snaptable.core.arguments.times import to_millis

if TYPE_CHECKING:
    from airflow_snaptable.core.table import Table

#: The summary key a keep-history rollback's snapshot carries (core/lifecycle/rollback.py).
ROLLBACK_SUMMARY_KEY = "rollback_to"


@dataclass(frozen=True)
class SnapshotPoint:
    id: int
    kind: str
    time_millis: int
    total_records: int
    delta_records: int
    commit_user: str
    #: False: the snapshot expired and only a tag's copy of it remains.
    retained: bool = True
    #: The next expiry (under the table's options) would remove it.
    pending_expiry: bool = False
    #: Data files the commit added and deleted (None: its metadata can no longer tell).
    added_files: int | None = 0
    deleted_files: int | None = 0
    #: Index files the snapshot lists (Paimon's dynamic-bucket hash indexes; None: the format keeps none).
    index_files: int | None = None
    #: A keep-history rollback: the snapshot whose state this one restored.
    rollback_to: int | None = None
    #: Removed by a run with a retention and restorable until purged: that run's id (``snaptable undo``).
    restorable_run_id: str | None = None


@dataclass(frozen=True)
class TagMark:
    name: str
    snapshot_id: int
    source: str
    create_time_millis: int
    expires_at_millis: int | None = None
    #: The tagged snapshot expired: the tag's copy is all that is left of it.
    snapshot_expired: bool = False
    #: The id now names another snapshot than the tag's copy (a rollback let the id be reused).
    id_reused: bool = False


@dataclass(frozen=True)
class ConsumerMark:
    id: str
    #: The consumer's position: the id of the snapshot it reads next (Iceberg: a sequence number along main).
    next_snapshot: int
    update_time_millis: int
    #: Read everything: its next snapshot is the one not committed yet.
    caught_up: bool = False
    #: The snapshot drawn as the one it reads next (None when it has read everything).
    next_snapshot_id: int | None = None


@dataclass(frozen=True)
class RollbackMark:
    #: "keep-history": a snapshot that restored an earlier state (from its summary).
    kind: str
    from_snapshot_id: int
    to_snapshot_id: int


@dataclass(frozen=True)
class Gap:
    """Snapshot ids missing between two snapshots the timeline shows."""

    first_missing: int
    last_missing: int
    #: "expired" (below the earliest retained snapshot) or "missing" (a hole among the retained ones).
    reason: str


@dataclass
class Timeline:
    uri: str
    format: str
    generated_at_millis: int
    #: Snapshot ids count the commits (this package's and Paimon's tables): a missing id is a gap, and the
    #: next snapshot is ``latest + 1``. Iceberg's ids are random: neither holds.
    numbered_ids: bool = True
    snapshots: list[SnapshotPoint] = field(default_factory=list)
    tags: list[TagMark] = field(default_factory=list)
    consumers: list[ConsumerMark] = field(default_factory=list)
    rollbacks: list[RollbackMark] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    earliest_snapshot_id: int | None = None
    latest_snapshot_id: int | None = None
    #: The ids the next expiry would remove (dry run of the real expiry), oldest first.
    expiry_window: list[int] = field(default_factory=list)
    #: Why the dry run could not tell (it raised); the window is then empty.
    expiry_error: str | None = None
    #: The table options that decide expiry, as set on the table (unset ones are the defaults).
    expiry_options: dict[str, str] = field(default_factory=dict)

    def snapshot(self, snapshot_id: int) -> SnapshotPoint | None:
        return next((s for s in self.snapshots if s.id == snapshot_id), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_EXPIRY_OPTION_PREFIXES = ("snapshot.num-retained", "snapshot.time-retained", "snapshot.expire", "consumer.", "history.expire.")
#: The summary key Iceberg's snapshots carry their sequence number under (core/formats/iceberg/snapshots.py).
SEQUENCE_NUMBER_KEY = "sequence-number"


def build_timeline(table: "Table", *, now=None) -> Timeline:
    """The timeline of ``table``: read its snapshots, tags and consumers, and dry-run its next expiry.

    ``table`` is any table ``Table.open`` returns: this package's, Paimon's, or an Iceberg table
    (whose history is ``main``'s, and whose tags may name snapshots off it, all still in the metadata).

    :param now: the time the expiry dry run is planned at (default: the table's clock), and the
        timeline's ``generated_at_millis``.
    """
    now_millis = table.clock() if now is None else to_millis(now)
    numbered = table.format != ICEBERG_FORMAT
    history = table.snapshots()  # earliest to latest
    retained = {s.id: s for s in history}
    tags = table.tags()
    window, error = _expiry_window(table, now_millis)

    shown: dict[int, tuple] = {s.id: (s, True) for s in history}
    marks = []
    for tag in tags:
        live = retained.get(tag.snapshot_id)
        reused = live is not None and live.base_manifest_list != tag.snapshot.base_manifest_list
        # Off the retained history: on numbered tables the tag's copy of an expired snapshot; on Iceberg a
        # snapshot of another branch, or one a rollback left, still in the metadata.
        expired = live is None and numbered
        if live is None and tag.snapshot_id not in shown:
            shown[tag.snapshot_id] = (tag.snapshot, not expired)
        marks.append(TagMark(
            name=tag.name, snapshot_id=tag.snapshot_id, source=tag.source, create_time_millis=tag.create_time_millis,
            expires_at_millis=tag.expires_at_millis, snapshot_expired=expired, id_reused=reused,
        ))
    restorable = _restorable(table) if numbered else {}
    for snapshot_id, (snapshot, _run_id) in restorable.items():
        shown.setdefault(snapshot_id, (snapshot, False))
    counts = _file_counts(table, [snapshot for snapshot, _kept in shown.values()])
    points = {
        i: _point(snapshot, kept, i in window and kept, counts.get(i), restorable.get(i, (None, None))[1])
        for i, (snapshot, kept) in shown.items()
    }

    earliest = history[0].id if history else None
    latest = history[-1].id if history else None
    consumers = [
        _consumer_mark(c, history, numbered) for c in sorted(table.consumers(), key=lambda c: (c.next_snapshot, c.id))
    ]
    ordered = sorted(points.values(), key=lambda p: (p.time_millis, p.id))
    rollbacks = [RollbackMark("keep-history", p.id, p.rollback_to) for p in ordered if p.rollback_to is not None]
    return Timeline(
        uri=table.uri,
        format=table.format,
        generated_at_millis=now_millis,
        numbered_ids=numbered,
        snapshots=ordered,
        tags=sorted(marks, key=lambda t: (points[t.snapshot_id].time_millis, t.snapshot_id, t.name)),
        consumers=consumers,
        rollbacks=rollbacks,
        gaps=_gaps(sorted(points), earliest) if numbered else [],
        earliest_snapshot_id=earliest,
        latest_snapshot_id=latest,
        expiry_window=sorted(window, key=lambda i: (points[i].time_millis, i) if i in points else (0, i)),
        expiry_error=error,
        expiry_options=_expiry_options(table),
    )


def _consumer_mark(consumer, history: list, numbered: bool) -> ConsumerMark:
    """Where the consumer reads next. Numbered tables: the snapshot of its id (caught up past the latest).
    Iceberg: the first of main's snapshots at or above its position (a sequence number)."""
    if numbered:
        caught_up = bool(history) and consumer.next_snapshot > history[-1].id
        return ConsumerMark(consumer.id, consumer.next_snapshot, consumer.update_time_millis, caught_up,
                            None if caught_up else consumer.next_snapshot)
    for snapshot in history:
        if int(snapshot.summary.get(SEQUENCE_NUMBER_KEY) or 0) >= consumer.next_snapshot:
            return ConsumerMark(consumer.id, consumer.next_snapshot, consumer.update_time_millis, False, snapshot.id)
    return ConsumerMark(consumer.id, consumer.next_snapshot, consumer.update_time_millis, bool(history), None)


def _file_counts(table: "Table", snapshots: list) -> dict[int, Any]:
    """Each snapshot's added and deleted files; a snapshot whose metadata cannot tell is left out."""
    try:
        return file_counts(table, snapshots, index_files=True)
    except SnapTableError:
        found = {}
        for snapshot in snapshots:
            try:
                found.update(file_counts(table, [snapshot], index_files=True))
            except SnapTableError:
                continue
        return found


def _restorable(table: "Table") -> dict[int, tuple[Any, str]]:
    """The snapshots runs with a retention removed and an undo would bring back, by id: (snapshot, run id)."""
    from airflow_snaptable.core.native.snapshot import Snapshot

    found: dict[int, tuple[Any, str]] = {}
    try:
        for entry in table.noncurrent_journal().entries():
            for text in entry.snapshots:
                snapshot = Snapshot.from_json(text.encode(), where="noncurrent journal")
                found[snapshot.id] = (snapshot, entry.run.run_id)
    except SnapTableError:
        return {}  # the picture shows what it can read; verify names an unreadable entry
    return found


def _point(snapshot, retained: bool, pending: bool, counts, restorable_run_id: str | None = None) -> SnapshotPoint:
    summary = snapshot.summary or {}
    target = summary.get(ROLLBACK_SUMMARY_KEY)
    return SnapshotPoint(
        id=snapshot.id,
        kind=snapshot.commit_kind.value,
        time_millis=snapshot.time_millis,
        total_records=snapshot.total_record_count,
        delta_records=snapshot.delta_record_count,
        commit_user=snapshot.commit_user,
        retained=retained,
        pending_expiry=pending,
        added_files=None if counts is None else counts.added,
        deleted_files=None if counts is None else counts.deleted,
        index_files=None if counts is None else counts.index_files,
        rollback_to=target if isinstance(target, int) and not isinstance(target, bool) else None,
        restorable_run_id=None if retained else restorable_run_id,
    )


def _expiry_window(table: "Table", now_millis: int) -> tuple[set[int], str | None]:
    """The ids the next expiry removes: the real expiry's dry run (it deletes nothing)."""
    try:
        result = table.expire_snapshots(dry_run=True, now=now_millis)
    except SnapTableError as exc:
        return set(), f"{type(exc).__name__}: {exc}"
    return set(result.expired_snapshot_ids), None


def _gaps(ids: list[int], earliest_retained: int | None) -> list[Gap]:
    gaps = []
    for before, after in zip(ids, ids[1:]):
        if after > before + 1:
            reason = "expired" if earliest_retained is not None and after <= earliest_retained else "missing"
            gaps.append(Gap(before + 1, after - 1, reason))
    return gaps


def _expiry_options(table: "Table") -> dict[str, str]:
    options = table.properties if table.format == ICEBERG_FORMAT else table.schema.options
    return {str(k): str(v) for k, v in sorted(options.items()) if str(k).startswith(_EXPIRY_OPTION_PREFIXES)}
