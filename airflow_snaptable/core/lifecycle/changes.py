"""Change sets and streaming scans: what changed between snapshots, read from their deltas.

Rules:
- A change range ``(from, to]`` is read from the deltas of the snapshots in it:
  O(range), never O(history).
- COMPACT snapshots rewrite rows without changing them, so their entries are
  left out: incremental readers never see the same row twice.
- A file added and deleted inside the same range cancels out.
- A position whose snapshots were expired (or rolled back) is an error, never
  a silent skip.

Both read the table through its store (core/lifecycle/store.py), so they work on any format
that implements one; rows are read by the table (``read_rows``: Table.read_files).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import pyarrow as pa

from airflow_snaptable.core.arguments.checks import check_bool, check_int, check_optional_int
from airflow_snaptable.core.errors import InvalidArgumentError, SnapshotNotFoundError, StreamPositionLostError
from airflow_snaptable.core.native.manifest import DataFile, FileKind
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot
from airflow_snaptable.core.lifecycle.store import TableStore
from airflow_snaptable.core.arguments.times import to_millis

START_MODES = ("latest-full", "latest", "from-snapshot", "from-snapshot-full", "from-timestamp")

#: Reads the rows of data files, projected to ``columns`` (None: every column).
ReadRows = Callable[[Sequence[DataFile], list[str] | None], pa.Table]


@dataclass
class ChangeSet:
    """Net file-level changes after ``from_snapshot_id`` up to and including ``to_snapshot_id``."""

    read_rows: ReadRows = field(repr=False)
    from_snapshot_id: int
    to_snapshot_id: int
    snapshot_ids: list[int]
    commit_kinds: list[str]
    added_files: list[DataFile]
    deleted_files: list[DataFile]

    @property
    def added_record_count(self) -> int:
        return sum(f.record_count for f in self.added_files)

    @property
    def deleted_record_count(self) -> int:
        return sum(f.record_count for f in self.deleted_files)

    def added_rows(self, columns: list[str] | None = None) -> pa.Table:
        return self.read_rows(self.added_files, columns)

    def deleted_rows(self, columns: list[str] | None = None) -> pa.Table:
        return self.read_rows(self.deleted_files, columns)


def compute_changes(store: TableStore, read_rows: ReadRows, from_snapshot_id: int, to_snapshot_id: int | None) -> ChangeSet:
    """What happened after ``from_snapshot_id`` up to and including ``to_snapshot_id`` (default latest)."""
    check_int(from_snapshot_id, "from_snapshot_id", minimum=0)
    check_optional_int(to_snapshot_id, "to_snapshot_id", minimum=0)
    snapshots = store.snapshots
    latest = snapshots.latest_id()
    if to_snapshot_id is None:
        to_snapshot_id = latest or 0
    if from_snapshot_id < 0 or to_snapshot_id < from_snapshot_id:
        raise InvalidArgumentError(f"invalid change range ({from_snapshot_id}, {to_snapshot_id}]")
    if latest is None or to_snapshot_id > latest:
        raise SnapshotNotFoundError(f"snapshot {to_snapshot_id} does not exist (latest is {latest})")
    earliest = snapshots.earliest_id() or 1
    # Rows deleted by snapshot from+1 live in files only snapshot `from` still references.
    if from_snapshot_id < earliest and not (from_snapshot_id == 0 and earliest == 1):
        raise SnapshotNotFoundError(
            f"snapshot {from_snapshot_id} has expired (earliest is {earliest}); the changes after it cannot be read"
        )
    added: dict[str, DataFile] = {}
    deleted: dict[str, DataFile] = {}
    ids, kinds = [], []
    for snapshot_id in range(from_snapshot_id + 1, to_snapshot_id + 1):
        snapshot = snapshots.snapshot(snapshot_id)
        ids.append(snapshot_id)
        kinds.append(snapshot.commit_kind.value)
        if snapshot.commit_kind is CommitKind.COMPACT:
            continue
        for entry in store.files.delta(snapshot):
            path = entry.file.path
            if entry.kind is FileKind.ADD:
                added[path] = entry.file
            elif path in added:
                del added[path]
            else:
                deleted[path] = entry.file
    return ChangeSet(read_rows, from_snapshot_id, to_snapshot_id, ids, kinds, list(added.values()), list(deleted.values()))


@dataclass(frozen=True)
class StreamPlan:
    """What a stream reads next: the full state of a snapshot, or one snapshot's delta."""

    snapshot_id: int
    commit_kind: str
    full: bool
    added_files: list[DataFile]
    deleted_files: list[DataFile]

    @property
    def record_count(self) -> int:
        return sum(f.record_count for f in self.added_files)


