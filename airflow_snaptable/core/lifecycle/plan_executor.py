"""Carrying out deletion plans: the one sequence expiry, tag deletion and rollback share.

:meth:`PlanExecutor.run` is the sequence, written once:

0. before its first planning read, the owner reads :meth:`PlanExecutor.view`: the table it plans
   on (the undo generation, then the earliest snapshot, :class:`PlannedOn`);
1. publish the plan *pending*: its fence is up, so from now on new tags and consumers
   below it back out (core/lifecycle/tags.py, core/lifecycle/consumers.py), and an undo that
   marks refuses (core/lifecycle/noncurrent/undo.py);
1b. prove the table is still the one it planned on: no undo marked (``UndoInProgressError``),
   the same undo generation and the same earliest snapshot; otherwise the plan is dropped and
   its owner plans again (an undo that ran whole while it planned brought back what the plan
   would delete, or hide below its fence);
2. the owner's re-check of what came in before the fence (expiry: consumers; rollback:
   the latest snapshot is still the one it planned on); a failed check drops the plan;
3. read what protects (core/lifecycle/protection.py), failing closed: any error drops the plan;
4. the owner's last step while nothing is deleted yet (rollback moves consumers back);
5. activate: from here on anyone finishes the plan (:meth:`PlanExecutor.finish_all`);
6. execute: unpublish first (restore a rolled-back-to snapshot, delete the tags, unpublish
   the snapshots, move the hints), then delete the candidates nothing protects, then the
   plan. Each step is idempotent; a crash in between leaks files, never loses them.
   A plan in parts (core/lifecycle/expiry/parts.py) deletes its data files part by part, each part
   recorded first, and its metadata files (which the parts are streamed from) after the last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from airflow_snaptable.core.errors import CorruptMetadataError, SnapshotNotFoundError
from airflow_snaptable.core.lifecycle.expiry.parts import candidate_parts
from airflow_snaptable.core.lifecycle.intents import IntentManager
from airflow_snaptable.core.lifecycle.noncurrent.journal import NoncurrentJournal, NoncurrentRun, refuse_while_undoing, undo_markers
from airflow_snaptable.core.lifecycle.noncurrent.record import record_leftovers, record_part, record_plan
from airflow_snaptable.core.lifecycle.deletion_plans import EXPIRE, ROLLBACK, DataCandidate, DeletionPlan, PlanEffect, PlanManager, PlanOutcome
from airflow_snaptable.core.lifecycle.progress import delete_with_progress
from airflow_snaptable.core.lifecycle.protection import Protection, ProtectionReader
from airflow_snaptable.core.lifecycle.readds import READD_DIR, ReaddRegistry
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.lifecycle.store import TableStore


#: Planning again after the table changed under a plan: each retry follows a change someone else finished.
MAX_PLANNING_ATTEMPTS = 10


@dataclass(frozen=True)
class PlannedOn:
    """The table a deleting run planned on, read before its first planning read (:meth:`PlanExecutor.view`)
    and proven unchanged once its plan is published (:meth:`PlanExecutor.run`)."""

    #: The undo markers (core/lifecycle/noncurrent/journal.py ``undo_markers``): the undo generation.
    undo_generation: frozenset[str]
    #: ``(id, identity)`` of the earliest snapshot (None: no snapshot): what an undo of an expiry lowers.
    earliest: tuple[int, str] | None


class PlanExecutor:
    def __init__(self, store: TableStore, noncurrent: NoncurrentRun | None = None):
        """:param noncurrent: the run's retention: the plans it runs record what they remove and delete no file
        (core/lifecycle/noncurrent/). Plans left by other runs keep their own setting."""
        self.store = store
        self.plans = PlanManager(store)
        self.protection = ProtectionReader(store)
        self.noncurrent = noncurrent

    def view(self) -> PlannedOn:
        """Step 0: the table a deleting run is about to plan on; read before its first planning read.

        The undo generation first, then the earliest snapshot: an undo that brings snapshots back
        below it after this read changes the generation before :meth:`run` reads it again."""
        generation = undo_markers(NoncurrentJournal(self.store.lifecycle))
        return PlannedOn(generation, self._earliest())

    def _earliest(self) -> tuple[int, str] | None:
        snapshots = self.store.snapshots
        for attempt in range(3):
            try:
                earliest = snapshots.earliest_snapshot()
                return None if earliest is None else (earliest.id, snapshots.identity(earliest))
            except (SnapshotNotFoundError, CorruptMetadataError):
                if attempt == 2:
                    raise  # not a moving EARLIEST (an expiry unpublishing it): real damage
        raise AssertionError("unreachable")

    def still_planned_on(self, planned_on: PlannedOn) -> bool:
        """Step 1b, once the plan is published (pending or active): no undo is marked (else
        ``UndoInProgressError``), and the table is still the one ``planned_on`` read.

        Fenced against undo like a tag against a plan: the plan is visible before this reads the undo
        marks, an undo marks before it reads the plans; one of the two backs out. An undo that ran whole
        before this read changed the undo generation (or the earliest snapshot): the plan may delete what
        it brought back, so it is made again on the table as it is now."""
        generation = undo_markers(NoncurrentJournal(self.store.lifecycle))
        refuse_while_undoing(NoncurrentJournal(self.store.lifecycle), self.store.uri, "this run deleted nothing", generation)
        return generation == planned_on.undo_generation and self._earliest() == planned_on.earliest

    def run(
        self,
        plan: DeletionPlan,
        *,
        planned_on: PlannedOn,
        check: Callable[[], bool] | None = None,
        before_activate: Callable[[], None] | None = None,
    ) -> PlanOutcome | None:
        """The plan sequence (see the module doc). ``planned_on``: :meth:`view` as read before the plan's
        first planning read. Returns None, having deleted nothing, when the table is no longer the one
        planned on or ``check`` returns False: the owner plans again. ``check`` may also raise;
        ``before_activate`` runs once protection is read, before anything is deleted."""
        if self.noncurrent is not None and plan.noncurrent is None:
            plan.noncurrent = self.noncurrent.to_dict()
        self.plans.publish_pending(plan)
        try:
            if not self.still_planned_on(planned_on):
                self.plans.discard_pending(plan)
                return None
            if check is not None and not check():
                self.plans.discard_pending(plan)
                return None
            protection = self.protection.read(plan)
            if plan.noncurrent is not None:
                # Recorded before anything moves (consumers a rollback moves back included); a crash
                # before activation leaves a pending plan (dropped) and an entry naming nothing removed.
                self._record(plan, protection)
        except BaseException:
            self.plans.discard_pending(plan)
            raise
        if before_activate is not None:
            before_activate()
        self.plans.activate(plan)
        return self.execute(plan, protection)

    def publish_proven(self, plan: DeletionPlan, planned_on: PlannedOn) -> bool:
        """Steps 1, 1b and 5 for a plan whose owner reads protection only when executing it (a tag replaced
        in place: the new version of the tag must be written first): pending, proven, active. False, having
        published nothing, when the table is no longer the one planned on."""
        self.plans.publish_pending(plan)
        try:
            proven = self.still_planned_on(planned_on)
        except BaseException:
            self.plans.discard_pending(plan)
            raise
        if not proven:
            self.plans.discard_pending(plan)
            return False
        self.plans.activate(plan)
        return True

    def finish_all(self) -> PlanOutcome:
        """Complete every active plan (left by a crash); drop pending plans whose owner died, stale intents and
        the temp files writers killed mid-write left in the engine's directories (plans, intents, re-adds)."""
        total = PlanOutcome()
        for plan in self.plans.plans():
            outcome = self.execute(plan)
            total.deleted_snapshot_files += outcome.deleted_snapshot_files
            total.deleted_data_files += outcome.deleted_data_files
            total.streamed_data_files += outcome.streamed_data_files
            total.deleted_manifest_files += outcome.deleted_manifest_files
            total.bytes_freed += outcome.bytes_freed
            total.noncurrent_data_files += outcome.noncurrent_data_files
            total.noncurrent_manifest_files += outcome.noncurrent_manifest_files
            total.noncurrent_bytes += outcome.noncurrent_bytes
        self.plans.drop_abandoned()
        IntentManager(self.store.lifecycle).drop_stale(self.store.snapshots.earliest_id())
        self.store.lifecycle.remove_abandoned_temps(READD_DIR)
        return total

    def execute(self, plan: DeletionPlan, protection: Protection | None = None) -> PlanOutcome:
        """Step 6 of the sequence, for an active plan (also one a crashed run left behind)."""
        snapshots, files = self.store.snapshots, self.store.files
        outcome = PlanOutcome()
        doomed = self.protection.doomed_tag_names(plan)
        if protection is None:
            protection = self.protection.read(plan)

        noncurrent = plan.noncurrent is not None
        if noncurrent:
            self._record(plan, protection)  # once: the run recorded it already, or this rerun does
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

        registry = ReaddRegistry(self.store.lifecycle)
        if noncurrent:
            # Nothing is deleted: what unpublishing left is noncurrent too; a plan in parts records its
            # parts (streamed from metadata that stays). Re-add entries stay: an undo needs what they protect.
            record_leftovers(self.store, plan, unpublished)
            if plan.parted is not None:
                for number, (doomed, protected) in enumerate(self._parts(plan, protection)):
                    record_part(self.store, plan, number, doomed)
                    outcome.noncurrent_data_files += len(doomed)
                    outcome.noncurrent_bytes += sum(c.size for c in doomed)
                    outcome.protected_data_files += protected
                manifests = self._unheld_manifests(plan, protection)
            else:
                effect = self.effect(plan, protection)
                manifests = effect.manifest_files
                outcome.noncurrent_data_files = len(effect.data_files)
                outcome.noncurrent_bytes = sum(c.size for c in effect.data_files)
                outcome.protected_data_files = effect.protected_data_files
            outcome.noncurrent_manifest_files = len(manifests)
            outcome.noncurrent_bytes += sum(size for _name, size in manifests)
            self.plans.finished(plan)
            return outcome
        if plan.parted is not None:
            self._delete_parts(plan, protection, outcome, registry)
            # Metadata last: the parts were streamed from it, and a rerun streams them again.
            manifests = self._unheld_manifests(plan, protection)
            metadata = [files.metadata_path(name) for name, _size in manifests] + unpublished
            delete_with_progress("deleting metadata files", metadata, files.delete)
            outcome.deleted_manifest_files = [name for name, _size in manifests]
            outcome.bytes_freed += sum(size for _name, size in manifests)
        else:
            effect = self.effect(plan, protection)
            metadata = [files.metadata_path(name) for name, _size in effect.manifest_files] + unpublished
            delete_with_progress("deleting metadata files", metadata, files.delete)
            outcome.deleted_manifest_files = [name for name, _size in effect.manifest_files]
            delete_with_progress("deleting data files", [c.path for c in effect.data_files], files.delete)
            outcome.deleted_data_files = [c.path for c in effect.data_files]
            outcome.bytes_freed = effect.bytes
            outcome.protected_data_files = effect.protected_data_files

        for entry in protection.discarded_readds:
            registry.retire(entry)
        registry.forget(outcome.deleted_data_files)  # a plan in parts forgot each part's as it went
        self.plans.finished(plan)
        return outcome

    def _record(self, plan: DeletionPlan, protection: Protection) -> None:
        effect = PlanEffect(self._unheld_manifests(plan, protection), [], 0) if plan.parted is not None else self.effect(plan, protection)
        record_plan(self.store, plan, effect, self.protection.doomed_tag_names(plan))

    def _delete_parts(self, plan: DeletionPlan, protection: Protection, outcome: PlanOutcome, registry: ReaddRegistry) -> None:
        """Delete a plan in parts' data files a part at a time: each part recorded, then deleted; then
        "all parts done" recorded, before the metadata they are streamed from goes.

        Parts below the recorded one were deleted before an interruption: streamed past (the same
        parts in the same order) and counted, not deleted again. Once all are done, a rerun
        streams nothing (the metadata may be partly gone).
        """
        resume, done = self.plans.recorded_part(plan)
        if done:
            return
        number = 0
        for number, (doomed, protected) in enumerate(self._parts(plan, protection), start=1):
            outcome.protected_data_files += protected
            outcome.streamed_data_files += len(doomed)
            outcome.bytes_freed += sum(c.size for c in doomed)
            if number - 1 < resume:
                continue
            self.plans.record_part(plan, number - 1, doomed)
            paths = [c.path for c in doomed]
            delete_with_progress(f"deleting data files (part {number})", paths, self.store.files.delete)
            registry.forget(paths)
        self.plans.record_part(plan, number, [], done=True)

    def _parts(self, plan: DeletionPlan, protection: Protection):
        """Each part of a plan in parts: (the candidates to delete, how many ``protection`` holds)."""
        for part in candidate_parts(self.store, plan):
            held = self.protection.protected(part, protection)
            yield self._measured([c for c in part if c.path not in held]), len(held)

    def effect(self, plan: DeletionPlan, protection: Protection) -> PlanEffect:
        """The metadata and data files executing ``plan`` deletes: its candidates minus what ``protection`` holds.

        The one rule both a real run and a dry run apply (a plan in parts: streamed part by part,
        and listed whole, as a dry run reports them).
        """
        if plan.parted is not None:
            data, protected = [], 0
            # All parts done (an interrupted run's plan): only metadata is left, maybe partly gone.
            parts = [] if self.plans.recorded_part(plan)[1] else self._parts(plan, protection)
            for doomed, held in parts:
                data += doomed
                protected += held
            return PlanEffect(self._unheld_manifests(plan, protection), data, protected)
        data = self._measured([c for c in plan.data_files if c.path not in protection.protected_paths])
        return PlanEffect(
            manifest_files=self._unheld_manifests(plan, protection),
            data_files=data,
            protected_data_files=len(plan.data_files) - len(data),
        )

    def _measured(self, doomed: list[DataCandidate]) -> list[DataCandidate]:
        """The doomed files with every size known: a format that records no size for some of its files
        (Paimon's file indexes) measures them, so the bytes freed count every file deleted."""
        measured = getattr(self.store.files, "measured", None)
        return doomed if measured is None else measured(doomed)

    @staticmethod
    def _unheld_manifests(plan: DeletionPlan, protection: Protection) -> list[tuple[str, int]]:
        return [(name, size) for name, size in plan.manifest_files if name not in protection.held_manifests]
