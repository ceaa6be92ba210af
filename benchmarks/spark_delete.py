"""Expiry that deletes 20,000 data files: core in process vs the same action with deletes on Spark executors.

``python -m benchmarks.spark_delete [--files N] [--repeat R] [--s3 SERVER] [--quick]``

The table: snapshot 1 adds ``--files`` small data files (written directly and
committed as they are, so building costs one write per file and no Parquet
encoding), snapshot 2 overwrites the whole table with a few rows. Expiring
snapshot 1 (``retain_min=1, retain_max=1``) deletes all ``--files`` data files
and snapshot 1's manifests.

Each round copies the built table twice and runs on the copies, same data, same run:

- in-process: ``Table.expire_snapshots`` (core's ``Storage.delete_files``: the shared
  I/O thread pool locally, S3 DeleteObjects of 1,000 keys);
- distributed: the same ``ExpireSnapshots`` action through
  ``spark.maintenance.run_action_distributed`` on a ``local[2]`` SparkSession
  (the data files' ``delete_files`` call becomes one Spark job, whatever the
  default threshold; ``--files-per-task`` files per task (default: the job's, 5,000),
  each task running core's ``delete_files``). The session is started and its Python
  workers warmed up before timing; the start-up is printed separately (a
  spark-submit job pays it on top).

Rounds alternate which runs first. Both copies must end identical: ``verify()``
clean, the same files on storage, all ``--files`` data files gone.

``--s3 seaweedfs|moto`` runs the same on a local S3 server from tests/s3_servers.py
(default count 2,000 there).

``--driver-rss N`` measures memory instead of time: it builds one table of N files and runs
the expiry once in process and once distributed, each in a fresh interpreter (the table is built in
another: a peak RSS is inherited across fork and exec), and prints each
one's Python peak RSS (``ru_maxrss``; the distributed run's is the driver's, which plans with
core and holds one part of a plan in parts at a time, core/lifecycle/expiry/parts.py), the
distributed driver's also as its growth over the started session. ``--parted-bound B`` sets
``expire_subranges.MAX_DELETED_FILES`` in those interpreters (default: core's, 500,000): with
B < N the expiry is a plan in parts; with B >= N, one plan holding every candidate.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_snaptable.spark.maintenance import DEFAULT_FILES_PER_TASK, DEFAULT_PARALLEL_THRESHOLD
from benchmarks.common import add_spark_run_arguments, benchmark_parser, describe_load, machine_load, peak_rss_mb

SCHEMA = pa.schema([pa.field("p", pa.int64()), pa.field("id", pa.int64()), pa.field("value", pa.float64())])
PARTITIONS = 10


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = benchmark_parser("benchmarks.spark_delete", __doc__)
    parser.add_argument("--files", type=int, help="data files the expiry deletes (default 20,000; 2,000 on S3)")
    add_spark_run_arguments(
        parser, repeat=3, runs="rounds, each on fresh copies", master="local[2]", place="where to build the tables",
        quick="2,000 files (200 on S3), 1 round",
    )
    parser.add_argument("--files-per-task", type=int, default=DEFAULT_FILES_PER_TASK,
                        help=f"deletes per Spark task (default {DEFAULT_FILES_PER_TASK}, the job's default)")
    parser.add_argument("--s3", choices=("seaweedfs", "moto"), help="run on a local S3 server instead of local files")
    parser.add_argument("--driver-rss", type=int, metavar="N", help="measure peak RSS of one expiry of N files instead")
    parser.add_argument("--parted-bound", type=int, metavar="B", help="with --driver-rss: MAX_DELETED_FILES in the runs")
    return parser.parse_args(argv)


# -- building --------------------------------------------------------------------


def one_row_parquet(partition: int) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"p": [partition], "id": [partition], "value": [0.5]}, schema=SCHEMA), sink)
    return sink.getvalue()


def build_table(uri: str, files: int, storage_options: dict | None):
    """Snapshot 1 adds ``files`` data files; snapshot 2 overwrites them all."""
    from airflow_snaptable.core import Table
    from airflow_snaptable.core.io.pool import map_io
    from airflow_snaptable.core.native.manifest import DataFile

    table = Table.create(uri, SCHEMA, partition_by=["p"], storage_options=storage_options)
    bodies = {p: one_row_parquet(p) for p in range(PARTITIONS)}
    added = [
        DataFile(path=f"data/p={i % PARTITIONS}/data-{uuid.uuid4().hex}.parquet", partition=(i % PARTITIONS,), record_count=1,
                 file_size=len(bodies[i % PARTITIONS]))
        for i in range(files)
    ]
    # hints-grade durability: the benchmark needs files on storage, not crash safety
    map_io(lambda f: table.storage.write_bytes(f.path, bodies[f.partition[0]], durable=False), added)
    table.commit_files(added)
    table.overwrite(pa.table({"p": list(range(PARTITIONS)), "id": list(range(PARTITIONS)), "value": [1.0] * PARTITIONS}, schema=SCHEMA))
    return table, sorted(f.path for f in added)


def copy_table(source_uri: str, target_uri: str, storage_options: dict | None) -> None:
    from airflow_snaptable.core.io.pool import map_io
    from airflow_snaptable.core.io.storage import Storage

    source = Storage.from_uri(source_uri, storage_options)
    if source._is_local:
        shutil.copytree(source.root, Storage.from_uri(target_uri, storage_options).root)
        return
    target = Storage.from_uri(target_uri, storage_options)
    rels = [rel for rel, _size, _mtime in source.list_files("")]
    map_io(lambda rel: source.fs.copy(source.full_path(rel), target.full_path(rel)), rels)


def files_on_storage(uri: str, storage_options: dict | None) -> list[str]:
    from airflow_snaptable.core.io.storage import Storage

    return [rel for rel, _size, _mtime in Storage.from_uri(uri, storage_options).list_files("")]


# -- running ---------------------------------------------------------------------


@dataclass
class Measurement:
    seconds: float
    data_files_deleted: int
    manifests_deleted: int
    operations: dict[str, int]
    spark_jobs: int = 0
    deleted_on_executors: int = 0


def expire_in_process(uri: str, storage_options: dict | None) -> Measurement:
    from airflow_snaptable.core import Table

    started = time.perf_counter()
    table = Table.open(uri, storage_options)
    result = table.expire_snapshots(retain_min=1, retain_max=1)
    seconds = time.perf_counter() - started
    return Measurement(seconds, result.deleted_data_files, result.deleted_manifest_files, table.storage.snapshot_counts())


def expire_distributed(spark, uri: str, storage_options: dict | None, files: int, files_per_task: int) -> Measurement:
    from airflow_snaptable.core.actions import ExpireSnapshots
    from airflow_snaptable.spark.maintenance import run_action_distributed

    started = time.perf_counter()
    # threshold = the data files: they go to the executors whatever the default; the 2 manifests stay in process
    run = run_action_distributed(spark, ExpireSnapshots(table=uri, retain_min=1, retain_max=1), storage_options,
                                 threshold=files, files_per_task=files_per_task)
    seconds = time.perf_counter() - started
    result = run.result["result"]
    return Measurement(seconds, result["deleted_data_files"], result["deleted_manifest_files"], run.operations,
                       run.spark_jobs, run.deleted_on_executors)


def check_same_end_state(uris: list[str], doomed: list[str], storage_options: dict | None) -> None:
    from airflow_snaptable.core import Table

    listings = []
    for uri in uris:
        table = Table.open(uri, storage_options)
        verified = table.verify()
        if verified.missing_files or verified.unreferenced_files:
            raise SystemExit(f"{uri}: verify() not clean: missing {verified.missing_files[:5]}, "
                             f"unreferenced {verified.unreferenced_files[:5]}")
        if [s.id for s in table.snapshots()] != [2]:
            raise SystemExit(f"{uri}: snapshots {[s.id for s in table.snapshots()]}, expected [2]")
        listing = files_on_storage(uri, storage_options)
        left = set(doomed) & set(listing)
        if left:
            raise SystemExit(f"{uri}: {len(left)} of the expired data files are still there, e.g. {sorted(left)[:3]}")
        listings.append(listing)
    if any(listing != listings[0] for listing in listings[1:]):
        raise SystemExit(f"the copies differ after expiry: {[len(listing) for listing in listings]} files")


def start_spark(master: str):
    from pyspark.sql import SparkSession

    started = time.perf_counter()
    spark = (
        SparkSession.builder.master(master)
        .appName("snaptable spark_delete benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    session_seconds = time.perf_counter() - started
    started = time.perf_counter()
    # start the Python workers and import core there once: a job pays this once, not per delete call
    spark.sparkContext.parallelize(range(spark.sparkContext.defaultParallelism * 2)).foreachPartition(
        lambda rows: __import__("airflow_snaptable.core.io.storage")
    )
    return spark, session_seconds, time.perf_counter() - started


def driver_rss_child(uri: str, mode: str, master: str, bound: int | None) -> dict:
    """One expiry of the table at ``uri`` in this (fresh) interpreter: its peak RSS, and for the
    distributed run the driver's peak RSS once the session ran its first tasks (before the expiry)."""
    from airflow_snaptable.core.lifecycle.expiry import subranges as expire_subranges

    if bound is not None:
        expire_subranges.MAX_DELETED_FILES = bound
    if mode == "in-process":
        measured = expire_in_process(uri, None)
        return {"seconds": measured.seconds, "data_files": measured.data_files_deleted, "peak_rss_mb": peak_rss_mb()}
    spark, _session, _warmup = start_spark(master)
    try:
        before = peak_rss_mb()
        measured = expire_distributed(spark, uri, None, DEFAULT_PARALLEL_THRESHOLD, DEFAULT_FILES_PER_TASK)
        return {"seconds": measured.seconds, "data_files": measured.data_files_deleted, "peak_rss_mb": peak_rss_mb(),
                "session_rss_mb": before, "spark_jobs": measured.spark_jobs, "on_executors": measured.deleted_on_executors}
    finally:
        spark.stop()


