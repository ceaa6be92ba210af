"""Bin-pack compaction of an Iceberg table: each partition's small data files rewritten into files near
the target size, in one ``replace`` snapshot (Iceberg's ``RewriteDataFiles`` with the bin-pack strategy).

The rules are Iceberg's:

- the target is the table's ``write.target-file-size-bytes`` (512 MB by default); a file is small
  below 75% of it (``min-file-size-bytes``), and a partition is rewritten when it has at least
  ``min-input-files`` (5) small files;
- partitions are those of the spec each file was written with (every spec the table has): the
  new files keep the spec and the partition values of the files they replace;
- the rows are written in the table's sort order where it has one (and the files say so by
  ``sort_order_id``); column statistics come from the Parquet writer, as pyiceberg writes them;
- a partition's small files are split in file groups of at most ``max_group_bytes`` (Iceberg's
  ``max-file-group-size-bytes``, 100 GB), each read and written on its own: the unit a Spark
  executor runs;
- the commit is validated as ``RewriteFiles`` validates it (replace_commit.py): a rewritten file
  that a concurrent commit deleted fails the attempt, which is planned again once from the new
  state before a CommitConflictError; concurrent appends stay.

Delete files and format v3 tables fail closed (UnsupportedMetadataError, which says what handling
them takes).
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_snaptable.core.arguments.checks import check_int
from airflow_snaptable.core.errors import (
    CommitConflictError,
    CorruptMetadataError,
    InvalidArgumentError,
    UnsupportedMetadataError,
)
from airflow_snaptable.core.formats.iceberg.counted_io import CountedFileIO
from airflow_snaptable.core.native.partition_keys import partition_key
from airflow_snaptable.core.formats.iceberg.replace_commit import (
    CommitOutcomeUnknownError,
    ReplaceConflict,
    check_format_version,
    check_no_delete_files,
    commit_replace,
    live_entries_by_manifest,
    replace_summary,
    snapshot_manifests,
    target_size,
)

#: Iceberg's defaults (``RewriteDataFiles`` / ``SizeBasedFileRewritePlanner``).
TARGET_FILE_SIZE_PROPERTY = "write.target-file-size-bytes"
DEFAULT_TARGET_FILE_SIZE = 512 * 1024**2
DEFAULT_MIN_INPUT_FILES = 5
MIN_FILE_SIZE_RATIO = 0.75
DEFAULT_MAX_GROUP_BYTES = 100 * 1024**3
#: Plans made before a rewrite's conflict is reported: the first, and one made again on the new state.
PLANS = 2


@dataclass(frozen=True)
class FileGroup:
    """Small files of one partition rewritten together: one task (on a Spark executor, one task each)."""

    spec_id: int
    #: The partition's values as Iceberg writes them in paths (``{"day": "2026-01-01"}``; a null is None).
    partition: dict[str, Any]
    #: The files rewritten: listed by a dry run; a compaction's result keeps the count only (a small XCom).
    files: list[str]
    file_count: int
    input_bytes: int
    input_rows: int
    #: Files the rows are written into: the group's bytes over the target, rounded (at least one).
    output_files: int


@dataclass
class CompactionResult:
    """What a compaction rewrote (or, in a dry run, would rewrite)."""

    snapshot_id: int | None
    dry_run: bool
    target_file_size: int
    min_input_files: int
    groups: list[FileGroup] = field(default_factory=list)
    rewritten_files: int = 0
    rewritten_bytes: int = 0
    added_files: int = 0
    added_bytes: int = 0
    added_paths: list[str] = field(default_factory=list)


@dataclass
class _Plan:
    base_id: int
    schema_id: int
    groups: list[FileGroup]
    #: The rewritten files' pyiceberg DataFiles, by path.
    data_files: dict[str, Any]


class _Properties:
    """A pickled rewriter's FileIO before :meth:`_GroupRewriter.on` opens one: its properties only."""

    def __init__(self, properties: dict):
        self.properties = properties


class _PartitionPath:
    """What pyiceberg's location provider asks of a partition key: its path."""

    def __init__(self, path: str):
        self._path = path

    def to_path(self) -> str:
        return self._path


