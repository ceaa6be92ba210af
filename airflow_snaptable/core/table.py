"""The table: one directory (or object-store prefix) holding schema, snapshots, manifests and data."""

from __future__ import annotations

import datetime as dt
from datetime import timedelta
import time
import uuid
from typing import Any, Callable, Sequence

import pendulum
import pyarrow as pa

from airflow_snaptable.core import expire, orphans, periodic, rollback
from airflow_snaptable.core import tags as tag_ops
from airflow_snaptable.core.checks import check_bool, check_int, check_optional_int
from airflow_snaptable.core.commit import WHOLE_TABLE, CommitRequest, FileStoreCommit
from airflow_snaptable.core.errors import (
    CommitConflictError,
    CommitFailedError,
    CorruptMetadataError,
    InvalidArgumentError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TagNotFoundError,
    UnsupportedStorageError,
)
from airflow_snaptable.core import consumers as consumer_ops
from airflow_snaptable.core.consumers import Consumer, ConsumerManager
from airflow_snaptable.core.external_files import check_shapes, refuse_known_paths, split_kept
from airflow_snaptable.core.incremental import ChangeSet, StreamScan, compute_changes
from airflow_snaptable.core.manifest import DataFile, ManifestIO
from airflow_snaptable.core.options import TableOptions
from airflow_snaptable.core.orphans import OrphanResult, VerifyResult
from airflow_snaptable.core.periodic import PeriodicTagResult
from airflow_snaptable.core.plans import PlanManager
from airflow_snaptable.core.rollback import RollbackResult
from airflow_snaptable.core.scan import TableScan, check_columns, check_filter, read_files, to_expression
from airflow_snaptable.core.schema import SCHEMA_DIR, TableSchema, parse_schema_id, schema_path
from airflow_snaptable.core.snapshot import CommitKind, Snapshot, SnapshotManager
from airflow_snaptable.core.storage import Storage
from airflow_snaptable.core.tags import Tag, TagManager
from airflow_snaptable.core.writer import (
    DATA_DIR,
    check_rows_in_partitions,
    split_by_partition,
    to_arrow_table,
    write_data_files,
)

DEFAULT_COMMIT_USER = "snaptable"


def _now_millis() -> int:
    return int(time.time() * 1000)


# The epoch millis of the first and the last millisecond a datetime holds (years 1 and 9999, UTC).
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MIN_MILLIS = (dt.datetime.min.replace(tzinfo=dt.timezone.utc) - _EPOCH) // timedelta(milliseconds=1)
_MAX_MILLIS = (dt.datetime.max.replace(tzinfo=dt.timezone.utc) - _EPOCH) // timedelta(milliseconds=1)


