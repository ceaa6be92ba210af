"""Snapshot expiry on an Iceberg table that deletes the files it frees (Iceberg's ``RemoveSnapshots``
with ``cleanExpiredFiles(true)``), crash-safe.

The sequence:

1. Plan: retention.py picks the snapshots and refs to remove; the files to delete are those the
   expired snapshots reach and no retained snapshot does (manifest lists, manifests, data and
   delete files), their statistics files, and the metadata files the commit drops from the
   metadata log (``write.metadata.previous-versions-max``).
2. Journal: the plan is written under ``<location>/snaptable/plan/`` before the commit; it is the
   fence consumers check (core/formats/iceberg/consumers.py). The table is read again after it: if any
   commit came in between (a consumer, a ref, a retention setting, a snapshot), the plan is made again.
3. Commit: the removal goes through the catalog's atomic swap, and holds only on the metadata it was
   planned on (requirements.py): any change in between fails it, and the whole plan is made again
   on the new metadata, with backoff, as Java's ``RemoveSnapshots`` does; the statistics and
   partition-statistics entries of the removed snapshots go in the same commit.
4. Delete, then drop the journal. A run that finds a journal finishes it first: if the catalog
   no longer has its snapshots the commit happened, and what is still unreachable is deleted;
   otherwise nothing was deleted and the journal is dropped.

Reachability, not the snapshots' order, decides what goes (Iceberg's ``ReachableFileCleanup``),
so branches, tags, rollbacks and files put back (``add_files`` after a delete) need no special
case. The candidates are the files named in the manifests only expired snapshots use; every
manifest a retained snapshot uses is read before anything is deleted, as Java reads them: no
sequence number bounds what a manifest names (a file put back comes with a new, higher one), and
a retained manifest that is missing or unreadable fails the expiry before its commit.
"""

from __future__ import annotations

import json
import random
import re
import time
import uuid
from dataclasses import dataclass, field

from airflow_snaptable.core.errors import CommitConflictError, CorruptMetadataError, UndoInProgressError, UnsupportedMetadataError
from airflow_snaptable.core.lifecycle.expiry.run import ExpireResult
from airflow_snaptable.core.formats.iceberg.consumers import held_by_consumers
from airflow_snaptable.core.formats.iceberg.files import LIFECYCLE_DIR, Locator, ManifestReader, ManifestRef, reach, statistics_entries
from airflow_snaptable.core.formats.iceberg.retention import Retention, RetentionSettings, ancestors, plan_retention
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.io.table_paths import checked_relative_path
from airflow_snaptable.core.formats.iceberg.journal import journal_of
from airflow_snaptable.core.formats.iceberg.noncurrent import record_expiry
from airflow_snaptable.core.lifecycle.noncurrent.journal import UNDO_PREFIX, NoncurrentRun

PLAN_DIR = f"{LIFECYCLE_DIR}/plan"
METADATA_DIR = "metadata"
_METADATA_FILE = re.compile(r"(?:^|/)(\d+)-[^/]*\.metadata\.json$")
#: Commit attempts before a conflict is reported (Iceberg's commit.retry.num-retries default is 4).
COMMIT_ATTEMPTS = 8


@dataclass
class IcebergDeletionPlan:
    """What one expiry removes: the snapshots and refs (one catalog commit), then the files."""

    table_uuid: str
    expired_ids: list[int]
    removed_refs: list[str]
    manifest_lists: list[str] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    content_files: list[str] = field(default_factory=list)
    statistics_files: list[str] = field(default_factory=list)
    metadata_files: list[str] = field(default_factory=list)
    #: Bytes of each file the plan names (what ``bytes_freed`` adds up, for the files actually deleted).
    sizes: dict[str, int] = field(default_factory=dict)
    delete_files: bool = True
    #: A run with a retention (core/lifecycle/noncurrent/): it records what it removes and deletes no file.
    noncurrent: dict | None = None
    name: str = field(default_factory=lambda: f"expire-{uuid.uuid4().hex}.json")

    def to_json(self) -> bytes:
        doc = {k: v for k, v in self.__dict__.items() if k != "name"}
        return json.dumps(doc, sort_keys=True).encode()

    @property
    def deleted_paths(self) -> list[str]:
        """Every file executing the plan deletes (none when it keeps the files)."""
        if not self.delete_files:
            return []
        return self.metadata_files + self.manifest_lists + self.manifests + self.content_files + self.statistics_files

    @property
    def bytes(self) -> int:
        return sum(self.sizes.get(path, 0) for path in self.deleted_paths)

    @classmethod
    def from_json(cls, name: str, data: bytes) -> "IcebergDeletionPlan":
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict):
                raise ValueError("a deletion plan is a JSON object")
            doc.pop("bytes", None)  # a journal of an earlier version: a total, not per file
            plan = cls(name=name, **doc)
        except (ValueError, TypeError) as exc:
            raise CorruptMetadataError(f"{PLAN_DIR}/{name}: unreadable deletion plan: {exc}") from exc
        # A plan is finished by whoever finds it: what it names is deleted only inside the table.
        for kind in ("manifest_lists", "manifests", "content_files", "statistics_files", "metadata_files"):
            paths = getattr(plan, kind)
            if not isinstance(paths, list):
                raise CorruptMetadataError(f"{PLAN_DIR}/{name}: {kind} is not a list")
            for path in paths:
                checked_relative_path(path, f"{kind} entry", f"{PLAN_DIR}/{name}")
        return plan


