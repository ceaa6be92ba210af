"""Spark write of one DataFrame: ``df.write.format("snaptable")`` vs ``df.write.partitionBy("p").parquet``.

``python -m benchmarks.spark_write [--rows N] [--quick]`` caches a DataFrame of
``--rows`` rows with a partition column ``p`` of ``--partitions`` values, then, in
one SparkSession, writes it with every writer below, alternating the order per round:

- parquet: ``df.write.mode("overwrite").partitionBy("p").parquet(dir)`` with Spark's
  default codec (snappy);
- parquet-zstd: the same with ``option("compression", "zstd")``;
- snaptable: ``df.write.format("snaptable").mode("overwrite").save(table)``, the table's
  default ``file.compression`` (zstd): one snapshot per job;
- snaptable-snappy: the same into a table created with ``file.compression=snappy``.

Every run starts after ``os.sync()`` (unless ``--no-sync``) (snaptable fsyncs its data files before the
commit, Spark's parquet writer does not; an fsync on ext4 would otherwise also
write out what the previous run left dirty). Each writer is warmed up once (which also creates the tables), then timed
``--repeat`` times; the median is reported with its ratio to the parquet writer with
the same codec. Target: snaptable <= 1.2x parquet. The CPU seconds the JVM and the
Python workers spent per run (medians, from psutil) show where the work goes; their
sum against the reference's (cpu ratio) moves much less with the machine's load than
wall time does. The files and bytes each writer
left for its last run are printed, so that codec and file-count differences show.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Callable

from benchmarks.common import add_spark_run_arguments, benchmark_parser

#: writer -> the parquet writer with the same codec (the fair reference)
REFERENCE = {"parquet": "parquet", "parquet-zstd": "parquet-zstd", "snaptable": "parquet-zstd", "snaptable-snappy": "parquet"}
TARGET = 1.2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = benchmark_parser("benchmarks.spark_write", __doc__)
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows written per run (default 4,000,000)")
    parser.add_argument("--partitions", type=int, default=8, help="values of the partition column p (default 8)")
    parser.add_argument("--slices", type=int, default=2, help="Spark partitions of the DataFrame = write tasks (default 2)")
    add_spark_run_arguments(
        parser, repeat=3, runs="timed runs per writer", master="local[2]", place="where to write", quick="200,000 rows, 2 runs"
    )
    parser.add_argument(
        "--arrow-batch-rows", type=int, default=None,
        help="spark.sql.execution.arrow.maxRecordsPerBatch: rows per Arrow batch sent to the write tasks (Spark's default 10,000)",
    )
    parser.add_argument("--no-sync", action="store_true", help="do not os.sync() before each run (fsyncs then also pay for the previous runs' dirty pages)")
    parser.add_argument("--only", help="comma list of writers to run (default: all)")
    return parser.parse_args(argv)


def cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far by this process's descendants: the JVM and the Python workers (psutil)."""
    import psutil

    used = {"jvm": 0.0, "python": 0.0}
    for process in psutil.Process().children(recursive=True):
        try:
            times = process.cpu_times()
            kind = "jvm" if process.name().startswith("java") else "python"
        except psutil.Error:  # exited meanwhile; its time moves to its parent's children_* counters
            continue
        used[kind] += times.user + times.system + times.children_user + times.children_system
    return used


def timed(action: Callable[[], None], cpu: dict[str, list[float]], sync: bool) -> float:
    """Wall seconds of ``action``; appends the CPU seconds the JVM and the Python workers spent to ``cpu``."""
    if sync:
        # Every run starts with no dirty pages: snaptable fsyncs its files (Spark's parquet writer
        # does not), and on ext4 an fsync also writes out the dirty data of earlier runs.
        os.sync()
    before = cpu_seconds()
    start = time.perf_counter()
    action()
    elapsed = time.perf_counter() - start
    after = cpu_seconds()
    for kind in after:
        cpu.setdefault(kind, []).append(after[kind] - before[kind])
    return elapsed


def parquet_files(directory: str) -> tuple[int, int]:
    """(files, bytes) of the Parquet files under ``directory``."""
    count = size = 0
    for root, _dirs, names in os.walk(directory):
        for name in names:
            if name.endswith(".parquet"):
                count += 1
                size += os.path.getsize(os.path.join(root, name))
    return count, size