class Table:
    """A snapshot table. Every write is one new, immutable, numbered snapshot.

    Create with :meth:`create`, open with :meth:`open`. ``uri`` is a local path
    or any fsspec URL (``s3://bucket/prefix``); ``storage_options`` go to fsspec.
    """

    def __init__(self, storage: Storage, schema: TableSchema, clock: Callable[[], int] = _now_millis):
        self.storage = storage
        self.schema = schema
        self.options = schema.table_options
        self.clock = clock
        self.snapshot_manager = SnapshotManager(storage)
        self.manifest_io = ManifestIO(storage, schema.partition_types())
        self.tag_manager = TagManager(storage)
        self.consumer_manager = ConsumerManager(storage)

    # -- lifecycle -----------------------------------------------------------

    @classmethod
    def create(
        cls,
        uri: str,
        schema: pa.Schema,
        partition_by: Sequence[str] = (),
        options: dict[str, Any] | None = None,
        storage_options: dict[str, Any] | None = None,
        *,
        storage: Storage | None = None,
    ) -> "Table":
        """Create an empty table; raises TableAlreadyExistsError if one is there."""
        table_schema = TableSchema.new(schema, partition_by, options, _now_millis())
        storage = storage or Storage.from_uri(uri, storage_options)
        if any(parse_schema_id(name) is not None for name in storage.list_names(SCHEMA_DIR)):
            raise TableAlreadyExistsError(f"a table exists already at {storage.uri}")
        _check_atomic_create(storage)
        if not storage.create_exclusive(schema_path(0), table_schema.to_json()):
            raise TableAlreadyExistsError(f"a table was created concurrently at {storage.uri}")
        return cls(storage, table_schema)

    @classmethod
    def open(cls, uri: str, storage_options: dict[str, Any] | None = None, *, storage: Storage | None = None) -> "Table":
        """Open an existing table; raises TableNotFoundError if there is none."""
        storage = storage or Storage.from_uri(uri, storage_options)
        ids = [i for i in (parse_schema_id(n) for n in storage.list_names(SCHEMA_DIR)) if i is not None]
        if not ids:
            raise TableNotFoundError(f"no table at {storage.uri}")
        path = schema_path(max(ids))
        return cls(storage, TableSchema.from_json(storage.read_bytes(path), where=storage.full_uri(path)))

    @classmethod
    def exists(cls, uri: str, storage_options: dict[str, Any] | None = None) -> bool:
        storage = Storage.from_uri(uri, storage_options)
        return any(parse_schema_id(n) is not None for n in storage.list_names(SCHEMA_DIR))

    @property
    def uri(self) -> str:
        return self.storage.uri

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.schema.arrow_schema

    @property
    def partition_keys(self) -> tuple[str, ...]:
        return self.schema.partition_keys

    def __repr__(self) -> str:
        return f"Table({self.uri!r})"

    # -- history ---------------------------------------------------------------

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot, earliest to latest."""
        return list(self.snapshot_manager.snapshots())

    def snapshot(self, snapshot_id: int) -> Snapshot:
        _check_snapshot_id(snapshot_id)
        return self.snapshot_manager.snapshot(snapshot_id)

    def latest_snapshot(self) -> Snapshot | None:
        return self.snapshot_manager.latest_snapshot()

    def earliest_snapshot(self) -> Snapshot | None:
        return self.snapshot_manager.earliest_snapshot()

    def snapshot_at(self, when) -> Snapshot | None:
        """The latest snapshot committed at or before ``when`` (datetime, ISO string or epoch millis)."""
        return self.snapshot_manager.snapshot_at(self.to_millis(when))

    def snapshot_at_watermark(self, watermark: int) -> Snapshot | None:
        """The earliest snapshot whose watermark reached ``watermark``."""
        return self.snapshot_manager.snapshot_at_watermark(check_int(watermark, "watermark"))

    @staticmethod
    def to_millis(when) -> int:
        """Epoch milliseconds from an int (millis), a datetime (naive means UTC) or an ISO-8601 string."""
        if isinstance(when, bool):
            raise InvalidArgumentError(f"not a time: {when!r}")
        if isinstance(when, int):
            # Times are turned into dates (tag names, messages): one no date can hold fails there, untyped.
            if not _MIN_MILLIS <= when <= _MAX_MILLIS:
                raise InvalidArgumentError(f"time {when!r} (epoch millis) is outside the years 1 to 9999")
            return when
        if isinstance(when, str):
            try:
                when = pendulum.parse(when)
            except Exception as exc:  # noqa: BLE001 - pendulum raises several types
                raise InvalidArgumentError(f"cannot parse time {when!r}: {exc}") from exc
        if isinstance(when, dt.datetime):
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.timezone.utc)
            return int(when.timestamp() * 1000)
        if isinstance(when, dt.date):
            return int(dt.datetime(when.year, when.month, when.day, tzinfo=dt.timezone.utc).timestamp() * 1000)
        raise InvalidArgumentError(f"not a time: {when!r}")

    # -- writes ------------------------------------------------------------------

    def append(self, data, *, commit_user: str | None = None, commit_identifier: int | None = None, watermark: int | None = None) -> Snapshot:
        """Add rows as a new snapshot (commit kind APPEND)."""
        _check_commit_arguments(commit_user, commit_identifier, watermark)
        groups = self._prepare(data)
        base = self.latest_snapshot()
        added = self._write(groups)
        return self._commit(CommitKind.APPEND, added, [], base, commit_user, commit_identifier, watermark, written_here=True)

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
        _check_commit_arguments(commit_user, commit_identifier, watermark)
        specs = self._check_partition_specs(partitions, allow_none=True)
        groups = self._prepare(data)
        if specs is not None:
            check_rows_in_partitions(groups, self.schema, specs)
        base = self.latest_snapshot()
        scope = WHOLE_TABLE if specs is None else specs
        deleted = self._files_in_scope(base, scope)
        added = self._write(groups)
        return self._commit(CommitKind.OVERWRITE, added, deleted, base, commit_user, commit_identifier, watermark, scope, written_here=True)

    def delete(self, partitions: list[dict], *, commit_user: str | None = None, commit_identifier: int | None = None) -> Snapshot:
        """Remove every row of ``partitions`` as a new snapshot (commit kind DELETE)."""
        _check_commit_arguments(commit_user, commit_identifier, None)
        specs = self._check_partition_specs(partitions, allow_none=False)
        base = self.latest_snapshot()
        deleted = self._files_in_scope(base, specs)
        return self._commit(CommitKind.DELETE, [], deleted, base, commit_user, commit_identifier, None, specs)

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
        _check_commit_arguments(commit_user, None, None)
        specs = self._check_partition_specs(partitions, allow_none=True)
        if target_file_size is None:
            target = self.options.get("target-file-size")
        else:
            from airflow_snaptable.core.options import parse_size

            target = parse_size(target_file_size, "target_file_size")
        if min_file_num is None:
            min_files = self.options.get("compaction.min.file-num")
            if min_files < 2:
                raise InvalidArgumentError(f"option compaction.min.file-num must be >= 2 to compact, got {min_files}")
        else:
            min_files = check_int(min_file_num, "min_file_num", minimum=2)
        base = self.latest_snapshot()
        if base is None:
            return None
        by_partition: dict[tuple, list[DataFile]] = {}
        for data_file in self.manifest_io.read_state(base).values():
            if data_file.file_size < target and (specs is None or self.schema.partition_matches(data_file.partition, specs)):
                by_partition.setdefault(data_file.partition, []).append(data_file)
        chosen = {p: files for p, files in by_partition.items() if len(files) >= min_files}
        if not chosen:
            return None
        groups = []
        deleted: list[DataFile] = []
        for partition, files in sorted(chosen.items(), key=lambda item: str(item[0])):
            files.sort(key=lambda f: f.path)
            groups.append((partition, self.read_files(files)))
            deleted.extend(files)
        added = write_data_files(self.storage, self.schema, groups, target, self.options.get("file.compression"))
        return self._commit(CommitKind.COMPACT, added, deleted, base, commit_user, None, None, written_here=True)

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

        ``summary``: extra string-keyed JSON scalars for the snapshot's summary (e.g.
        ``{"engine": "spark"}``); the standard keys (added_files, ...) cannot be overridden.

        ``mode="append"`` adds them (APPEND); ``mode="overwrite"`` makes them replace the
        whole table, or only ``partitions`` (OVERWRITE), like :meth:`overwrite`.
        ``base_snapshot_id`` is the snapshot the files were written against: an
        overwrite then conflicts with changes to its partitions committed after it
        (``CommitConflictError``, also when it has expired meanwhile); ``0`` means the
        empty table, None the latest snapshot now. ``commit_user``/``commit_identifier``
        as in :meth:`append`: a retry returns the earlier snapshot, and the files given
        to the retry are then not part of any snapshot (the caller deletes them).

        Checked before anything is written (core/external_files.py): each file is a
        DataFile under ``data/`` in the directory of its partition, whose values have the
        schema's types; no path twice; an overwrite of ``partitions`` adds files only to
        those; no path the table knows (a retained snapshot, a tag or an unfinished plan
        references it), except that a live file given again to an overwrite of its own
        partition stays as it is. Not checked: that the files exist, their sizes and
        row counts (a missing file surfaces in ``verify()`` and as a typed error on read).
        """
        if mode not in ("append", "overwrite"):
            raise InvalidArgumentError(f"mode must be 'append' or 'overwrite', got {mode!r}")
        if partitions is not None and mode != "overwrite":
            raise InvalidArgumentError("partitions are only for mode='overwrite'")
        specs = self._check_partition_specs(partitions, allow_none=True)
        files = check_shapes(self.schema, added, specs)
        _check_commit_arguments(commit_user, commit_identifier, watermark)
        if commit_user is not None and commit_identifier is not None:
            # A retry of a commit that landed returns it before its files count as known paths.
            done = self.new_commit().find_committed(commit_user, commit_identifier)
            if done is not None:
                return done

        def expired_base(snapshot_id: int) -> CommitConflictError | Snapshot:
            # A retried job whose first attempt committed returns that snapshot, however old its base.
            if commit_user is not None and commit_identifier is not None:
                done = self.new_commit().find_committed(commit_user, commit_identifier)
                if done is not None:
                    return done
            return CommitConflictError(f"snapshot {snapshot_id}, which this overwrite was written against, has expired")

        if base_snapshot_id is None:
            base = self.latest_snapshot()
        elif check_int(base_snapshot_id, "base_snapshot_id (0: the empty table)", minimum=0) == 0:
            base = None
        else:
            try:
                base = self.snapshot_manager.snapshot(base_snapshot_id)
            except SnapshotNotFoundError:
                if mode == "overwrite":
                    outcome = expired_base(base_snapshot_id)
                    if isinstance(outcome, Snapshot):
                        return outcome
                    raise outcome from None
                base = self.latest_snapshot()  # appends never conflict: any newer base will do
        extra = _check_summary(summary)
        if mode == "append":
            refuse_known_paths(self, files)
            return self._commit(
                CommitKind.APPEND, files, [], base, commit_user, commit_identifier, watermark, extra_summary=extra, new_paths=True
            )
        scope = WHOLE_TABLE if specs is None else specs
        try:
            replaced = self._files_in_scope(base, scope)
        except CorruptMetadataError as exc:
            if base is None or self.snapshot_manager.exists(base.id):
                raise
            outcome = expired_base(base.id)  # it expired while we read it
            if isinstance(outcome, Snapshot):
                return outcome
            raise outcome from exc
        files, deleted = split_kept(files, replaced)
        refuse_known_paths(self, files)
        return self._commit(
            CommitKind.OVERWRITE, files, deleted, base, commit_user, commit_identifier, watermark, scope, extra_summary=extra,
            new_paths=True, replan=len(deleted) == len(replaced),  # kept files must not be compacted away under us
        )

    def _prepare(self, data) -> list[tuple[tuple, pa.Table]]:
        """The rows by partition, every partition's directory checked: writing starts only once all are valid."""
        groups = split_by_partition(to_arrow_table(data, self.schema), self.schema)
        for partition, _rows in groups:
            self.schema.partition_dir(partition)
        return groups

    def _write(self, groups) -> list[DataFile]:
        return write_data_files(
            self.storage, self.schema, groups, self.options.get("target-file-size"), self.options.get("file.compression")
        )

    def _check_partition_specs(self, partitions, allow_none: bool) -> list[dict] | None:
        if partitions is None and allow_none:
            return None
        if isinstance(partitions, dict):
            partitions = [partitions]
        if not isinstance(partitions, (list, tuple)) or not partitions:
            raise InvalidArgumentError(f"partitions must be a non-empty list of dicts like [{{'p': 3}}], got {partitions!r}")
        return [self.schema.check_partition_spec(spec) for spec in partitions]

    def _files_in_scope(self, snapshot: Snapshot | None, scope) -> list[DataFile]:
        if snapshot is None:
            return []
        files = self.manifest_io.read_state(snapshot).values()
        if scope == WHOLE_TABLE:
            return list(files)
        return [f for f in files if self.schema.partition_matches(f.partition, scope)]

    def _commit(
        self, kind, added, deleted, base, commit_user, commit_identifier, watermark, scope=None, written_here=False, extra_summary=None,
        new_paths=False, replan=True,
    ) -> Snapshot:
        """Commit; if the data files were written by this call and the commit surely failed, delete them too.

        ``new_paths``: the added paths come from the caller (commit_files), so a racing commit of the
        same path is a conflict. ``replan``: a concurrent compaction of the scope may re-plan the deletes.
        """
        try:
            return self._commit_request(
                kind, added, deleted, base, commit_user, commit_identifier, watermark, scope, extra_summary, new_paths, replan
            )
        except (CommitConflictError, CommitFailedError):
            if written_here:
                self.storage.delete_files([f.path for f in added])
            raise

    def _commit_request(
        self, kind, added, deleted, base, commit_user, commit_identifier, watermark, scope, extra_summary=None, new_paths=False, replan=True
    ) -> Snapshot:
        # commit_files' check; append, overwrite, delete and compact made it before writing their first file.
        _check_commit_arguments(commit_user, commit_identifier, watermark)
        request = CommitRequest(
            kind=kind,
            added=added,
            deleted=deleted,
            base_snapshot=base,
            commit_user=commit_user or DEFAULT_COMMIT_USER,
            commit_identifier=commit_identifier,
            watermark=watermark,
            overwrite_scope=scope,
            replan_deleted=(lambda latest: self._files_in_scope(latest, scope)) if scope is not None and replan else None,
            extra_summary=extra_summary or {},
            new_paths=frozenset(f.path for f in added) if new_paths else frozenset(),
        )
        return self.new_commit().commit(request)

    def new_commit(self) -> FileStoreCommit:
        return FileStoreCommit(self.snapshot_manager, self.manifest_io, self.schema, self.clock)

    # -- reads -------------------------------------------------------------------

    def scan(
        self,
        snapshot_id: int | None = None,
        as_of=None,
        filter=None,
        columns: Sequence[str] | None = None,
        tag: str | None = None,
    ) -> TableScan:
        """Read the latest snapshot, a given snapshot id, a tag, or the state as of a time."""
        if sum(x is not None for x in (snapshot_id, as_of, tag)) > 1:
            raise InvalidArgumentError("give at most one of snapshot_id, as_of and tag")
        expression = check_filter(self.schema, to_expression(filter))
        columns = check_columns(self.schema, columns)
        if tag is not None:
            snapshot = self.tag_manager.tag(tag).snapshot
        elif snapshot_id is not None:
            snapshot = self.snapshot(snapshot_id)
        elif as_of is not None:
            snapshot = self.snapshot_at(as_of)
            if snapshot is None:
                raise SnapshotNotFoundError(f"no snapshot at or before {as_of} (or it has expired)")
        else:
            snapshot = self.latest_snapshot()
        files = [] if snapshot is None else list(self.manifest_io.read_state(snapshot).values())
        return TableScan(self.storage, self.schema, snapshot, files, expression, columns)

    def read_files(self, files: Sequence[DataFile], columns: Sequence[str] | None = None, filter=None) -> pa.Table:
        """Rows of the given data files (as planned by a scan, a change set or a stream)."""
        columns = check_columns(self.schema, columns)
        target = self.schema.arrow_schema if columns is None else pa.schema([self.schema.arrow_schema.field(c) for c in columns])
        batches = list(read_files(self.storage, self.schema, files, columns, to_expression(filter)))
        return pa.Table.from_batches(batches, schema=target)

    def changes(self, from_snapshot_id: int, to_snapshot_id: int | None = None) -> ChangeSet:
        """What happened after ``from_snapshot_id`` up to and including ``to_snapshot_id`` (default latest)."""
        return compute_changes(self, from_snapshot_id, to_snapshot_id)

    def stream(self, start_mode: str = "latest-full", snapshot_id: int | None = None, timestamp=None, include_overwrite: bool = False) -> StreamScan:
        """A streaming scan (Paimon start modes: latest-full, latest, from-snapshot, from-snapshot-full, from-timestamp)."""
        return StreamScan(self, start_mode, snapshot_id=snapshot_id, timestamp=timestamp, include_overwrite=include_overwrite)


    # -- tags ----------------------------------------------------------------------

    def create_tag(
        self, name: str, snapshot_id: int | None = None, *, as_of=None, time_retained=None, if_exists: str = "fail"
    ) -> Tag:
        """Tag a snapshot (default: the latest) so its state outlives the snapshot's expiry.

        :param as_of: or tag the latest snapshot committed at or before this time (a late or
            backfilled run tags the state at a period's boundary).
        :param time_retained: the tag's time to live ("7 d", a timedelta); default option
            ``tag.default-time-retained``, else kept until deleted.
        :param if_exists: ``"fail"`` (TagAlreadyExistsError), or ``"skip"``: an existing tag of that
            name on the requested snapshot is returned as it is (re-runs are idempotent).
        """
        return tag_ops.create_or_keep_tag(
            self, name, snapshot_id, as_of=as_of, time_retained=time_retained, if_exists=if_exists
        )[0]

    def delete_tag(self, name: str) -> list[str]:
        """Delete a tag, and the data files only it still held (returned)."""
        return tag_ops.delete_tag(self, name)

    def replace_tag(self, name: str, snapshot_id: int, *, time_retained=None) -> Tag:
        """Point an existing tag at another snapshot (the old target's freed files are cleaned up)."""
        return tag_ops.replace_tag(self, name, snapshot_id, time_retained)

    def create_periodic_tags(
        self,
        period=None,
        *,
        delay=None,
        formatter: str | None = None,
        num_retained_max: int | None = None,
        catch_up: bool = False,
        time_retained=None,
        now=None,
    ) -> PeriodicTagResult:
        """Tag the state at the end of each elapsed period ("daily", "hourly", "two-hours" or a timedelta).

        Defaults come from the options ``tag.creation-period``, ``tag.creation-delay``,
        ``tag.period-formatter`` and ``tag.num-retained-max`` (see core/periodic.py).
        """
        check_bool(catch_up, "catch_up")
        return periodic.create_periodic_tags(self, period, delay, formatter, num_retained_max, catch_up, time_retained, now)

    def tags(self) -> list[Tag]:
        """Every tag, ordered by snapshot id."""
        return self.tag_manager.tags()

    def tag(self, name: str) -> Tag:
        return self.tag_manager.tag(name)

    def expire_tags(self, *, now=None) -> list[str]:
        """Delete the tags whose time to live has passed; returns their names."""
        now_millis = self.clock() if now is None else self.to_millis(now)
        PlanManager(self).finish_all()  # an interrupted run's deletions first
        expired = [t.name for t in self.tag_manager.tags() if t.is_expired(now_millis)]
        for name in expired:
            try:
                self.delete_tag(name)
            except TagNotFoundError:
                pass  # deleted concurrently: the outcome wanted
        return expired

    # -- consumers -------------------------------------------------------------------

    def consumers(self) -> list[Consumer]:
        return self.consumer_manager.consumers()

    def consumer(self, consumer_id: str) -> Consumer:
        return self.consumer_manager.consumer(consumer_id)

    def update_consumer(self, consumer_id: str, next_snapshot: int) -> Consumer:
        """Record that ``consumer_id`` has read everything before ``next_snapshot``.

        ``next_snapshot`` and later snapshots are then never expired while the
        consumer lives. It must lie in ``[earliest, latest + 1]``.
        """
        return consumer_ops.update_consumer(self, consumer_id, next_snapshot)

    def delete_consumer(self, consumer_id: str) -> None:
        self.consumer_manager.consumer(consumer_id)
        self.consumer_manager.delete(consumer_id)

    def expire_consumers(self, *, now=None) -> list[str]:
        """Delete consumers not updated for ``consumer.expiration-time``; returns their ids."""
        return consumer_ops.expire_consumers(self, now)

    # -- expiry --------------------------------------------------------------------

    #: ``expire_snapshots(*, retain_min, retain_max, time_retained, older_than, retain_last, limit, dry_run,
    #: now, skip_missing) -> ExpireResult``: core/expire.py's function itself, so its keyword arguments are
    #: written once (an argument is added there and in the ExpireSnapshots action, nowhere else).
    expire_snapshots = expire.expire_snapshots


    # -- rollback --------------------------------------------------------------------

    def rollback_to(
        self, snapshot_id: int | None = None, *, tag: str | None = None, as_of=None, keep_history: bool = False, force: bool = False
    ) -> RollbackResult:
        """Make the table's state that of a snapshot, a tag or a time (see core/rollback.py).

        Default: later snapshots and tags are discarded with the files only they used.
        ``keep_history=True``: a new snapshot with the target's state, nothing discarded.
        Consumers past the target refuse the default mode unless ``force=True``.
        """
        check_bool(keep_history, "keep_history")
        check_bool(force, "force")
        return rollback.rollback_to(self, snapshot_id, tag, as_of, keep_history, force)

    # -- files ---------------------------------------------------------------------

    def remove_orphan_files(self, *, older_than=None, dry_run: bool = True, now=None) -> OrphanResult:
        """Delete files nothing references that are older than ``older_than`` (default: 1 day).

        Dry run by default: pass ``dry_run=False`` to delete.
        """
        return orphans.remove_orphan_files(self, older_than, dry_run, now)

    def verify(self) -> VerifyResult:
        """What is wrong with the table, reported, never raised (see core/orphans.py ``verify``): missing and
        unreferenced files, files of the wrong size, unparsable metadata, gaps in the ids, snapshots from the future."""
        return orphans.verify(self)


