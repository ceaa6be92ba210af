"""Writing rows into new Parquet data files, one or more per partition."""

from __future__ import annotations

import io
import uuid
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_snaptable.core.native.column_stats import stats_of_table
from airflow_snaptable.core.errors import InvalidArgumentError, SchemaMismatchError
from airflow_snaptable.core.io.pool import map_io
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.io.storage import Storage

DATA_DIR = "data"


def to_arrow_table(data, schema: TableSchema) -> pa.Table:
    """Accept a pyarrow Table, a RecordBatch, or an iterable of RecordBatches, conformed to ``schema``."""
    if isinstance(data, pa.Table):
        table = data
    elif isinstance(data, pa.RecordBatch):
        table = pa.Table.from_batches([data])
    elif isinstance(data, pa.RecordBatchReader):
        table = data.read_all()
    elif isinstance(data, Iterable) and not isinstance(data, (str, bytes, dict)):
        batches = list(data)
        if not all(isinstance(b, pa.RecordBatch) for b in batches):
            raise SchemaMismatchError("data must be a pyarrow.Table or pyarrow.RecordBatch objects")
        if not batches:
            table = schema.arrow_schema.empty_table()
        else:
            first = batches[0].schema
            if any(not b.schema.equals(first) for b in batches[1:]):
                raise SchemaMismatchError("record batches do not all have the same schema")
            table = pa.Table.from_batches(batches)
    else:
        raise SchemaMismatchError(f"data must be a pyarrow.Table or record batches, got {type(data).__name__}")
    return schema.conform(table)


def split_by_partition(table: pa.Table, schema: TableSchema) -> list[tuple[tuple, pa.Table]]:
    """Group rows by partition value, in a stable order (rows keep their order inside a group).

    Vectorised, without a Python object per row: a stable sort of the key columns
    makes each partition one contiguous run, a group-by on the sorted keys gives the
    runs' lengths (in order of first appearance, which is the sorted order), and each
    group is a zero-copy slice of the reordered rows. Rows already in one partition
    (a pre-partitioned Spark task) are not reordered at all.
    """
    keys = list(schema.partition_keys)
    if not keys:
        return [((), table)] if table.num_rows else []
    if table.num_rows == 0:
        return []
    key_columns = table.select(keys)
    order = pc.sort_indices(key_columns, sort_keys=[(k, "ascending") for k in keys])
    runs = key_columns.take(order).group_by(keys, use_threads=False).aggregate([([], "count_all")])
    rows = table if runs.num_rows == 1 else table.take(order)
    values = [runs.column(k).to_pylist() for k in keys]
    groups = []
    start = 0
    for i, length in enumerate(runs.column("count_all").to_pylist()):
        groups.append((tuple(column[i] for column in values), rows.slice(start, length)))
        start += length
    groups.sort(key=lambda item: tuple((v is None, str(v)) for v in item[0]))
    return groups


def data_file_path(schema: TableSchema, partition: tuple) -> str:
    directory = schema.partition_dir(partition)
    name = f"data-{uuid.uuid4().hex}.parquet"
    return f"{DATA_DIR}/{directory}/{name}" if directory else f"{DATA_DIR}/{name}"


def write_data_files(
    storage: Storage,
    schema: TableSchema,
    groups: list[tuple[tuple, pa.Table]],
    target_file_size: int,
    compression: str,
) -> list[DataFile]:
    """Write conformed rows, grouped by :func:`split_by_partition`, as new data files (names never reused).

    Partitions are written concurrently: each file costs a round trip (S3) or an
    fsync (local), and both overlap well; encoding releases the GIL too.
    """
    if len(groups) <= 1:
        return [f for partition, rows in groups for f in write_partition_files(storage, schema, partition, rows, target_file_size, compression)]
    written = map_io(lambda group: write_partition_files(storage, schema, group[0], group[1], target_file_size, compression), groups)
    return [f for files in written for f in files]


def write_partition_files(
    storage: Storage,
    schema: TableSchema,
    partition: tuple,
    rows: pa.Table,
    target_file_size: int,
    compression: str,
) -> list[DataFile]:
    if rows.num_rows == 0:
        return []
    # Arrow's in-memory size overestimates Parquet's, so files come out at or below target.
    bytes_per_row = max(1, rows.nbytes // rows.num_rows)
    rows_per_file = max(1, target_file_size // bytes_per_row)
    files = []
    for start in range(0, rows.num_rows, rows_per_file):
        chunk = rows.slice(start, rows_per_file)
        sink = io.BytesIO()
        pq.write_table(
            chunk, sink, compression=None if compression == "none" else compression, use_dictionary=dictionary_columns(chunk)
        )
        data = sink.getvalue()
        path = data_file_path(schema, partition)
        storage.write_bytes(path, data)
        stats = stats_of_table(chunk, skip=schema.partition_keys)  # the file's column bounds: lets filtered scans skip it
        files.append(DataFile(path=path, partition=partition, record_count=chunk.num_rows, file_size=len(data), stats=stats))
    return files


#: Rows of a file sampled to decide which columns get dictionary encoding.
DICTIONARY_SAMPLE_ROWS = 10_000


def dictionary_columns(rows: pa.Table) -> list[str]:
    """The columns worth dictionary-encoding: at most half of the sampled values distinct.

    Arrow dictionary-encodes every column and falls back to plain encoding only once
    a column chunk's dictionary passes 1 MiB, so a column of unique values (ids,
    measures) pays for hashing and a useless dictionary page plus indices for its
    first rows: files come out up to 2x bigger and slower to write. Parquet-mr
    (Spark's writer) drops such dictionaries; this decides up front from a sample.
    Columns whose type cannot be counted keep Arrow's default (dictionary on).
    """
    sample = rows.slice(0, DICTIONARY_SAMPLE_ROWS)
    if sample.num_rows == 0:
        return list(rows.column_names)
    chosen = []
    for name in rows.column_names:
        try:
            distinct = pc.count_distinct(sample.column(name), mode="all").as_py()
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            chosen.append(name)
            continue
        if distinct * 2 <= sample.num_rows:
            chosen.append(name)
    return chosen


def check_rows_in_partitions(groups: list[tuple[tuple, pa.Table]], schema: TableSchema, specs: list[dict]) -> None:
    """An overwrite of some partitions may only write rows into those partitions."""
    for partition, _rows in groups:
        if not schema.partition_matches(partition, specs):
            named = dict(zip(schema.partition_keys, partition))
            raise InvalidArgumentError(f"data has rows in partition {named}, which is not among the overwritten partitions {specs}")
