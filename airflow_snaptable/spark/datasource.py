"""The ``snaptable`` PySpark data source (Spark 4.x ``pyspark.sql.datasource``).

Batch reads plan their files with core (time travel, change ranges, partition
pruning) and read them with core, one input partition per data file or per
group of small files. Writes run core's writer in every task and make exactly
one snapshot per job in ``commit``; streaming reads are in
:mod:`airflow_snaptable.spark.streaming`.

Options (all optional except the location):

read
    ``snapshot-id``, ``tag``, ``as-of`` (ISO time or epoch millis) or
    ``incremental-between`` (``"from,to"``: rows added after snapshot ``from`` up to
    ``to``); at most one. ``read.split-size`` (default 8 mb) packs files smaller than
    that into one task, up to that size; bigger files get a task each.
write
    ``overwrite-partitions`` (``true``: dynamic partition overwrite), ``commit-user``
    and ``commit-identifier`` (a retried job is applied once), ``partition-by``
    (comma list, used when the write creates the table) and any table option
    (``snapshot.num-retained.min`` ...) for a table the write creates.
any
    ``storage-options``: fsspec options as a JSON object (else the environment
    variable ``SNAPTABLE_STORAGE_OPTIONS``, else fsspec's defaults, e.g. AWS_* for S3).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    WriterCommitMessage,
)

from airflow_snaptable.core.native.batch_writer import PartitionedBatchWriter
from airflow_snaptable.core.errors import InvalidArgumentError, SchemaMismatchError, TableAlreadyExistsError
from airflow_snaptable.core.incremental import added_after, snapshot_adds
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.arguments.table_options import OPTION_SPECS
from airflow_snaptable.core.native.partition_pruning import prune_files, pruned_state
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.table import Table
from airflow_snaptable.spark._common import (
    DEFAULT_SPLIT_SIZE,
    arrow_schema_for,
    bool_option,
    cast_batch,
    check_castable,
    filter_to_expression,
    group_files,
    int_option,
    plain_options,
    size_option,
    skippable_in_spark,
    spark_schema_for,
    storage_options_from,
    table_uri,
)
from airflow_snaptable.spark.read_tasks import FilesPartition, TableFiles

log = logging.getLogger(__name__)

FORMAT_NAME = "snaptable"
DEFAULT_SPARK_COMMIT_USER = "spark"


class SnapTableDataSource(DataSource):
    """``spark.read/readStream.format("snaptable")`` and ``df.write.format("snaptable")``.

    This variant does no filter pushdown: Spark refuses a reader with ``pushFilters``
    unless ``spark.sql.python.filterPushdown.enabled`` is true (false by default), so
    :func:`airflow_snaptable.spark.register` picks :class:`SnapTablePushdownDataSource`
    when that conf is on.
    """

    reader_class: type = None  # set below

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self):
        options = plain_options(self.options)
        table = Table.open(table_uri(options), storage_options_from(options))
        return spark_schema_for(table.arrow_schema)

    def reader(self, schema) -> "SnapTableBatchReader":
        return self.reader_class(plain_options(self.options), schema)

    def writer(self, schema, overwrite: bool) -> "SnapTableWriter":
        return SnapTableWriter(plain_options(self.options), schema, overwrite)

    def streamReader(self, schema):
        from airflow_snaptable.spark.streaming import SnapTableStreamReader

        return SnapTableStreamReader(plain_options(self.options), schema)


# -- reading -----------------------------------------------------------------------


def select_read(table: Table, options: dict) -> tuple[Snapshot | None, tuple[int, int] | None, list[DataFile] | None]:
    """The snapshot (time travel) or change range (incremental) a batch read asks for; a change range's
    files too. A snapshot's files are planned once the filters are pushed (``planned_files``)."""
    snapshot_id = int_option(options, "snapshot-id", minimum=1)
    tag = options.get("tag")
    as_of = options.get("as-of")
    between = options.get("incremental-between")
    given = [k for k, v in (("snapshot-id", snapshot_id), ("tag", tag), ("as-of", as_of), ("incremental-between", between)) if v is not None]
    if len(given) > 1:
        raise InvalidArgumentError(f"give at most one of snapshot-id, tag, as-of and incremental-between; got {given}")
    if between is not None:
        parts = [p.strip() for p in str(between).split(",")]
        try:
            start, end = (int(p) for p in parts)
        except ValueError:
            raise InvalidArgumentError(f"incremental-between must be 'from,to' (two snapshot ids), got {between!r}") from None
        changes = table.changes(start, end)
        return None, (start, end), changes.added_files
    if as_of is not None:
        text = str(as_of).strip()
        as_of = int(text) if text.lstrip("-").isdigit() else text
    # core resolves and validates (expired ids, unknown tags, times before the first snapshot)
    return table.snapshot_to_read(snapshot_id=snapshot_id, tag=tag, as_of=as_of), None, None