_STANDARD_SUMMARY_KEYS = {"added_files", "deleted_files", "added_records", "deleted_records", "changed_partitions"}


def _check_summary(summary) -> dict[str, Any]:
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


def _check_commit_arguments(commit_user, commit_identifier, watermark) -> None:
    """What a commit records about its writer, checked before the write's first file."""
    if commit_user is not None and (not isinstance(commit_user, str) or not commit_user.strip()):
        raise InvalidArgumentError(f"commit_user must be a non-empty string, got {commit_user!r}")
    if commit_identifier is not None:
        if commit_user is None:
            raise InvalidArgumentError("commit_identifier needs commit_user (identifiers increase per user)")
        check_int(commit_identifier, "commit_identifier", minimum=0)
    check_optional_int(watermark, "watermark")


def _check_snapshot_id(snapshot_id) -> None:
    check_int(snapshot_id, "snapshot id", minimum=1)


def _check_atomic_create(storage: Storage) -> None:
    """Refuse object stores that ignore ``If-None-Match: *``: commits there could overwrite each other."""
    if not storage._is_s3:
        return
    probe = f"_probe/create-{uuid.uuid4().hex}"
    try:
        if not storage.create_exclusive(probe, b"1"):
            raise UnsupportedStorageError(f"{storage.uri}: a new object reported as existing")
        if storage.create_exclusive(probe, b"2"):
            raise UnsupportedStorageError(
                f"{storage.uri}: the server ignores If-None-Match on PUT, so concurrent commits could overwrite "
                "each other; use an S3 server with conditional writes"
            )
    finally:
        storage.delete(probe)