class StreamScan:
    """Paimon-style streaming read: a start mode picks the first plan, then one plan per new snapshot.

    ``checkpoint()`` is the id of the next snapshot to read; ``restore(id)`` resumes there.
    """

    def __init__(
        self,
        store: TableStore,
        read_rows: ReadRows,
        start_mode: str = "latest-full",
        snapshot_id: int | None = None,
        timestamp=None,
        include_overwrite: bool = False,
    ):
        if start_mode not in START_MODES:
            raise InvalidArgumentError(f"start_mode must be one of {', '.join(START_MODES)}; got {start_mode!r}")
        if start_mode in ("from-snapshot", "from-snapshot-full"):
            if snapshot_id is None:
                raise InvalidArgumentError(f"start_mode {start_mode!r} needs snapshot_id >= 1")
            check_int(snapshot_id, "snapshot_id", minimum=1)
        check_bool(include_overwrite, "include_overwrite")
        if start_mode == "from-timestamp" and timestamp is None:
            raise InvalidArgumentError("start_mode 'from-timestamp' needs timestamp")
        self.store = store
        self.read_rows = read_rows
        self.start_mode = start_mode
        self.start_snapshot_id = snapshot_id
        self.start_millis = None if timestamp is None else to_millis(timestamp)
        self.include_overwrite = include_overwrite
        self._next: int | None = None
        self._full_pending: int | None = None
        self._started = False
        # (id, identity) of the last snapshot read: tells a rolled-back history apart.
        self._last: tuple[int, str] | None = None
        self._start()  # "latest" means the latest when the stream is made

    # -- position ----------------------------------------------------------

    def checkpoint(self) -> int | None:
        """The next snapshot id this stream reads (None before the first plan on an empty start)."""
        self._start()
        return self._next if self._full_pending is None else self._full_pending

    def restore(self, next_snapshot_id: int) -> None:
        check_int(next_snapshot_id, "next_snapshot_id", minimum=1)
        self._started = True
        self._full_pending = None
        self._next = next_snapshot_id
        self._last = None

    def _start(self) -> None:
        if self._started:
            return
        snapshots = self.store.snapshots
        latest = snapshots.latest_id()
        mode = self.start_mode
        if mode == "latest-full":
            if latest is None:
                self._next = 1
            else:
                self._full_pending = latest
        elif mode == "latest":
            self._next = (latest or 0) + 1
        elif mode == "from-snapshot":
            self._next = self.start_snapshot_id
        elif mode == "from-snapshot-full":
            if not snapshots.exists(self.start_snapshot_id):
                raise SnapshotNotFoundError(f"snapshot {self.start_snapshot_id} does not exist")
            self._full_pending = self.start_snapshot_id
        else:  # from-timestamp
            before = snapshots.snapshot_at(self.start_millis)
            if before is not None:
                self._next = before.id + 1
            else:
                earliest = snapshots.earliest_id()
                if earliest is not None and earliest > 1:
                    raise StreamPositionLostError(
                        f"every snapshot at or before the timestamp has expired (earliest is {earliest}); "
                        "rows committed after it may be gone. Start from-snapshot-full instead"
                    )
                self._next = 1
        self._started = True

    # -- planning ----------------------------------------------------------

    def next_plan(self) -> StreamPlan | None:
        """The next thing to read, or None when there is no new snapshot yet."""
        self._start()
        if self._full_pending is not None:
            snapshot = self.store.snapshots.snapshot(self._full_pending)
            files = list(self.store.files.state(snapshot).values())
            self._full_pending = None
            self._next = snapshot.id + 1
            self._last = (snapshot.id, self.store.snapshots.identity(snapshot))
            return StreamPlan(snapshot.id, snapshot.commit_kind.value, True, files, [])
        while True:
            snapshot = self._read_next()
            if snapshot is None:
                return None
            self._check_same_history()
            self._next = snapshot.id + 1
            self._last = (snapshot.id, self.store.snapshots.identity(snapshot))
            if snapshot.commit_kind is CommitKind.COMPACT:
                continue
            if snapshot.commit_kind is CommitKind.OVERWRITE and not self.include_overwrite:
                continue
            entries = self.store.files.delta(snapshot)
            added = [e.file for e in entries if e.kind is FileKind.ADD]
            deleted = [e.file for e in entries if e.kind is FileKind.DELETE]
            return StreamPlan(snapshot.id, snapshot.commit_kind.value, False, added, deleted)

    def _read_next(self) -> Snapshot | None:
        snapshots = self.store.snapshots
        try:
            return snapshots.snapshot(self._next)
        except SnapshotNotFoundError:
            pass
        earliest = snapshots.earliest_id()
        if earliest is not None and self._next < earliest:
            raise StreamPositionLostError(
                f"the stream's next snapshot {self._next} has expired (earliest is {earliest}); "
                "continuing would skip data. Protect stream positions with a consumer"
            )
        latest = snapshots.latest_id() or 0
        if self._next > latest + 1:
            raise StreamPositionLostError(
                f"the stream's next snapshot {self._next} is beyond latest + 1 ({latest + 1}): the table was rolled back"
            )
        return None

    def _check_same_history(self) -> None:
        """The snapshot read last must still be the one the stream read (not replaced by a rollback)."""
        if self._last is None or self._last[0] != self._next - 1:
            return
        try:
            previous = self.store.snapshots.snapshot(self._last[0])
        except SnapshotNotFoundError:
            earliest = self.store.snapshots.earliest_id() or 0
            if self._last[0] < earliest:
                return  # expired since: nothing to compare, and nothing was skipped
            raise StreamPositionLostError(f"snapshot {self._last[0]}, read last, is gone: the table was rolled back") from None
        if self.store.snapshots.identity(previous) != self._last[1]:
            raise StreamPositionLostError(
                f"snapshot {self._last[0]} is not the one this stream read: the table was rolled back past it"
            )

    def read(self, plan: StreamPlan, columns: list[str] | None = None) -> pa.Table:
        return self.read_rows(plan.added_files, columns)

    def __iter__(self) -> Iterator[StreamPlan]:
        """Plans available now, until there is nothing new."""
        while (plan := self.next_plan()) is not None:
            yield plan