def driver_rss(args: argparse.Namespace) -> int:
    import json
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory(prefix="snaptable-driver-rss-", dir=args.dir) as base:
        started = time.perf_counter()
        # Built in its own interpreter: Linux carries a process's peak RSS across fork and exec, so
        # a parent that built a large table would pass its peak on to every run it starts.
        subprocess.run([sys.executable, "-c", "import sys; from benchmarks.spark_delete import build_table; "
                        "build_table(sys.argv[1], int(sys.argv[2]), None)", f"{base}/built", str(args.driver_rss)],
                       check=True, cwd=root)
        print(f"spark_delete --driver-rss: expiry deleting {args.driver_rss:,} data files (local files), "
              f"MAX_DELETED_FILES {args.parted_bound or 'default'}; built in {time.perf_counter() - started:.0f} s")
        for mode in ("in-process", "distributed"):
            uri = f"{base}/{mode}"
            copy_table(f"{base}/built", uri, None)
            code = ("import json, sys; from benchmarks.spark_delete import driver_rss_child; "
                    "print(json.dumps(driver_rss_child(*json.loads(sys.argv[1]))))")
            done = subprocess.run([sys.executable, "-c", code, json.dumps([uri, mode, args.master, args.parted_bound])],
                                  capture_output=True, text=True, cwd=root)
            if done.returncode:
                raise SystemExit(f"{mode} run failed:\n{done.stderr[-3000:]}")
            got = json.loads(done.stdout.strip().splitlines()[-1])
            if got["data_files"] != args.driver_rss:
                raise SystemExit(f"{mode} deleted {got['data_files']} data files, expected {args.driver_rss}")
            line = f"  {mode:<12} {got['seconds']:7.1f} s, peak RSS {got['peak_rss_mb']:6.0f} MB"
            if mode == "distributed":
                line += (f" (driver; {got['session_rss_mb']:.0f} MB with the session started, +"
                         f"{got['peak_rss_mb'] - got['session_rss_mb']:.0f} MB for the expiry; {got['spark_jobs']} Spark jobs, "
                         f"{got['on_executors']:,} files deleted on executors)")
            print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if args.driver_rss:
        return driver_rss(args)
    if args.files is None:
        args.files = (200 if args.s3 else 2_000) if args.quick else (2_000 if args.s3 else 20_000)
    if args.quick:
        args.repeat = 1
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    load_start = machine_load()

    server = None
    storage_options = None
    workdir = tempfile.TemporaryDirectory(prefix="snaptable-spark-delete-", dir=args.dir)
    try:
        if args.s3:
            sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            from tests.s3_servers import make_server

            server = make_server(args.s3).start()
            storage_options = server.storage_options()
            base = f"s3://{server.create_bucket('bench')}"
        else:
            base = workdir.name
        started = time.perf_counter()
        _table, doomed = build_table(f"{base}/built", args.files, storage_options)
        build_seconds = time.perf_counter() - started

        spark, session_seconds, warmup_seconds = start_spark(args.master)
        runs: dict[str, list[Measurement]] = {"in-process": [], "distributed": []}
        copy_seconds = 0.0
        try:
            for round_number in range(args.repeat):
                uris = {name: f"{base}/round{round_number}-{name}" for name in runs}
                started = time.perf_counter()
                for uri in uris.values():
                    copy_table(f"{base}/built", uri, storage_options)
                copy_seconds += time.perf_counter() - started
                order = list(runs) if round_number % 2 == 0 else list(reversed(runs))
                for name in order:
                    if name == "in-process":
                        runs[name].append(expire_in_process(uris[name], storage_options))
                    else:
                        runs[name].append(expire_distributed(spark, uris[name], storage_options, args.files, args.files_per_task))
                check_same_end_state(list(uris.values()), doomed, storage_options)
                for name in runs:
                    if runs[name][-1].data_files_deleted != args.files:
                        raise SystemExit(f"{name} deleted {runs[name][-1].data_files_deleted} data files, expected {args.files}")
        finally:
            spark.stop()
    finally:
        if server is not None:
            server.stop()
        workdir.cleanup()
    load_end = machine_load()

    where = f"S3 ({args.s3} on 127.0.0.1)" if args.s3 else "local files"
    print(f"spark_delete: expiry deleting {args.files:,} data files on {where}, {args.repeat} round(s), "
          f"Spark {args.master}, {args.files_per_task} files per task, {os.cpu_count()} CPUs")
    print(f"  table built in {build_seconds:.1f} s, copies in {copy_seconds:.1f} s; Spark session {session_seconds:.1f} s "
          f"+ first Python workers with core imported {warmup_seconds:.1f} s (not in the times below)")
    print(f"  machine at start: {describe_load(load_start)}")
    print(f"{'run':<12} {'median s':>9} {'min s':>8} {'max s':>8} {'data files':>11} {'manifests':>10} "
          f"{'deletes':>8} {'reads':>6} {'writes':>7} {'lists':>6} {'exists':>7} {'Spark jobs':>11} {'on executors':>13}")
    for name, measured in runs.items():
        times = [m.seconds for m in measured]
        last = measured[-1]
        ops = last.operations
        print(f"{name:<12} {statistics.median(times):>9.2f} {min(times):>8.2f} {max(times):>8.2f} {last.data_files_deleted:>11,} "
              f"{last.manifests_deleted:>10} {ops['delete']:>8,} {ops['read']:>6} {ops['write']:>7} {ops['list']:>6} "
              f"{ops['exists']:>7} {last.spark_jobs:>11} {last.deleted_on_executors:>13,}")
    in_process = statistics.median(m.seconds for m in runs["in-process"])
    distributed = statistics.median(m.seconds for m in runs["distributed"])
    print(f"distributed / in-process (median): {distributed / in_process:.2f}x; both copies end identical, verify() clean")
    print(f"  machine at end: {describe_load(load_end)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
