"""Rollback to a snapshot, a tag or a time.

Default (Paimon's rollback): the target becomes the latest snapshot; later
snapshots and later tags are discarded, and so are the data files only they
referenced, by the rollback itself, through a deletion plan (crash-safe,
finished by a rerun or by the next expiry). Rolling back to a tag whose
snapshot expired recreates that snapshot from the tag. Snapshot ids above the
target are reused by later commits, so a consumer past the target refuses the
rollback unless ``force=True`` (which moves such consumers back to the target's
successor); an in-process stream past it gets StreamPositionLostError.

``keep_history=True`` instead commits a new snapshot whose state equals the
target (Iceberg-like: nothing is discarded). That re-adds files the table had
deleted, which every deletion rule otherwise assumes never happens, so the
re-added files are registered first (core/lifecycle/readds.py) and deletion plans keep
them.

Writers may race a rollback (Paimon requires a quiet table): a commit that
lands while the rollback plans makes the rollback refuse; one that lands
later is discarded with the rest, its writer sees the rollback's fence (or its
rolled-back parent) and fails with CommitFailedError instead of being
acknowledged and lost (core/native/commit.py), and the executor sweeps any snapshot
above the target that a writer which died left behind.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

from airflow_snaptable.core.arguments.checks import check_exclusive, check_int
from airflow_snaptable.core.native.commit_request import WHOLE_TABLE, CommitRequest
from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.errors import CommitConflictError, InvalidArgumentError, MissingMetadataError, SnapshotNotFoundError
from airflow_snaptable.core.lifecycle.expiry.parts import candidates_among
from airflow_snaptable.core.native.manifest import FileKind
from airflow_snaptable.core.lifecycle.plan_executor import MAX_PLANNING_ATTEMPTS, PlanExecutor
from airflow_snaptable.core.lifecycle.deletion_plans import ROLLBACK, DataCandidate, DeletionPlan, is_dead_rollback
from airflow_snaptable.core.lifecycle.readds import ReaddRegistry
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot
from airflow_snaptable.core.lifecycle.store import TableStore
from airflow_snaptable.core.lifecycle.tags import snapshot_or_tagged
from airflow_snaptable.core.arguments.times import to_millis


@dataclass
class RollbackResult:
    target_snapshot_id: int
    latest_snapshot_id: int
    keep_history: bool
    discarded_snapshot_ids: list[int] = field(default_factory=list)
    discarded_tags: list[str] = field(default_factory=list)
    deleted_data_files: int = 0
    deleted_manifest_files: int = 0
    bytes_freed: int = 0
    moved_consumers: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


class Rollback:
    """Rolls one table back (Paimon's rollback_to; ``keep_history``: Iceberg's, as a new snapshot)."""

    def __init__(
        self, store: TableStore, executor: PlanExecutor, commit: Callable[[CommitRequest], Snapshot], clock: Callable[[], int]
    ):
        self.store = store
        self.executor = executor
        #: Commits a snapshot through the format's writer (the keep-history rollback's new snapshot).
        self.commit = commit
        self.clock = clock

    def resolve_target(self, snapshot_id=None, tag=None, as_of=None) -> Snapshot:
        check_exclusive({"snapshot_id": snapshot_id, "tag": tag, "as_of": as_of}, required=True)
        if tag is not None:
            return self.store.tags.tag(tag).snapshot
        if as_of is not None:
            target = self.store.snapshots.snapshot_at(to_millis(as_of))
            if target is None:
                raise SnapshotNotFoundError(f"no snapshot at or before {as_of} (or it has expired)")
            return target
        return snapshot_or_tagged(self.store, check_int(snapshot_id, "snapshot_id", minimum=1))

    def rollback_to(self, snapshot_id=None, tag=None, as_of=None, keep_history: bool = False, force: bool = False) -> RollbackResult:
        store = self.store
        target = self.resolve_target(snapshot_id, tag, as_of)
        self.executor.finish_all()
        latest = store.snapshots.latest_id()
        if latest is None:
            raise SnapshotNotFoundError("the table has no snapshots")
        if keep_history:
            return self._rollback_keeping_history(target)

        r = target.id
        late_consumers = [c for c in store.consumers.consumers() if c.next_snapshot > r + 1]
        if late_consumers and not force:
            names = ", ".join(f"{c.id} (next {c.next_snapshot})" for c in late_consumers)
            raise InvalidArgumentError(
                f"consumers have read past snapshot {r}: {names}. Their position would point at discarded "
                "history; pass force=True to move them back to the rollback target"
            )
        result = RollbackResult(target_snapshot_id=r, latest_snapshot_id=r, keep_history=False)
        if r == latest:
            return result
        if r > latest:
            raise SnapshotNotFoundError(f"snapshot {r} is newer than the latest snapshot {latest}")

        for _attempt in range(MAX_PLANNING_ATTEMPTS):
            outcome, plan = self._run(target, latest, late_consumers, result)
            if outcome is not None:
                break
            # An undo brought snapshots back (or an expiry moved the earliest) while this planned: plan again, from
            # the same latest snapshot (a commit that landed meanwhile fails the plan's check: a quiet table).
        else:
            raise CommitConflictError(f"{store.uri}: the history kept changing while the rollback was planned; nothing was rolled back")
        result.discarded_snapshot_ids = sorted(i for i in plan.snapshot_ids if i > r)
        result.discarded_tags = plan.tag_names
        result.deleted_data_files = len(outcome.deleted_data_files)
        result.deleted_manifest_files = len(outcome.deleted_manifest_files)
        result.bytes_freed = outcome.bytes_freed
        return result

    def _run(self, target: Snapshot, latest: int, late_consumers: list[Consumer], result: RollbackResult):
        """Plan the rollback to ``target`` from ``latest`` and run the plan: (its outcome, or None when the table
        is no longer the one it planned on, and the plan)."""
        store, r = self.store, target.id
        planned_on = self.executor.view()
        try:
            plan = self._plan(target, latest)
        except (MissingMetadataError, SnapshotNotFoundError):
            if not self._held_by_a_tag(target):
                self._target_still_there(target)  # an expiry removed it while this was planning: say so
            raise

        def still_the_planned_latest() -> bool:
            now_latest = store.snapshots.latest_snapshot()
            if now_latest is None or [now_latest.id, store.snapshots.identity(now_latest)] != plan.planned_latest:
                raise CommitConflictError("a commit landed while the rollback was being planned; rollback needs a quiet table")
            if plan.restore_snapshot is None:
                # The fence is up: an expiry removing the target either published its plan before this
                # check (its fence is above the target) or sees this plan's ceiling and backs off
                # (core/lifecycle/expiry/run.py); one that finished meanwhile took the target with it.
                self._target_still_there(target)
            return True

        def move_consumers_back() -> None:
            for consumer in late_consumers:
                store.consumers.write(Consumer(consumer.id, r + 1, self.clock()))
                result.moved_consumers.append(consumer.id)

        return self.executor.run(plan, planned_on=planned_on, check=still_the_planned_latest, before_activate=move_consumers_back), plan

    def _target_still_there(self, target: Snapshot) -> None:
        """Raise SnapshotNotFoundError unless the retained ``target`` is still retained and no expiry is removing it."""
        snapshots = self.store.snapshots
        try:
            same = snapshots.identity(snapshots.snapshot(target.id)) == snapshots.identity(target)
        except SnapshotNotFoundError:
            same = False
        if not same or self.executor.plans.fence() > target.id:
            raise SnapshotNotFoundError(f"snapshot {target.id} no longer exists: an expiry removed it while the rollback ran")

    def _plan(self, target: Snapshot, latest: int) -> DeletionPlan:
        snapshots, files = self.store.snapshots, self.store.files
        r = target.id
        earliest = snapshots.earliest_id()
        restore = None if snapshots.exists(r) else target.to_json().decode()
        if restore is not None and not self._held_by_a_tag(target):
            # Restored from a tag's copy only: a retained target that expired since it was read took its files with it.
            raise SnapshotNotFoundError(f"snapshot {r} no longer exists: an expiry removed it while the rollback ran")
        first_discarded = r + 1 if restore is None else earliest
        discarded_ids = list(range(latest, first_discarded - 1, -1))  # newest first: the rest stays contiguous
        discarded_tags = [t for t in self.store.tags.tags() if t.snapshot_id > r]

        kept_files = set(files.state(target))
        kept_metadata = set(files.metadata_files(target))
        candidates: dict[str, int] = {}
        metadata_sizes: dict[str, int] = {}
        if restore is not None and earliest is not None:
            # The whole retained history is discarded: start from the earliest state.
            for path, data_file in files.state(snapshots.snapshot(earliest)).items():
                candidates[path] = data_file.file_size
        for snapshot_id in discarded_ids:
            snapshot = snapshots.snapshot(snapshot_id)
            for entry in files.delta(snapshot):
                if entry.kind is FileKind.ADD:
                    candidates[entry.file.path] = entry.file.file_size
            metadata_sizes.update(files.metadata_files(snapshot))
        for tag in discarded_tags:
            for path, data_file in files.state(tag.snapshot).items():
                candidates[path] = data_file.file_size
            metadata_sizes.update(files.metadata_files(tag.snapshot))
        if any(e.pending or (e.live and e.snapshot_id > r) for e in ReaddRegistry(self.store.lifecycle).entries()):
            # A discarded snapshot re-added files: those may also be used by retained snapshots before r.
            kept_files |= self._files_of_range(earliest, r) if earliest is not None and earliest <= r else set()
        data = [DataCandidate(path, size, below=r + 1) for path, size in sorted(candidates.items()) if path not in kept_files]
        metadata_files = sorted((n, s) for n, s in metadata_sizes.items() if n not in kept_metadata)
        latest_snapshot = snapshots.snapshot(latest)
        return DeletionPlan(
            kind=ROLLBACK,
            fence=0,
            snapshot_ids=[i for i in discarded_ids if i != r],
            data_files=data,
            manifest_files=metadata_files,
            tag_names=[t.name for t in discarded_tags],
            tag_create_times={t.name: t.create_time_millis for t in discarded_tags},
            ceiling=r,
            restore_snapshot=restore,
            planned_latest=[latest, snapshots.identity(latest_snapshot)],
        )

    def _held_by_a_tag(self, target: Snapshot) -> bool:
        identity = self.store.snapshots.identity(target)
        return any(self.store.snapshots.identity(tag.snapshot) == identity for tag in self.store.tags.tags())

    def _files_of_range(self, first: int, last: int) -> set[str]:
        """Every data file any snapshot in ``[first, last]`` references."""
        snapshots, files = self.store.snapshots, self.store.files
        found = set(files.state(snapshots.snapshot(first)))
        for snapshot_id in range(first + 1, last + 1):
            found.update(e.file.path for e in files.delta(snapshots.snapshot(snapshot_id)) if e.kind is FileKind.ADD)
        return found

    def _rollback_keeping_history(self, target: Snapshot) -> RollbackResult:
        files = self.store.files
        latest = self.store.snapshots.latest_snapshot()
        target_files = files.state(target)
        live = files.state(latest)
        readded = [f for path, f in target_files.items() if path not in live]
        registry = ReaddRegistry(self.store.lifecycle)
        # Register first, then check: either a deletion plan's executor sees the registry entry,
        # or this sees the plan (or the file already gone) and backs out.
        pending = registry.add_pending([f.path for f in readded])
        try:
            wanted = {f.path for f in readded}
            plans = self.executor.plans.fences()
            if readded and any(p.pending and not is_dead_rollback(self.store.snapshots, p) for p in plans):
                # A pending plan may have read its protection before this entry existed, and lists no candidate
                # yet: whether it deletes these files cannot be told (an active plan's candidates can).
                raise CommitConflictError(
                    f"{self.store.uri}: a deletion plan is being made ready; nothing was rolled back: rerun the rollback"
                )
            doomed = {path for plan in plans if not plan.pending for path in candidates_among(self.store, plan, wanted)}
        except BaseException:
            registry.discard(pending)
            raise
        missing = [f.path for f in readded if f.path in doomed or not files.exists(f.path)]
        if missing:
            registry.discard(pending)
            raise SnapshotNotFoundError(
                f"snapshot {target.id} can no longer be restored: {len(missing)} of its files are deleted or being deleted "
                f"(e.g. {missing[0]})"
            )
        request = CommitRequest(
            kind=CommitKind.OVERWRITE,
            added=readded,
            deleted=[f for path, f in live.items() if path not in target_files],
            base_snapshot=latest,
            commit_user="rollback",
            overwrite_scope=WHOLE_TABLE,
            extra_summary={"rollback_to": target.id},
        )
        snapshot = self.commit(request)
        if readded:
            registry.finalize(pending, snapshot.id, [f.path for f in readded])
        else:
            registry.discard(pending)
        return RollbackResult(target_snapshot_id=target.id, latest_snapshot_id=snapshot.id, keep_history=True)
