"""Optimistic commit of one snapshot.

Rules:
- Data files and the delta manifest are written first; the commit point is the
  atomic create-if-absent of ``snapshot-<latest+1>``. Until then nothing is
  visible; a crash leaves only unreferenced files for orphan cleaning.
- Losing the race means: re-read the latest snapshot, check the snapshots
  committed in between for real conflicts, rebuild the base manifest list on
  top of the new latest, and try the next id, with exponential backoff.
- What counts as a conflict is core/native/commit_conflicts.py's; how the base list's
  manifests are merged, core/native/manifest_merge.py's.
- A commit with ``commit_identifier`` is applied once: a retry finds the
  snapshot its earlier attempt made and returns it.
- LATEST/EARLIEST hints are written after the commit point and their failure
  does not fail the commit (readers never trust hints blindly).
- A published snapshot must extend the table: its predecessor is the snapshot
  it was planned on, and no rollback is discarding its id. Otherwise (a stale
  base re-created an expired id, or a rollback raced the commit) it is undone:
  after an expiry the commit retries; after a rollback it fails, because the
  state it was planned on was discarded on purpose. core/native/commit_lineage.py tells
  which, from identities rather than ids.
"""

from __future__ import annotations

import logging
import random
import time
from datetime import timedelta
from dataclasses import dataclass, field
from typing import Callable

from airflow_snaptable.core.native.commit_conflicts import ConflictDetection
from airflow_snaptable.core.native.commit_lineage import ROLLED_BACK, CommitLineage
from airflow_snaptable.core.native.commit_request import CommitRequest
from airflow_snaptable.core.native.deleting_commits import link_below
from airflow_snaptable.core.errors import (
    ClockSkewError,
    CommitConflictError,
    CommitFailedError,
    CorruptMetadataError,
    SnapshotNotFoundError,
)
from airflow_snaptable.core.native.manifest import FileKind, ManifestEntry, ManifestFileMeta, ManifestIO, manifest_path
from airflow_snaptable.core.native.manifest_merge import ManifestMerger
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.native.snapshot import Snapshot, SnapshotManager, snapshot_path

log = logging.getLogger(__name__)


@dataclass
class _Written:
    """The metadata one commit wrote, so that nothing its published snapshot does not reference survives it."""

    #: The delta list this commit publishes with.
    delta: str
    #: The current attempt's base list and the manifests its merge wrote.
    attempt: list[str] = field(default_factory=list)
    #: Written and referenced by nothing: earlier attempts, deltas replaced by a re-plan.
    unused: list[str] = field(default_factory=list)

    def next_attempt(self) -> None:
        self.unused += self.attempt
        self.attempt = []

    def replace_delta(self, old_names: list[str], new_delta: str) -> None:
        self.unused += old_names
        self.delta = new_delta


