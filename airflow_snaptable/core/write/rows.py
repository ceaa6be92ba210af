"""The table's write path: rows into data files, data files into one commit (core/native/commit.py).

Everything a write is given is checked before its first file is written (the rows
against the schema, every partition's directory name, the commit arguments), so bad
input changes nothing on storage. A commit that surely failed takes the data files its
own call wrote with it; files given by a caller (``commit_files``) stay the caller's.
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from airflow_snaptable.core.arguments.checks import check_int, check_optional_int
from airflow_snaptable.core.native.commit import FileStoreCommit
from airflow_snaptable.core.native.commit_request import WHOLE_TABLE, CommitRequest
from airflow_snaptable.core.errors import CommitConflictError, CommitFailedError, InvalidArgumentError
from airflow_snaptable.core.native.manifest import DataFile, ManifestIO
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot, SnapshotManager
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.native.data_files import check_rows_in_partitions, split_by_partition, to_arrow_table, write_data_files

DEFAULT_COMMIT_USER = "snaptable"

_STANDARD_SUMMARY_KEYS = {"added_files", "deleted_files", "added_records", "deleted_records", "changed_partitions"}


class TableWrite:
    """One table's writes. ``new_commit`` makes the commit of each write (Table.new_commit)."""

    def __init__(
        self,
        storage: Storage,
        schema: TableSchema,
        snapshots: SnapshotManager,
        manifests: ManifestIO,
        new_commit: Callable[[], FileStoreCommit],
    ):
        self.storage = storage
        self.schema = schema
        self.options = schema.table_options
        self.snapshots = snapshots
        self.manifests = manifests
        self.new_commit = new_commit

    def append(self, data, commit_user: str | None, commit_identifier: int | None, watermark: int | None) -> Snapshot:
        check_commit_arguments(commit_user, commit_identifier, watermark)
        groups = self.prepare(data)
        base = self.snapshots.latest_snapshot()
        added = self.write(groups)
        return self.commit(CommitKind.APPEND, added, [], base, commit_user, commit_identifier, watermark, written_here=True)

    def overwrite(
        self, data, partitions: list[dict] | None, commit_user: str | None, commit_identifier: int | None, watermark: int | None
    ) -> Snapshot:
        check_commit_arguments(commit_user, commit_identifier, watermark)
        specs = self.check_partition_specs(partitions, allow_none=True)
        groups = self.prepare(data)
        if specs is not None:
            check_rows_in_partitions(groups, self.schema, specs)
        base = self.snapshots.latest_snapshot()
        scope = WHOLE_TABLE if specs is None else specs
        deleted = self.files_in_scope(base, scope)
        added = self.write(groups)
        return self.commit(CommitKind.OVERWRITE, added, deleted, base, commit_user, commit_identifier, watermark, scope, written_here=True)

    def delete(self, partitions: list[dict], commit_user: str | None, commit_identifier: int | None) -> Snapshot:
        check_commit_arguments(commit_user, commit_identifier, None)
        specs = self.check_partition_specs(partitions, allow_none=False)
        base = self.snapshots.latest_snapshot()
        deleted = self.files_in_scope(base, specs)
        return self.commit(CommitKind.DELETE, [], deleted, base, commit_user, commit_identifier, None, specs)

    # -- the steps ---------------------------------------------------------------------------

    def prepare(self, data) -> list[tuple[tuple, pa.Table]]:
        """The rows by partition, every partition's directory checked: writing starts only once all are valid."""
        groups = split_by_partition(to_arrow_table(data, self.schema), self.schema)
        for partition, _rows in groups:
            self.schema.partition_dir(partition)
        return groups

    def write(self, groups: list[tuple[tuple, pa.Table]], target_file_size: int | None = None) -> list[DataFile]:
        """New data files for the rows (option ``target-file-size`` unless given)."""
        target = self.options.get("target-file-size") if target_file_size is None else target_file_size
        return write_data_files(self.storage, self.schema, groups, target, self.options.get("file.compression"))

    def check_partition_specs(self, partitions, allow_none: bool) -> list[dict] | None:
        if partitions is None and allow_none:
            return None
        if isinstance(partitions, dict):
            partitions = [partitions]
        if not isinstance(partitions, (list, tuple)) or not partitions:
            raise InvalidArgumentError(f"partitions must be a non-empty list of dicts like [{{'p': 3}}], got {partitions!r}")
        return [self.schema.check_partition_spec(spec) for spec in partitions]

    def files_in_scope(self, snapshot: Snapshot | None, scope) -> list[DataFile]:
        if snapshot is None:
            return []
        files = self.manifests.read_state(snapshot).values()
        if scope == WHOLE_TABLE:
            return list(files)
        return [f for f in files if self.schema.partition_matches(f.partition, scope)]

    def commit(
        self, kind, added, deleted, base, commit_user, commit_identifier, watermark, scope=None, written_here=False,
        extra_summary=None, new_paths=False, replan=True,
    ) -> Snapshot:
        """Commit; if the data files were written by this call and the commit surely failed, delete them too.

        ``new_paths``: the added paths come from the caller (commit_files), so a racing commit of the
        same path is a conflict. ``replan``: a concurrent compaction of the scope may re-plan the deletes.
        """
        # commit_files' check; append, overwrite, delete and compact made it before writing their first file.
        check_commit_arguments(commit_user, commit_identifier, watermark)
        request = CommitRequest(
            kind=kind,
            added=added,
            deleted=deleted,
            base_snapshot=base,
            commit_user=commit_user or DEFAULT_COMMIT_USER,
            commit_identifier=commit_identifier,
            watermark=watermark,
            overwrite_scope=scope,
            replan_deleted=(lambda latest: self.files_in_scope(latest, scope)) if scope is not None and replan else None,
            extra_summary=extra_summary or {},
            new_paths=frozenset(f.path for f in added) if new_paths else frozenset(),
        )
        try:
            return self.new_commit().commit(request)
        except (CommitConflictError, CommitFailedError):
            if written_here:
                self.storage.delete_files([f.path for f in added])
            raise


def check_commit_arguments(commit_user, commit_identifier, watermark) -> None:
    """What a commit records about its writer, checked before the write's first file."""
    if commit_user is not None and (not isinstance(commit_user, str) or not commit_user.strip()):
        raise InvalidArgumentError(f"commit_user must be a non-empty string, got {commit_user!r}")
    if commit_identifier is not None:
        if commit_user is None:
            raise InvalidArgumentError("commit_identifier needs commit_user (identifiers increase per user)")
        check_int(commit_identifier, "commit_identifier", minimum=0)
    check_optional_int(watermark, "watermark")


def check_summary(summary) -> dict[str, Any]:
    """Extra keys for a snapshot's summary: string keys, JSON scalar values, none of the standard keys."""
    if summary is None:
        return {}
    if not isinstance(summary, dict):
        raise InvalidArgumentError(f"summary must be a dict, got {type(summary).__name__}")
    for key, value in summary.items():
        if not isinstance(key, str) or key in _STANDARD_SUMMARY_KEYS:
            raise InvalidArgumentError(f"summary key {key!r} is not a string or is one of the standard keys")
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise InvalidArgumentError(f"summary value for {key!r} must be a JSON scalar, got {type(value).__name__}")
    return dict(summary)
