"""A long history of small commits (issue 15: "100,000 snapshots expire in bounded memory too").

Run by ``python -m benchmarks.scale --only snapshots [--snapshots 20000 100000]`` (the default
run of benchmarks/scale.py includes it). For each size N it builds (untimed setup, ``os.fsync``
off, benchmarks/w2_expiry.py ``no_fsync``) a table of N commits through ``Table.commit_files``,
one tiny data file each (an empty file on disk), every :data:`OVERWRITE_EVERY`-th commit an
overwrite of the whole table (so the live state stays small and expiry has data files to delete),
then runs, each in a fresh interpreter (so the peak RSS is the step's own):

- everyday operations at N snapshots: open the table and read the latest snapshot; time travel to
  an old snapshot by id and by timestamp (plan its files too); list tags; the new-snapshot sensor's
  check (core/incremental.py ``find_new_snapshots``) with one new snapshot and with none;
- the lower bound of the expiry, measured in the same run: reading the metadata it must read
  once (the snapshot files of the expired range and its successor, and the delta manifests of
  snapshots 2 .. N, which name the files deleted and added back) and as many plain deletes as it makes (a scratch copy of its files, empty, deleted
  through the same ``Storage.delete_files``);
- the expiry of every snapshot but the last (``retain_min=1``).

Printed: the build's commit time for the first and the last 1,000 commits (ms/commit; targets:
flat), each step's time and peak RSS, and the expiry against its lower bound (target <= 1.5x) and
its peak RSS across sizes (target: not growing with N).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import bulk_delete_bound, peak_rss_mb

ROOT = Path(__file__).resolve().parents[1]
#: Every this many commits one overwrites the whole table.
OVERWRITE_EVERY = 1000
#: Commits timed at the start and at the end of the build.
TIMED_COMMITS = 1000


def build(uri: str, commits: int) -> dict:
    """The table, with the time of each of the first and last :data:`TIMED_COMMITS` commits."""
    import pyarrow as pa

    from airflow_snaptable.core import Table
    from airflow_snaptable.core.native.manifest import DataFile
    from benchmarks.w2_expiry import no_fsync

    table = Table.create(uri, pa.schema([("id", pa.int64())]))
    Path(uri, "data").mkdir(parents=True, exist_ok=True)
    times = []
    started = time.perf_counter()
    with no_fsync():
        for c in range(commits):
            path = f"data/data-{c}.parquet"
            Path(uri, path).touch()
            mode = "overwrite" if c % OVERWRITE_EVERY == OVERWRITE_EVERY - 1 else "append"
            began = time.perf_counter()
            table.commit_files([DataFile(path, (), 1, 0)], mode=mode)
            times.append(time.perf_counter() - began)
    head, tail = times[:TIMED_COMMITS], times[-TIMED_COMMITS:]
    return {
        "seconds": time.perf_counter() - started, "first_ms": 1000 * sum(head) / len(head),
        "last_ms": 1000 * sum(tail) / len(tail), "timed": len(head), "peak_rss_mb": peak_rss_mb(),
    }


def everyday(uri: str) -> dict:
    """Seconds of each everyday operation at this history length (first call in a fresh process)."""
    from airflow_snaptable.core import Table
    from airflow_snaptable.core.incremental import find_new_snapshots

    timings: dict[str, float] = {}
    reads: dict[str, int] = {}  # storage reads + lists + exists probes of each operation
    tables = []

    def probes() -> int:
        counts = tables[0].storage.snapshot_counts() if tables else {}
        return sum(counts.get(kind, 0) for kind in ("read", "list", "exists"))

    def timed(name: str, action):
        before, began = probes(), time.perf_counter()
        value = action()
        timings[name] = time.perf_counter() - began
        reads[name] = probes() - before
        return value

    def open_and_latest():
        tables.append(Table.open(uri))
        return tables[0].latest_snapshot()

    latest = timed("open_and_latest", open_and_latest)
    table = tables[0]
    old_id = max(1, latest.id // 10)
    old = timed("snapshot_by_id", lambda: table.snapshot(old_id))
    timed("plan_old_snapshot", lambda: len(table.scan(snapshot_id=old_id).files()))
    found = timed("snapshot_at_timestamp", lambda: table.snapshot_at(old.time_millis))
    assert found is not None and found.time_millis <= old.time_millis
    for n in range(3):
        table.create_tag(f"bench-{n}", latest.id - n)
    timed("list_tags", lambda: len(table.tags()))
    for n in range(3):
        table.delete_tag(f"bench-{n}")
    timed("sensor_one_new", lambda: find_new_snapshots(table, after_snapshot_id=latest.id - 1).found)
    timed("sensor_nothing_new", lambda: find_new_snapshots(table, after_snapshot_id=latest.id, checked_through=latest.id).found)
    return {"seconds": timings, "reads": reads, "peak_rss_mb": peak_rss_mb(), "operations": table.storage.snapshot_counts()}


def lower_bound(uri: str, scratch: str) -> dict:
    """Reading what the expiry must read, once, and as many plain deletes as it makes."""
    from airflow_snaptable.core import Table
    from airflow_snaptable.core.native.manifest import manifest_path, manifest_table
    from airflow_snaptable.core.native.snapshot import Snapshot, snapshot_path
    from airflow_snaptable.core.io.storage import Storage

    table = Table.open(uri)
    first, last = table.snapshot_manager.earliest_id(), table.snapshot_manager.latest_id()
    latest = table.snapshot(last)
    kept = {manifest_path(n) for n in table.manifest_io.names_of(latest)}
    live = {f.path for f in table.scan().files()}
    doomed = [snapshot_path(i) for i in range(first, last)]
    doomed += [rel for rel, _size, _mtime in table.storage.list_files("manifest") if rel not in kept]
    doomed += [rel for rel, _size, _mtime in table.storage.list_files("data") if rel not in live]
    for rel in doomed:
        Path(scratch, rel).parent.mkdir(parents=True, exist_ok=True)
        Path(scratch, rel).touch()
    storage = Storage.from_uri(scratch)
    started = time.perf_counter()
    entries = 0
    # The snapshot files of the range and its successor's, in bulk, parsed; then the delta manifests
    # (named by the snapshots) of every expired snapshot's successor, parsed as Arrow tables.
    for chunk_start in range(first, last + 1, 10_000):
        ids = range(chunk_start, min(chunk_start + 10_000, last + 1))
        contents = table.storage.read_many([snapshot_path(i) for i in ids])
        snapshots = [Snapshot.from_json(data) for data in contents.values()]
        manifests = [manifest_path(m) for s in snapshots if s.id > first for m in s.written_metadata["delta_manifests"]]
        read = table.storage.read_many(manifests)
        entries += sum(manifest_table(read[rel], where=rel).num_rows for rel in manifests)
    read_seconds = time.perf_counter() - started
    return bulk_delete_bound(storage, doomed, read_seconds, entries_read=entries)


def expire(uri: str) -> dict:
    """The expiry of every snapshot but the last in this (fresh) process."""
    from airflow_snaptable.core import Table

    table = Table.open(uri)
    latest = table.latest_snapshot().id
    started = time.perf_counter()
    result = table.expire_snapshots(retain_min=1, time_retained="0 s", limit=latest + 1)
    return {
        "seconds": time.perf_counter() - started, "snapshots": len(result.expired_snapshot_ids),
        "data_files": result.deleted_data_files, "manifest_files": result.deleted_manifest_files,
        "peak_rss_mb": peak_rss_mb(), "operations": table.storage.snapshot_counts(),
    }


def _in_fresh_process(function: str, *args) -> dict:
    code = f"import json, sys; from benchmarks.snapshot_history import {function}; print(json.dumps({function}(*json.loads(sys.argv[1]))))"
    done = subprocess.run([sys.executable, "-c", code, json.dumps(list(args))], capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"{function} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(sizes: list[int]) -> None:
    """Build, everyday operations, lower bound and expiry at each size; then the sizes side by side."""
    expiries = {}
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="snapshots-") as tmp:
            uri, scratch = str(Path(tmp) / "t"), str(Path(tmp) / "scratch")
            built = _in_fresh_process("build", uri, size)
            print(f"\n  {size:,} snapshots of one-file commits (every {OVERWRITE_EVERY:,}th an overwrite), built in {built['seconds']:.0f} s:")
            print(
                f"    commit time: {built['first_ms']:.2f} ms/commit (first {built['timed']:,}), "
                f"{built['last_ms']:.2f} ms/commit (last {built['timed']:,}), "
                f"last/first {built['last_ms'] / built['first_ms']:.2f}x (target: flat), peak RSS {built['peak_rss_mb']:.0f} MB",
                flush=True,
            )
            daily = _in_fresh_process("everyday", uri)
            print("    everyday operations (fresh process; storage reads+lists+exists): " + ", ".join(
                f"{k} {1000 * v:.1f} ms ({daily['reads'][k]})" for k, v in daily["seconds"].items()), flush=True)
            bound = _in_fresh_process("lower_bound", uri, scratch)
            print(
                f"    lower bound: {bound['seconds']:.2f} s (reading {size:,} snapshots and their delta manifests, "
                f"{bound['entries_read']:,} entries: {bound['read_seconds']:.2f} s; deleting {bound['files_deleted']:,} files: "
                f"{bound['delete_seconds']:.2f} s), peak RSS {bound['peak_rss_mb']:.0f} MB",
                flush=True,
            )
            done = expiries[size] = _in_fresh_process("expire", uri)
            print(
                f"    expiry of all but the last: {done['seconds']:.2f} s ({done['seconds'] / bound['seconds']:.2f}x the lower bound, "
                f"target <= 1.5x), {done['snapshots']:,} snapshots, {done['data_files']:,} data files, "
                f"{done['manifest_files']:,} metadata files, peak RSS {done['peak_rss_mb']:.0f} MB",
                flush=True,
            )
            print(f"      storage operations: {done['operations']}", flush=True)
    if len(expiries) > 1:
        sizes_seen = sorted(expiries)
        print("    expiry peak RSS by size (target: not growing): " + ", ".join(f"{n:,}: {expiries[n]['peak_rss_mb']:.0f} MB" for n in sizes_seen))