def compact_iceberg(
    table,
    partitions: list[dict] | None = None,
    target_file_size: int | str | None = None,
    min_input_files: int | None = None,
    dry_run: bool = False,
    max_group_bytes: int = DEFAULT_MAX_GROUP_BYTES,
    rewrite_groups: Callable[[list[FileGroup], Callable[[FileGroup], list]], list[list]] | None = None,
) -> CompactionResult:
    """Compact ``table`` (an IcebergTable). ``rewrite_groups(groups, rewrite_one)`` runs the groups'
    rewrites (default: in turn here; the Spark maintenance job runs them on executors)."""
    iceberg = table.refresh()
    target = _target(iceberg, target_file_size)
    min_files = DEFAULT_MIN_INPUT_FILES if min_input_files is None else check_int(min_input_files, "min_input_files", minimum=1)
    wanted = _check_partitions(iceberg, partitions)
    result = CompactionResult(None, dry_run, target, min_files)
    for plan_number in range(PLANS):
        file_io = CountedFileIO(table.storage, iceberg.location(), iceberg.io.properties)
        plan = _plan(iceberg, file_io, table.uri, target, min_files, wanted, max_group_bytes)
        result.groups = plan.groups if plan else []
        if plan is None or dry_run:
            _count(result, plan, [])
            return result
        rewrite = _GroupRewriter(iceberg.metadata, file_io, target, plan.data_files)
        try:
            written = (rewrite_groups or _in_turn)(plan.groups, rewrite)
            added = [data_file for files in written for data_file in files]
            file_io.written.extend(data_file.file_path for data_file in added)
            result.snapshot_id = commit_replace(
                table.refresh, file_io, iceberg.metadata.new_snapshot_id(), plan.schema_id,
                lambda writer, head: _manifests(writer, head, plan, added, table.uri), table.uri,
            )
        except CommitOutcomeUnknownError:
            raise  # it may have landed: what it wrote may be in use
        except ReplaceConflict as exc:
            file_io.delete_written()
            if plan_number == PLANS - 1:
                raise CommitConflictError(f"{table.uri}: compaction conflicts with a concurrent commit: {exc}") from exc
            iceberg = table.refresh()
            continue
        except Exception:
            file_io.delete_written()  # certainly not committed: the files written are nobody's (a crash leaves them to orphan removal)
            raise
        _count(result, plan, added)
        result.groups = [dataclasses.replace(group, files=[]) for group in plan.groups]
        return result
    raise AssertionError("unreachable")


def _in_turn(groups: list[FileGroup], rewrite: Callable[[FileGroup], list]) -> list[list]:
    return [rewrite(group) for group in groups]


def _count(result: CompactionResult, plan: _Plan | None, added: list) -> None:
    groups = plan.groups if plan else []
    result.rewritten_files = sum(g.file_count for g in groups)
    result.rewritten_bytes = sum(g.input_bytes for g in groups)
    result.added_files = len(added) if not result.dry_run else sum(g.output_files for g in groups)
    result.added_bytes = sum(f.file_size_in_bytes for f in added)
    result.added_paths = sorted(f.file_path for f in added)


def _target(iceberg, given) -> int:
    return target_size(iceberg.metadata, given, "target_file_size", TARGET_FILE_SIZE_PROPERTY, DEFAULT_TARGET_FILE_SIZE)


def _partition_names(metadata) -> set[str]:
    return {f.name for spec in metadata.specs().values() for f in spec.fields}


def _check_partitions(iceberg, partitions: list[dict] | None) -> list[dict] | None:
    """Partitions are given by partition field names (every spec's) and their values as the partition holds them."""
    if partitions is None:
        return None
    names = _partition_names(iceberg.metadata)
    for partition in partitions:
        if not isinstance(partition, dict) or not partition:
            raise InvalidArgumentError(f"a partition is an object of partition field values, got {partition!r}")
        unknown = set(partition) - names
        if unknown:
            raise InvalidArgumentError(f"unknown partition field(s) {sorted(unknown)}: the table's are {sorted(names)}")
    return partitions


def partition_dict(spec, partition) -> dict[str, Any]:
    return {f.name: partition[i] for i, f in enumerate(spec.fields)}


