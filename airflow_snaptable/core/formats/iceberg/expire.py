"""Snapshot expiry on an Iceberg table that deletes the files it frees (Iceberg's ``RemoveSnapshots``
with ``cleanExpiredFiles(true)``), crash-safe.

The sequence:

1. Plan: retention.py picks the snapshots and refs to remove; the files to delete are those the
   expired snapshots reach and no retained snapshot does (manifest lists, manifests, data and
   delete files), their statistics files, and the metadata files the commit drops from the
   metadata log (``write.metadata.previous-versions-max``).
2. Journal: the plan is written under ``<location>/snaptable/plan/`` before the commit; it is the
   fence consumers check (core/formats/iceberg/consumers.py), and the consumers are read again after it.
3. Commit: the removal goes through the catalog's atomic swap, asserting the table's current
   state; a concurrent commit fails it, and the whole plan is made again on the new metadata,
   with backoff.
4. Delete, then drop the journal. A run that finds a journal finishes it first: if the catalog
   no longer has its snapshots the commit happened, and what is still unreachable is deleted;
   otherwise nothing was deleted and the journal is dropped.

Reachability, not the snapshots' order, decides what goes (Iceberg's ``ReachableFileCleanup``),
so branches, tags and rollbacks need no special case. Only the retained manifests that can hold
a candidate are read: a manifest whose smallest data sequence number is above every candidate's
cannot (v2 tables; v1 tables record none and are read whole).
"""

from __future__ import annotations

import json
import random
import re
import time
import uuid
from dataclasses import dataclass, field

from airflow_snaptable.core.errors import CommitConflictError, CorruptMetadataError, UnsupportedMetadataError
from airflow_snaptable.core.lifecycle.expiry.run import ExpireResult
from airflow_snaptable.core.formats.iceberg.consumers import held_by_consumers, read_consumers
from airflow_snaptable.core.formats.iceberg.files import LIFECYCLE_DIR, Locator, ManifestReader, reach
from airflow_snaptable.core.formats.iceberg.retention import Retention, RetentionSettings, ancestors, plan_retention
from airflow_snaptable.core.io.storage import Storage

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
    bytes: int = 0
    delete_files: bool = True
    name: str = field(default_factory=lambda: f"expire-{uuid.uuid4().hex}.json")

    def to_json(self) -> bytes:
        doc = {k: v for k, v in self.__dict__.items() if k != "name"}
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_json(cls, name: str, data: bytes) -> "IcebergDeletionPlan":
        try:
            return cls(name=name, **json.loads(data))
        except (ValueError, TypeError) as exc:
            raise CorruptMetadataError(f"{PLAN_DIR}/{name}: unreadable deletion plan: {exc}") from exc


