"""Snapshot expiry: Table.expire_snapshots (rules and planning: core/lifecycle/expiry/plan.py).

A run first finishes the plans an interrupted run left behind, then carries out the range
that expires now as consecutive sub-ranges (core/lifecycle/expiry/subranges.py), each planned and carried
out through the one plan sequence (core/lifecycle/plan_executor.py), with the consumers re-checked once its
fence is up. An error in a later sub-range leaves the earlier ones done (each a complete expiry of
a prefix). A dry run reports what that real run would delete, reading instead of deleting.
"""

from __future__ import annotations

import dataclasses

from dataclasses import asdict, dataclass, field
from typing import Callable

from airflow_snaptable.core.arguments.checks import check_bool
from airflow_snaptable.core.errors import MissingMetadataError, SnapshotNotFoundError
from airflow_snaptable.core.lifecycle.expiry.plan import (
    ExpireSettings,
    ExpireRule,
    SnapshotCache,
    expire_rule,
    lowest_consumer_position,
    plan_expiry,
    resolve_settings,
)
from airflow_snaptable.core.lifecycle.expiry.parts import needs_parts, plan_parted_expiry
from airflow_snaptable.core.lifecycle.expiry.subranges import subrange_end
from airflow_snaptable.core.arguments.table_options import TableOptions
from airflow_snaptable.core.lifecycle.plan_executor import PlanExecutor
from airflow_snaptable.core.lifecycle.deletion_plans import EXPIRE, DeletionPlan
from airflow_snaptable.core.lifecycle.store import TableStore
from airflow_snaptable.core.arguments.times import to_millis

#: Planning starts over when a consumer moves into the range or another expiry overtakes this one;
#: each retry follows progress someone else made.
MAX_PLANNING_ATTEMPTS = 10