class SnapTableBatchReader(DataSourceReader):
    """Plans in ``partitions()`` (after ``pushFilters``); the object is pickled to the tasks
    before that, so it holds only the chosen snapshot, never the file list."""

    def __init__(self, options: dict, schema):
        uri = table_uri(options)
        storage_options = storage_options_from(options)
        table = Table.open(uri, storage_options)
        self.files_reader = TableFiles(uri, storage_options, table.schema, schema)
        self.snapshot, self.change_range, self._files = select_read(table, options)
        self.split_size = size_option(options, "read.split-size", DEFAULT_SPLIT_SIZE)
        self.expression = None
        self.pushed: list = []

    def __getstate__(self) -> dict:
        # Spark pickles the reader into every read task: leave the (possibly long) file list out.
        state = dict(self.__dict__)
        state["_files"] = None
        return state

    def planned_files(self) -> list[DataFile]:
        files_reader = self.files_reader
        if self.change_range is None and self.snapshot is None:
            return []
        files = self._files
        if files is not None:  # a change range's files, read when the reader was made
            return prune_files(files_reader.table_schema, files, self.expression)
        table = Table.open(files_reader.uri, files_reader.storage_options)
        if self.change_range is not None:  # planning on an unpickled copy: read the same range again
            return prune_files(files_reader.table_schema, table.changes(*self.change_range).added_files, self.expression)
        # A snapshot: only the manifests whose partition and column bounds may match are read (as core's scan).
        return list(pruned_state(table.manifest_io, files_reader.table_schema, self.snapshot, self.expression).values())

    def partitions(self):
        groups = group_files(self.planned_files(), self.split_size)
        return [FilesPartition(group) for group in groups] or [FilesPartition([])]

    def read(self, partition):
        files = getattr(partition, "files", None) or []
        return self.files_reader.read(files)


class SnapTablePushdownReader(SnapTableBatchReader):
    """The batch reader with partition pruning and data skipping from Spark's pushed filters."""

    def pushFilters(self, filters):
        schema = self.files_reader.table_schema
        partition_types = dict(zip(schema.partition_keys, schema.partition_types()))
        stats_types = {f.name: f.type for f in schema.arrow_schema if f.name not in partition_types and skippable_in_spark(f.type)}
        remaining = []
        for spark_filter in filters:
            expression = filter_to_expression(spark_filter, partition_types) if partition_types else None
            if expression is not None:
                self.pushed.append(spark_filter)  # decided by partition values: pruning applies it exactly
            else:
                # On another column it only skips files (core's column statistics): Spark still filters the rows.
                remaining.append(spark_filter)
                expression = filter_to_expression(spark_filter, stats_types) if stats_types else None
            if expression is not None:
                self.expression = expression if self.expression is None else (self.expression & expression)
        return remaining


class SnapTablePushdownDataSource(SnapTableDataSource):
    """``snaptable`` with partition pruning (needs ``spark.sql.python.filterPushdown.enabled=true``)."""

    reader_class = SnapTablePushdownReader


SnapTableDataSource.reader_class = SnapTableBatchReader


# -- writing -----------------------------------------------------------------------


@dataclass
class SnapTableCommitMessage(WriterCommitMessage):
    """The data files one task wrote (not yet part of any snapshot)."""

    files: list[DataFile] = field(default_factory=list)


def _partition_by(options: dict) -> list[str] | None:
    text = options.get("partition-by")
    if text is None:
        return None
    return [k.strip() for k in str(text).split(",") if k.strip()]


def _table_options(options: dict) -> dict[str, str]:
    return {k: v for k, v in options.items() if k in OPTION_SPECS}


