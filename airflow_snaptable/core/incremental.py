"""What landed in a table after a baseline: the questions incremental jobs ask before reading.

- :func:`find_new_snapshots`: the snapshots after a snapshot id or a consumer's position,
  as the change range to process next (sensors, triggers, ``snaptable new-snapshots``);
- :func:`added_after` / :func:`snapshot_adds`: whether a commit of given files landed
  (a job whose commit failed ambiguously must not delete files a snapshot references).

Reading the changes themselves is ``Table.changes`` and ``Table.stream`` (core/lifecycle/changes.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from airflow_snaptable.core.arguments.checks import check_int
from airflow_snaptable.core.errors import InvalidArgumentError, SnapshotNotFoundError
from airflow_snaptable.core.lineage import NEW_TABLE, ROLLED_BACK, Lineage, Mark, table_identity
from airflow_snaptable.core.native.manifest import FileKind
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot
from airflow_snaptable.core.native.new_snapshots import NewSnapshots
from airflow_snaptable.core.table import Table

#: Commit kinds that change rows (COMPACT only rewrites them): what downstream readers wait for.
DATA_COMMIT_KINDS = ("APPEND", "OVERWRITE", "DELETE")


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


def consumer_baseline(table: Table, consumer_id: str) -> int:
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
        f"SnapTableAdvanceConsumerOperator(consumer_id={consumer_id!r}, next_snapshot={latest + 1}) to read from now on"
    )


def find_new_snapshots(
    table: Table,
    after_snapshot_id: int | None = None,
    consumer_id: str | None = None,
    commit_kinds: Iterable[str] | str | None = None,
    with_changes: bool = True,
    checked_through: int | None = None,
    ref: str | None = None,
) -> NewSnapshots:
    """Snapshots newer than a baseline: ``after_snapshot_id``, or where ``consumer_id`` sits.

    The result's ``found`` is True once a new snapshot has a kind in ``commit_kinds`` (None: any
    kind). When nothing is new this costs ``latest_id()`` (plus one consumer read when the
    baseline is a consumer): O(1) storage operations, whatever the history; so does a call whose
    ``checked_through`` (an earlier call's ``latest_snapshot_id`` with nothing found, e.g. a
    sensor's last poke) is still the latest. Otherwise it reads the new snapshots and, ``with_changes``,
    their delta manifests for the record counts. Snapshots of the range that have expired are an
    error (data would be skipped), never a silent skip. ``ref``: on an Iceberg table, follow that
    branch or tag instead of ``main`` (core/formats/iceberg/positions.py); other tables have none.
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
    if ref is not None and (not isinstance(ref, str) or not ref.strip()):
        raise InvalidArgumentError(f"ref must be a non-empty string (a branch or tag), got {ref!r}")
    if getattr(table, "format", None) == "iceberg":
        # Random snapshot ids: positions are sequence numbers along a ref (core/formats/iceberg/positions.py).
        if ref is not None and consumer_id is not None:
            raise InvalidArgumentError("a consumer reads main: give ref or consumer_id, not both")
        return table.new_snapshots(baseline, kinds_wanted, with_changes, checked_through, ref)
    if ref is not None:
        raise InvalidArgumentError(f"ref={ref!r}: only Iceberg tables have branches and tags to follow; {table.uri} is not one")
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


# -- a reader's position across polls: still in the table's lineage? (core/lineage.py) --------------


def position_mark(table: Table, position: int, lineage: Lineage | None = None, *, with_table: bool = True) -> Mark:
    """``position`` (a snapshot id; Iceberg: a sequence number) with what tells later whether it is still in
    the table's lineage: the commit under the id (ours, Paimon) and, ``with_table``, the table's identity
    (one read more on ours and Paimon: needed to tell a re-created table from a rollback)."""
    lineage = lineage or Lineage(table)
    table_id = lineage.identity() if with_table or lineage.is_iceberg else None
    if lineage.is_iceberg or not position:
        return Mark(position, table=table_id)
    return Mark(position, snapshot=lineage.commit_of(position), table=table_id)


class PositionWatch:
    """A waiting reader's baseline and last check, held across polls (a sensor's try), that follow the table's
    lineage rather than its ids (core/lineage.py):

    - the table dropped and re-created at the name or location: the baseline is 0 of the new table
      (all of its history is new, as for a table that appears while waited for);
    - a rollback past the baseline (ours and Paimon reuse the ids after it): a consumer's baseline is read
      again (a rollback moves the consumers past its target, or refuses); a fixed ``after_snapshot_id`` no
      longer names the state the changes would be read from: SnapshotNotFoundError, as when it expired;
    - ``checked_through`` (nothing new up to the latest, last poll) is used only while that latest snapshot
      is still the same commit: a rollback and as many commits land on the same id with other changes.

    A poll with nothing new reads the baseline's and the latest's snapshot (ours, Paimon) besides what
    :func:`find_new_snapshots` reads: O(1) storage operations.
    """

    def __init__(self, baseline: int, rebase: Callable[[Table], int] | None = None):
        self.baseline = baseline
        self.rebase = rebase
        self._baseline_mark: Mark | None = None
        self._checked: Mark | None = None
        self._table_id: str | None = None  # Iceberg's
        self._checked_id: int | None = None  # Iceberg's

    def find(self, table: Table, commit_kinds: Iterable[str] | str | None = None, ref: str | None = None,
             with_changes: bool = True) -> NewSnapshots:
        if getattr(table, "format", None) == "iceberg":
            return self._find_iceberg(table, commit_kinds, ref, with_changes)
        lineage = Lineage(table)
        checked_through = None
        if self._checked is not None and lineage.moved(self._checked) is None:
            # The latest commit checked is still there: so is the baseline below it, in the same table.
            checked_through = self._checked.id
        elif self._baseline_mark is None:
            self._baseline_mark = position_mark(table, self.baseline, lineage)
        else:
            moved = lineage.moved(self._baseline_mark)
            if moved == NEW_TABLE:
                self.baseline = 0
                self._baseline_mark = position_mark(table, 0, lineage)
            elif moved == ROLLED_BACK:
                if self.rebase is None:
                    raise SnapshotNotFoundError(
                        f"snapshot {self.baseline} of {table.uri} was rolled back and its id reused by other commits: "
                        "the changes after it cannot be read. Protect a reader's position with a consumer"
                    )
                self.baseline = self.rebase(table)
                self._baseline_mark = position_mark(table, self.baseline, lineage)
        new = find_new_snapshots(table, after_snapshot_id=self.baseline, commit_kinds=commit_kinds,
                                 with_changes=with_changes, checked_through=checked_through, ref=ref)
        self._checked = None if new.found else position_mark(table, new.latest_snapshot_id, lineage, with_table=False)
        return new

    def _find_iceberg(self, table: Table, commit_kinds, ref: str | None, with_changes: bool) -> NewSnapshots:
        """Iceberg's positions are sequence numbers, which a rollback never reuses: only the table is compared,
        after the poll (it reads the table's metadata anew) and, once it changed, polled again from 0."""
        def poll() -> NewSnapshots:
            return find_new_snapshots(table, after_snapshot_id=self.baseline, commit_kinds=commit_kinds,
                                      with_changes=with_changes, checked_through=self._checked_id, ref=ref)

        try:
            new, failure = poll(), None
        except SnapshotNotFoundError as exc:
            new, failure = None, exc
        identity = table_identity(table)
        if self._table_id is None or identity is None or identity == self._table_id:
            self._table_id = self._table_id or identity
            if failure is not None:
                raise failure
        else:
            self._table_id, self.baseline, self._checked_id = identity, 0, None
            new = poll()
        self._checked_id = None if new.found else new.latest_snapshot_id
        return new


@dataclass(frozen=True)
class WatchedPosition:
    """An event watcher's position (the last snapshot an event covered) with the lineage it was reached along:
    the table's identity and, on ours and Paimon, the commits under the last :data:`KEPT_COMMITS` ids up to it,
    so that after a rollback past it the watcher continues from the newest of them still in the lineage."""

    id: int
    table: str | None = None
    commits: dict[int, str] = field(default_factory=dict)

    def to_state(self) -> dict[str, Any]:
        return {"tableId": self.table, "commits": {str(k): v for k, v in sorted(self.commits.items())}}

    @classmethod
    def from_state(cls, position: int, state: Any) -> "WatchedPosition | None":
        """The position as stored (None: stored before lineage was kept)."""
        if not isinstance(state, dict) or not isinstance(state.get("commits"), dict):
            return None
        commits = {int(k): v for k, v in state["commits"].items() if str(k).isdigit() and isinstance(v, str)}
        table = state.get("tableId")
        return cls(position, table if isinstance(table, str) else None, commits)


#: Commits a watcher keeps to find where a rollback left its lineage (ids up to its position).
KEPT_COMMITS = 32


def advance_position(table: Table, position: WatchedPosition | None, to_id: int) -> WatchedPosition:
    """The watcher's position at ``to_id`` (a range up to it was reported, or stepped over): reads the commits
    of the kept ids it does not know yet (those of the range, once)."""
    lineage = Lineage(table)
    if lineage.is_iceberg:
        return WatchedPosition(to_id, lineage.identity())
    known = {} if position is None else {i: c for i, c in position.commits.items() if i <= position.id}
    commits = {}
    for snapshot_id in range(max(1, to_id - KEPT_COMMITS + 1), to_id + 1):
        commit = known.get(snapshot_id) or lineage.commit_of(snapshot_id)
        if commit is not None:
            commits[snapshot_id] = commit
    return WatchedPosition(to_id, lineage.identity(), commits)


def rewound_position(table: Table, position: WatchedPosition) -> tuple[WatchedPosition, str] | None:
    """Where a watcher continues when its position left the table's lineage, and why (NEW_TABLE: from 0 of the
    new table; ROLLED_BACK: from the newest kept id whose commit is still there, else from 0); None when it did
    not. Iceberg's positions are sequence numbers a rollback never reuses: only the table is compared (call it
    after a poll, which reads the metadata anew). Costs one snapshot read when nothing moved."""
    lineage = Lineage(table)
    mark = Mark(position.id, snapshot=position.commits.get(position.id), table=position.table)
    moved = lineage.moved(mark)
    if moved is None:
        return None
    if moved == NEW_TABLE or lineage.is_iceberg:
        return WatchedPosition(0, lineage.identity()), NEW_TABLE
    latest = table.snapshot_manager.latest_id() or 0
    for snapshot_id in sorted((i for i in position.commits if i <= min(position.id, latest)), reverse=True):
        if lineage.commit_of(snapshot_id) == position.commits[snapshot_id]:
            kept = {i: c for i, c in position.commits.items() if i <= snapshot_id}
            return WatchedPosition(snapshot_id, position.table, kept), ROLLED_BACK
    return WatchedPosition(0, lineage.identity()), ROLLED_BACK


# -- after the commit: did it land? (files written by Spark tasks, committed by the driver) --------


def snapshot_adds(table: Table, snapshot: Snapshot, paths: Collection[str]) -> bool:
    """Does ``snapshot`` add any of ``paths``? (A retried commit with an identifier returns the
    snapshot of the run that landed first: the files of this run are then in no snapshot.)"""
    wanted = set(paths)
    return any(entry.kind is FileKind.ADD and entry.file.path in wanted for entry in table.manifest_io.read_delta(snapshot))


def added_after(table: Table, after_snapshot_id: int, paths: Collection[str]) -> bool:
    """Does a snapshot after ``after_snapshot_id`` add any of ``paths``? (A commit that failed
    ambiguously may have landed: its files are then the table's, not leftovers to delete.)"""
    manager = table.snapshot_manager
    latest = manager.latest_id() or 0
    return any(snapshot_adds(table, manager.snapshot(i), paths) for i in range(after_snapshot_id + 1, latest + 1))
