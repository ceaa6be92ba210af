"""Incremental reads: what changed between two snapshots, and streaming scans.

Rules:
- A change range ``(from, to]`` is read from the delta manifests of the
  snapshots in it: O(range), never O(history).
- COMPACT snapshots rewrite rows without changing them, so their entries are
  left out: incremental readers never see the same row twice.
- A file added and deleted inside the same range cancels out.
- A position whose snapshots were expired (or rolled back) is an error, never
  a silent skip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import pyarrow as pa

from airflow_snaptable.core.checks import check_bool, check_int, check_optional_int
from airflow_snaptable.core.errors import InvalidArgumentError, SnapshotNotFoundError, StreamPositionLostError
from airflow_snaptable.core.manifest import DataFile, FileKind
from airflow_snaptable.core.scan import read_files
from airflow_snaptable.core.snapshot import CommitKind, Snapshot

if TYPE_CHECKING:
    from airflow_snaptable.core.table import Table

START_MODES = ("latest-full", "latest", "from-snapshot", "from-snapshot-full", "from-timestamp")
#: Commit kinds that change rows (COMPACT only rewrites them): what downstream readers wait for.
DATA_COMMIT_KINDS = ("APPEND", "OVERWRITE", "DELETE")


@dataclass
class ChangeSet:
    """Net file-level changes after ``from_snapshot_id`` up to and including ``to_snapshot_id``."""

    table: "Table" = field(repr=False)
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
        return self.table.read_files(self.added_files, columns=columns)

    def deleted_rows(self, columns: list[str] | None = None) -> pa.Table:
        return self.table.read_files(self.deleted_files, columns=columns)


def compute_changes(table: "Table", from_snapshot_id: int, to_snapshot_id: int | None) -> ChangeSet:
    check_int(from_snapshot_id, "from_snapshot_id", minimum=0)
    check_optional_int(to_snapshot_id, "to_snapshot_id", minimum=0)
    snapshots = table.snapshot_manager
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
        for entry in table.manifest_io.read_delta(snapshot):
            path = entry.file.path
            if entry.kind is FileKind.ADD:
                added[path] = entry.file
            elif path in added:
                del added[path]
            else:
                deleted[path] = entry.file
    return ChangeSet(table, from_snapshot_id, to_snapshot_id, ids, kinds, list(added.values()), list(deleted.values()))


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
        table: "Table",
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
        self.table = table
        self.start_mode = start_mode
        self.start_snapshot_id = snapshot_id
        self.start_millis = None if timestamp is None else table.to_millis(timestamp)
        self.include_overwrite = include_overwrite
        self._next: int | None = None
        self._full_pending: int | None = None
        self._started = False
        # (id, delta manifest list) of the last snapshot read: tells a rolled-back history apart.
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
        snapshots = self.table.snapshot_manager
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
            snapshot = self.table.snapshot_manager.snapshot(self._full_pending)
            files = list(self.table.manifest_io.read_state(snapshot).values())
            self._full_pending = None
            self._next = snapshot.id + 1
            self._last = (snapshot.id, snapshot.delta_manifest_list)
            return StreamPlan(snapshot.id, snapshot.commit_kind.value, True, files, [])
        while True:
            snapshot = self._read_next()
            if snapshot is None:
                return None
            self._check_same_history()
            self._next = snapshot.id + 1
            self._last = (snapshot.id, snapshot.delta_manifest_list)
            if snapshot.commit_kind is CommitKind.COMPACT:
                continue
            if snapshot.commit_kind is CommitKind.OVERWRITE and not self.include_overwrite:
                continue
            entries = self.table.manifest_io.read_delta(snapshot)
            added = [e.file for e in entries if e.kind is FileKind.ADD]
            deleted = [e.file for e in entries if e.kind is FileKind.DELETE]
            return StreamPlan(snapshot.id, snapshot.commit_kind.value, False, added, deleted)

    def _read_next(self) -> Snapshot | None:
        snapshots = self.table.snapshot_manager
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
            previous = self.table.snapshot_manager.snapshot(self._last[0])
        except SnapshotNotFoundError:
            earliest = self.table.snapshot_manager.earliest_id() or 0
            if self._last[0] < earliest:
                return  # expired since: nothing to compare, and nothing was skipped
            raise StreamPositionLostError(f"snapshot {self._last[0]}, read last, is gone: the table was rolled back") from None
        if previous.delta_manifest_list != self._last[1]:
            raise StreamPositionLostError(
                f"snapshot {self._last[0]} is not the one this stream read: the table was rolled back past it"
            )

    def read(self, plan: StreamPlan, columns: list[str] | None = None) -> pa.Table:
        return self.table.read_files(plan.added_files, columns=columns)

    def __iter__(self) -> Iterator[StreamPlan]:
        """Plans available now, until there is nothing new."""
        while (plan := self.next_plan()) is not None:
            yield plan


# -- new snapshots after a baseline (sensors, triggers, the CLI) ---------------------------------


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


def normalize_commit_kinds(commit_kinds: Iterable[str] | str | None) -> list[str] | None:
    """Upper-case commit kind names, checked against CommitKind; None means every kind."""
    if commit_kinds is None:
        return None
    if isinstance(commit_kinds, str):
        commit_kinds = [commit_kinds]
    known = {k.value for k in CommitKind}
    kinds = []
    for kind in commit_kinds:
        name = getattr(kind, "value", kind)
        if not isinstance(name, str) or name.upper() not in known:
            raise InvalidArgumentError(f"unknown commit kind {kind!r}; known: {', '.join(sorted(known))}")
        kinds.append(name.upper())
    if not kinds:
        raise InvalidArgumentError("commit_kinds must not be empty (None means every kind)")
    return sorted(set(kinds))


def consumer_baseline(table: "Table", consumer_id: str) -> int:
    """The snapshot a consumer has read through (its next snapshot - 1).

    A consumer that does not exist yet starts before snapshot 1 when the table's history is
    complete; otherwise that is an error (InvalidArgumentError): create the consumer first.
    """
    consumer = table.consumer_manager.get(consumer_id)
    if consumer is not None:
        return consumer.next_snapshot - 1
    earliest = table.snapshot_manager.earliest_id()
    if earliest is None or earliest == 1:
        return 0
    latest = table.snapshot_manager.latest_id() or 0
    raise InvalidArgumentError(
        f"consumer {consumer_id!r} does not exist in {table.uri} and snapshots before {earliest} have expired, "
        f"so the whole history cannot be read; create the consumer first where it should start, e.g. "
        f"AdvanceConsumerOperator(consumer_id={consumer_id!r}, next_snapshot={latest + 1}) to read from now on"
    )


def find_new_snapshots(
    table: "Table",
    after_snapshot_id: int | None = None,
    consumer_id: str | None = None,
    commit_kinds: Iterable[str] | str | None = None,
    with_changes: bool = True,
    checked_through: int | None = None,
) -> NewSnapshots:
    """Snapshots newer than a baseline: ``after_snapshot_id``, or where ``consumer_id`` sits.

    The result's ``found`` is True once a new snapshot has a kind in ``commit_kinds`` (None: any
    kind). When nothing is new this costs ``latest_id()`` (plus one consumer read when the
    baseline is a consumer): O(1) storage operations, whatever the history; so does a call whose
    ``checked_through`` (an earlier call's ``latest_snapshot_id`` with nothing found, e.g. a
    sensor's last poke) is still the latest. Otherwise it reads the new snapshots and, ``with_changes``,
    their delta manifests for the record counts. Snapshots of the range that have expired are an
    error (data would be skipped), never a silent skip.
    """
    if (after_snapshot_id is None) == (consumer_id is None):
        raise InvalidArgumentError("give exactly one of after_snapshot_id and consumer_id")
    if consumer_id is not None:
        if not isinstance(consumer_id, str) or not consumer_id.strip():
            raise InvalidArgumentError(f"consumer_id must be a non-empty string, got {consumer_id!r}")
        baseline = consumer_baseline(table, consumer_id.strip())
    else:
        baseline = check_int(after_snapshot_id, "after_snapshot_id", minimum=0)
    kinds_wanted = normalize_commit_kinds(commit_kinds)
    manager = table.snapshot_manager
    latest = manager.latest_id() or 0
    if latest <= baseline or latest == checked_through:
        return NewSnapshots(table.uri, baseline, baseline, latest)
    earliest = manager.earliest_id() or 1
    # Same rule as Table.changes: the rows deleted by snapshot from+1 are only readable while `from` lives.
    if baseline < earliest and not (baseline == 0 and earliest == 1):
        raise SnapshotNotFoundError(
            f"snapshot {baseline} of {table.uri} has expired (earliest is {earliest}): the changes after "
            "it cannot be read completely. Protect a reader's position with a consumer"
        )
    ids = list(range(baseline + 1, latest + 1))
    kinds = [manager.snapshot(snapshot_id).commit_kind.value for snapshot_id in ids]
    matching = [i for i, k in zip(ids, kinds) if kinds_wanted is None or k in kinds_wanted]
    added = deleted = None
    if matching and with_changes:
        changes = table.changes(baseline, latest)
        added, deleted = changes.added_record_count, changes.deleted_record_count
    return NewSnapshots(table.uri, baseline, latest, latest, ids, kinds, matching, added, deleted)