class IcebergExpiry:
    def __init__(self, table_loader, storage: Storage):
        #: ``table_loader()`` -> the pyiceberg table as the catalog has it now
        self.load = table_loader
        self.storage = storage

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
        gone = [metadata.snapshot_by_id(i) for i in retention.expired_ids]
        self._fill_files(plan, reader, gone, retained)
        plan.statistics_files = self._statistics(metadata, locator, expired)
        plan.metadata_files = self._dropped_metadata(table, locator, retention) if delete_files else []
        return plan

    @staticmethod
    def _fill_files(plan: IcebergDeletionPlan, reader: ManifestReader, gone: list, retained: list) -> None:
        kept_lists = {reader.locator.inside(s.manifest_list, "manifest list") for s in retained}
        kept_manifests = {
            reader.locator.inside(m.path, "manifest"): m for s in retained for m in reader.manifests_of(s)
        }
        exclusive = reach(reader, gone, only_live=False, manifest_filter=lambda m: reader.locator.relative(m.path) not in kept_manifests)
        candidates = dict(exclusive.content_files)
        if candidates:
            newest = max(candidates.values())
            live = reach(
                reader, retained, only_live=True,
                manifest_filter=lambda m: m.min_sequence_number <= newest,
            )
            for path in live.content_files:
                candidates.pop(path, None)
        plan.manifest_lists = sorted(exclusive.manifest_lists - kept_lists)
        plan.manifests = sorted(set(exclusive.manifests) - set(kept_manifests))
        plan.content_files = sorted(candidates)
        plan.bytes = sum(exclusive.bytes.get(p, 0) for p in plan.manifests + plan.content_files)

    @staticmethod
    def _statistics(metadata, locator: Locator, expired: set[int]) -> list[str]:
        entries = list(metadata.statistics or []) + list(getattr(metadata, "partition_statistics", None) or [])
        kept = {f.statistics_path for f in entries if f.snapshot_id not in expired}
        return sorted(
            locator.inside(f.statistics_path, "statistics file")
            for f in entries if f.snapshot_id in expired and f.statistics_path not in kept
        )

    def _dropped_metadata(self, table, locator: Locator, retention: Retention) -> list[str]:
        """The metadata files older than every one the log keeps once the commit trims it to
        ``write.metadata.previous-versions-max``: those this commit drops and those earlier
        commits dropped without deleting. Only versions below the oldest kept one: a concurrent
        commit's new file has a higher version and is never touched."""
        from pyiceberg.table import TableProperties

        metadata = table.metadata
        keep = int(metadata.properties.get(TableProperties.METADATA_PREVIOUS_VERSIONS_MAX, TableProperties.METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT))
        log = [entry.metadata_file for entry in metadata.metadata_log] + [table.metadata_location]
        kept = log[-max(1, keep):]
        versions = [v for v in (_metadata_version(p) for p in kept) if v is not None]
        dropped = {locator.inside(p, "metadata file") for p in log[: len(log) - len(kept)]}
        if versions:
            for rel, _size, _mtime in self.storage.list_files(METADATA_DIR):
                version = _metadata_version(rel)
                if version is not None and version < min(versions):
                    dropped.add(rel)
        return sorted(dropped)

    # -- running ----------------------------------------------------------------------------------

    def run(self, settings: RetentionSettings, *, dry_run: bool = False, delete_files: bool = True) -> ExpireResult:
        recovered = 0 if dry_run else self.finish_pending()
        attempt = 0
        while True:
            table = self.load()
            plan = self.plan(table, settings, delete_files)
            before = _main_ancestry(table.metadata)
            if dry_run or (not plan.expired_ids and not plan.removed_refs):
                return self._result(plan, before, before if dry_run else before, dry_run=dry_run, recovered=recovered, table=table)
            self.storage.write_bytes(f"{PLAN_DIR}/{plan.name}", plan.to_json())
            try:
                # The journal is this plan's fence: a consumer that moves from now on sees it and backs
                # out (core/formats/iceberg/consumers.py); one that moved before is seen here.
                if read_consumers(self.load().metadata) != read_consumers(table.metadata):
                    raise CommitConflictError(f"{table.name()}: a consumer moved while the expiry was planned")
                committed = self._commit(table, plan)
            except CommitConflictError:
                self.storage.delete(f"{PLAN_DIR}/{plan.name}")
                attempt += 1
                if attempt >= COMMIT_ATTEMPTS:
                    raise
                time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
                continue
            self._delete(plan, committed.metadata, committed.metadata_location)
            self.storage.delete(f"{PLAN_DIR}/{plan.name}")
            return self._result(plan, before, _main_ancestry(committed.metadata), dry_run=False, recovered=recovered, table=table)

    def _commit(self, table, plan: IcebergDeletionPlan):
        from pyiceberg.exceptions import CommitFailedException
        from pyiceberg.table.update import (
            AssertCurrentSchemaId,
            AssertRefSnapshotId,
            AssertTableUUID,
            RemoveSnapshotRefUpdate,
            RemoveSnapshotsUpdate,
        )

        metadata = table.metadata
        updates = tuple(RemoveSnapshotRefUpdate(ref_name=name) for name in plan.removed_refs)
        if plan.expired_ids:
            updates += (RemoveSnapshotsUpdate(snapshot_ids=plan.expired_ids),)
        # The plan holds while every ref still points where it did: a commit or ref change
        # in between fails the swap and the plan is made again.
        requirements = (AssertTableUUID(uuid=metadata.table_uuid), AssertCurrentSchemaId(current_schema_id=metadata.current_schema_id))
        requirements += tuple(AssertRefSnapshotId(ref=name, snapshot_id=ref.snapshot_id) for name, ref in metadata.refs.items())
        try:
            response = table.catalog.commit_table(table, requirements, updates)
        except CommitFailedException as exc:
            raise CommitConflictError(f"{table.name()}: the table changed while the expiry was planned: {exc}") from exc
        return response

    def _delete(self, plan: IcebergDeletionPlan, metadata, metadata_location: str) -> None:
        if not plan.delete_files:
            return
        locator = Locator(metadata.location)
        logged = {locator.relative(e.metadata_file) for e in metadata.metadata_log} | {locator.relative(metadata_location)}
        plan.metadata_files = [p for p in plan.metadata_files if p not in logged]
        # Metadata that names files goes before the files it names: a crash leaves files nothing names.
        self.storage.delete_files(plan.metadata_files)
        self.storage.delete_files(plan.manifest_lists)
        self.storage.delete_files(plan.manifests)
        self.storage.delete_files(plan.content_files + plan.statistics_files)

    def finish_pending(self) -> int:
        """Finish the plans a crashed run left; the number of data and delete files it deleted."""
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
                self._delete(plan, table.metadata, table.metadata_location)
                deleted += len(plan.content_files) if plan.delete_files else 0
            self.storage.delete(rel)
        return deleted

    def _result(self, plan, before: list, after: list, *, dry_run: bool, recovered: int, table) -> ExpireResult:
        result = ExpireResult(
            expired_snapshot_ids=list(plan.expired_ids),
            deleted_data_files=len(plan.content_files) if plan.delete_files else 0,
            deleted_manifest_files=(len(plan.manifests) + len(plan.manifest_lists)) if plan.delete_files else 0,
            deleted_snapshot_files=len(plan.metadata_files) if plan.delete_files else 0,
            bytes_freed=plan.bytes if plan.delete_files else 0,
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


def _metadata_version(path: str) -> int | None:
    match = _METADATA_FILE.search(path)
    return int(match.group(1)) if match else None


def _main_ancestry(metadata) -> list:
    return ancestors(metadata, metadata.current_snapshot_id)


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
