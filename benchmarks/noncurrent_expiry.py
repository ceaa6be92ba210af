"""What noncurrent retention costs an expiry (issue 26): the same expiry, plain and with ``noncurrent_days``.

``python -m benchmarks.noncurrent_expiry [--snapshots N] [--quick]``

One table of N snapshots (small appends over 10 partitions, every 5th commit an overwrite of one
partition, so expiry frees data files) is copied, and on each copy ours expires everything but the
newest snapshot: plainly (deleting what it frees), and with ``noncurrent_days=10`` (deleting no file,
recording it in the journal). Three alternated rounds, each on a fresh copy; printed: the median
times, their ratio (noncurrent / plain), storage operations by kind, the files each left, and the
cost of the purge that later deletes the noncurrent files (days 0), checked to delete the same set.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter

import pyarrow as pa

from airflow_snaptable.core import Table
from tests.noncurrent_support import data_and_manifest_files as files

EXPIRE = dict(retain_min=1, time_retained="0 s", limit=1_000_000)


def build(uri: str, snapshots: int) -> None:
    table = Table.create(uri, pa.schema([("id", pa.int64()), ("p", pa.int64())]), partition_by=["p"])
    row = 0
    for i in range(snapshots):
        p = i % 10
        rows = pa.table({"id": list(range(row, row + 10)), "p": [p] * 10})
        row += 10
        if i % 5 == 4:
            table.overwrite(rows, partitions=[{"p": p}])
        else:
            table.append(rows)


def timed(uri: str, days: int | None) -> tuple[float, Counter]:
    table = Table.open(uri)
    ops: Counter = Counter()
    table.storage.on_operation = lambda kind, path: ops.update([kind])
    start = time.perf_counter()
    with table.retaining_noncurrent(days, "expire-snapshots"):
        table.expire_snapshots(**EXPIRE)
    return time.perf_counter() - start, ops


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.noncurrent_expiry")
    parser.add_argument("--snapshots", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="100 snapshots, one round")
    args = parser.parse_args(argv)
    snapshots, rounds = (100, 1) if args.quick else (args.snapshots, 3)
    with tempfile.TemporaryDirectory(prefix="snaptable-noncurrent-") as scratch:
        template = os.path.join(scratch, "template")
        build(template, snapshots)
        before = files(template)
        times: dict[str, list[float]] = {"plain": [], "noncurrent": []}
        ops: dict[str, Counter] = {}
        left: dict[str, set[str]] = {}
        for _round in range(rounds):
            for mode, days in (("plain", None), ("noncurrent", 10)):
                work = os.path.join(scratch, mode)
                shutil.rmtree(work, ignore_errors=True)
                shutil.copytree(template, work)
                os.sync()
                seconds, ops[mode] = timed(work, days)
                times[mode].append(seconds)
                left[mode] = files(work)
        purge_copy = os.path.join(scratch, "purge")
        shutil.rmtree(purge_copy, ignore_errors=True)
        shutil.copytree(template, purge_copy)
        timed(purge_copy, 0)
        start = time.perf_counter()
        Table.open(purge_copy).purge()
        purge_seconds = time.perf_counter() - start
    plain, noncurrent = statistics.median(times["plain"]), statistics.median(times["noncurrent"])
    print(f"expiry of {snapshots - 1} of {snapshots} snapshots, {len(before)} data and manifest files, median of {rounds}")
    for mode, seconds in (("plain", plain), ("noncurrent", noncurrent)):
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(ops[mode].items()))
        print(f"  {mode:<11} {seconds * 1000:8.1f} ms   files left {len(left[mode]):6d}   operations: {kinds}")
    print(f"  ratio noncurrent / plain: {noncurrent / plain:.2f}")
    print(f"  the later purge (days 0): {purge_seconds * 1000:.1f} ms; files deleted by the plain expiry: {len(before - left['plain'])}")


if __name__ == "__main__":
    main()