def _human_values(spec, schema, partition) -> dict[str, str | None]:
    """Partition values as Iceberg writes them in paths (``2026-01-01`` for a day, not its day number); a null
    is None (Iceberg's path says ``null``, as for the string 'null')."""
    values: dict[str, str | None] = {}
    for i, partition_field in enumerate(spec.fields):
        if partition[i] is None:
            values[partition_field.name] = None
            continue
        try:
            values[partition_field.name] = partition_field.transform.to_human_string(
                schema.find_type(partition_field.source_id), partition[i],
            )
        except Exception:  # noqa: BLE001 - a value no human form is known for matches by itself only
            values[partition_field.name] = str(partition[i])
    return values


def _matches(values: dict[str, Any], human: dict[str, str | None], wanted: list[dict] | None) -> bool:
    """A partition matches a wanted one when every field given equals its value, as stored or in human form."""
    if wanted is None:
        return True
    return any(all(k in values and _value_matches(values[k], human[k], v) for k, v in w.items()) for w in wanted)


def _value_matches(value: Any, human: str | None, wanted: Any) -> bool:
    """None matches only a null; a string value only the same string; another value the same value of its type,
    or its human form (a day as ``2026-01-01``, a decimal's digits) given as text or as a value that prints so."""
    if value is None or wanted is None:
        return value is None and wanted is None
    if isinstance(value, str) or isinstance(wanted, bool) or isinstance(value, bool):
        return type(wanted) is type(value) and wanted == value or (isinstance(wanted, str) and wanted == human)
    if type(wanted) is type(value):
        return partition_key([wanted]) == partition_key([value])
    return str(wanted) == human


def _plan(iceberg, file_io, uri: str, target: int, min_files: int, wanted, max_group_bytes: int) -> _Plan | None:
    from pyiceberg.manifest import DataFileContent

    metadata = iceberg.metadata
    check_format_version(metadata, uri, "compaction")
    head = metadata.current_snapshot()
    if head is None:
        return None
    manifests = snapshot_manifests(head, file_io)
    entries = live_entries_by_manifest(manifests, file_io, metadata)
    check_no_delete_files(manifests, file_io, metadata, uri)
    _check_sort_order(metadata)
    small_size = target * MIN_FILE_SIZE_RATIO
    # Keyed by the typed values (partition_keys.py), never their printed form: a NULL partition and the
    # string 'null' print alike in Iceberg's paths and are two partitions.
    by_partition: dict[tuple, list] = {}
    names: dict[tuple, dict[str, str | None]] = {}
    matched: dict[tuple, bool] = {}
    specs = metadata.specs()
    schema = metadata.schema()
    for manifest in manifests:
        for entry in entries[manifest.manifest_path]:
            data_file = entry.data_file
            if data_file.content != DataFileContent.DATA:  # a delete file in a data manifest: fail closed alike
                check_no_delete_files([manifest], file_io, metadata, uri, found=data_file.file_path)
            if data_file.file_size_in_bytes >= small_size:
                continue
            partition = data_file.partition
            # The typed key, not the values themselves: 0.0 == -0.0 in Python, two partitions in Iceberg.
            key = (data_file.spec_id, partition_key(partition[i] for i in range(len(partition))))
            if key not in matched:  # judged once per partition (10,000 files of 10 partitions: 10 times)
                values = partition_dict(specs[data_file.spec_id], partition)
                human = _human_values(specs[data_file.spec_id], schema, partition)
                matched[key] = _matches(values, human, wanted)
                names[key] = human
            if matched[key]:
                by_partition.setdefault(key, []).append(data_file)
    groups: list[FileGroup] = []
    data_files: dict[str, Any] = {}
    for (spec_id, typed), files in sorted(by_partition.items(), key=lambda item: item[0]):
        if len(files) < min_files:
            continue
        files.sort(key=lambda f: f.file_path)
        for chunk in _bins(files, max_group_bytes):
            data_files.update((f.file_path, f) for f in chunk)
            size = sum(f.file_size_in_bytes for f in chunk)
            groups.append(FileGroup(
                spec_id, dict(names[(spec_id, typed)]), [f.file_path for f in chunk], len(chunk), size, sum(f.record_count for f in chunk),
                max(1, round(size / target)),
            ))
    if not groups:
        return None
    return _Plan(head.snapshot_id, metadata.current_schema_id, groups, data_files)


