"""Conflict detection: which commits made since a commit was planned make it wrong.

Rules (docs/format.md, "Commit protocol"):
- Appends of files the commit wrote itself never conflict.
- An OVERWRITE or DELETE of some partitions (or the whole table) conflicts with a
  concurrent commit that changed those partitions, except a COMPACT (same rows),
  after which the files to delete are planned again.
- Any commit conflicts with a concurrent one that deleted a file it deletes.
- A ``commit_files`` of a path conflicts with a concurrent commit that added or deleted it.
"""

from __future__ import annotations

from airflow_snaptable.core.native.commit_request import WHOLE_TABLE, CommitRequest
from airflow_snaptable.core.errors import CommitConflictError, SnapshotNotFoundError
from airflow_snaptable.core.native.manifest import FileKind, ManifestIO
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot, SnapshotManager


class ConflictDetection:
    def __init__(self, snapshots: SnapshotManager, manifests: ManifestIO, schema: TableSchema):
        self.snapshots = snapshots
        self.manifests = manifests
        self.schema = schema

    def check(self, request: CommitRequest, base: Snapshot | None, latest: Snapshot | None) -> bool:
        """Raise CommitConflictError if a snapshot after ``base`` up to ``latest`` conflicts with ``request``;
        return True if ``request.deleted`` was re-planned (after a compaction of the overwritten partitions)."""
        if latest is None or (base is not None and latest.id <= base.id):
            return False
        if request.overwrite_scope is None and not request.deleted and not request.new_paths:
            return False  # a pure append of files it wrote itself commutes with everything
        deleted_paths = {f.path for f in request.deleted}
        replan = False
        first = 1 if base is None else base.id + 1
        for snapshot_id in range(first, latest.id + 1):
            try:
                other = self.snapshots.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                raise CommitConflictError(
                    f"snapshot {snapshot_id}, committed after this commit was planned, is gone already; "
                    "cannot check it for conflicts"
                ) from None
            entries = self.manifests.read_delta(other)
            if request.overwrite_scope is not None:
                touched = [e for e in entries if self._in_scope(e.file.partition, request.overwrite_scope)]
                if touched:
                    if other.commit_kind is CommitKind.COMPACT and request.replan_deleted is not None:
                        replan = True
                        continue
                    named = dict(zip(self.schema.partition_keys, touched[0].file.partition))
                    raise CommitConflictError(
                        f"snapshot {other.id} ({other.commit_kind.value}) changed partition {named or '(table)'} "
                        f"that this {request.kind.value} replaces; re-run it against the new state"
                    )
            taken = [e.file.path for e in entries if e.file.path in request.new_paths]
            if taken:
                raise CommitConflictError(
                    f"snapshot {other.id} ({other.commit_kind.value}) committed {taken[0]}, which this "
                    f"{request.kind.value} adds: a path is never committed twice"
                )
            gone = [e.file.path for e in entries if e.kind is FileKind.DELETE and e.file.path in deleted_paths]
            if gone:
                raise CommitConflictError(
                    f"snapshot {other.id} ({other.commit_kind.value}) already deleted {gone[0]}, which this "
                    f"{request.kind.value} deletes"
                )
        if replan:
            request.deleted = request.replan_deleted(latest)
        return replan

    def _in_scope(self, partition: tuple, scope: list[dict] | str) -> bool:
        return scope == WHOLE_TABLE or self.schema.partition_matches(partition, scope)
