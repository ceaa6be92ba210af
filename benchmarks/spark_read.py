"""Spark read of one snapshot: ``read_table`` and the ``snaptable`` data source vs ``spark.read.parquet``.

``python -m benchmarks.spark_read [--rows N] [--quick]`` builds a local table with
core, then, in one SparkSession, reads the same snapshot three ways and fully
materialises every column (``write.format("noop")``):

- parquet: ``spark.read.parquet(*paths)`` of exactly the snapshot's data files (the reference);
- parquet+schema: the same with the schema given (no footer read to infer it), the lower bound;
- read_table: ``airflow_snaptable.spark.read_table`` (core plans, Spark reads natively);
- datasource: ``spark.read.format("snaptable")`` (core plans and reads in Python workers, Arrow to the JVM).

Each is warmed up once, then timed ``--repeat`` times in rotating order; the
median is reported with its ratio to parquet. Target: read_table <= 1.1x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Callable

import pyarrow as pa

from benchmarks.common import add_spark_run_arguments, benchmark_parser

SCHEMA = pa.schema(
    [
        pa.field("p", pa.int64()),
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("flag", pa.bool_()),
    ]
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = benchmark_parser("benchmarks.spark_read", __doc__)
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows in the snapshot (default 4,000,000)")
    parser.add_argument("--partitions", type=int, default=8, help="table partitions (default 8)")
    parser.add_argument("--commits", type=int, default=4, help="appends building the snapshot: files per partition (default 4)")
    add_spark_run_arguments(
        parser, repeat=5, runs="timed runs per reader", master="local[*]", place="where to build the table", quick="200,000 rows, 2 runs"
    )
    return parser.parse_args(argv)


def build_table(uri: str, rows: int, partitions: int, commits: int):
    from airflow_snaptable.core import Table

    table = Table.create(uri, SCHEMA, partition_by=["p"])
    per_commit = rows // commits
    for c in range(commits):
        start = c * per_commit
        ids = pa.array(range(start, start + per_commit), pa.int64())
        batch = pa.table(
            {
                "p": pa.compute.remainder(ids, partitions),
                "id": ids,
                "name": pa.array([f"customer-{i % 100_003}" for i in range(start, start + per_commit)]),
                "value": pa.compute.multiply(pa.compute.cast(ids, pa.float64()), 0.25),
                "flag": pa.compute.equal(pa.compute.remainder(ids, 3), 0),
            },
            schema=SCHEMA,
        )
        table.append(batch)
    return table


def timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.rows, args.repeat = 200_000, 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    from airflow_snaptable.core import Table
    from airflow_snaptable.spark import read_table, register
    from airflow_snaptable.spark._common import spark_schema_for
    from airflow_snaptable.spark.fastread import hadoop_path

    with tempfile.TemporaryDirectory(prefix="snaptable-spark-read-", dir=args.dir) as workdir:
        uri = os.path.join(workdir, "table")
        started = time.perf_counter()
        table = build_table(uri, args.rows, args.partitions, args.commits)
        build_seconds = time.perf_counter() - started
        files = table.scan().files()
        paths = [hadoop_path(table.storage, f.path) for f in files]
        total_bytes = sum(f.file_size for f in files)

        spark = (
            SparkSession.builder.master(args.master)
            .appName("snaptable spark_read benchmark")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.sql.python.filterPushdown.enabled", "true")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        spark_schema = spark_schema_for(table.arrow_schema)
        try:
            def materialise(df) -> None:
                df.write.format("noop").mode("overwrite").save()

            readers: dict[str, Callable[[], None]] = {
                "parquet": lambda: materialise(spark.read.parquet(*paths)),
                "parquet+schema": lambda: materialise(spark.read.schema(spark_schema).parquet(*paths)),
                "read_table": lambda: materialise(read_table(spark, uri)),
                "datasource": lambda: materialise(spark.read.format("snaptable").load(uri)),
            }
            # the same rows every way
            counts = {
                "parquet": spark.read.parquet(*paths).count(),
                "read_table": read_table(spark, uri).count(),
                "datasource": spark.read.format("snaptable").load(uri).count(),
            }
            if len(set(counts.values())) != 1 or counts["parquet"] != args.rows // args.commits * args.commits:
                print(f"row counts differ: {counts}", file=sys.stderr)
                return 1
            for action in readers.values():
                action()  # warm-up
            times: dict[str, list[float]] = {name: [] for name in readers}
            names = list(readers)
            for run in range(args.repeat):
                for name in names[run % len(names):] + names[: run % len(names)]:
                    times[name].append(timed(readers[name]))
            planning = [timed(lambda: Table.open(uri).scan().files()) for _ in range(args.repeat)]
        finally:
            spark.stop()

    base = statistics.median(times["parquet"])
    print(f"spark_read: {args.rows:,} rows, {len(files)} files, {total_bytes / 2**20:.1f} MiB, master {args.master}, "
          f"{args.repeat} runs each (table built in {build_seconds:.1f} s)")
    print(f"{'reader':<15} {'median s':>9} {'min s':>8} {'max s':>8} {'median/parquet':>15} {'min/parquet':>12}")
    base_min = min(times["parquet"])
    for name in readers:
        values = times[name]
        median = statistics.median(values)
        print(f"{name:<15} {median:>9.3f} {min(values):>8.3f} {max(values):>8.3f} {median / base:>14.2f}x {min(values) / base_min:>11.2f}x")
    print(f"core planning (Table.open + scan + files): median {statistics.median(planning) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