def _bins(files: list, max_bytes: int) -> list[list]:
    bins, current, size = [], [], 0
    for data_file in files:
        if current and size + data_file.file_size_in_bytes > max_bytes:
            bins.append(current)
            current, size = [], 0
        current.append(data_file)
        size += data_file.file_size_in_bytes
    return bins + [current] if current else bins


class _GroupRewriter:
    """Reads a group's files (pyiceberg's projection onto the current schema) and writes them sorted into new files.

    :meth:`on` makes the same rewriter on another storage: a Spark executor's, opened from the
    table location (spark/maintenance.py runs one task per group).
    """

    def __init__(self, metadata, file_io: CountedFileIO, target: int, data_files: dict[str, Any]):
        self.metadata = metadata
        self.file_io = file_io
        self.target = target
        self.data_files = data_files

    def for_group(self, group: FileGroup) -> "_GroupRewriter":
        """This rewriter with ``group``'s files only, without their statistics (the rewrite writes new ones):
        what one Spark task is sent."""
        return _GroupRewriter(self.metadata, self.file_io, self.target, {path: self.data_files[path].without_statistics() for path in group.files})

    def on(self, storage) -> "_GroupRewriter":
        file_io = CountedFileIO(storage, self.metadata.location, self.file_io.properties)
        return _GroupRewriter(self.metadata, file_io, self.target, self.data_files)

    def __getstate__(self) -> dict:
        # The storage stays on the driver (locks, counters): an executor gets its own through on().
        return {"metadata": self.metadata, "file_io": None, "target": self.target, "data_files": self.data_files,
                "properties": dict(self.file_io.properties) if self.file_io is not None else {}}

    def __setstate__(self, state: dict) -> None:
        properties = state.pop("properties")
        self.__dict__.update(state)
        self.file_io = _Properties(properties)

    def __call__(self, group: FileGroup) -> list:
        rows = self.read(group)
        rows = sort_rows(self.metadata, rows)
        return self.write(group, rows)

    def read(self, group: FileGroup) -> pa.Table:
        """The group's rows in the current schema. A file written with it (the same field ids, names and
        types) is read as it is; any other goes through pyiceberg's projection (renamed, added or
        promoted columns, files without field ids). Runs of files of one Arrow schema are cast to the
        table's at once."""
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
        from pyiceberg.table import FileScanTask

        from airflow_snaptable.core.io.pool import map_io

        schema = self.metadata.schema()
        wanted = schema_to_pyarrow(schema)
        #: File schemas already found to be the current one's columns (most groups: one).
        current: list[pa.Schema] = []

        def is_current(found: pa.Schema) -> bool:
            if any(found.equals(known, check_metadata=True) for known in current):
                return True
            if not _same_columns(found, wanted):
                return False
            if len(current) < _KNOWN_SCHEMAS:
                current.append(found)
            return True

        def read_one(path: str) -> pa.Table:
            with self.file_io.new_input(path).open() as stream:
                # Arrow's thread pool costs more than it gains on a small file (measured: 25% slower on files of 100 rows)
                content = pq.ParquetFile(stream).read(use_threads=stream.size() > _THREADED_READ_BYTES)
            if is_current(content.schema):
                return content  # the same types: cast below, where only the field-id metadata is set
            task = FileScanTask(self.data_files[path].to_pyiceberg(self.metadata.format_version))
            return ArrowScan(self.metadata, self.file_io, schema, AlwaysTrue()).to_table([task]).cast(wanted)

        # Remote files on the I/O pool; local ones in turn (threads only contend for the GIL there: measured slower).
        parts = map_io(read_one, group.files) if self.file_io.storage.is_remote else [read_one(path) for path in group.files]
        runs: list[list[pa.Table]] = []
        for part in parts:
            if runs and part.schema.equals(runs[-1][0].schema):
                runs[-1].append(part)
            else:
                runs.append([part])
        rows = pa.concat_tables([pa.concat_tables(run).cast(wanted) for run in runs]) if runs else wanted.empty_table()
        if rows.num_rows != group.input_rows:
            raise CorruptMetadataError(f"read {rows.num_rows} rows from files whose manifests say {group.input_rows}: {group.files[0]}, ...")
        return rows

    def write(self, group: FileGroup, rows: pa.Table) -> list:
        from pyiceberg.io.pyarrow import _to_requested_schema
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
        from pyiceberg.table.locations import load_location_provider
        from pyiceberg.io.pyarrow import FileFormatFactory, ParquetFormatWriter
        from pyiceberg.schema import sanitize_column_names

        format_model = FileFormatFactory.get(FileFormat.PARQUET)
        metadata = self.metadata
        schema = metadata.schema()
        file_schema = sanitize_column_names(schema)
        spec = metadata.specs()[group.spec_id]
        partition = self.data_files[group.files[0]].partition
        key = _PartitionPath(spec.partition_to_path(partition, schema)) if spec.fields else None
        locations = load_location_provider(table_location=metadata.location, table_properties=metadata.properties)
        sort_order_id = metadata.default_sort_order_id if not metadata.sort_order().is_unsorted else None
        write_id = uuid.uuid4()
        written = []
        per_file = math.ceil(rows.num_rows / group.output_files) if rows.num_rows else 0
        for index in range(group.output_files):
            chunk = rows.slice(index * per_file, per_file)
            if chunk.num_rows == 0:
                continue
            batches = [
                _to_requested_schema(
                    requested_schema=file_schema, file_schema=schema, batch=batch, include_field_ids=True, format_model=format_model,
                )
                for batch in chunk.combine_chunks().to_batches()
            ]
            path = locations.new_data_location(f"00000-{index}-{write_id}.parquet", partition_key=key)
            output = self.file_io.new_output(path)
            writer = ParquetFormatWriter(output, file_schema, metadata.properties)
            with writer:
                writer.write(pa.Table.from_batches(batches))
            statistics = writer.result()
            data_file = DataFile.from_args(
                content=DataFileContent.DATA, file_path=path,
                file_format=FileFormat.PARQUET, partition=partition, file_size_in_bytes=len(output), sort_order_id=sort_order_id,
                equality_ids=None, key_metadata=None, **statistics.to_serialized_dict(),
            )
            data_file.spec_id = group.spec_id
            written.append(data_file)
        return written


