"""The table: one directory (or object-store prefix) holding schema, snapshots, manifests and data.

``Table`` is the front door and only that: it opens the table's managers, wires them into the
store the lifecycle engine reads (core/lifecycle/store.py), and hands each call to the module holding its rules.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from airflow_snaptable.core.lifecycle.changes import ChangeSet, StreamScan, compute_changes
from airflow_snaptable.core.arguments.checks import check_bool, check_int
from airflow_snaptable.core.lifecycle.hudi_clean import SAVEPOINT, Clean, CleanResult, Floor, savepoint_name
from airflow_snaptable.core.lifecycle.consumers import ConsumerLifecycle
from airflow_snaptable.core.native.consumers import Consumer, ConsumerManager
from airflow_snaptable.core.errors import (
    CorruptMetadataError,
    InvalidArgumentError,
    SnapshotNotFoundError,
    UnsupportedOperationError,
)
from airflow_snaptable.core.lifecycle.expiry.run import ExpireResult, SnapshotExpiry
from airflow_snaptable.core.native.manifest import DataFile, ManifestIO
from airflow_snaptable.core.formats.native.files import NativeFiles
from airflow_snaptable.core.lifecycle.orphans import OrphanFilesClean, OrphanResult
from airflow_snaptable.core.lifecycle.periodic_tags import PeriodicTagging, PeriodicTagResult, resolve_sources
from airflow_snaptable.core.lifecycle.noncurrent.journal import NoncurrentJournal, NoncurrentRun
from airflow_snaptable.core.lifecycle.noncurrent.purge import NoncurrentPurge, PurgeResult
from airflow_snaptable.core.lifecycle.noncurrent.trash import RunSummary, trash
from airflow_snaptable.core.lifecycle.noncurrent.undo import NoncurrentUndo, UndoResult
from airflow_snaptable.core.lifecycle.plan_executor import PlanExecutor
from airflow_snaptable.core.lifecycle.rollback import Rollback, RollbackResult
from airflow_snaptable.core.native.partition_pruning import pruned_state
from airflow_snaptable.core.native.scan import TableScan, check_columns, check_filter, read_table, to_expression
from airflow_snaptable.core.native.schema import SchemaManager, TableSchema
from airflow_snaptable.core.native.snapshot import Snapshot, SnapshotManager
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.formats.foreign import is_iceberg_uri, open_foreign
from airflow_snaptable.core.lifecycle.store import NATIVE_FORMAT, FormatTable, TableStore
from airflow_snaptable.core.lifecycle.tags import TagLifecycle
from airflow_snaptable.core.native.tags import Tag, TagManager
from airflow_snaptable.core.native.commit import FileStoreCommit
from airflow_snaptable.core.write.compaction import compact
from airflow_snaptable.core.write.data_expiry import expire_data as expire_native_data
from airflow_snaptable.core.lifecycle.data_expiry import DataExpiryResult, check_column, cutoff_millis
from airflow_snaptable.core.write.external_files import commit_external_files
from airflow_snaptable.core.lifecycle.deletion_plans import PlanManager
from airflow_snaptable.core.write.rows import TableWrite
from airflow_snaptable.core.arguments.times import duration_argument, millis, now_millis, to_millis
from airflow_snaptable.core.formats.native.verify import VerifyResult, verify


class Table:
    """A snapshot table. Every write is one new, immutable, numbered snapshot.

    Create with :meth:`create`, open with :meth:`open`. ``uri`` is a local path
    or any fsspec URL (``s3://bucket/prefix``); ``storage_options`` go to fsspec.
    """

    #: The run with a retention the deleting calls inside :meth:`retaining_noncurrent` belong to (None: they delete).
    _noncurrent: NoncurrentRun | None = None

    def __init__(
        self, storage: Storage, schema: TableSchema, clock: Callable[[], int] = now_millis, *, foreign: FormatTable | None = None
    ):
        self.storage = storage
        self.schema = schema
        self.options = schema.table_options
        self.clock = clock
        #: The table's format: NATIVE_FORMAT, or the engine whose table this is ("paimon", "iceberg").
        self.format = NATIVE_FORMAT if foreign is None else foreign.format
        self._readable = True if foreign is None else foreign.readable
        if foreign is not None:
            # Another engine's table: the lifecycle runs on its store; rows are that engine's to write.
            self.store = foreign.store
            self.snapshot_manager = foreign.store.snapshots
            self.tag_manager = foreign.store.tags
            self.consumer_manager = foreign.store.consumers
            self.manifest_io = None
            self.native_files = None
            return
        self.snapshot_manager = SnapshotManager(storage)
        self.manifest_io = ManifestIO(storage, schema.partition_types())
        self.tag_manager = TagManager(storage)
        self.consumer_manager = ConsumerManager(storage)
        self.native_files = NativeFiles(storage, self.manifest_io)
        #: The table as the lifecycle engine sees it; the engine keeps its own files beside the format's.
        self.store = TableStore(
            storage.uri, self.snapshot_manager, self.native_files, self.tag_manager, self.consumer_manager, lifecycle=storage
        )

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
        table_schema = TableSchema.new(schema, partition_by, options, now_millis())
        storage = storage or Storage.from_uri(uri, storage_options)
        SchemaManager(storage).create(table_schema)
        return cls(storage, table_schema)

    @classmethod
    def open(
        cls,
        uri: str,
        storage_options: dict[str, Any] | None = None,
        *,
        storage: Storage | None = None,
        catalog: dict[str, Any] | None = None,
    ) -> "Table":
        """Open an existing table; raises TableNotFoundError if there is none.

        ``uri`` names a table of this package's format or an Apache Paimon table directory (both
        detected by their files), or ``iceberg://<namespace>.<table>`` in the pyiceberg catalog
        whose properties ``catalog`` gives (core/formats/foreign.py).
        """
        if is_iceberg_uri(uri) or catalog is not None:
            return open_foreign(uri, None, catalog, now_millis)  # an IcebergTable: core/formats/iceberg/table.py
        storage = storage or Storage.from_uri(uri, storage_options)
        try:
            schema = SchemaManager(storage).latest()
        except CorruptMetadataError:
            # Not this package's schema: another engine's table (one read more, only for those).
            foreign = open_foreign(uri, storage, None, now_millis)
            if foreign is None:
                raise
            return cls(foreign.storage, foreign.schema, foreign=foreign)
        return cls(storage, schema)

    @classmethod
    def exists(cls, uri: str, storage_options: dict[str, Any] | None = None) -> bool:
        return bool(SchemaManager(Storage.from_uri(uri, storage_options)).ids())

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
        return f"Table({self.uri!r})" if self.format == NATIVE_FORMAT else f"Table({self.uri!r}, format={self.format!r})"

    def _check_readable(self) -> None:
        if not self._readable:
            raise UnsupportedOperationError(f"{self.format} table {self.uri}: its own engine merges its files on read")

    def _native_only(self, operation: str) -> None:
        """Writing rows (and what commits them) is this package's format's; another engine writes its own table."""
        if self.format != NATIVE_FORMAT:
            raise UnsupportedOperationError(
                f"{operation} is not supported on {self.format} table {self.uri}: its own engine writes its rows "
                "(the snapshot lifecycle runs here: expiry, tags, consumers, rollback, orphan cleaning)"
            )

    # -- history ---------------------------------------------------------------

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot, earliest to latest."""
        if self.format != NATIVE_FORMAT:
            earliest, latest = self.snapshot_manager.earliest_id(), self.snapshot_manager.latest_id()
            if earliest is None or latest is None:
                return []
            read = self.snapshot_manager.read_ids(range(earliest, latest + 1))
            return [read[i][0] for i in sorted(read)]
        return list(self.snapshot_manager.snapshots())

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self.snapshot_manager.snapshot(check_int(snapshot_id, "snapshot id", minimum=1))

    def latest_snapshot(self) -> Snapshot | None:
        return self.snapshot_manager.latest_snapshot()

    def earliest_snapshot(self) -> Snapshot | None:
        return self.snapshot_manager.earliest_snapshot()

    def snapshot_at(self, when) -> Snapshot | None:
        """The latest snapshot committed at or before ``when`` (datetime, ISO string or epoch millis)."""
        return self.snapshot_manager.snapshot_at(to_millis(when))

    def snapshot_at_watermark(self, watermark: int) -> Snapshot | None:
        """The earliest snapshot whose watermark reached ``watermark``."""
        self._native_only("snapshot_at_watermark")
        return self.snapshot_manager.snapshot_at_watermark(check_int(watermark, "watermark"))

    #: Epoch milliseconds from an int (millis), a datetime (naive means UTC) or an ISO-8601 string (core/arguments/times.py).
    to_millis = staticmethod(to_millis)

    # -- writes (this package's format only: planned in core/write/, committed by core/native/commit.py) --

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

    def expire_data(self, column: str, retention, *, dry_run: bool = False, now=None) -> DataExpiryResult:
        """Delete the rows whose time ``column`` is older than ``retention`` (e.g. ``"30 d"``) before ``now``,
        dropping files (and partitions) of old rows only, in one commit (core/lifecycle/data_expiry.py).
        A Paimon table fails closed: its rows are its own engine's to write."""
        if self.format != NATIVE_FORMAT:
            raise UnsupportedOperationError(
                f"data expiry is not supported on {self.format} table {self.uri} yet: its own engine writes its rows "
                "(Paimon: the table option partition.expiration-time expires partitions on its writes)"
            )
        cutoff = cutoff_millis(retention, self.clock() if now is None else to_millis(now))
        write = self._write()
        return expire_native_data(write, self.read_files, check_column(column), cutoff, check_bool(dry_run, "dry_run"))

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
        not: core/write/external_files.py (no path the table knows is committed again).
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

    # -- reads -------------------------------------------------------------------

    def scan(
        self, snapshot_id: int | None = None, as_of=None, filter=None, columns: Sequence[str] | None = None, tag: str | None = None,
    ) -> TableScan:
        """Read the latest snapshot, a given snapshot id, a tag, or the state as of a time."""
        expression = check_filter(self.schema, to_expression(filter))
        columns = check_columns(self.schema, columns)
        snapshot = self.snapshot_to_read(snapshot_id, as_of, tag)
        # With a filter, only the manifests whose partition bounds may match are read, and only the entries whose
        # partition and column statistics may match are decoded (core/native/partition_pruning.py, core/native/data_skipping.py).
        dnf = filter if isinstance(filter, (list, tuple)) else None  # a DNF filter plans without pandas
        files = [] if snapshot is None else list(pruned_state(self.manifest_io, self.schema, snapshot, expression, dnf).values())
        return TableScan(self.storage, self.schema, snapshot, files, expression, columns)

    def snapshot_to_read(self, snapshot_id: int | None = None, as_of=None, tag: str | None = None) -> Snapshot | None:
        """The snapshot a read of a snapshot id, a tag or a time sees (the latest without any; None for an
        empty table), checked readable: what ``scan`` plans, for planners that read its files later."""
        if sum(x is not None for x in (snapshot_id, as_of, tag)) > 1:
            raise InvalidArgumentError("give at most one of snapshot_id, as_of and tag")
        self._check_readable()
        if tag is not None:
            return self.tag_manager.tag(tag).snapshot
        if snapshot_id is not None:
            return self.snapshot(snapshot_id)
        if as_of is None:
            return self.latest_snapshot()
        snapshot = self.snapshot_at(as_of)
        if snapshot is None:
            raise SnapshotNotFoundError(f"no snapshot at or before {as_of} (or it has expired)")
        return snapshot

    def read_files(self, files: Sequence[DataFile], columns: Sequence[str] | None = None, filter=None) -> pa.Table:
        """Rows of the given data files (as planned by a scan, a change set or a stream)."""
        self._check_readable()
        return read_table(self.storage, self.schema, files, check_columns(self.schema, columns), to_expression(filter))

    def changes(self, from_snapshot_id: int, to_snapshot_id: int | None = None) -> ChangeSet:
        """What happened after ``from_snapshot_id`` up to and including ``to_snapshot_id`` (default latest)."""
        return compute_changes(self.store, self.read_files, from_snapshot_id, to_snapshot_id)

    def stream(self, start_mode: str = "latest-full", snapshot_id: int | None = None, timestamp=None, include_overwrite: bool = False) -> StreamScan:
        """A streaming scan (Paimon start modes: latest-full, latest, from-snapshot, from-snapshot-full, from-timestamp)."""
        return StreamScan(
            self.store, self.read_files, start_mode, snapshot_id=snapshot_id, timestamp=timestamp, include_overwrite=include_overwrite
        )

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
        return self.tag_lifecycle().create_or_keep(
            name, snapshot_id, as_of=as_of, time_retained=time_retained, if_exists=if_exists
        )[0]

    def delete_tag(self, name: str) -> list[str]:
        """Delete a tag, and the data files only it still held (returned)."""
        return self.tag_lifecycle().delete(name)

    def replace_tag(self, name: str, snapshot_id: int, *, time_retained=None) -> Tag:
        """Point an existing tag at another snapshot (the old target's freed files are cleaned up)."""
        return self.tag_lifecycle().replace(name, snapshot_id, time_retained)

    def rename_tag(self, name: str, new_name: str) -> Tag:
        """Rename a tag; it keeps its snapshot, create time, time to live and source."""
        return self.tag_lifecycle().rename(name, new_name)

    @property
    def create_periodic_tags(self) -> Callable[..., PeriodicTagResult]:
        """``create_periodic_tags(period=None, *, delay, formatter, num_retained_max, catch_up, time_retained, now)
        -> PeriodicTagResult``: core/lifecycle/periodic_tags.py's ``PeriodicTagging.create`` on this table, so its arguments are
        written once (like ``expire_snapshots``)."""
        return PeriodicTagging(self.store, self.tag_lifecycle(), self.options, self.clock).create

    def tags(self) -> list[Tag]:
        """Every tag by snapshot id; one that records no source is periodic or manual by the table's options."""
        return resolve_sources(self.tag_manager.tags(), self.options, self.clock())

    def tag(self, name: str) -> Tag:
        return resolve_sources([self.tag_manager.tag(name)], self.options, self.clock())[0]

    def expire_tags(self, *, now=None) -> list[str]:
        """Delete the tags whose time to live has passed; returns their names."""
        return self.tag_lifecycle().expire(self.clock() if now is None else to_millis(now))

    def tag_lifecycle(self) -> TagLifecycle:
        """Tag creation, replacement, deletion and expiry, checked against the deletion plans (the tag methods' engine)."""
        return TagLifecycle(self.store, self._plans(), self.clock, self.options.get("tag.default-time-retained"))

    def _plans(self) -> PlanExecutor:
        return PlanExecutor(self.store, self._noncurrent)

    # -- recoverable deletes (core/lifecycle/noncurrent/) ------------------------------------------

    @contextmanager
    def retaining_noncurrent(self, days: int | None, operation: str) -> Iterator[NoncurrentRun | None]:
        """Inside the block, deleting calls (expiry, rollback, tag deletion and expiry, consumer expiry, clean,
        orphan removal) delete no file: they record what they remove under one run (yielded; its ``run_id``
        undoes it) and purge deletes it ``days`` days later. ``days`` None: the option ``noncurrent-days``,
        and when that is unset too, the calls delete as before (yields None)."""
        if days is None:
            days = self.options.get("noncurrent-days")
        else:
            days = check_int(days, "noncurrent_days", minimum=0)
        previous = self._noncurrent
        self._noncurrent = None if days is None else NoncurrentRun.start(days, operation)
        try:
            yield self._noncurrent
        finally:
            self._noncurrent = previous

    def noncurrent_journal(self) -> NoncurrentJournal:
        return NoncurrentJournal(self.store.lifecycle)

    def undo(self, run_id: str) -> UndoResult:
        """Bring back what a run with a retention removed: its snapshots (same rows), tags and consumers."""
        return NoncurrentUndo(self.store, self._plans()).undo(run_id)

    def abandon_undo(self, run_id: str) -> UndoResult:
        """Abandon an interrupted undo of the run: its mark goes (deleting runs and purge go on), the table is
        left as the undo left it, the run stays recorded (``abandoned``: whether a mark was up)."""
        return NoncurrentUndo(self.store, self._plans()).abandon(run_id)

    def purge(self, *, now=None) -> PurgeResult:
        """Delete the noncurrent files whose retention has passed (by the real clock: a later ``now`` never
        shortens one), each checked against the live metadata first."""
        return NoncurrentPurge(self.store, self._plans()).purge(None if now is None else to_millis(now))

    def trash(self) -> list[RunSummary]:
        """The runs whose removals are noncurrent: when, what, the files and bytes held, when purge is due."""
        return trash(self.store)

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
        return self._consumers().update(consumer_id, next_snapshot)

    def delete_consumer(self, consumer_id: str) -> None:
        self._consumers().delete(consumer_id)

    def expire_consumers(self, *, now=None, expiration_time=None) -> list[str]:
        """Delete consumers not updated for ``expiration_time`` (default: option ``consumer.expiration-time``);
        returns their ids."""
        # ``now`` first: a bad one is an error whether or not the option makes this run do anything.
        now_millis = self.clock() if now is None else to_millis(now)
        if expiration_time is None:
            return self._consumers().expire(now_millis)
        expiration = duration_argument(expiration_time, "expiration_time")
        return ConsumerLifecycle(self.store, self.clock, expiration, self._noncurrent).expire(now_millis)

    def _consumers(self) -> ConsumerLifecycle:
        return ConsumerLifecycle(self.store, self.clock, self.options.get("consumer.expiration-time"), self._noncurrent)

    # -- expiry --------------------------------------------------------------------

    @property
    def expire_snapshots(self) -> Callable[..., ExpireResult]:
        """``expire_snapshots(*, retain_min, retain_max, time_retained, older_than, retain_last, limit, dry_run,
        now, skip_missing) -> ExpireResult``: core/lifecycle/expiry/run.py's ``SnapshotExpiry.expire`` on this table, so its
        keyword arguments are written once (an argument is added there and in the ExpireSnapshots action)."""
        return SnapshotExpiry(self.store, self._plans(), self.options, self.clock).expire

    # -- Hudi-style cleaning and savepoints (core/lifecycle/hudi_clean.py) ---------------------------

    def clean(self, policy: str, *, commits_retained=None, hours_retained=None, file_versions_retained=None,
              dry_run: bool = False, retain_min=None, time_retained=None) -> CleanResult:
        """Run a Hudi cleaning policy: KEEP_LATEST_COMMITS, KEEP_LATEST_BY_HOURS or KEEP_LATEST_FILE_VERSIONS.

        ``retain_min`` / ``time_retained``: a floor whatever the policy says (the newest snapshots, every state of
        the last duration), as the lake's clean job keeps a table's own ``snapshot.num-retained.min`` and
        ``snapshot.time-retained``; the result's ``floor_kept_from`` says when it kept more than the policy."""
        floor = None
        if retain_min is not None or time_retained is not None:
            floor = Floor(
                None if retain_min is None else check_int(retain_min, "retain_min", 1),
                None if time_retained is None else millis(duration_argument(time_retained, "time_retained")),
            )
        return self._clean().clean(
            policy, commits_retained=commits_retained, hours_retained=hours_retained,
            file_versions_retained=file_versions_retained, dry_run=dry_run, floor=floor,
        )

    def cleans(self) -> list[dict]:
        """The completed cleans (policy, earliest commit retained), oldest first."""
        return self._clean().cleans()

    def _clean(self) -> Clean:
        return Clean(self.store, SnapshotExpiry(self.store, self._plans(), self.options, self.clock), self.clock)

    def create_savepoint(self, snapshot_id: int | None = None) -> Tag:
        """Savepoint a snapshot (default: the latest): no clean or expiry removes its files."""
        snapshot = self.latest_snapshot() if snapshot_id is None else self.snapshot(snapshot_id)
        if snapshot is None:
            raise SnapshotNotFoundError("the table has no snapshot to savepoint")
        return self.tag_lifecycle().create(savepoint_name(snapshot.id), snapshot.id, source=SAVEPOINT)

    def savepoints(self) -> list[Tag]:
        return [tag for tag in self.tags() if tag.source == SAVEPOINT]

    def delete_savepoint(self, snapshot_id: int) -> list[str]:
        """Delete a savepoint, and the files only it still held (returned)."""
        return self.delete_tag(savepoint_name(snapshot_id))

    def restore_savepoint(self, snapshot_id: int, *, force: bool = False) -> RollbackResult:
        """Hudi's restore: roll the table back to a savepoint (later snapshots and tags are discarded)."""
        self.tag(savepoint_name(snapshot_id))  # TagNotFoundError when there is no such savepoint
        return self.rollback_to(tag=savepoint_name(snapshot_id), force=force)

    # -- rollback --------------------------------------------------------------------

    def rollback_to(
        self, snapshot_id: int | None = None, *, tag: str | None = None, as_of=None, keep_history: bool = False, force: bool = False
    ) -> RollbackResult:
        """Make the table's state that of a snapshot, a tag or a time (see core/lifecycle/rollback.py).

        Default: later snapshots and tags are discarded with the files only they used.
        ``keep_history=True``: a new snapshot with the target's state, nothing discarded.
        Consumers past the target refuse the default mode unless ``force=True``.
        """
        check_bool(keep_history, "keep_history")
        check_bool(force, "force")
        if keep_history:
            self._native_only("rollback_to(keep_history=True), which commits a new snapshot,")
        rollback = Rollback(self.store, self._plans(), lambda request: self.new_commit().commit(request), self.clock)
        return rollback.rollback_to(snapshot_id, tag, as_of, keep_history, force)

    # -- files ---------------------------------------------------------------------

    def remove_orphan_files(self, *, older_than=None, dry_run: bool = True, now=None) -> OrphanResult:
        """Delete files nothing references that are older than ``older_than`` (default: 1 day).

        Dry run by default: pass ``dry_run=False`` to delete.
        """
        return OrphanFilesClean(self.store, self.clock, noncurrent=self._noncurrent).clean(older_than, dry_run, now)

    def verify(self) -> VerifyResult:
        """What is wrong with the table, reported, never raised (see core/formats/native/verify.py): missing and
        unreferenced files, files of the wrong size, unparsable metadata, gaps in the ids, snapshots from the future."""
        # Another format's consumer files are its own JSON: its consumer store says how to read one.
        parse_consumer = getattr(self.consumer_manager, "parse_consumer_file", Consumer.from_json)
        return verify(
            self.storage, self.snapshot_manager, self.store.files, self.tag_manager, self.options.get("commit.max-clock-skew"),
            lifecycle=self.store.lifecycle, parse_consumer=parse_consumer,
        )
