"""Recoverable deletes on Apache Iceberg tables (core/lifecycle/noncurrent/ holds the rules; this is the format's part).

- The journal lives in the table's ``snaptable/noncurrent/`` (Iceberg's own orphan cleaning never
  looks there; neither does ours).
- Expiry with a retention writes its entry (the removed snapshots as Iceberg's snapshot JSON, the
  removed refs, main's dropped ``snapshot-log`` entries, the files it would delete) before its
  catalog commit, and deletes nothing after it (core/formats/iceberg/expire.py).
- Undo puts the snapshots, their log entries and the refs back in ONE catalog commit, holding only
  on the metadata it checked (core/formats/iceberg/requirements.py). Iceberg's ``add-snapshot``
  refuses a snapshot older than the last sequence number, so the snapshots go back through
  :class:`RestoreSnapshotsUpdate`, applied by the catalog's own metadata update in process (the SQL,
  in-memory, Hive and Glue catalogs of pyiceberg); the table's last sequence number stays. A catalog
  that applies commits on a server (REST) knows only Iceberg's own updates: there an undo that must
  put snapshots back is refused (``UndoUnsupportedError``, nothing changed); one of refs, consumers
  and statistics only commits standard updates and requirements and works on any catalog.
- Iceberg's removal clears ``parent-snapshot-id`` on each snapshot it keeps whose parent it removes:
  the expiry records those links (``JournalEntry.parents``) and undo sets them again in the same
  commit, so each ref's history is whole again. A run whose unlinked children a later run removed
  is undone after that run (``DependentRunError``), as on our tables.
- The statistics and partition-statistics entries the expiry dropped with its snapshots go back in
  the same commit (``set-statistics``, ``set-partition-statistics``).
- Purge keeps every file the current metadata reaches (orphan cleaning's valid set) and what the
  runs not yet due would bring back.
"""

from __future__ import annotations

import io
import json

from airflow_snaptable.core.errors import (
    DependentRunError,
    RunPurgedError,
    UndoInvariantError,
    UndoNameTakenError,
    UndoUnsupportedError,
)
from airflow_snaptable.core.formats.iceberg.files import Locator, ManifestReader, reach
from airflow_snaptable.core.formats.iceberg.journal import expiry_plans_in_flight, journal_of
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.noncurrent.journal import (
    PURGE_PREFIX,
    UNDO_PREFIX,
    JournalEntry,
    NoncurrentRun,
    drop_crashed_deleting_marks,
    real_now_millis,
)
from airflow_snaptable.core.lifecycle.noncurrent import purge as purge_module
from airflow_snaptable.core.lifecycle.noncurrent.purge import PurgeResult
from airflow_snaptable.core.lifecycle.noncurrent.undo import UndoResult, abandon_undo, undo_run
from airflow_snaptable.core.lifecycle.progress import delete_with_progress

def snapshot_json(snapshot) -> str:
    return snapshot.model_dump_json(by_alias=True, exclude_none=True)