#: Files larger than this are decoded on Arrow's thread pool.
_THREADED_READ_BYTES = 4 * 1024**2
#: File schemas a group's read remembers as the current one's (files of one writer share one).
_KNOWN_SCHEMAS = 8


def _same_columns(found: pa.Schema, wanted: pa.Schema) -> bool:
    if len(found) != len(wanted):
        return False
    if any(pa.types.is_nested(f.type) for f in wanted):
        return False  # nested fields carry their ids on the children: pyiceberg's projection checks them
    for have, want in zip(found, wanted):
        have_id = (have.metadata or {}).get(b"PARQUET:field_id")
        if have.name != want.name or _plain(have.type) != _plain(want.type) or have_id != (want.metadata or {}).get(b"PARQUET:field_id"):
            return False
    return True


def _plain(arrow_type: pa.DataType) -> pa.DataType:
    """Arrow's large and small string and binary are one Iceberg type each."""
    return {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}.get(arrow_type, arrow_type)


def _order_preserving() -> tuple[type, ...]:
    from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, MonthTransform, TruncateTransform, YearTransform

    return (IdentityTransform, YearTransform, MonthTransform, DayTransform, HourTransform, TruncateTransform)


#: Transforms that keep the source's order: sorting by the source column sorts by them (ties broken by the source value).
_ORDER_PRESERVING = _order_preserving()


def _transformed(sort_field, schema, column):
    """A sort key through a transform that does not keep the order (bucket): pyiceberg computes it, with pyiceberg-core."""
    try:
        return sort_field.transform.pyarrow_transform(schema.find_type(sort_field.source_id))(column)
    except Exception as exc:  # noqa: BLE001 - pyiceberg's NotInstalledError and unsupported types alike
        raise UnsupportedMetadataError(
            f"the sort order's {sort_field.transform} cannot be computed here ({exc}); compacting would lose the table's order"
        ) from None


