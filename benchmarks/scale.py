"""Planning at scale: a table of many commits of many files; the full plan against a one-partition plan.

``python -m benchmarks.scale [--commits 1000] [--files-per-commit 1000] [--partitions 100]``

Builds (with ``commit_files``: metadata only, no data files) a table of ``commits`` x
``files-per-commit`` data files in ``partitions`` partitions, twice: every commit touching every
partition, and each commit one partition (a daily ingestion). Then it times, each in a fresh interpreter (so the peak RSS is the step's own):

- the full plan of the latest snapshot (every live file): the lower bound of any plan that reads
  all manifests;
- a one-partition plan (``scan(filter=[("p", "=", 3)])``); its manifests' partition bounds let it
  skip the others (core/partition_pruning.py). Target: <= 0.1x the full plan's time.
- a selective non-partition filter: every data file carries column statistics (core/column_stats.py)
  for ``id``, which increases over commits (100 ids per file); a filter on an ``id`` range holding 1%
  of the rows keeps only the files whose bounds overlap it. Targets: <= 5% of the files read, in at most
  the full plan's time (core/data_skipping.py).

Printed: commit time at the start and the end, the plans' times and peak RSS, and the ratios.
The issue's other scale figures (expiry and orphan cleaning of the whole table in bounded memory,
the Spark write path) are not measured here yet.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IDS_PER_FILE = 100


def selective_filter(total_files: int):
    """``id`` in a range of 1% of the ids, in the middle of the table."""
    import pyarrow.compute as pc

    ids = total_files * IDS_PER_FILE
    low = ids // 2
    return (pc.field("id") >= low) & (pc.field("id") < low + max(1, ids // 100))


def build(uri: str, commits: int, files_per_commit: int, partitions: int, layout: str = "spread") -> dict:
    """``layout``: "spread", every commit writes every partition; "clustered", commit ``c`` writes
    partition ``c % partitions`` only (a daily ingestion into a day partition)."""
    import pyarrow as pa

    from airflow_snaptable.core import Table
    from airflow_snaptable.core.column_stats import ColumnStats, FileStats
    from airflow_snaptable.core.manifest import DataFile

    def stats(first_id: int) -> str:  # a file of ids first_id .. first_id + 99 (sorted over commits)
        return FileStats(IDS_PER_FILE, {"id": ColumnStats(0, first_id, first_id + IDS_PER_FILE - 1)}).encode()

    schema = pa.schema([("p", pa.int64()), ("id", pa.int64())])
    table = Table.create(uri, schema, partition_by=["p"])
    times = []
    for c in range(commits):
        files = [
            DataFile(f"data/p={p}/data-{c}-{i}.parquet", (p,), IDS_PER_FILE, 4096, stats((c * files_per_commit + i) * IDS_PER_FILE))
            for i in range(files_per_commit)
            for p in [i % partitions if layout == "spread" else c % partitions]
        ]
        started = time.perf_counter()
        table.commit_files(files)
        times.append(time.perf_counter() - started)
    head = times[: min(10, len(times))]
    tail = times[-min(10, len(times)):]
    return {"first_commits_ms": 1000 * sum(head) / len(head), "last_commits_ms": 1000 * sum(tail) / len(tail)}


def plan(uri: str, which: str, total_files: int = 0) -> dict:
    """One plan in this (fresh) process: seconds, files planned, peak RSS in MB."""
    import resource

    from airflow_snaptable.core import Table

    table = Table.open(uri)
    started = time.perf_counter()
    if which == "full":
        scan = table.scan()
    elif which == "partition":
        scan = table.scan(filter=[("p", "=", 3)])
    else:
        scan = table.scan(filter=selective_filter(total_files))
    files = len(scan.files())
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "files": files, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _in_fresh_process(function: str, *args) -> dict:
    code = f"import json, sys; from benchmarks.scale import {function}; print(json.dumps({function}(*json.loads(sys.argv[1]))))"
    done = subprocess.run([sys.executable, "-c", code, json.dumps(list(args))], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--files-per-commit", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100)
    args = parser.parse_args(argv)
    total = args.commits * args.files_per_commit
    median = lambda runs: sorted(r["seconds"] for r in runs)[1]  # noqa: E731
    print(f"Table: {args.commits} commits x {args.files_per_commit} files = {total:,} data files in {args.partitions} partitions")
    for layout, label in (("spread", "every commit writes every partition"), ("clustered", "each commit writes one partition")):
        with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
            uri = str(Path(tmp) / "t")
            built = _in_fresh_process("build", uri, args.commits, args.files_per_commit, args.partitions, layout)
            full = [_in_fresh_process("plan", uri, "full") for _ in range(3)]
            one = [_in_fresh_process("plan", uri, "partition") for _ in range(3)]
            selective = [_in_fresh_process("plan", uri, "selective", total) for _ in range(3)]
        print(f"\n  {label}:")
        print(f"    commit time: {built['first_commits_ms']:.1f} ms (first 10), {built['last_commits_ms']:.1f} ms (last 10)")
        print(f"    full plan:          {median(full):.3f} s (median of 3), {full[0]['files']:,} files, peak RSS {max(r['peak_rss_mb'] for r in full):.0f} MB")
        print(f"    one-partition plan: {median(one):.3f} s (median of 3), {one[0]['files']:,} files, peak RSS {max(r['peak_rss_mb'] for r in one):.0f} MB")
        print(f"    one-partition / full: {median(one) / median(full):.3f}x (target <= 0.1x)")
        read = selective[0]["files"]
        print(f"    selective non-partition filter (id range, 1% of rows): {median(selective):.3f} s (median of 3), "
              f"{read:,} of {total:,} files read = {100 * read / total:.2f}% (target <= 5%), peak RSS {max(r['peak_rss_mb'] for r in selective):.0f} MB")
        print(f"    selective / full: {median(selective) / median(full):.3f}x (target <= 1x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
