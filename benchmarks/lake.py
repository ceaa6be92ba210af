"""A lake of many small tables maintained by one policy (issue 24: "1,000 small tables maintained").

``python -m benchmarks.lake [--tables 1000] [--parallel 1 4] [--dir DIR]``

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
    template = work / "template"
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lake", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000, help="tables in the lake (default 1000)")
    parser.add_argument("--parallel", type=int, nargs="+", default=[1, 4], help="runs with these --parallel values (default 1 4)")
    parser.add_argument("--dir", help="build the lake here and keep it (default: a temporary directory)")
    args = parser.parse_args(argv)
    print(f"lake maintenance: {args.tables:,} small tables, one policy (expiry to one snapshot, consumer and tag expiry)")
    run(args.tables, args.parallel, args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