def _check_sort_order(metadata) -> None:
    """Fail before any file is written when a sort key cannot be computed here."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = metadata.schema()
    for sort_field in metadata.sort_order().fields:
        if not isinstance(sort_field.transform, _ORDER_PRESERVING):
            _transformed(sort_field, schema, pa.array([], schema_to_pyarrow(schema.find_type(sort_field.source_id))))


def sort_rows(metadata, rows: pa.Table) -> pa.Table:
    """``rows`` in the table's default sort order (its transforms, directions and null order); as they are without one."""
    order = metadata.sort_order()
    if order.is_unsorted or rows.num_rows == 0:
        return rows
    schema = metadata.schema()
    flat = rows
    while any(pa.types.is_struct(f.type) for f in flat.schema):
        flat = flat.flatten()
    keys = {}
    sort_keys = []
    for i, sort_field in enumerate(order.fields):
        name = schema.find_column_name(sort_field.source_id)
        column = flat.column(name)
        if not isinstance(sort_field.transform, _ORDER_PRESERVING):
            column = _transformed(sort_field, schema, column)
        keys[f"k{i}"] = column
        sort_keys.append((
            f"k{i}", "ascending" if sort_field.direction.value == "asc" else "descending",
            "at_start" if sort_field.null_order.value == "nulls-first" else "at_end",
        ))
    indices = pc.sort_indices(pa.table(keys), sort_keys=sort_keys)
    return rows.take(indices)


def _manifests(writer, head, plan: _Plan, added: list, uri: str):
    """The replace's manifests on ``head``: its manifests with the rewritten files marked deleted, and one
    manifest per spec of the new files. A rewritten file no longer live in ``head`` is a conflict."""
    if head is None:
        raise ReplaceConflict("main has no snapshot any more")
    file_io = writer.file_io
    manifests = snapshot_manifests(head, file_io)
    held = live_entries_by_manifest([m for m in manifests if _may_hold(m, plan)], file_io, writer.metadata)
    if head.snapshot_id != plan.base_id:
        check_no_delete_files(manifests, file_io, writer.metadata, uri)
    rewritten = set(plan.data_files)
    removed: dict[str, Any] = {}
    deleted_entries: dict[int, list] = {}
    kept = []
    for manifest in manifests:
        entries = held.get(manifest.manifest_path, [])
        if not any(e.data_file.file_path in rewritten for e in entries):
            kept.append(manifest)
            continue
        staying = [e for e in entries if e.data_file.file_path not in rewritten]
        for entry in entries:
            if entry.data_file.file_path in rewritten:
                removed[entry.data_file.file_path] = entry.data_file
                deleted_entries.setdefault(manifest.partition_spec_id, []).append(entry)
        if staying:  # a manifest left with no live file is dropped; its files' deletion is recorded below
            with writer.manifest_writer(manifest.partition_spec_id) as out:
                for entry in staying:
                    out.existing(entry)
            kept.append(out.to_manifest_file())
    gone = rewritten - set(removed)
    if gone:
        raise ReplaceConflict(f"{len(gone)} file(s) it rewrote were deleted by a concurrent commit, e.g. {sorted(gone)[0]}")
    new = []
    for spec_id in sorted({f.spec_id for f in added}):
        with writer.manifest_writer(spec_id) as out:
            for data_file in added:
                if data_file.spec_id == spec_id:
                    out.add(data_file)
        new.append(out.to_manifest_file())
    for spec_id, entries in sorted(deleted_entries.items()):
        with writer.manifest_writer(spec_id) as out:
            for entry in entries:
                out.delete(entry)
        new.append(out.to_manifest_file())
    removed = list(removed.values())
    summary = replace_summary(writer.metadata, head, added, removed, {})
    return new + kept, summary


def _may_hold(manifest, plan: _Plan) -> bool:
    """Could ``manifest`` hold a rewritten file? Only data manifests of a spec a group was planned in."""
    from pyiceberg.manifest import ManifestContent

    return manifest.content == ManifestContent.DATA and manifest.partition_spec_id in {g.spec_id for g in plan.groups}
