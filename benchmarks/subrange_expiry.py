"""Peak memory of expiring a long history of small commits (issue 15: expiry in sub-range plans).

``python -m benchmarks.subrange_expiry --commits N [--code DIR ...]`` builds (metadata through
``Table.commit_files``, one empty file on disk per data file, ``os.fsync`` off: untimed setup) a
table of N commits of one tiny data file each, every 100th commit an overwrite of the whole table
(so expiry has files to delete), then expires all but the latest snapshot in a fresh process per
``--code`` directory (an ``airflow_snaptable`` checkout to import: compare a version before the
sub-ranges with this one on copies of the same table). Prints seconds, snapshots expired, data
files deleted and peak RSS (MB) per run.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OVERWRITE_EVERY = 100


def build(uri: str, commits: int) -> None:
    import pyarrow as pa

    from airflow_snaptable.core import Table
    from airflow_snaptable.core.native.manifest import DataFile
    from benchmarks.w2_expiry import no_fsync

    table = Table.create(uri, pa.schema([("id", pa.int64())]))
    with no_fsync():
        for c in range(commits):
            path = f"data/data-{c}.parquet"
            Path(uri, path).parent.mkdir(parents=True, exist_ok=True)
            Path(uri, path).touch()
            table.commit_files([DataFile(path, (), 1, 0)], mode="overwrite" if c % OVERWRITE_EVERY == OVERWRITE_EVERY - 1 else "append")


def expire(uri: str, max_snapshots: int | None = None) -> dict:
    """One expiry in this (fresh) process; ``max_snapshots``: the sub-range bound (code with sub-ranges only)."""
    import resource

    from airflow_snaptable.core import Table

    if max_snapshots is not None:
        from airflow_snaptable.core.lifecycle.expiry import subranges as expire_subranges

        expire_subranges.MAX_SNAPSHOTS = max_snapshots

    table = Table.open(uri)
    started = time.perf_counter()
    result = table.expire_snapshots(retain_min=1, time_retained="0 s", limit=10**9)
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "expired": len(result.expired_snapshot_ids),
        "deleted_data_files": result.deleted_data_files,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=20_000)
    parser.add_argument("--code", action="append", default=[], help="airflow_snaptable checkout to expire with")
    parser.add_argument("--max-snapshots", type=int, help="sub-range bound for code with sub-ranges")
    parser.add_argument("--expire", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.expire:
        print(json.dumps(expire(args.expire, args.max_snapshots)))
        return
    with tempfile.TemporaryDirectory() as work:
        template = os.path.join(work, "template")
        started = time.perf_counter()
        build(template, args.commits)
        print(f"built {args.commits} commits in {time.perf_counter() - started:.0f} s", flush=True)
        for n, code in enumerate(args.code or [str(ROOT)]):
            uri = os.path.join(work, f"run-{n}")
            shutil.copytree(template, uri)
            env = dict(os.environ, PYTHONPATH=f"{code}{os.pathsep}{ROOT}")
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.subrange_expiry", "--expire", uri],
                env=env, cwd=code, check=True, capture_output=True, text=True,
            ).stdout
            print(code, out.strip(), flush=True)
            shutil.rmtree(uri)


if __name__ == "__main__":
    main()