def snaptable_files(uri: str) -> tuple[int, int]:
    """(files, bytes) the latest snapshot of ``uri`` holds (an overwrite: what the last run wrote)."""
    from airflow_snaptable.core import Table

    files = Table.open(uri).scan().files()
    return len(files), sum(f.file_size for f in files)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.rows, args.repeat = 200_000, 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    from airflow_snaptable.core import Table
    from airflow_snaptable.spark import register

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="snaptable-spark-write-", dir=args.dir) as workdir:
        spark = (
            SparkSession.builder.master(args.master)
            .appName("snaptable spark_write benchmark")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(args.slices))
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        if args.arrow_batch_rows:
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.arrow_batch_rows))
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        try:
            df = spark.range(0, args.rows, numPartitions=args.slices).selectExpr(
                f"id % {args.partitions} as p",
                "id",
                "concat('customer-', cast(id % 100003 as string)) as name",
                "cast(id as double) * 0.25 as value",
                "id % 3 = 0 as flag",
            ).cache()
            if df.count() != args.rows:
                print("the cached DataFrame has the wrong row count", file=sys.stderr)
                return 1
            paths = {name: os.path.join(workdir, name) for name in REFERENCE}

            def snaptable(uri: str, options: dict[str, str]) -> Callable[[], None]:
                def run() -> None:
                    writer = df.write.format("snaptable").mode("overwrite").option("partition-by", "p")
                    for key, value in options.items():
                        writer = writer.option(key, value)
                    writer.save(uri)

                return run

            writers: dict[str, Callable[[], None]] = {
                "parquet": lambda: df.write.mode("overwrite").partitionBy("p").parquet(paths["parquet"]),
                "parquet-zstd": lambda: df.write.mode("overwrite").option("compression", "zstd").partitionBy("p").parquet(paths["parquet-zstd"]),
                "snaptable": snaptable(paths["snaptable"], {}),
                "snaptable-snappy": snaptable(paths["snaptable-snappy"], {"file.compression": "snappy"}),
            }
            if args.only:
                wanted = [w.strip() for w in args.only.split(",")]
                writers = {name: w for name, w in writers.items() if name in wanted or name in {REFERENCE[x] for x in wanted if x in REFERENCE}}
            for action in writers.values():
                action()  # warm-up; creates the snaptable tables
            times: dict[str, list[float]] = {name: [] for name in writers}
            cpu: dict[str, dict[str, list[float]]] = {name: {} for name in writers}
            names = list(writers)
            for run in range(args.repeat):
                for name in names[run % len(names):] + names[: run % len(names)]:
                    times[name].append(timed(writers[name], cpu[name], not args.no_sync))
            files = {
                name: (snaptable_files(paths[name]) if name.startswith("snaptable") else parquet_files(paths[name]))
                for name in writers
            }
            for name in writers:
                if name.startswith("snaptable"):
                    written = Table.open(paths[name]).scan().to_arrow().num_rows
                    if written != args.rows:
                        print(f"{name} holds {written} rows, expected {args.rows}", file=sys.stderr)
                        return 1
        finally:
            spark.stop()

    load_after = os.getloadavg()
    print(
        f"spark_write: {args.rows:,} rows, {args.partitions} partition values, {args.slices} tasks, master {args.master}, "
        f"Arrow batches of {args.arrow_batch_rows or 10_000:,} rows, "
        f"{args.repeat} runs each{'' if args.no_sync else ', os.sync() before each'}; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    print(f"{'writer':<17} {'median s':>9} {'min s':>8} {'max s':>8} {'vs':>13} {'ratio':>7} {'files':>6} {'MiB':>8} {'cpu jvm':>8} {'cpu py':>7} {'cpu ratio':>9}")
    for name in writers:
        values = times[name]
        median = statistics.median(values)
        reference = REFERENCE[name]
        ratio = median / statistics.median(times[reference]) if reference in times else float("nan")
        count, size = files[name]
        jvm, python = (statistics.median(cpu[name][kind]) for kind in ("jvm", "python"))
        cpu_ratio = (jvm + python) / sum(statistics.median(cpu[reference][k]) for k in ("jvm", "python")) if reference in cpu else float("nan")
        print(
            f"{name:<17} {median:>9.3f} {min(values):>8.3f} {max(values):>8.3f} {reference:>13} {ratio:>6.2f}x "
            f"{count:>6} {size / 2**20:>8.1f} {jvm:>8.2f} {python:>7.2f} {cpu_ratio:>8.2f}x"
        )
    for name in writers:
        if name.startswith("snaptable") and REFERENCE[name] in times:
            ratio = statistics.median(times[name]) / statistics.median(times[REFERENCE[name]])
            verdict = "met" if ratio <= TARGET else "missed"
            print(f"target {name} <= {TARGET}x {REFERENCE[name]}: {ratio:.2f}x, {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