class FileStoreCommit:
    def __init__(
        self,
        snapshots: SnapshotManager,
        manifests: ManifestIO,
        schema: TableSchema,
        clock: Callable[[], int],
        rollback_ceiling: Callable[[], int | None],
    ):
        self.snapshots = snapshots
        self.manifests = manifests
        self.schema = schema
        self.clock = clock
        #: Snapshot ids above this are being discarded by an unfinished rollback (None: none); the
        #: lifecycle's plans know (core/lifecycle/deletion_plans.py PlanManager.ceiling), the table passes it in.
        self.rollback_ceiling = rollback_ceiling
        options = schema.table_options
        self.max_retries = options.get("commit.max-retries")
        self.max_clock_skew_millis = int(options.get("commit.max-clock-skew").total_seconds() * 1000)
        self.conflicts = ConflictDetection(snapshots, manifests, schema)
        self.lineage = CommitLineage(snapshots, rollback_ceiling)
        self.merger = ManifestMerger(
            manifests, schema.id, options.get("manifest.target-file-size"), options.get("manifest.merge-min-count")
        )

    # -- entry point ---------------------------------------------------------

    def commit(self, request: CommitRequest) -> Snapshot:
        if request.commit_identifier is not None:
            done = self.find_committed(request.commit_user, request.commit_identifier)
            if done is not None:
                log.info("commit %s/%s was applied already as snapshot %s", request.commit_user, request.commit_identifier, done.id)
                return done

        written = _Written(delta=self._write_delta(request))
        try:
            snapshot = self._attempt(request, request.base_snapshot, written)
        except (CommitConflictError, CommitFailedError):
            # Nothing of this commit is referenced: take its metadata with it (data files are the caller's).
            self._delete_quietly(written.unused + written.attempt + self._delta_names(written.delta))
            raise
        self._delete_quietly(written.unused)
        return snapshot

    def _attempt(self, request: CommitRequest, latest, written: "_Written") -> Snapshot:
        backoff = 0.01
        for attempt in range(1, self.max_retries + 1):
            new_id = 1 if latest is None else latest.id + 1
            written.next_attempt()
            try:
                base_metas = self._next_base(latest)
            except CorruptMetadataError as exc:
                # The base we planned on is gone (its lists with it): a rollback discarded it, or it
                # expired under us, which is a lost race if a newer snapshot exists.
                removed = self.lineage.base_removed(latest)
                if removed == ROLLED_BACK:
                    raise CommitFailedError(
                        f"a rollback of {self.snapshots.storage.uri} discarded snapshot {latest.id}, "
                        "which this commit was planned on"
                    ) from exc
                newer = self.snapshots.latest_snapshot()
                if removed is None or newer is None or newer.id <= latest.id:
                    raise
                if self.conflicts.check(request, latest, newer):
                    written.replace_delta(self._delta_names(written.delta), self._write_delta(request))
                latest = newer
                continue
            base_list = self.manifests.write_list(base_metas)
            written.attempt = [base_list] + self._merged(latest, base_metas)
            delta_list = written.delta
            snapshot = self._new_snapshot(new_id, latest, request, base_list, delta_list, base_metas)
            # Publishing on a base that expiry or a rollback removed would re-create a removed id
            # (undone below, but visible meanwhile): check right before, to keep that window tiny.
            removed = self.lineage.base_removed(latest)
            if removed == ROLLED_BACK:
                raise CommitFailedError(
                    f"a rollback of {self.snapshots.storage.uri} discarded snapshot {latest.id}, which this commit was planned on"
                )
            if removed is None and self._publish(snapshot):
                stranded = self.lineage.stranded(snapshot, latest)
                if stranded is None:
                    self._write_hints(snapshot)
                    return snapshot
                self.snapshots.storage.delete(snapshot_path(snapshot.id))
                if stranded == ROLLED_BACK:
                    raise CommitFailedError(
                        f"a rollback of {self.snapshots.storage.uri} discarded the snapshot this commit was planned on "
                        f"(it had published snapshot {snapshot.id}; undone). Nothing of this commit remains"
                    )
                log.warning("snapshot %s re-created an expired id from a stale base; undone, retrying", snapshot.id)
                # While it was visible, an expiry may have taken the undone snapshot's
                # delta manifests with it: write them anew for the retry.
                written.replace_delta(self._delta_names(delta_list), self._write_delta(request))

            newer = self.snapshots.latest_snapshot()
            if newer is None or (latest is not None and newer.id <= latest.id):
                # The id is taken but not visible as latest: a rollback is racing us; re-read and retry.
                newer = self.snapshots.latest_snapshot()
            if request.commit_identifier is not None and newer is not None:
                # Only what landed since the last look can be an earlier attempt of this commit.
                done = self.find_committed(request.commit_user, request.commit_identifier, after=latest.id if latest else 0)
                if done is not None:
                    return done
            if self.conflicts.check(request, latest, newer):
                written.replace_delta(self._delta_names(written.delta), self._write_delta(request))
            latest = newer
            time.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, 1.0)
        raise CommitFailedError(
            f"could not commit to {self.snapshots.storage.uri} after {self.max_retries} attempts "
            "(other writers kept winning the race)"
        )

    # -- steps -------------------------------------------------------------

    def _write_delta(self, request: CommitRequest) -> str:
        entries = [ManifestEntry(FileKind.ADD, f) for f in request.added]
        entries += [ManifestEntry(FileKind.DELETE, f) for f in request.deleted]
        metas = [self.manifests.write_manifest(entries, self.schema.id)] if entries else []
        return self.manifests.write_list(metas)

    def _next_base(self, latest: Snapshot | None) -> list[ManifestFileMeta]:
        if latest is None:
            return []
        metas = self.manifests.read_list(latest.base_manifest_list) + self.manifests.read_list(latest.delta_manifest_list)
        return self.merger.merge(metas)

    def _merged(self, parent: Snapshot | None, base_metas: list[ManifestFileMeta]) -> list[str]:
        """The manifests of ``base_metas`` this commit wrote (merging), not inherited from ``parent``."""
        inherited = self._inherited(parent)
        return [m.file_name for m in base_metas if m.file_name not in inherited]

    def _inherited(self, parent: Snapshot | None) -> set[str]:
        if parent is None:
            return set()
        lists = (parent.base_manifest_list, parent.delta_manifest_list)
        return {m.file_name for name in lists for m in self.manifests.read_list(name)}  # cached by _next_base

    def _written_metadata(self, parent: Snapshot | None, base_list: str, delta_list: str, base_metas: list[ManifestFileMeta]) -> dict:
        """What this commit wrote (see Snapshot.written_metadata); all from memory, no I/O."""
        inherited = self._inherited(parent)
        return {
            "base_list": self.manifests.list_size(base_list),
            "delta_list": self.manifests.list_size(delta_list),
            "delta_manifests": {m.file_name: m.file_size for m in self.manifests.read_list(delta_list)},
            "merged_manifests": {m.file_name: m.file_size for m in base_metas if m.file_name not in inherited},
        }

    def _new_snapshot(
        self, new_id: int, parent: Snapshot | None, request: CommitRequest, base_list: str, delta_list: str,
        base_metas: list[ManifestFileMeta],
    ) -> Snapshot:
        added_records = sum(f.record_count for f in request.added)
        deleted_records = sum(f.record_count for f in request.deleted)
        parent_total = parent.total_record_count if parent else 0
        watermark = request.watermark
        if parent is not None and parent.watermark is not None:
            watermark = parent.watermark if watermark is None else max(watermark, parent.watermark)
        # Commit times never go backwards, so time travel can binary-search.
        now = self.clock()
        if parent is not None and parent.time_millis - now > self.max_clock_skew_millis:
            raise ClockSkewError(_skew_message(parent, now, self.snapshots.storage.uri))
        time_millis = max(now, parent.time_millis if parent else 0)
        summary = {
            "added_files": len(request.added),
            "deleted_files": len(request.deleted),
            "added_records": added_records,
            "deleted_records": deleted_records,
            "changed_partitions": len({f.partition for f in request.added} | {f.partition for f in request.deleted}),
            **request.extra_summary,
        }
        return Snapshot(
            id=new_id,
            parent_id=parent.id if parent else None,
            schema_id=self.schema.id,
            commit_kind=request.kind,
            commit_user=request.commit_user,
            commit_identifier=request.commit_identifier,
            time_millis=time_millis,
            total_record_count=parent_total + added_records - deleted_records,
            delta_record_count=added_records - deleted_records,
            watermark=watermark,
            base_manifest_list=base_list,
            delta_manifest_list=delta_list,
            summary=summary,
            written_metadata=self._written_metadata(parent, base_list, delta_list, base_metas),
            parent_base_manifest_list=parent.base_manifest_list if parent else None,
            may_delete_below=link_below(parent),
        )

    def _publish(self, snapshot: Snapshot) -> bool:
        """Create the snapshot file; True if this attempt's snapshot is the one that exists.

        "Already exists" and errors are both ambiguous: a client retry of a PUT that
        landed gets 412, and a timeout may hide a success. The base list name is
        unique to this attempt, so reading the file back tells whose it is.
        """
        try:
            if self.snapshots.commit(snapshot):
                return True
        except Exception:
            if self.lineage.is_ours(snapshot):
                return True
            raise
        return self.lineage.is_ours(snapshot)

    def _delta_names(self, delta_list: str) -> list[str]:
        try:
            return [delta_list] + [m.file_name for m in self.manifests.read_list(delta_list)]
        except Exception:  # noqa: BLE001 - best effort cleanup
            return [delta_list]

    def _delete_quietly(self, names: list[str]) -> None:
        """Remove metadata files no snapshot references; a failure only leaves work for orphan cleaning."""
        for name in names:
            try:
                self.snapshots.storage.delete(manifest_path(name))
            except Exception as exc:  # noqa: BLE001
                log.warning("could not remove unused %s: %s", name, exc)

    def _write_hints(self, snapshot: Snapshot) -> None:
        try:
            self.snapshots.write_latest_hint(snapshot.id)
            if snapshot.id == 1:
                self.snapshots.write_earliest_hint(1)
        except Exception as exc:  # noqa: BLE001 - hints are optional; the commit stands
            log.warning("snapshot %s committed, but writing the hint failed: %s", snapshot.id, exc)

    # -- conflicts and idempotency -------------------------------------------

    def find_committed(self, commit_user: str, commit_identifier: int, after: int = 0) -> Snapshot | None:
        """The snapshot ``commit_user`` made with ``commit_identifier``, if any, among those with id > ``after``.

        Identifiers increase per user, so walking back from the latest snapshot
        stops at the user's first commit with a smaller identifier.
        """
        latest = self.snapshots.latest_id()
        if latest is None:
            return None
        earliest = max(self.snapshots.earliest_id() or 1, after + 1)
        for snapshot_id in range(latest, earliest - 1, -1):
            try:
                snapshot = self.snapshots.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                break  # expired under us: everything older is gone too
            if snapshot.commit_user != commit_user or snapshot.commit_identifier is None:
                continue
            if snapshot.commit_identifier == commit_identifier:
                return snapshot
            if snapshot.commit_identifier < commit_identifier:
                return None
        return None


def _skew_message(parent: Snapshot, now_millis: int, uri: str) -> str:
    ahead = timedelta(milliseconds=parent.time_millis - now_millis)
    return (
        f"snapshot {parent.id} of {uri} is stamped {ahead} ahead of this writer's clock, more than "
        "commit.max-clock-skew allows: commit times never go backwards, so this commit would carry that time "
        "and break time travel and time-based expiry. If this writer's clock is right, the writer of snapshot "
        f"{parent.id} ran ahead: fix its clock, then roll back to snapshot {parent.id - 1} and re-run what it "
        "committed (verify() lists snapshots from the future). If this writer's clock is behind, fix it"
    )
