"""The write half of ``Table``'s front door: rows in, one new snapshot out (this package's format only)."""

from __future__ import annotations

from typing import Any, Sequence

from airflow_snaptable.core.native.commit import FileStoreCommit
from airflow_snaptable.core.compaction import compact
from airflow_snaptable.core.external_files import commit_external_files
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.lifecycle.deletion_plans import PlanManager
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.table_write import TableWrite


class TableWrites:
    """``Table``'s write methods (mixed into it): each plans in core/table_write.py and commits in core/native/commit.py."""

    def append(self, data, *, commit_user: str | None = None, commit_identifier: int | None = None, watermark: int | None = None) -> Snapshot:
        """Add rows as a new snapshot (commit kind APPEND)."""
        return self._write().append(data, commit_user, commit_identifier, watermark)

    def overwrite(
        self,
        data,
        partitions: list[dict] | None = None,
        *,
        commit_user: str | None = None,
        commit_identifier: int | None = None,
        watermark: int | None = None,
    ) -> Snapshot:
        """Replace the whole table, or only ``partitions`` (e.g. ``[{"p": 3}]``), with ``data``."""
        return self._write().overwrite(data, partitions, commit_user, commit_identifier, watermark)

    def delete(self, partitions: list[dict], *, commit_user: str | None = None, commit_identifier: int | None = None) -> Snapshot:
        """Remove every row of ``partitions`` as a new snapshot (commit kind DELETE)."""
        return self._write().delete(partitions, commit_user, commit_identifier)

    def compact(
        self,
        partitions: list[dict] | None = None,
        *,
        target_file_size: int | str | None = None,
        min_file_num: int | None = None,
        commit_user: str | None = None,
    ) -> Snapshot | None:
        """Rewrite the small files of each partition into fewer files (commit kind COMPACT).

        A partition is compacted when it has at least ``min_file_num`` files smaller than
        ``target_file_size`` (defaults: options ``compaction.min.file-num``, ``target-file-size``).
        Returns None, committing nothing, when no partition qualifies.
        """
        return compact(self._write(), self.read_files, partitions, target_file_size, min_file_num, commit_user)

    def commit_files(
        self,
        added: Sequence[DataFile],
        *,
        mode: str = "append",
        partitions: list[dict] | None = None,
        base_snapshot_id: int | None = None,
        commit_user: str | None = None,
        commit_identifier: int | None = None,
        watermark: int | None = None,
        summary: dict[str, Any] | None = None,
    ) -> Snapshot:
        """Commit data files that are written already (e.g. by Spark tasks) as one new snapshot.

        ``mode="append"`` adds them (APPEND); ``mode="overwrite"`` makes them replace the
        whole table, or only ``partitions`` (OVERWRITE), like :meth:`overwrite`.
        ``base_snapshot_id`` is the snapshot the files were written against: an
        overwrite then conflicts with changes to its partitions committed after it
        (``CommitConflictError``, also when it has expired meanwhile); ``0`` means the
        empty table, None the latest snapshot now. ``commit_user``/``commit_identifier``
        as in :meth:`append`: a retry returns the earlier snapshot, and the files given
        to the retry are then not part of any snapshot (the caller deletes them).
        ``summary``: extra string-keyed JSON scalars for the snapshot's summary (e.g.
        ``{"engine": "spark"}``). What is checked before anything is written, and what is
        not: core/external_files.py (no path the table knows is committed again).
        """
        return commit_external_files(
            self._write(), self.store, added, mode=mode, partitions=partitions, base_snapshot_id=base_snapshot_id,
            commit_user=commit_user, commit_identifier=commit_identifier, watermark=watermark, summary=summary,
        )

    def _write(self) -> TableWrite:
        self._native_only("writing rows")
        return TableWrite(self.storage, self.schema, self.snapshot_manager, self.manifest_io, self.new_commit)

    def new_commit(self) -> FileStoreCommit:
        self._native_only("committing a snapshot")
        return FileStoreCommit(self.snapshot_manager, self.manifest_io, self.schema, self.clock, PlanManager(self.store).ceiling)