class SnapTableWriter(DataSourceArrowWriter):
    """One Spark write job = one snapshot.

    ``__init__`` runs on the driver: it opens (or prepares to create) the table and
    records the snapshot the write starts from. ``write`` runs in every task: it
    writes Parquet data files with core's writer and returns their metadata.
    ``commit``/``abort`` run on a pickled copy of this object in another driver-side
    Python worker: everything they need is set in ``__init__``.
    """

    def __init__(self, options: dict, schema, overwrite: bool):
        self.uri = table_uri(options)
        self.storage_options = storage_options_from(options)
        self.overwrite = bool(overwrite)
        self.dynamic = bool_option(options, "overwrite-partitions")
        if self.dynamic and not self.overwrite:
            raise InvalidArgumentError("overwrite-partitions=true needs mode('overwrite')")
        self.commit_user = options.get("commit-user") or None
        self.commit_identifier = int_option(options, "commit-identifier", minimum=0)
        if self.commit_identifier is not None and self.commit_user is None:
            raise InvalidArgumentError("commit-identifier needs commit-user (identifiers increase per user)")
        partition_by = _partition_by(options)
        source_schema = arrow_schema_for(schema)
        if Table.exists(self.uri, self.storage_options):
            table = Table.open(self.uri, self.storage_options)
            if partition_by is not None and tuple(partition_by) != table.partition_keys:
                raise InvalidArgumentError(
                    f"partition-by {partition_by} differs from the table's partition keys {list(table.partition_keys)}"
                )
            self.table_schema = table.schema
            self.create = False
            self.base = table.latest_snapshot()
        else:
            # Created in commit(), so a failed first write leaves nothing behind.
            self.table_schema = TableSchema.new(source_schema, partition_by or (), _table_options(options), int(time.time() * 1000))
            self.create = True
            self.base = None
        check_castable(source_schema, self.table_schema.arrow_schema, f"writing to {self.uri}")
        table_options = self.table_schema.table_options
        self.target_file_size = table_options.get("target-file-size")
        self.compression = table_options.get("file.compression")

    # -- tasks ---------------------------------------------------------------

    def write(self, iterator) -> SnapTableCommitMessage:
        storage = Storage.from_uri(self.uri, self.storage_options)
        target = self.table_schema.arrow_schema
        files = PartitionedBatchWriter(storage, self.table_schema, self.target_file_size, self.compression)
        try:
            for batch in iterator:
                files.add(cast_batch(batch, target))
            written = files.finish()
        except BaseException:
            # A failing task removes what it wrote; Spark's abort only sees finished tasks.
            _delete_quietly(storage, [f.path for f in files.written])
            raise
        return SnapTableCommitMessage(written)

    # -- driver ----------------------------------------------------------------

    def _open_or_create(self) -> Table:
        if not self.create:
            return Table.open(self.uri, self.storage_options)
        schema = self.table_schema
        try:
            return Table.create(self.uri, schema.arrow_schema, schema.partition_keys, dict(schema.options), self.storage_options)
        except TableAlreadyExistsError:
            table = Table.open(self.uri, self.storage_options)  # created by a concurrent first write
            if not table.arrow_schema.equals(schema.arrow_schema) or table.partition_keys != schema.partition_keys:
                raise SchemaMismatchError(
                    f"{self.uri} was created concurrently with another schema or partitioning; this write was not committed"
                ) from None
            return table

    def commit(self, messages) -> None:
        added = [f for m in messages if m is not None for f in m.files]
        table = self._open_or_create()
        commit_user = self.commit_user or DEFAULT_SPARK_COMMIT_USER
        mode = "overwrite" if self.overwrite else "append"
        partitions = None
        if self.overwrite and self.dynamic and table.partition_keys:
            # Dynamic overwrite replaces the partitions the job wrote rows to; none written: none replaced.
            values = sorted({f.partition for f in added}, key=str)
            partitions = [dict(zip(table.partition_keys, p)) for p in values] or None
            mode = "overwrite" if partitions else "append"
        base_snapshot_id = self.base.id if self.base is not None else 0
        snapshot = table.commit_files(
            added, mode=mode, partitions=partitions, base_snapshot_id=base_snapshot_id, commit_user=commit_user,
            commit_identifier=self.commit_identifier, summary={"engine": "spark"},
        )
        if self.commit_identifier is not None and added and not snapshot_adds(table, snapshot, [added[0].path]):
            # An earlier or concurrent run of the same job committed: ours is a duplicate.
            log.info("%s/%s was committed already as snapshot %s", commit_user, self.commit_identifier, snapshot.id)
            _delete_quietly(table.storage, [f.path for f in added])
            return
        log.info("committed snapshot %s to %s (%s files)", snapshot.id, self.uri, len(added))

    def abort(self, messages) -> None:
        paths = [f.path for m in messages if m is not None for f in m.files]
        if not paths:
            return
        storage = Storage.from_uri(self.uri, self.storage_options)
        if _committed_since(self, paths):
            log.warning("abort: the write's files are part of a snapshot already; keeping them")
            return
        _delete_quietly(storage, paths)


def _committed_since(writer: SnapTableWriter, paths: list[str]) -> bool:
    """Did a snapshot after the write's base add one of ``paths``? (an ambiguous commit failure)"""
    try:
        if not Table.exists(writer.uri, writer.storage_options):
            return False
        table = Table.open(writer.uri, writer.storage_options)
        return added_after(table, writer.base.id if writer.base is not None else 0, paths)
    except Exception:  # noqa: BLE001 - cannot tell: keep the files (orphan cleaning removes them later)
        log.warning("abort: cannot check whether the write was committed; keeping its files", exc_info=True)
        return True


def _delete_quietly(storage: Storage, paths: list[str]) -> None:
    for path in paths:
        try:
            storage.delete(path)
        except Exception:  # noqa: BLE001 - best effort: orphan cleaning removes leftovers
            log.warning("could not delete %s", path, exc_info=True)
