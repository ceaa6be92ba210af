"""The fast batch path: plan a snapshot's files with core, read them with Spark's native Parquet reader.

Spark reads the data files directly (``spark.read.parquet(*paths)`` with the
table's schema given, so nothing is inferred), which costs what reading the
Parquet files costs, plus core's planning. Partition columns are stored in the
data files, so no partition discovery is involved.

Paths: local tables become ``file://`` URLs; ``s3://`` tables become ``s3a://``
URLs, which needs the hadoop-aws jars (and their AWS SDK) on Spark's classpath and
S3A configured (``spark.hadoop.fs.s3a.*``: endpoint, credentials provider); fsspec
``storage_options`` are used only for planning. Other fsspec protocols are not
readable by Spark's Hadoop file systems: use the ``snaptable`` data source there.
Parquet types Spark cannot read (e.g. nanosecond timestamps) also need the data source.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from airflow_snaptable.core.errors import InvalidArgumentError, UnsupportedStorageError
from airflow_snaptable.core.native.scan import to_expression
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.table import Table
from airflow_snaptable.spark._common import spark_schema_for

_DNF_OPS = ("=", "==", "!=", "<", ">", "<=", ">=", "in", "not in")


def hadoop_path(storage: Storage, rel: str) -> str:
    """The URL of a table file as Spark's Hadoop file systems read it."""
    protocol = fsspec.core.split_protocol(storage.uri)[0]
    full = storage.full_path(rel)
    if protocol in (None, "file", "local"):
        return "file://" + os.path.abspath(full)
    if protocol in ("s3", "s3a"):
        return "s3a://" + full.lstrip("/")
    raise UnsupportedStorageError(
        f"Spark cannot read {protocol}:// paths natively; read {storage.uri} with spark.read.format('snaptable')"
    )


def plan_paths(table: Table, snapshot_id=None, tag=None, as_of=None, filter=None) -> tuple[list[str], bool]:
    """The Spark paths of the files a scan keeps, and whether the filter still has to be applied to rows."""
    expression = to_expression(filter)
    scan = table.scan(snapshot_id=snapshot_id, as_of=as_of, tag=tag, filter=filter)  # DNF as given: planned without pandas
    files = scan.files()
    exact = expression is None or _partition_only(table, expression)
    return [hadoop_path(table.storage, f.path) for f in files], not exact


def read_table(
    spark,
    uri: str,
    snapshot_id: int | None = None,
    tag: str | None = None,
    as_of=None,
    filter=None,
    storage_options: dict[str, Any] | None = None,
    columns: Sequence[str] | None = None,
):
    """A DataFrame of a table's snapshot (latest, ``snapshot_id``, ``tag`` or ``as_of``), read natively.

    ``filter`` is core's filter: DNF tuples like ``[("p", "=", 3)]`` (or a list of
    such lists, OR-ed), or a pyarrow Expression over partition columns only. It
    prunes files with core (partitions, then column statistics); DNF terms on other
    columns are applied by Spark too.
    """
    table = Table.open(uri, storage_options)
    paths, needs_row_filter = plan_paths(table, snapshot_id, tag, as_of, filter)
    row_filter = None
    if needs_row_filter:
        if isinstance(filter, pc.Expression):
            raise InvalidArgumentError(
                "read_table takes a pyarrow Expression only over partition columns; give other conditions as "
                "DNF tuples like [('id', '>', 3)] or filter the DataFrame"
            )
        row_filter = dnf_to_column(filter)
    schema = spark_schema_for(table.arrow_schema)
    if paths:
        df = spark.read.schema(schema).parquet(*paths)
    else:
        df = spark.createDataFrame([], schema)
    if row_filter is not None:
        df = df.filter(row_filter)
    if columns is not None:
        df = df.select(*columns)
    return df


def _partition_only(table: Table, expression: pc.Expression) -> bool:
    """True if ``expression`` refers to partition columns only (then pruning files applies it exactly)."""
    keys = table.partition_keys
    if not keys:
        return False
    schema = pa.schema([table.arrow_schema.field(k) for k in keys])
    try:
        ds.dataset(schema.empty_table()).to_table(filter=expression)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return False
    return True


def dnf_to_column(filter):
    """Core's DNF filter (``[(col, op, value), ...]`` or a list of such lists) as a Spark Column."""
    from pyspark.sql import functions as F

    if not isinstance(filter, (list, tuple)) or not filter:
        raise InvalidArgumentError(f"not a DNF filter: {filter!r}")
    disjuncts = filter if isinstance(filter[0], (list, tuple)) and filter[0] and isinstance(filter[0][0], (list, tuple)) else [filter]
    result = None
    for conjunct in disjuncts:
        term = None
        for item in conjunct:
            if not isinstance(item, (list, tuple)) or len(item) != 3 or item[1] not in _DNF_OPS:
                raise InvalidArgumentError(f"not a DNF term (column, op, value): {item!r}")
            name, op, value = item
            column = F.col(name)
            if op in ("=", "=="):
                condition = column == F.lit(value)
            elif op == "!=":
                condition = column != F.lit(value)
            elif op == "<":
                condition = column < F.lit(value)
            elif op == ">":
                condition = column > F.lit(value)
            elif op == "<=":
                condition = column <= F.lit(value)
            elif op == ">=":
                condition = column >= F.lit(value)
            elif op == "in":
                condition = column.isin(list(value))
            else:
                condition = ~column.isin(list(value))
            term = condition if term is None else term & condition
        result = term if result is None else result | term
    return result