@dataclass
class ExpireResult:
    expired_snapshot_ids: list[int] = field(default_factory=list)
    deleted_data_files: int = 0
    deleted_manifest_files: int = 0
    deleted_snapshot_files: int = 0
    bytes_freed: int = 0
    earliest_before: int | None = None
    earliest_after: int | None = None
    dry_run: bool = False
    #: Files held by a tag and therefore kept.
    protected_data_files: int = 0
    #: Full lists of what was (dry run: would be) deleted; filled on dry runs only, to keep results small.
    data_files: list[str] = field(default_factory=list)
    manifest_files: list[str] = field(default_factory=list)
    snapshot_files: list[str] = field(default_factory=list)
    #: Files deleted while finishing plans an earlier, interrupted run left behind.
    recovered_data_files: int = 0
    #: skip_missing: metadata of the expired snapshots that was already gone (what it named is left for orphan cleaning).
    missing_metadata: list[str] = field(default_factory=list)
    #: A run with a retention (``noncurrent_days``) deletes none of them: the files it made noncurrent instead,
    #: undoable by ``run_id`` until purged (core/lifecycle/noncurrent/).
    noncurrent_data_files: int = 0
    noncurrent_manifest_files: int = 0
    noncurrent_bytes: int = 0
    run_id: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class SnapshotExpiry:
    """Expires the snapshots of one table (Paimon's ExpireSnapshotsImpl)."""

    def __init__(self, store: TableStore, executor: PlanExecutor, options: TableOptions, clock: Callable[[], int]):
        self.store = store
        self.executor = executor
        self.options = options
        self.clock = clock

    def expire(
        self,
        *,
        retain_min: int | None = None,
        retain_max: int | None = None,
        time_retained=None,
        older_than=None,
        retain_last: int | None = None,
        limit: int | None = None,
        dry_run: bool = False,
        now=None,
        skip_missing: bool = False,
        delete_files: bool = True,
        snapshot_ids: list[int] | None = None,
    ) -> ExpireResult:
        """Expire old snapshots and delete the files nothing retained still uses (``Table.expire_snapshots``).

        Defaults come from the options ``snapshot.num-retained.min`` / ``.max``, ``snapshot.time-retained``
        and ``snapshot.expire.limit``. ``older_than`` (a time) and ``retain_last`` are Iceberg's names for
        the time bound and ``retain_min``. Tags and consumers always protect what they hold. ``now``: the
        time expiry runs at (default: the table's clock). ``skip_missing=True`` is the repair path when
        metadata of the snapshots being expired is already gone (``expire_plan.plan_expiry``).
        ``snapshot_ids`` (Iceberg's ``expireSnapshotId``) expires exactly those, which must be the oldest
        retained snapshots (``expire_plan.given_range``). ``delete_files=False`` (Iceberg's ``cleanExpiredFiles(false)``) only removes the snapshots: the
        files they alone used stay, unreferenced, for orphan cleaning to remove later. The action
        ``ExpireSnapshots`` (core/actions/maintenance.py) documents each argument for the CLI and the operators.
        """
        check_bool(dry_run, "dry_run")
        check_bool(skip_missing, "skip_missing")
        check_bool(delete_files, "delete_files")
        now_millis = None if now is None else to_millis(now)
        settings = resolve_settings(
            self.options, self.clock, retain_min=retain_min, retain_max=retain_max, time_retained=time_retained,
            older_than=older_than, retain_last=retain_last, limit=limit, now_millis=now_millis, snapshot_ids=snapshot_ids,
        )
        return self.run(settings, dry_run=dry_run, skip_missing=skip_missing, delete_files=delete_files)

    def run(self, settings: ExpireSettings, *, dry_run: bool = False, skip_missing: bool = False, delete_files: bool = True) -> ExpireResult:
        """Expire by resolved settings (``expire`` resolves them from arguments and options; a Hudi clean
        policy resolves its own, core/lifecycle/hudi_clean.py)."""
        result = ExpireResult(dry_run=dry_run)
        missing = result.missing_metadata if skip_missing else None
        if dry_run:
            return self._dry_run(settings, result, missing, delete_files)
        snapshots = self.store.snapshots
        result.recovered_data_files = self.executor.finish_all().data_file_count
        result.earliest_before = snapshots.earliest_id()
        expired = 0  # snapshots this run expired: a rule planned again counts its limit from where it started
        first_end: int | None = None  # the range the rules decided first: planning again never widens it
        rule: ExpireRule | None = None
        read = SnapshotCache(snapshots)
        attempts = 0
        while attempts < MAX_PLANNING_ATTEMPTS:
            planned_on = self.executor.view()  # before the first read the plan is made of (plan_executor.py)
            start = snapshots.earliest_id()
            try:
                if rule is None:
                    rule = self._rule(settings, expired, first_end, start)
                    if rule is None:
                        break
                    first_end = rule.end_bound if first_end is None else first_end
                end = None if start is None else subrange_end(rule, read, start)
                if end is None:
                    break
                plan_missing = None if missing is None else []
                plan = self._planned((start, end), read, plan_missing, delete_files)
            except (MissingMetadataError, SnapshotNotFoundError):
                if not self._expired_meanwhile(start):
                    raise
                attempts, rule, read = attempts + 1, None, SnapshotCache(snapshots)
                continue  # another expiry removed what this one was reading: plan again from where it left off

            def nothing_moved_in(plan=plan, earliest=start, kept=read.get(end)) -> bool:
                # The fence is up: consumers that came in before it are seen now.
                lowest = lowest_consumer_position(self.store, earliest)
                if lowest is not None and lowest < plan.fence:
                    return False
                # So are rollbacks: one in flight to below the fence would discard what this plan keeps (a
                # rollback that checks after this fence is up backs off, core/lifecycle/rollback.py); one that finished
                # since the planning discarded the kept snapshot.
                ceiling = self.executor.plans.ceiling()
                return (ceiling is None or ceiling >= plan.fence) and self._still_retained(kept)

            outcome = self.executor.run(plan, planned_on=planned_on, check=nothing_moved_in)
            if outcome is None:
                attempts, rule, read = attempts + 1, None, SnapshotCache(snapshots)
                continue  # an undo or another expiry changed the history, a consumer moved into the range, or a rollback ran: plan again
            result.expired_snapshot_ids += plan.snapshot_ids
            result.deleted_snapshot_files += outcome.deleted_snapshot_files
            result.deleted_data_files += outcome.data_file_count
            result.deleted_manifest_files += len(outcome.deleted_manifest_files)
            result.bytes_freed += outcome.bytes_freed + sum(read.file_size(i) for i in plan.snapshot_ids)
            result.protected_data_files += outcome.protected_data_files
            result.noncurrent_data_files += outcome.noncurrent_data_files
            result.noncurrent_manifest_files += outcome.noncurrent_manifest_files
            result.noncurrent_bytes += outcome.noncurrent_bytes
            if plan.noncurrent is not None:
                result.run_id = plan.noncurrent["run_id"]
                result.bytes_freed -= sum(read.file_size(i) for i in plan.snapshot_ids)  # nothing freed: recorded
            result.missing_metadata += plan_missing or []
            result.earliest_after = plan.fence
            expired += len(plan.snapshot_ids)
            read.drop_below(plan.fence)  # memory bounded by the sub-range, not the range
        if not expired:
            result.earliest_after = snapshots.earliest_id()
        return result

    def _still_retained(self, snapshot) -> bool:
        snapshots = self.store.snapshots
        try:
            return snapshots.identity(snapshots.snapshot(snapshot.id)) == snapshots.identity(snapshot)
        except SnapshotNotFoundError:
            return False

    def _rule(self, settings: ExpireSettings, expired: int, first_end: int | None, start: int | None) -> ExpireRule | None:
        """The rule from ``start`` on, after this run expired ``expired`` snapshots of the range first decided."""
        if expired:
            if settings.limit - expired <= 0:
                return None
            settings = dataclasses.replace(settings, limit=settings.limit - expired)
        rule = expire_rule(self.store, settings, earliest=start)
        if rule is not None and first_end is not None and rule.end_bound > first_end:
            rule = dataclasses.replace(rule, end_bound=first_end)
        return rule

    def _expired_meanwhile(self, start: int | None) -> bool:
        """Did another expiry remove (or start removing) snapshot ``start`` since this run read it as the earliest?

        Then missing metadata below its fence is that run's progress, not damage.
        """
        if start is None:
            return False
        return not self.store.snapshots.exists(start) or self.executor.plans.fence() > start

    def _planned(
        self, bounds: tuple[int, int], read: SnapshotCache, missing: list[str] | None, delete_files: bool
    ) -> DeletionPlan:
        """plan_expiry (without its files when ``delete_files`` is off), naming the way out when metadata is missing."""
        try:
            if delete_files and needs_parts(read, *bounds, missing):
                return plan_parted_expiry(self.store, *bounds, read=read)  # candidates streamed when executed
            plan = plan_expiry(self.store, *bounds, read=read, missing=missing)
            return plan if delete_files else dataclasses.replace(plan, data_files=[], manifest_files=[])
        except MissingMetadataError as exc:
            raise MissingMetadataError(
                f"{exc}. Expiry deletes nothing it cannot plan from. If this file belongs to a snapshot being "
                "expired (verify() lists what is missing), expire with skip_missing=True (CLI: --skip-missing): "
                "missing metadata of the expired snapshots is skipped, what it named is left for orphan cleaning"
            ) from exc

    def _dry_run(
        self, settings: ExpireSettings, result: ExpireResult, missing: list[str] | None, delete_files: bool
    ) -> ExpireResult:
        """What the real run with the same arguments deletes, deleting nothing.

        The real run first finishes the plans an interrupted run left behind, then
        expires from where they end; so does this, reading instead of deleting.
        """
        snapshots, files, executor = self.store.snapshots, self.store.files, self.executor
        earliest = result.earliest_before = snapshots.earliest_id()
        snapshot_ids: set[int] = set()
        manifest_files: dict[str, int] = {}
        data_files: dict[str, int] = {}
        for leftover in executor.plans.plans():
            # Files of an interrupted plan may be gone already: list only what is still there.
            effect = executor.effect(leftover, executor.protection.read(leftover))
            snapshot_ids.update(i for i in leftover.snapshot_ids if snapshots.exists(i))
            manifest_files.update(
                (files.metadata_path(n), size) for n, size in effect.manifest_files if files.exists(files.metadata_path(n))
            )
            data_files.update((c.path, c.size) for c in effect.data_files if files.exists(c.path))
            result.protected_data_files += effect.protected_data_files
            if leftover.kind == EXPIRE and leftover.snapshot_ids:
                earliest = max(earliest or 0, leftover.fence)
        result.recovered_data_files = len(data_files)

        read = SnapshotCache(snapshots)
        rule = expire_rule(self.store, settings, earliest=earliest)
        end = None if rule is None else subrange_end(rule, read, rule.earliest)
        while end is not None:
            # The sub-ranges the real run carries out, one plan each.
            plan = self._planned((earliest, end), read, missing, delete_files)
            effect = executor.effect(plan, executor.protection.read(plan))
            result.expired_snapshot_ids += plan.snapshot_ids
            snapshot_ids.update(plan.snapshot_ids)
            manifest_files.update((files.metadata_path(n), size) for n, size in effect.manifest_files)
            data_files.update((c.path, c.size) for c in effect.data_files)
            result.protected_data_files += effect.protected_data_files
            result.bytes_freed += sum(read.file_size(i) for i in plan.snapshot_ids)
            earliest = plan.fence
            read.drop_below(earliest)
            end = subrange_end(rule, read, earliest)

        result.snapshot_files = [snapshots.path(i) for i in sorted(snapshot_ids)]
        result.manifest_files = sorted(manifest_files)
        result.data_files = sorted(data_files)
        result.deleted_snapshot_files = len(snapshot_ids)
        result.deleted_manifest_files = len(manifest_files)
        result.deleted_data_files = len(data_files)
        result.bytes_freed += sum(manifest_files.values()) + sum(data_files.values())
        result.earliest_after = earliest
        return result
