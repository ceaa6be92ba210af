"""A lake of many small tables maintained by one policy (issue 24: "1,000 small tables maintained").

``python -m benchmarks.lake [--tables 1000] [--parallel 1 4] [--dir DIR]``
``python -m benchmarks.lake --spark [--tables 100 1000] [--master local[2]]``
``python -m benchmarks.lake --dag [--tables 100]``

Builds (untimed setup, ``os.fsync`` off) ``--tables`` small tables of this package's format under
one location, in 10 namespaces of ``tables / 10``: each ``SNAPSHOTS`` overwrites of a few rows
(real Parquet files). Then, for each ``--parallel`` value, on a fresh copy of the lake and each in a
fresh interpreter (so the peak RSS is the run's own):

- a run with work: the policy expires every table to one snapshot (``SNAPSHOTS - 1`` snapshots and
  their files per table) and runs consumer and tag expiry;
- the same policy again, when no table has anything to do: what one table costs then, in time and
  in storage operations by kind (target: a few; the lower bound of "look and find nothing" is
  reading the table's latest snapshot and its tags, consumers and status).

Printed per run: wall time, time per table, tables per second, peak RSS, and the storage
operations per table by kind (every ``Storage`` of the process counted, discovery included).

``--spark`` (issue 25: "100 small tables in one Spark application < 3x the in-process run"): for
each ``--tables`` size, the run with work in process (a fresh interpreter, ``--parallel`` 4) and,
on fresh copies of the same lake, in ONE spark-submit of the maintenance job (``--lake-file``,
as the lake DAG's Spark mode runs it) with the tables on the executors and on the driver. The
Spark time is the whole spark-submit (JVM and Python start-up included) plus listing the tables;
the time inside the application (the maintenance alone) is printed beside it, and each run's
ratio to the in-process run of the same round, and Spark's start-up alone (an empty lake, the SparkSession
started). ``--repeat N`` runs N rounds and prints each ratio's median (a shared machine's load swings).
The Spark runs are three: the tables on the executors; on the driver with the SparkSession started at
once (``spark.snaptable.lazySession=false``: a Spark application registered for the whole run); and on
the driver as the job runs by default, where no SparkSession is started because no work needs one
(spark/job_session.py). Each spark-submit gets the runner's driver JVM options (spark/jvm_startup.py).

``--dag``: what a DAG author sees: the lake DAG (``lake_maintenance_group``) under ``airflow
dags test``, ``runner="local"`` (one mapped task per table) against ``runner="spark"`` (one
spark-submit for the lake), on copies of the same lake.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Commits per table at the start.
SNAPSHOTS = 4
NAMESPACES = 10
POLICY = {
    "defaults": {
        "snapshot-expiry": {"min-snapshots-to-keep": 1, "max-snapshot-age-hours": 0},
        "consumer-expiry": {},
        "tag-expiry": {},
    }
}


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(lake: str, tables: int) -> dict:
    """``tables`` small tables under ``lake``: ``ns<k>/t<i>``, each of SNAPSHOTS overwrites."""
    import pyarrow as pa

    from airflow_snaptable.core import Table
    from benchmarks.w2_expiry import no_fsync

    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    started = time.perf_counter()
    with no_fsync():
        for i in range(tables):
            table = Table.create(f"{lake}/ns{i % NAMESPACES}/t{i}", schema)
            for s in range(SNAPSHOTS):
                table.overwrite(pa.table({"id": [s, s + 1], "v": ["a", "b"]}, schema=schema))
    return {"seconds": time.perf_counter() - started}


def maintain_once(lake: str, parallel: int) -> dict:
    """One ``maintain`` run in this (fresh) process: its time, peak RSS and every storage operation."""
    from airflow_snaptable.core.lake import Policy, maintain
    from airflow_snaptable.core.io.storage import Storage

    counts: Counter = Counter()
    original = Storage._op

    def counted(self, kind, rel, n=1):
        counts[kind] += n
        return original(self, kind, rel, n)

    Storage._op = counted
    started = time.perf_counter()
    report = maintain(lake, Policy.from_mapping(POLICY), parallel=parallel)
    seconds = time.perf_counter() - started
    jobs = [t.jobs["snapshot-expiry"] for t in report.tables]
    return {
        "seconds": seconds, "tables": len(report.tables), "failed": report.failed,
        "expired": sum(j.get("snapshotsExpired") or 0 for j in jobs),
        "files": sum((j.get("filesDeleted") or {}).get("data", 0) for j in jobs),
        "operations": dict(counts), "peak_rss_mb": _peak_rss_mb(),
    }


def _in_fresh_process(function: str, *args) -> dict:
    code = f"import json, sys; from benchmarks.lake import {function}; print(json.dumps({function}(*json.loads(sys.argv[1]))))"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", code, json.dumps(list(args))], capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode:
        raise RuntimeError(f"{function} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _describe(label: str, run: dict) -> str:
    tables = max(1, run["tables"])
    per_table = {kind: round(count / tables, 1) for kind, count in sorted(run["operations"].items()) if count}
    return (
        f"    {label}: {run['seconds']:.1f} s, {1000 * run['seconds'] / tables:.1f} ms/table, "
        f"{tables / run['seconds']:.0f} tables/s, peak RSS {run['peak_rss_mb']:.0f} MB, "
        f"{run['expired']:,} snapshots and {run['files']:,} data files expired{', FAILED jobs' if run['failed'] else ''}\n"
        f"      storage operations per table: {per_table} (total {sum(per_table.values()):.1f})"
    )


def run(tables: int, parallels: list[int], directory: str | None) -> None:
    work = Path(directory or tempfile.mkdtemp(prefix="lake-bench-"))
    template = work / f"template-{tables}"
    if not template.exists():
        built = _in_fresh_process("build", str(template), tables)
        print(f"  built {tables:,} tables of {SNAPSHOTS} snapshots in {built['seconds']:.0f} s (untimed setup)", flush=True)
    for parallel in parallels:
        lake = work / f"lake-{parallel}"
        shutil.rmtree(lake, ignore_errors=True)
        shutil.copytree(template, lake)
        print(f"\n  --parallel {parallel} ({os.cpu_count()} CPUs):", flush=True)
        print(_describe("with work (expire to one snapshot)", _in_fresh_process("maintain_once", str(lake), parallel)), flush=True)
        print(_describe("nothing to do", _in_fresh_process("maintain_once", str(lake), parallel)), flush=True)
    if directory is None:
        shutil.rmtree(work, ignore_errors=True)


def spark_once(lake: str, mode: str, master: str, parallel: int, lazy_session: bool = True) -> dict:
    """The lake maintained by ONE spark-submit of the job (as the lake DAG's Spark mode runs it), with the
    runner's defaults (the driver JVM's options, the job's session defaults: spark/job_session.py)."""
    from airflow_snaptable.core.lake import Policy, list_tables
    from airflow_snaptable.spark import job_path
    from airflow_snaptable.spark.job_session import LAZY_SESSION_CONF
    from airflow_snaptable.spark.jvm_startup import submit_jvm_options
    from airflow_snaptable.spark.lake import LakeJob

    started = time.perf_counter()
    job = LakeJob(tuple(list_tables(lake)), Policy.from_mapping(POLICY), parallel=parallel, mode=mode)
    work = Path(tempfile.mkdtemp(prefix="lake-spark-"))
    (work / "lake.json").write_text(json.dumps(job.to_dict()))
    command = [
        str(Path(sys.executable).with_name("spark-submit")), "--master", master,
        "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
        "--conf", f"{LAZY_SESSION_CONF}={str(lazy_session).lower()}",
        job_path(), "--lake-file", str(work / "lake.json"), "--result", str(work / "result.json"),
    ]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    jvm = submit_jvm_options(None, command[0], env)  # as the runner does (spark/jvm_startup.py)
    env["SPARK_SUBMIT_OPTS"] = jvm.options
    done = subprocess.run(command, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    jvm.finish(done.returncode == 0)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"spark-submit failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    result = json.loads((work / "result.json").read_text())
    shutil.rmtree(work, ignore_errors=True)
    failed = any(j.get("status") == "Failed" for t in result["tables"] for j in t["jobs"].values())
    expired = sum(t["jobs"]["snapshot-expiry"].get("snapshotsExpired") or 0 for t in result["tables"])
    return {"seconds": seconds, "in_application": result["seconds"], "tables": len(result["tables"]), "failed": failed,
            "expired": expired, "spark_tasks": result["sparkTasks"]}


def run_spark(sizes: list[int], master: str, directory: str | None, repeat: int = 1) -> None:
    parallel = 4
    work = Path(directory or tempfile.mkdtemp(prefix="lake-bench-"))
    (work / "empty").mkdir(parents=True, exist_ok=True)
    print(f"  load average {_load()}", flush=True)
    floor = spark_once(str(work / "empty"), "driver", master, parallel, lazy_session=False)
    print(f"  Spark start-up alone (one spark-submit of the job on an empty lake, SparkSession started, {master}): "
          f"{floor['seconds']:.2f} s", flush=True)
    for tables in sizes:
        template = work / f"template-{tables}"
        if not template.exists():
            built = _in_fresh_process("build", str(template), tables)
            print(f"\n  {tables:,} tables: built in {built['seconds']:.0f} s (untimed setup)", flush=True)
        runs = (("executors", True, "tables on the executors"),
                ("driver", False, "tables on the driver, SparkSession started at once (spark.snaptable.lazySession=false)"),
                ("driver", True, "tables on the driver, no SparkSession needed (the default)"))
        ratios: dict[str, list[float]] = {label: [] for _mode, _lazy, label in runs}
        for round_ in range(repeat):
            if repeat > 1:
                print(f"    round {round_ + 1} of {repeat}, load average {_load()}:", flush=True)
            lake = work / f"lake-{tables}-process"
            shutil.rmtree(lake, ignore_errors=True)
            shutil.copytree(template, lake)
            local = _in_fresh_process("maintain_once", str(lake), parallel)
            print(f"    in process (--parallel {parallel}): {local['seconds']:.2f} s, "
                  f"{1000 * local['seconds'] / tables:.1f} ms/table, {local['expired']:,} snapshots expired", flush=True)
            for mode, lazy, label in runs:
                lake = work / f"lake-{tables}-{mode}-{lazy}"
                shutil.rmtree(lake, ignore_errors=True)
                shutil.copytree(template, lake)
                spark = spark_once(str(lake), mode, master, parallel, lazy)
                ratios[label].append(spark["seconds"] / local["seconds"])
                print(f"    one spark-submit, {master}, {label}: {spark['seconds']:.2f} s "
                      f"({1000 * spark['seconds'] / tables:.1f} ms/table, {spark['seconds'] / local['seconds']:.1f}x in process), "
                      f"of which maintenance {spark['in_application']:.2f} s ({1000 * spark['in_application'] / tables:.1f} ms/table, "
                      f"{spark['in_application'] / local['seconds']:.1f}x; total less the empty lake's "
                      f"{(spark['seconds'] - floor['seconds']) / local['seconds']:.1f}x); {spark['spark_tasks']} Spark task(s), "
                      f"{spark['expired']:,} snapshots expired{', FAILED jobs' if spark['failed'] else ''}", flush=True)
        if repeat > 1:
            import statistics

            for label, values in ratios.items():
                print(f"    {label}: median {statistics.median(values):.1f}x in process "
                      f"(rounds: {', '.join(f'{v:.1f}x' for v in values)})", flush=True)
    print(f"  load average {_load()}", flush=True)
    if directory is None:
        shutil.rmtree(work, ignore_errors=True)


_DAG_FILE = """
import os
import pendulum
from airflow.sdk import DAG
from airflow_snaptable.operators.lake import lake_maintenance_group
from benchmarks.lake import POLICY

with DAG(dag_id="lake_bench", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    lake_maintenance_group(location=os.environ["LAKE_BENCH_LOCATION"], policy=POLICY, runner=os.environ["LAKE_BENCH_RUNNER"],
                           spark_lake_mode="driver", spark_conf={"spark.ui.enabled": "false"})
"""


def run_dag(tables: int, master: str, directory: str | None) -> None:
    """The lake DAG under ``airflow dags test``: ``runner="local"`` (one mapped task per table) against
    ``runner="spark"`` (one spark-submit), each on a fresh copy of the same lake, one Airflow home."""
    from devtools.local_airflow import LocalAirflow, conn_json

    work = Path(directory or tempfile.mkdtemp(prefix="lake-bench-"))
    template = work / f"template-{tables}"
    if not template.exists():
        _in_fresh_process("build", str(template), tables)
    dags = work / "dags"
    dags.mkdir(exist_ok=True)
    (dags / "lake_bench.py").write_text(_DAG_FILE)
    airflow = LocalAirflow(work / "airflow-home", dags, env={
        "AIRFLOW_CONN_SPARK_DEFAULT": conn_json("spark", host=master), "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    })
    airflow.migrate()
    seconds = {}
    for runner in ("local", "spark"):
        lake = work / f"dag-lake-{runner}"
        shutil.rmtree(lake, ignore_errors=True)
        shutil.copytree(template, lake)
        env = {**airflow.env, "LAKE_BENCH_LOCATION": str(lake), "LAKE_BENCH_RUNNER": runner}
        seconds[runner] = airflow.dags_test("lake_bench", env=env, timeout=3600).seconds
        print(f"    airflow dags test, runner={runner!r}: {seconds[runner]:.1f} s "
              f"({'one task per table' if runner == 'local' else 'one spark-submit, tables on the driver'})", flush=True)
    print(f"    spark / local: {seconds['spark'] / seconds['local']:.2f}x", flush=True)
    if directory is None:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lake", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, nargs="+", default=None,
                        help="tables in the lake (default 1000; with --spark: 100 1000)")
    parser.add_argument("--parallel", type=int, nargs="+", default=[1, 4], help="runs with these --parallel values (default 1 4)")
    parser.add_argument("--dir", help="build the lake here and keep it (default: a temporary directory)")
    parser.add_argument("--spark", action="store_true", help="in process against one Spark application (see above)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --spark: rounds of the in-process run and the Spark runs, each ratio within its round (default 1)")
    parser.add_argument("--master", default="local[2]", help="the Spark master of --spark (default local[2])")
    parser.add_argument("--dag", action="store_true",
                        help="the lake DAG under airflow dags test, runner local against spark (default 100 tables)")
    args = parser.parse_args(argv)
    if args.dag:
        for tables in args.tables or [100]:
            print(f"lake DAG, {tables:,} small tables: one mapped task per table against one spark-submit")
            run_dag(tables, args.master, args.dir)
        return 0
    if args.spark:
        sizes = args.tables or [100, 1000]
        print(f"lake maintenance in process vs one Spark application: {', '.join(f'{n:,}' for n in sizes)} small tables")
        run_spark(sizes, args.master, args.dir, args.repeat)
        return 0
    for tables in args.tables or [1000]:
        print(f"lake maintenance: {tables:,} small tables, one policy (expiry to one snapshot, consumer and tag expiry)")
        run(tables, args.parallel, args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
