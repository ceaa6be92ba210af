"""Bin-pack compaction of an Iceberg table of many small files, against pyarrow moving the same bytes.

``python -m benchmarks.iceberg_compaction [--files N] [--partitions P] [--rows R] [--no-spark] [--master M]``

pyarrow writes N small Parquet files (R rows each, spread over P identity partitions) and pyiceberg
registers them in one ``add_files`` commit (an SQL catalog on SQLite, local files). Then, in the
same run, on the same files:

- ours: ``Table.open`` and ``compact`` (in process), which plans from the manifests, reads every small file,
  writes one file per partition and commits one replace snapshot;
- ours on Spark (unless ``--no-spark``): the same ``Compact`` action through
  ``spark.maintenance.run_action_distributed`` on a ``local[2]`` session, on a second table of
  the same files: the file groups (one per partition) are rewritten by one task each on the
  executors, the plan and the commit run on the driver. The session is started and its Python
  workers warmed up (the compaction's imports) before timing; both are printed apart;
- the bound: pyarrow reads the same files and writes the same rows, one file per partition
  (``pq.ParquetFile(path).read()`` and ``pq.write_table``, no metadata, no statistics kept),
  measured before each run on that run's files (the machine's load moves between the runs);
- Spark's own cost of the job: an empty job of as many tasks (one per partition), just before.

Printed: the times, each run's ratio to the bound (the target is 1.5x), the files before and
after, and the machine's load average. pyiceberg reads the same row count back after each run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq


def _small_files(root: str, files: int, partitions: int, rows: int) -> list[str]:
    paths = []
    schema = pa.schema([
        pa.field("p", pa.string(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"2"}),
        pa.field("value", pa.float64(), metadata={b"PARQUET:field_id": b"3"}),
    ])
    for i in range(files):
        partition = f"p{i % partitions}"
        directory = os.path.join(root, f"p={partition}")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"small-{i:06d}.parquet")
        ids = pa.array(range(i * rows, (i + 1) * rows), pa.int64())
        pq.write_table(pa.table([pa.array([partition] * rows), ids, pa.compute.multiply(ids, 0.5)], schema=schema), path)
        paths.append(path)
    return paths


def _table(tmp: str, files: int, partitions: int, rows: int, name: str = "bench.small"):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType

    os.makedirs(f"{tmp}/warehouse", exist_ok=True)
    properties = {"type": "sql", "uri": f"sqlite:///{tmp}/catalog.db", "warehouse": f"file://{tmp}/warehouse"}
    catalog = load_catalog("default", **properties)
    catalog.create_namespace_if_not_exists("bench")
    schema = Schema(
        NestedField(1, "p", StringType(), required=False), NestedField(2, "id", LongType(), required=False),
        NestedField(3, "value", DoubleType(), required=False),
    )
    table = catalog.create_table(
        name, schema=schema, partition_spec=PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "p")),
    )
    paths = _small_files(os.path.join(table.location()[len("file://"):], "data"), files, partitions, rows)
    table.add_files([f"file://{p}" for p in paths])
    return properties, table.refresh(), paths


def _pyarrow_bound(paths: list[str], out: str, partitions: int) -> float:
    os.makedirs(out)
    started = time.perf_counter()
    by_partition: dict[str, list[str]] = {}
    for path in paths:
        by_partition.setdefault(os.path.basename(os.path.dirname(path)), []).append(path)
    for partition, group in by_partition.items():
        rows = pa.concat_tables([pq.ParquetFile(path).read() for path in group])
        pq.write_table(rows, os.path.join(out, f"{partition}.parquet"), compression="zstd")
    return time.perf_counter() - started


def _check(table, args, rewritten: int) -> int:
    table = table.refresh()
    left = [task.file for task in table.scan().plan_files()]
    rows = table.scan().to_arrow().num_rows
    assert rows == args.files * args.rows, rows
    assert len(left) == args.partitions and rewritten == args.files
    return len(left)


def _start_spark(master: str):
    """A session whose Python workers have imported the compaction (what a long-running job pays once)."""
    from benchmarks.spark_delete import start_spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers import this package from the same venv
    spark, session_seconds, _ = start_spark(master)
    started = time.perf_counter()
    spark.sparkContext.parallelize(range(spark.sparkContext.defaultParallelism * 2)).foreachPartition(
        lambda rows: [__import__(name) for name in ("airflow_snaptable.core.formats.iceberg.compaction", "pyiceberg.io.pyarrow", "pyiceberg.io.fsspec")]
    )
    return spark, session_seconds, time.perf_counter() - started


def _empty_job_seconds(spark, tasks: int) -> float:
    """A job of ``tasks`` tasks that do nothing: what scheduling and handing tasks to the Python workers costs."""
    started = time.perf_counter()
    spark.sparkContext.parallelize(range(tasks), tasks).mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--no-spark", dest="spark", action="store_false", help="skip the run on Spark executors")
    parser.add_argument("--master", default="local[2]", help="the Spark master of the Spark run (default local[2])")
    args = parser.parse_args(argv)
    from airflow_snaptable.core import Table
    from benchmarks.common import describe_load, machine_load

    print(f"machine: {describe_load(machine_load())}")
    tmp = tempfile.mkdtemp(prefix="iceberg-compaction-")
    spark = None
    try:
        built = time.perf_counter()
        properties, table, paths = _table(tmp, args.files, args.partitions, args.rows)
        print(f"{args.files} small files in {args.partitions} partitions written and added in {time.perf_counter() - built:.1f} s")
        bound = _pyarrow_bound(paths, os.path.join(tmp, "pyarrow"), args.partitions)
        # Both runs are timed from opening the table (catalog load, metadata read): the Spark run's
        # run_action_distributed opens it inside the timed call.
        started = time.perf_counter()
        result = Table.open("iceberg://bench.small", catalog=properties).compact(target_file_size="1 gb", min_input_files=2)
        ours = time.perf_counter() - started
        left = _check(table, args, result.rewritten_files)
        figures = {"files": args.files, "ours_s": round(ours, 3), "pyarrow_s": round(bound, 3), "ratio": round(ours / bound, 2)}
        print(f"compact (ours, in process): {ours:.2f} s; pyarrow read+write of the same bytes: {bound:.2f} s")
        print(f"ratio {ours / bound:.2f}x (target: within 1.5x); files {args.files} -> {left}; rows {args.files * args.rows}")
        if args.spark:
            from airflow_snaptable.core.actions import Compact
            from airflow_snaptable.spark.maintenance import run_action_distributed

            _properties, spark_table, _paths = _table(tmp, args.files, args.partitions, args.rows, name="bench.small_spark")
            spark, session_seconds, warmup_seconds = _start_spark(args.master)
            print(f"Spark {args.master}: session started in {session_seconds:.1f} s, Python workers warmed up in {warmup_seconds:.1f} s (not timed)")
            # The bound again, next to this run: on a shared machine the load moves within a minute.
            spark_bound = _pyarrow_bound(_paths, os.path.join(tmp, "pyarrow-spark"), args.partitions)
            empty_job = _empty_job_seconds(spark, args.partitions)
            started = time.perf_counter()
            run = run_action_distributed(
                spark, Compact(table="iceberg://bench.small_spark", target_file_size="1 gb", min_input_files=2), catalog=properties,
            )
            on_spark = time.perf_counter() - started
            left = _check(spark_table, args, run.result["result"]["rewritten_files"])
            figures.update({
                "spark_s": round(on_spark, 3), "spark_pyarrow_s": round(spark_bound, 3), "spark_ratio": round(on_spark / spark_bound, 2),
                "spark_jobs": run.spark_jobs, "spark_empty_job_s": round(empty_job, 3),
            })
            print(f"compact on Spark ({args.master}, {run.spark_jobs} job, one task per file group): {on_spark:.2f} s; "
                  f"pyarrow read+write of the same bytes just before: {spark_bound:.2f} s")
            print(f"ratio {on_spark / spark_bound:.2f}x (target: within 1.5x); files {args.files} -> {left}")
            print(f"Spark's own cost of the job's {args.partitions} tasks (an empty job of as many tasks, just before): {empty_job:.2f} s")
        print(f"machine: {describe_load(machine_load())}")
        return figures
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
