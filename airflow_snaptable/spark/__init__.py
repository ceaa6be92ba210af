"""Spark front end of snapshot tables (PySpark 4.x): data source, fast reads, maintenance job.

- :func:`register` makes ``format("snaptable")`` available to a session:
  ``spark.read.format("snaptable").load(uri)`` (options ``snapshot-id``, ``tag``,
  ``as-of``, ``incremental-between``), ``df.write.format("snaptable").mode("append" |
  "overwrite").save(uri)`` (``overwrite-partitions``, ``commit-user`` +
  ``commit-identifier``, ``partition-by``) and ``spark.readStream.format("snaptable")``
  (``scan.mode``, ``consumer-id``, ``max-files-per-trigger``). See
  :mod:`airflow_snaptable.spark.datasource` and :mod:`airflow_snaptable.spark.streaming`.
  Partition pruning needs ``spark.sql.python.filterPushdown.enabled=true`` when
  ``register`` is called.
- :func:`read_table` plans with core and reads with Spark's native Parquet reader
  (fastest for big reads; ``s3://`` tables are read as ``s3a://``, which needs the
  hadoop-aws jars and S3A configuration in Spark).
- :func:`job_path` is the maintenance job for ``spark-submit`` (see
  :mod:`airflow_snaptable.spark.job`).

Importing this package does not import pyspark.
"""

from __future__ import annotations

import os

__all__ = ["FORMAT", "job_path", "read_table", "register"]

FORMAT = "snaptable"


PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark, pushdown: bool | None = None) -> None:
    """Register the ``snaptable`` data source with ``spark`` (a SparkSession).

    ``pushdown``: prune partitions and skip files by column statistics with the filters
    Spark pushes down (Spark still applies those on other columns to the rows). Spark only
    accepts that when ``spark.sql.python.filterPushdown.enabled`` is true (it is
    false by default), so the default follows that conf; register again after
    changing it.
    """
    from airflow_snaptable.spark.datasource import SnapTableDataSource, SnapTablePushdownDataSource

    if pushdown is None:
        pushdown = str(spark.conf.get(PUSHDOWN_CONF, "false")).strip().lower() == "true"
    spark.dataSource.register(SnapTablePushdownDataSource if pushdown else SnapTableDataSource)


def read_table(spark, uri, snapshot_id=None, tag=None, as_of=None, filter=None, storage_options=None, columns=None):
    """A native ``spark.read.parquet`` DataFrame of a table snapshot planned by core (see fastread)."""
    from airflow_snaptable.spark.fastread import read_table as _read_table

    return _read_table(spark, uri, snapshot_id, tag, as_of, filter, storage_options, columns)


def job_path() -> str:
    """Path of the maintenance job file to give ``spark-submit``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "job.py")
