"""Carrying out deletion plans: the one sequence expiry, tag deletion and rollback share.

:meth:`PlanExecutor.run` is the sequence, written once:

1. publish the plan *pending*: its fence is up, so from now on new tags and consumers
   below it back out (core/tag_lifecycle.py, core/consumer_lifecycle.py);
2. the owner's re-check of what came in before the fence (expiry: consumers; rollback:
   the latest snapshot is still the one it planned on); a failed check drops the plan;
3. read what protects (core/protection.py), failing closed: any error drops the plan;
4. the owner's last step while nothing is deleted yet (rollback moves consumers back);
5. activate: from here on anyone finishes the plan (:meth:`PlanExecutor.finish_all`);
6. execute: unpublish first (restore a rolled-back-to snapshot, delete the tags, unpublish
   the snapshots, move the hints), then delete the candidates nothing protects, then the
   plan. Each step is idempotent; a crash in between leaks files, never loses them.
"""

from __future__ import annotations

from typing import Callable

from airflow_snaptable.core.intents import IntentManager
from airflow_snaptable.core.plans import EXPIRE, ROLLBACK, DeletionPlan, PlanEffect, PlanManager, PlanOutcome
from airflow_snaptable.core.progress import delete_with_progress
from airflow_snaptable.core.protection import Protection, ProtectionReader
from airflow_snaptable.core.readds import ReaddRegistry
from airflow_snaptable.core.snapshot import Snapshot
from airflow_snaptable.core.store import TableStore


class PlanExecutor:
    def __init__(self, store: TableStore):
        self.store = store
        self.plans = PlanManager(store)
        self.protection = ProtectionReader(store)

    def run(
        self,
        plan: DeletionPlan,
        *,
        check: Callable[[], bool] | None = None,
        before_activate: Callable[[], None] | None = None,
    ) -> PlanOutcome | None:
        """The plan sequence (see the module doc). ``check`` returns False to drop the plan (then
        this returns None and the owner may plan again) or raises; ``before_activate`` runs once
        protection is read, before anything is deleted."""
        self.plans.publish_pending(plan)
        try:
            if check is not None and not check():
                self.plans.discard_pending(plan)
                return None
            protection = self.protection.read(plan)
        except BaseException:
            self.plans.discard_pending(plan)
            raise
        if before_activate is not None:
            before_activate()
        self.plans.activate(plan)
        return self.execute(plan, protection)

    def finish_all(self) -> PlanOutcome:
        """Complete every active plan (left by a crash); drop pending plans whose owner died and stale intents."""
        total = PlanOutcome()
        for plan in self.plans.plans():
            outcome = self.execute(plan)
            total.deleted_snapshot_files += outcome.deleted_snapshot_files
            total.deleted_data_files += outcome.deleted_data_files
            total.deleted_manifest_files += outcome.deleted_manifest_files
            total.bytes_freed += outcome.bytes_freed
        self.plans.drop_abandoned()
        IntentManager(self.store.lifecycle).drop_stale(self.store.snapshots.earliest_id())
        return total

    def execute(self, plan: DeletionPlan, protection: Protection | None = None) -> PlanOutcome:
        """Step 6 of the sequence, for an active plan (also one a crashed run left behind)."""
        snapshots, files = self.store.snapshots, self.store.files
        outcome = PlanOutcome()
        doomed = self.protection.doomed_tag_names(plan)
        if protection is None:
            protection = self.protection.read(plan)

        # Unpublish first, delete files after: a crash in between leaks, never loses.
        if plan.restore_snapshot is not None and plan.ceiling is not None:
            snapshots.restore(Snapshot.from_json(plan.restore_snapshot.encode(), where=self.store.lifecycle.full_uri(plan.path)))
        for name in doomed:
            self.store.tags.delete(name)
        # What unpublishing left outside the history goes with the manifests, in one bulk delete.
        unpublished = list(snapshots.unpublish(plan.snapshot_ids) or [])
        outcome.deleted_snapshot_files += len(plan.snapshot_ids)
        if plan.kind == ROLLBACK and plan.ceiling is not None:
            # Commits that landed after the rollback last read LATEST are discarded too,
            # newest first (ids stay contiguous); their writers see the fence and fail.
            above = [i for i in sorted(snapshots.list_ids(), reverse=True) if i > plan.ceiling]
            unpublished += snapshots.unpublish(above) or []
            outcome.deleted_snapshot_files += len(above)
        if plan.kind == EXPIRE and plan.snapshot_ids:
            snapshots.write_earliest_hint(plan.fence)
        if plan.kind == ROLLBACK and plan.ceiling is not None:
            snapshots.write_latest_hint(plan.ceiling)
            if plan.restore_snapshot is not None:
                snapshots.write_earliest_hint(plan.ceiling)

        effect = self.effect(plan, protection)
        metadata = [files.metadata_path(name) for name, _size in effect.manifest_files] + unpublished
        delete_with_progress("deleting metadata files", metadata, files.delete)
        outcome.deleted_manifest_files = [name for name, _size in effect.manifest_files]
        delete_with_progress("deleting data files", [c.path for c in effect.data_files], files.delete)
        outcome.deleted_data_files = [c.path for c in effect.data_files]
        outcome.bytes_freed = effect.bytes
        outcome.protected_data_files = effect.protected_data_files

        registry = ReaddRegistry(self.store.lifecycle)
        for entry in protection.discarded_readds:
            registry.retire(entry)
        registry.forget(outcome.deleted_data_files)
        self.plans.finished(plan)
        return outcome

    @staticmethod
    def effect(plan: DeletionPlan, protection: Protection) -> PlanEffect:
        """The metadata and data files executing ``plan`` deletes: its candidates minus what ``protection`` holds.

        The one rule both a real run and a dry run apply.
        """
        data = [c for c in plan.data_files if c.path not in protection.protected_paths]
        return PlanEffect(
            manifest_files=[(name, size) for name, size in plan.manifest_files if name not in protection.held_manifests],
            data_files=data,
            protected_data_files=len(plan.data_files) - len(data),
        )