class IcebergExpiry:
    def __init__(self, table_loader, storage: Storage, noncurrent: NoncurrentRun | None = None):
        #: ``table_loader()`` -> the pyiceberg table as the catalog has it now
        self.load = table_loader
        self.storage = storage
        self.noncurrent = noncurrent

    # -- planning -------------------------------------------------------------------------------

    def plan(self, table, settings: RetentionSettings, delete_files: bool) -> IcebergDeletionPlan:
        metadata = table.metadata
        retention = plan_retention(metadata, settings, held_by_consumers(metadata))
        plan = IcebergDeletionPlan(str(metadata.table_uuid), retention.expired_ids, retention.removed_refs, delete_files=delete_files)
        if not retention.expired_ids and not retention.removed_refs:
            return plan
        expired = set(retention.expired_ids)
        retained = [s for s in metadata.snapshots if s.snapshot_id not in expired]
        locator = Locator(table.location())
        reader = ManifestReader(self.storage, locator)
        by_id = {s.snapshot_id: s for s in metadata.snapshots}
        gone = [by_id[i] for i in retention.expired_ids]
        self._fill_files(plan, reader, gone, retained)
        plan.statistics_files = self._statistics(metadata, locator, expired)
        plan.sizes.update(_statistics_sizes(metadata, locator))
        plan.metadata_files = self._dropped_metadata(table, locator, retention, plan.sizes) if delete_files else []
        return plan

    @staticmethod
    def _fill_files(plan: IcebergDeletionPlan, reader: ManifestReader, gone: list, retained: list) -> None:
        locator = reader.locator
        expired_ids = {s.snapshot_id for s in gone}
        kept_lists = {locator.inside(s.manifest_list, "manifest list") for s in retained}
        # Every list, retained and expired, parents first: a record a list shares with its parent's
        # is the parent's, taken when the parent was, unless the two sit on different sides.
        side_of = {s.snapshot_id: s.snapshot_id in expired_ids for s in list(gone) + list(retained)}
        kept_manifests: dict[str, ManifestRef] = {}
        gone_manifests: dict[str, ManifestRef] = {}
        sizes: dict[str, int] = {}
        # An expired append's list may be read by its head (manifest_lists.walk_lists): what that
        # could miss is only ever left behind, since every retained list is read whole.
        def read_by_head(snapshot) -> bool:
            summary = snapshot.summary
            operation = getattr(getattr(summary, "operation", None), "value", None)
            return side_of[snapshot.snapshot_id] and operation == "append"

        for snapshot, decoded in reader.walk(list(retained) + list(gone), read_by_head):
            expired = side_of[snapshot.snapshot_id]
            # A list read by its head shares the rest with its parent, taken on the parent's side.
            same_side = decoded.shares_parent and (side_of.get(snapshot.parent_snapshot_id) == expired or not decoded.complete)
            side = gone_manifests if expired else kept_manifests
            if expired:
                sizes[locator.inside(snapshot.manifest_list, "manifest list")] = decoded.size
            for manifest in decoded.added if same_side else decoded.records:
                rel = locator.inside(manifest.path, "manifest")
                if rel not in side:
                    side[rel] = manifest
        exclusive = [m for rel, m in gone_manifests.items() if rel not in kept_manifests]
        candidates: dict[str, int] = {}
        for manifest, entries in reader.iter_entries(exclusive):
            sizes[locator.inside(manifest.path, "manifest")] = manifest.length
            for entry in entries:
                candidates[locator.inside(entry.path, "data file")] = entry.size
        content = set(candidates)
        if gone and plan.delete_files:
            # A candidate any retained manifest names live stays (Java's ReachableFileCleanup). All of them
            # are read before anything is deleted, even with no candidate: a retained manifest that is
            # missing or unreadable means a table no file may be deleted from.
            content -= reader.live_paths(kept_manifests.values(), content)
        plan.manifest_lists = sorted({locator.inside(s.manifest_list, "manifest list") for s in gone} - kept_lists)
        plan.manifests = sorted(set(gone_manifests) - set(kept_manifests))
        plan.content_files = sorted(content)
        plan.sizes = {p: sizes[p] for p in plan.manifest_lists + plan.manifests if p in sizes}
        plan.sizes.update((p, candidates[p]) for p in plan.content_files)

    @staticmethod
    def _statistics(metadata, locator: Locator, expired: set[int]) -> list[str]:
        """The statistics files of the removed snapshots that no retained snapshot's entry lists."""
        entries = [(f.snapshot_id, locator.inside(f.statistics_path, "statistics file")) for f in statistics_entries(metadata)]
        kept = {path for snapshot_id, path in entries if snapshot_id not in expired}
        return sorted({path for snapshot_id, path in entries if snapshot_id in expired and path not in kept})

    def _dropped_metadata(self, table, locator: Locator, retention: Retention, sizes: dict[str, int]) -> list[str]:
        """The metadata files older than every one the log keeps once the commit trims it to
        ``write.metadata.previous-versions-max``: those this commit drops and those earlier
        commits dropped without deleting. Only versions below the oldest kept one: a concurrent
        commit's new file has a higher version and is never touched. Their bytes go into ``sizes``
        (from the listing of the metadata directory)."""
        from pyiceberg.table import TableProperties

        metadata = table.metadata
        keep = int(metadata.properties.get(TableProperties.METADATA_PREVIOUS_VERSIONS_MAX, TableProperties.METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT))
        log = [entry.metadata_file for entry in metadata.metadata_log] + [table.metadata_location]
        kept = log[-max(1, keep):]
        versions = [v for v in (_metadata_version(p) for p in kept) if v is not None]
        dropped = {locator.inside(p, "metadata file") for p in log[: len(log) - len(kept)]}
        if versions or dropped:
            for rel, size, _mtime in self.storage.list_files(METADATA_DIR):
                version = _metadata_version(rel)
                if versions and version is not None and version < min(versions):
                    dropped.add(rel)
                sizes[rel] = size
        return sorted(dropped)

    # -- running ----------------------------------------------------------------------------------

    def run(self, settings: RetentionSettings, *, dry_run: bool = False, delete_files: bool = True) -> ExpireResult:
        # A dry run reports what the real run does: it finishes the plans a crashed run left, then
        # expires; main's history then starts after the snapshots the plan removes.
        recovered = self.finish_pending(dry_run=dry_run)
        attempt = 0
        while True:
            table = self.load()
            plan = self.plan(table, settings, delete_files)
            before = _main_ancestry(table.metadata)
            if dry_run or (not plan.expired_ids and not plan.removed_refs):
                after = _main_ancestry(table.metadata, without=set(plan.expired_ids))
                return self._result(plan, before, after, dry_run=dry_run, recovered=recovered)
            if self.noncurrent is not None:
                plan.noncurrent = self.noncurrent.to_dict()
            self.storage.write_bytes(f"{PLAN_DIR}/{plan.name}", plan.to_json())
            if self.noncurrent is not None:
                # Before the commit: a crash after it leaves an entry for what the commit removed.
                record_expiry(self.storage, self.noncurrent, _entry_key(plan), table.metadata, plan)
            # Fenced against undo: the plan is visible before the undo marks are read, an undo marks
            # before it reads the plans (core/formats/iceberg/noncurrent.py); one of the two backs out.
            undoing = sorted(journal_of(self.storage).marked_runs(UNDO_PREFIX))
            if undoing:
                self.storage.delete(f"{PLAN_DIR}/{plan.name}")
                self._drop_entry(plan)
                raise UndoInProgressError(
                    f"{table.name()}: undo of run {undoing[0]} is under way (or was interrupted: rerun it); nothing was expired"
                )
            try:
                # The journal is this plan's fence: a consumer that moves from now on sees it and backs
                # out (core/formats/iceberg/consumers.py). Whatever committed before it (a consumer, a ref, a
                # retention setting) is seen here; what commits after it fails the commit's requirement.
                # A catalog that checks requirements here fails the commit on any change since the plan
                # (AssertMetadataUnchanged): for it the commit is that check, without another load.
                from airflow_snaptable.core.formats.iceberg.requirements import checks_requirements_here

                if not checks_requirements_here(table.catalog) and self.load().metadata_location != table.metadata_location:
                    raise CommitConflictError(f"{table.name()}: the table changed while the expiry was planned")
                committed = self._commit(table, plan)
            except CommitConflictError:
                self.storage.delete(f"{PLAN_DIR}/{plan.name}")
                self._drop_entry(plan)
                attempt += 1
                if attempt >= COMMIT_ATTEMPTS:
                    raise
                time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
                continue
            from airflow_snaptable.core.formats.iceberg.requirements import applied_on

            if not applied_on(table, committed.metadata):
                # A catalog that checks requirements on a server applied the removal over a version the
                # plan never saw: what the plan would delete may be in use there. Fail closed.
                self.storage.delete(f"{PLAN_DIR}/{plan.name}")
                raise CommitConflictError(
                    f"{table.name()}: the catalog applied the expiry over a concurrent commit; the snapshots are "
                    "removed, no file was deleted (orphan removal frees them)"
                )
            if plan.noncurrent is None:
                self._delete(plan, committed.metadata, committed.metadata_location)
            self.storage.delete(f"{PLAN_DIR}/{plan.name}")
            result = self._result(plan, before, _main_ancestry(committed.metadata), dry_run=False, recovered=recovered)
            if plan.noncurrent is not None:
                result.run_id = plan.noncurrent["run_id"]
                result.noncurrent_data_files, result.deleted_data_files = result.deleted_data_files, 0
                result.noncurrent_manifest_files, result.deleted_manifest_files = result.deleted_manifest_files, 0
                result.noncurrent_bytes, result.bytes_freed = result.bytes_freed, 0
                result.deleted_snapshot_files = 0
            return result

    def _drop_entry(self, plan: IcebergDeletionPlan) -> None:
        if plan.noncurrent is not None:
            journal_of(self.storage).delete([f"entry-{plan.noncurrent['run_id']}-{_entry_key(plan)}.json"])

    def _commit(self, table, plan: IcebergDeletionPlan):
        from pyiceberg.exceptions import CommitFailedException
        from pyiceberg.table.update import (
            RemovePartitionStatisticsUpdate,
            RemoveSnapshotRefUpdate,
            RemoveSnapshotsUpdate,
            RemoveStatisticsUpdate,
        )

        from airflow_snaptable.core.formats.iceberg.requirements import unchanged_since

        metadata = table.metadata
        expired = set(plan.expired_ids)
        updates = tuple(RemoveSnapshotRefUpdate(ref_name=name) for name in plan.removed_refs)
        # Java's RemoveSnapshots drops the removed snapshots' statistics and partition statistics with
        # them; pyiceberg's RemoveSnapshotsUpdate drops only the former, so both are named.
        updates += tuple(RemoveStatisticsUpdate(snapshot_id=i) for i in sorted({f.snapshot_id for f in metadata.statistics} & expired))
        updates += tuple(
            RemovePartitionStatisticsUpdate(snapshot_id=i)
            for i in sorted({f.snapshot_id for f in getattr(metadata, "partition_statistics", None) or []} & expired)
        )
        if plan.expired_ids:
            updates += (RemoveSnapshotsUpdate(snapshot_ids=plan.expired_ids),)
        try:
            return table.catalog.commit_table(table, unchanged_since(table), updates)
        except CommitFailedException as exc:
            raise CommitConflictError(f"{table.name()}: the table changed while the expiry was planned: {exc}") from exc

    def _delete(self, plan: IcebergDeletionPlan, metadata, metadata_location: str) -> None:
        if not plan.delete_files:
            return
        locator = Locator(metadata.location)
        logged = {locator.relative(e.metadata_file) for e in metadata.metadata_log} | {locator.relative(metadata_location)}
        plan.metadata_files = [p for p in plan.metadata_files if p not in logged]
        listed = {locator.relative(f.statistics_path) for f in statistics_entries(metadata)}
        plan.statistics_files = [p for p in plan.statistics_files if p not in listed]
        # Metadata that names files goes before the files it names: a crash leaves files nothing names.
        self.storage.delete_files(plan.metadata_files)
        self.storage.delete_files(plan.manifest_lists)
        self.storage.delete_files(plan.manifests)
        self.storage.delete_files(plan.content_files + plan.statistics_files)

    def finish_pending(self, dry_run: bool = False) -> int:
        """Finish the plans a crashed run left; the number of data and delete files it deleted
        (``dry_run``: would delete, deleting nothing)."""
        if not dry_run:
            # Nothing else cleans the engine's directory (orphan cleaning leaves it alone): a plan write
            # killed mid-way (kill -9) left a temp file that only this rerun removes.
            self.storage.remove_abandoned_temps(PLAN_DIR)
        deleted = 0
        for name in sorted(self.storage.list_names(PLAN_DIR)):
            if not name.startswith("expire-") or not name.endswith(".json"):
                continue
            rel = f"{PLAN_DIR}/{name}"
            try:
                plan = IcebergDeletionPlan.from_json(name, self.storage.read_bytes(rel))
            except FileNotFoundError:
                continue
            table = self.load()
            present = {s.snapshot_id for s in table.metadata.snapshots}
            if str(table.metadata.table_uuid) != plan.table_uuid:
                raise UnsupportedMetadataError(f"{self.storage.full_uri(rel)}: a deletion plan of another table")
            if not present.intersection(plan.expired_ids) and not set(plan.removed_refs) & set(table.metadata.refs):
                # Committed: what the plan names is still unreachable unless something re-added it.
                locator = Locator(table.location())
                live = reach(ManifestReader(self.storage, locator), table.metadata.snapshots, only_live=True)
                plan.content_files = [p for p in plan.content_files if p not in live.content_files]
                plan.manifests = [p for p in plan.manifests if p not in live.manifests]
                if not dry_run and plan.noncurrent is None:
                    self._delete(plan, table.metadata, table.metadata_location)
                deleted += len(plan.content_files) if plan.delete_files and plan.noncurrent is None else 0
            elif not dry_run:
                self._drop_entry(plan)  # not committed: the entry records nothing removed
            if not dry_run:
                self.storage.delete(rel)
        return deleted

    def _result(self, plan: IcebergDeletionPlan, before: list, after: list, *, dry_run: bool, recovered: int) -> ExpireResult:
        # Every file deleted counts, in the kind the dry run lists it under: data and delete files;
        # manifests and manifest lists; metadata and statistics files (a snapshot's own files).
        result = ExpireResult(
            expired_snapshot_ids=list(plan.expired_ids),
            deleted_data_files=len(plan.content_files) if plan.delete_files else 0,
            deleted_manifest_files=(len(plan.manifests) + len(plan.manifest_lists)) if plan.delete_files else 0,
            deleted_snapshot_files=(len(plan.metadata_files) + len(plan.statistics_files)) if plan.delete_files else 0,
            bytes_freed=plan.bytes,
            earliest_before=before[-1].snapshot_id if before else None,
            earliest_after=after[-1].snapshot_id if after else None,
            dry_run=dry_run,
            recovered_data_files=recovered,
        )
        if dry_run:
            result.data_files = list(plan.content_files)
            result.manifest_files = list(plan.manifest_lists + plan.manifests)
            result.snapshot_files = list(plan.metadata_files + plan.statistics_files)
        return result


