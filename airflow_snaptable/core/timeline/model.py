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
    added_files: int = 0
    deleted_files: int = 0
    #: A keep-history rollback: the snapshot whose state this one restored.
    rollback_to: int | None = None


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
    next_snapshot: int
    update_time_millis: int
    #: Read everything: its next snapshot is the one not committed yet (latest + 1).
    caught_up: bool = False


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


_EXPIRY_OPTION_PREFIXES = ("snapshot.num-retained", "snapshot.time-retained", "snapshot.expire", "consumer.")


def build_timeline(table: "Table", *, now=None) -> Timeline:
    """The timeline of ``table``: read its snapshots, tags and consumers, and dry-run its next expiry.

    :param now: the time the expiry dry run is planned at (default: the table's clock), and the
        timeline's ``generated_at_millis``.
    """
    now_millis = table.clock() if now is None else to_millis(now)
    retained = {s.id: s for s in table.snapshots()}
    tags = table.tags()
    window, error = _expiry_window(table, now_millis)

    points: dict[int, SnapshotPoint] = {}
    for snapshot in retained.values():
        points[snapshot.id] = _point(snapshot, True, snapshot.id in window)
    marks = []
    for tag in tags:
        live = retained.get(tag.snapshot_id)
        reused = live is not None and live.base_manifest_list != tag.snapshot.base_manifest_list
        if live is None and tag.snapshot_id not in points:
            points[tag.snapshot_id] = _point(tag.snapshot, False, False)
        marks.append(TagMark(
            name=tag.name, snapshot_id=tag.snapshot_id, source=tag.source, create_time_millis=tag.create_time_millis,
            expires_at_millis=tag.expires_at_millis, snapshot_expired=live is None, id_reused=reused,
        ))

    latest = max(retained) if retained else None
    consumers = [
        ConsumerMark(c.id, c.next_snapshot, c.update_time_millis, caught_up=latest is not None and c.next_snapshot > latest)
        for c in sorted(table.consumers(), key=lambda c: (c.next_snapshot, c.id))
    ]
    ordered = sorted(points.values(), key=lambda p: (p.time_millis, p.id))
    rollbacks = [RollbackMark("keep-history", p.id, p.rollback_to) for p in ordered if p.rollback_to is not None]
    return Timeline(
        uri=table.uri,
        format=table.format,
        generated_at_millis=now_millis,
        snapshots=ordered,
        tags=sorted(marks, key=lambda t: (t.snapshot_id, t.name)),
        consumers=consumers,
        rollbacks=rollbacks,
        gaps=_gaps(sorted(points), min(retained) if retained else None),
        earliest_snapshot_id=min(retained) if retained else None,
        latest_snapshot_id=latest,
        expiry_window=sorted(window),
        expiry_error=error,
        expiry_options=_expiry_options(table),
    )


def _point(snapshot, retained: bool, pending: bool) -> SnapshotPoint:
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
        added_files=_int(summary.get("added_files")),
        deleted_files=_int(summary.get("deleted_files")),
        rollback_to=target if isinstance(target, int) and not isinstance(target, bool) else None,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
    options = getattr(table.schema, "options", None) or {}
    return {str(k): str(v) for k, v in sorted(options.items()) if str(k).startswith(_EXPIRY_OPTION_PREFIXES)}