def record_expiry(storage: Storage, run: NoncurrentRun, key: str, metadata, plan) -> None:
    """The entry of an Iceberg expiry plan (``IcebergDeletionPlan``), written before its commit."""
    journal = journal_of(storage)
    if journal.has(run.run_id, key):
        return
    expired = set(plan.expired_ids)
    snapshots = sorted((metadata.snapshot_by_id(i) for i in expired), key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
    refs = {name: metadata.refs[name].model_dump_json(by_alias=True, exclude_none=True) for name in plan.removed_refs}
    log = [entry.model_dump(by_alias=True) for entry in metadata.snapshot_log if entry.snapshot_id in expired]
    # The commit clears the parent of every snapshot it keeps whose parent it removes (Iceberg's
    # RemoveSnapshots): undo links them again, or main's and each branch's history would end there.
    parents = {s.snapshot_id: s.parent_snapshot_id for s in metadata.snapshots if s.snapshot_id not in expired and s.parent_snapshot_id in expired}
    sizes = plan.sizes
    data = [(p, sizes.get(p, 0)) for p in plan.content_files]
    other = [(p, sizes.get(p, 0)) for p in plan.metadata_files + plan.manifest_lists + plan.manifests + plan.statistics_files]
    # The statistics entries the commit drops with the snapshots (expire.py): undo puts them back.
    statistics = [snapshot_json(f) for f in metadata.statistics or [] if f.snapshot_id in expired]
    partition_statistics = [snapshot_json(f) for f in getattr(metadata, "partition_statistics", None) or [] if f.snapshot_id in expired]
    journal.write(JournalEntry(
        run, key, snapshots=[snapshot_json(s) for s in snapshots], refs=refs, refs_after=dict.fromkeys(plan.removed_refs),
        log=log, parents=parents, statistics=statistics, partition_statistics=partition_statistics, data_files=data, metadata_files=other,
    ))


def record_refs(storage: Storage, run: NoncurrentRun, key: str, metadata, names: list[str], after: dict[str, int | None]) -> None:
    """Refs a run removes or moves (tag deletion and expiry, rollback of ``main``), before its commit."""
    refs = {name: metadata.refs[name].model_dump_json(by_alias=True, exclude_none=True) for name in names if name in metadata.refs}
    journal_of(storage).write(JournalEntry(run, key, refs=refs, refs_after=dict(after)))


# -- undo -----------------------------------------------------------------------------------------


def _restore_update_class():
    """The update that puts expired snapshots back (see the module doc), registered once with pyiceberg."""
    global _RESTORE
    if _RESTORE is not None:
        return _RESTORE
    from typing import Literal

    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot, SnapshotLogEntry
    from pyiceberg.table.update import IcebergBaseModel, _apply_table_update, _TableMetadataUpdateContext
    from pydantic import Field

    class RestoreSnapshotsUpdate(IcebergBaseModel):
        action: Literal["snaptable-restore-snapshots"] = Field(default="snaptable-restore-snapshots")
        snapshots: list[Snapshot]
        log: list[SnapshotLogEntry]
        #: Snapshots the expiry unlinked from the parent it removed (child id -> parent id): linked again.
        parents: dict[int, int] = Field(default_factory=dict)

    @_apply_table_update.register(RestoreSnapshotsUpdate)
    def _(update: RestoreSnapshotsUpdate, base: TableMetadata, context: _TableMetadataUpdateContext) -> TableMetadata:
        missing = [s for s in update.snapshots if base.snapshot_by_id(s.snapshot_id) is None]
        known = {(e.snapshot_id, e.timestamp_ms) for e in base.snapshot_log}
        log = sorted(list(base.snapshot_log) + [e for e in update.log if (e.snapshot_id, e.timestamp_ms) not in known],
                     key=lambda e: e.timestamp_ms)
        kept = [
            s.model_copy(update={"parent_snapshot_id": update.parents[s.snapshot_id]})
            if s.snapshot_id in update.parents and s.parent_snapshot_id is None else s
            for s in base.snapshots
        ]
        context.add_update(update)
        return base.model_copy(update={"snapshots": kept + missing, "snapshot_log": log})

    _RESTORE = RestoreSnapshotsUpdate
    return _RESTORE


_RESTORE = None


def _statistics_back(entries: list[JournalEntry], metadata, restored_ids: set[int]) -> tuple[list, list]:
    """The statistics and partition-statistics entries the run dropped with the snapshots coming back now
    (a snapshot that is back already got them in the same commit)."""
    from pyiceberg.table.statistics import PartitionStatisticsFile, StatisticsFile

    listed = {f.snapshot_id for f in metadata.statistics or []}
    listed_partition = {f.snapshot_id for f in getattr(metadata, "partition_statistics", None) or []}
    statistics = [StatisticsFile.model_validate_json(t) for e in entries for t in e.statistics]
    partition = [PartitionStatisticsFile.model_validate_json(t) for e in entries for t in e.partition_statistics]
    return (
        [f for f in statistics if f.snapshot_id in restored_ids and f.snapshot_id not in listed],
        [f for f in partition if f.snapshot_id in restored_ids and f.snapshot_id not in listed_partition],
    )


class IcebergNoncurrent:
    def __init__(self, table):
        """:param table: the IcebergTable (core/formats/iceberg/table.py)."""
        self.table = table
        self.storage = table.storage
        self.journal = journal_of(self.storage)

    def undo(self, run_id: str) -> UndoResult:
        def prepare(entries: list[JournalEntry], result: UndoResult):
            # The mark is up: an expiry that writes its plan from now on backs out; one that wrote it before
            # may delete what this would restore.
            # (Not finished here: a plan up may be a live expiry's, which finishing would drop under it.)
            if expiry_plans_in_flight(self.storage):
                raise UndoInvariantError(
                    "an expiry is in flight on the table (or crashed: the next expiry finishes its plan): undo when it finished"
                )
            # One catalog commit: a refusal (the table changed meanwhile) is part of the checks.
            self._commit(run_id, entries, result)
            result.released_files = sum(len(e.files) for e in entries)
            return lambda: None

        return undo_run(self.journal, run_id, self.table.uri, prepare)

    def abandon(self, run_id: str) -> UndoResult:
        """Abandon an interrupted undo (core/lifecycle/noncurrent/undo.py ``abandon_undo``): its one commit made
        the table whole or left it as it was, so only the mark goes."""
        return abandon_undo(self.journal, run_id, self.table.uri)

    def _commit(self, run_id: str, entries: list[JournalEntry], result: UndoResult) -> None:
        from pyiceberg.exceptions import CommitFailedException
        from pyiceberg.table.refs import SnapshotRef
        from pyiceberg.table.snapshots import Snapshot, SnapshotLogEntry
        from pyiceberg.table.update import AssertRefSnapshotId, SetPartitionStatisticsUpdate, SetSnapshotRefUpdate, SetStatisticsUpdate

        from airflow_snaptable.core.formats.iceberg import requirements

        table = self.table.refresh()
        metadata = table.metadata
        snapshots = [Snapshot.model_validate_json(text) for e in entries for text in e.snapshots]
        missing = [s for s in snapshots if metadata.snapshot_by_id(s.snapshot_id) is None]
        relinks = self._relinks(run_id, entries, metadata)
        if (missing or relinks) and not requirements.checks_requirements_here(table.catalog):
            # A catalog that applies commits on a server (REST) knows only Iceberg's updates, and its
            # add-snapshot refuses a snapshot older than the last sequence number (or would move that
            # number back): expired snapshots cannot go back through it. Refs, consumers and
            # statistics can (standard updates and requirements).
            raise UndoUnsupportedError(
                f"run {run_id} expired snapshots of {self.table.uri}: putting them back needs a catalog that applies the "
                "commit in this process (pyiceberg's SQL, in-memory, Hive, Glue or DynamoDB catalog), not one that applies "
                "it on a server (REST): Iceberg's add-snapshot refuses a snapshot older than the table's last sequence "
                "number. Nothing was changed; the run's files stay noncurrent until purged"
            )
        restored_ids = {s.snapshot_id for s in missing}
        for snapshot in missing:
            parent = snapshot.parent_snapshot_id
            if parent is not None and parent not in restored_ids and metadata.snapshot_by_id(parent) is None:
                later = self._run_holding(parent, run_id)
                if later:
                    raise DependentRunError(f"snapshot {parent} (the parent of {snapshot.snapshot_id}) was removed by run {later}: undo it first")
        refs: list[tuple[str, SnapshotRef]] = []
        for entry in entries:
            for name, text in entry.refs.items():
                ref = SnapshotRef.model_validate_json(text)
                current = metadata.refs.get(name)
                expected = entry.refs_after.get(name)
                now_at = None if current is None else current.snapshot_id
                if current == ref:
                    continue  # back already: the very ref (same snapshot, type and retention)
                if current is not None and expected is None:
                    raise UndoNameTakenError(
                        f"a ref name names one state: {name!r} exists again (on snapshot {now_at}) and is not the ref run "
                        f"{run_id} removed; delete or rename it and rerun the undo"
                    )
                if now_at != expected:
                    raise UndoInvariantError(
                        f"a ref names one state: {name!r} now points at {now_at}, not where run {run_id} left it ({expected})"
                    )
                if metadata.snapshot_by_id(ref.snapshot_id) is None and ref.snapshot_id not in restored_ids:
                    raise RunPurgedError(f"run {run_id}: ref {name!r} names snapshot {ref.snapshot_id}, which is gone")
                refs.append((name, ref))
        statistics, partition_statistics = _statistics_back(entries, metadata, restored_ids)
        self._check_files(run_id, table, missing, [f.statistics_path for f in statistics + partition_statistics])
        Restore = _restore_update_class()
        updates = []
        if missing or relinks:
            log = [SnapshotLogEntry.model_validate(d) for e in entries for d in e.log]
            updates.append(Restore(snapshots=sorted(missing, key=lambda s: (s.sequence_number or 0)), log=log, parents=relinks))
        updates += [SetStatisticsUpdate(statistics=f) for f in statistics]
        updates += [SetPartitionStatisticsUpdate(partition_statistics=f) for f in partition_statistics]
        for name, ref in refs:
            updates.append(SetSnapshotRefUpdate(
                ref_name=name, type=ref.snapshot_ref_type, snapshot_id=ref.snapshot_id, max_ref_age_ms=ref.max_ref_age_ms,
                max_snapshot_age_ms=ref.max_snapshot_age_ms, min_snapshots_to_keep=ref.min_snapshots_to_keep,
            ))
        if updates:
            # Each ref set back must still be where the checks saw it, absent ones included: a ref of that name
            # created meanwhile fails the commit on any catalog (a REST one checks only standard requirements).
            absent = tuple(AssertRefSnapshotId(ref=name, snapshot_id=None) for name, _ref in refs if name not in metadata.refs)
            try:
                table.catalog.commit_table(table, requirements.unchanged_since(table) + absent, tuple(updates))
            except CommitFailedException as exc:
                taken = [name for name, _ref in refs if name not in metadata.refs and name in self.table.refresh().metadata.refs]
                if taken:
                    raise UndoNameTakenError(
                        f"a ref name names one state: {taken[0]!r} was created while run {run_id} was being undone; nothing "
                        "was changed: delete or rename it and rerun the undo"
                    ) from exc
                raise UndoInvariantError(f"the table changed while the undo was checked; run it again: {exc}") from exc
        result.restored_snapshot_ids = sorted(s.snapshot_id for s in missing)
        result.restored_tags = sorted(name for name, _ref in refs)
        from airflow_snaptable.core.native.consumers import Consumer

        for entry in entries:
            for text in entry.consumers:
                consumer = Consumer.from_json(text.encode(), f"noncurrent run {run_id}")
                if self.table.consumer_manager.restore(consumer):  # one written since is left as it is
                    result.restored_consumers.append(consumer.id)

    def _relinks(self, run_id: str, entries: list[JournalEntry], metadata) -> dict[int, int]:
        """The snapshots the run unlinked from a parent it removed (child id -> parent id) that are not linked again yet
        (the parent is one of the run's snapshots: back already, or coming back in the same commit).

        A child that is gone was removed after this run: the run that removed it is undone first (as on
        our tables, ``DependentRunError``), or, removed for good, the history cannot be whole again."""
        relinks: dict[int, int] = {}
        for entry in entries:
            parents = entry.parents if entry.parents is not None else self._parents_from_lists(entry, metadata)
            for child_id, parent_id in parents.items():
                child = metadata.snapshot_by_id(child_id)
                if child is None:
                    later = self._run_holding(child_id, run_id)
                    raise DependentRunError(
                        f"snapshot {child_id} (a child of {parent_id}, which run {run_id} removed) was removed after it"
                        + (f" by run {later}: undo it first" if later else " for good (no noncurrent run holds it)")
                    )
                if child.parent_snapshot_id == parent_id:
                    continue  # linked again already
                if child.parent_snapshot_id is not None:
                    raise UndoInvariantError(
                        f"snapshot {child_id} has parent {child.parent_snapshot_id} now, not {parent_id} as before run {run_id}"
                    )
                relinks[child_id] = parent_id
        return relinks

    def _parents_from_lists(self, entry: JournalEntry, metadata) -> dict[int, int]:
        """An entry written before expiries recorded the links they cut: each snapshot without a parent whose
        manifest list names one of the entry's snapshots as its parent (Iceberg writes ``parent-snapshot-id``
        in every manifest list's header, and the removal leaves it there)."""
        import fastavro

        removed = {int(json.loads(text)["snapshot-id"]) for text in entry.snapshots}
        if not removed:
            return {}
        locator = Locator(metadata.location)
        found: dict[int, int] = {}
        for snapshot in metadata.snapshots:
            if snapshot.parent_snapshot_id is not None or snapshot.snapshot_id in removed:
                continue
            try:
                data = self.storage.read_bytes(locator.inside(snapshot.manifest_list, "manifest list"))
                named = fastavro.reader(io.BytesIO(data)).metadata.get("parent-snapshot-id")
                parent = None if named in (None, "null") else int(named)
            except Exception:  # noqa: BLE001 - a list without the header, or unreadable: no link is known
                continue
            if parent in removed:
                found[snapshot.snapshot_id] = parent
        return found

    def _check_files(self, run_id: str, table, snapshots: list, statistics_paths: list[str]) -> None:
        """Every file the snapshots coming back reach, and their statistics files, are there (invariant 1)."""
        if not snapshots:
            return
        locator = Locator(table.location())
        try:
            reached = reach(ManifestReader(self.storage, locator), snapshots, only_live=True)
        except Exception as exc:  # noqa: BLE001 - a manifest list or manifest that is gone
            raise RunPurgedError(f"run {run_id}: metadata of what it removed is gone ({exc}); invariant 1 would break") from exc
        statistics = {locator.inside(p, "statistics file") for p in statistics_paths}
        for path in sorted(reached.all() | statistics):
            if not self.storage.exists(path):
                raise RunPurgedError(f"run {run_id}: {path} is gone: the snapshots it removed would not be readable (invariant 1)")

    def _run_holding(self, snapshot_id: int, not_run: str) -> str | None:
        for entry in self.journal.entries():
            if entry.run.run_id != not_run and any(json.loads(t)["snapshot-id"] == snapshot_id for t in entry.snapshots):
                return entry.run.run_id
        return None

    # -- purge --------------------------------------------------------------------------------------

    def purge(self, now_millis: int | None = None) -> PurgeResult:
        from airflow_snaptable.core.formats.iceberg.orphans import valid_files

        real = real_now_millis()
        judged = real if now_millis is None else min(now_millis, real)
        result = PurgeResult(judged_at_millis=judged)
        journal = self.journal
        undoing = journal.marked_runs(UNDO_PREFIX)
        run_ids = journal.run_ids()
        for stale in journal.marked_runs(PURGE_PREFIX) - set(run_ids):
            journal.unmark(PURGE_PREFIX, stale)
        drop_crashed_deleting_marks(journal)
        purging: set[str] = set()
        for run_id in run_ids:
            first = next(iter(journal.entries(run_id)), None)
            if first is None:
                continue
            if run_id in undoing:
                result.undoing_run_ids.append(run_id)
            elif first.run.purge_after_millis > judged:
                result.waiting_run_ids.append(run_id)
            else:
                journal.mark(PURGE_PREFIX, run_id)
                if journal.marked(UNDO_PREFIX, run_id):
                    journal.unmark(PURGE_PREFIX, run_id)
                    result.undoing_run_ids.append(run_id)
                else:
                    purging.add(run_id)
        if not purging:
            return result
        from pyiceberg.table.snapshots import Snapshot

        def live() -> tuple[str, set[str]]:
            # Read after the marks: the current metadata's files, and what the runs not purged would bring back.
            table = self.table.refresh()
            keep = set(valid_files(table, self.storage))
            waiting = []
            for entry in journal.entries():
                if entry.run.run_id not in purging:
                    keep.update(path for path, _size in entry.files)
                    waiting += [Snapshot.model_validate_json(t) for t in entry.snapshots]
            if waiting:
                keep |= reach(ManifestReader(self.storage, Locator(table.location())), waiting, only_live=False).all()
            return table.metadata_location, keep

        location, keep = live()
        for run_id in sorted(purging):
            for name in journal.entry_names(run_id):
                entry = journal.read(name)
                # Checked right before each slice is deleted, as on our tables (core/lifecycle/noncurrent/purge.py).
                files = entry.files if entry is not None else []
                for first in range(0, len(files), purge_module.PURGE_RECHECK_FILES):
                    chunk = files[first:first + purge_module.PURGE_RECHECK_FILES]
                    if self.table.refresh().metadata_location != location:
                        location, keep = live()  # a commit meanwhile (an undo, a re-added file): read again
                    doomed = [(p, s) for p, s in chunk if p not in keep]
                    result.kept_referenced_files += len(chunk) - len(doomed)
                    delete_with_progress("purging noncurrent files", [p for p, _s in doomed], self.storage.delete_files)
                    result.deleted_files += len(doomed)
                    result.bytes_freed += sum(s for _p, s in doomed)
                journal.delete([name])
            journal.unmark(PURGE_PREFIX, run_id)
            result.purged_run_ids.append(run_id)
        return result