def _entry_key(plan: IcebergDeletionPlan) -> str:
    return plan.name[len("expire-"):-len(".json")]


def _metadata_version(path: str) -> int | None:
    match = _METADATA_FILE.search(path)
    return int(match.group(1)) if match else None


def _main_ancestry(metadata, without: frozenset[int] | set[int] = frozenset()) -> list:
    """``main``'s history, newest first; ``without`` those snapshots (it ends where the first of them was)."""
    history = ancestors(metadata, metadata.current_snapshot_id)
    for index, snapshot in enumerate(history):
        if snapshot.snapshot_id in without:
            return history[:index]
    return history


def journaled_expired_ids(storage: Storage) -> set[int]:
    """The snapshots the journaled plans remove (the fence consumers check, core/formats/iceberg/consumers.py)."""
    doomed: set[int] = set()
    for name in storage.list_names(PLAN_DIR):
        if name.startswith("expire-") and name.endswith(".json"):
            try:
                doomed.update(IcebergDeletionPlan.from_json(name, storage.read_bytes(f"{PLAN_DIR}/{name}")).expired_ids)
            except FileNotFoundError:
                continue  # finished meanwhile
    return doomed


def _statistics_sizes(metadata, locator: Locator) -> dict[str, int]:
    """The bytes the metadata records for each statistics file inside the table location."""
    entries = list(metadata.statistics or []) + list(getattr(metadata, "partition_statistics", None) or [])
    found = {}
    for entry in entries:
        rel = locator.relative(entry.statistics_path)
        if rel is not None:
            found[rel] = int(entry.file_size_in_bytes)
    return found
