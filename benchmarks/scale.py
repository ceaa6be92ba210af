"""Planning at scale: a table of many commits of many files; the full plan against a one-partition plan.

``python -m benchmarks.scale [--commits 1000] [--files-per-commit 1000] [--partitions 100] [--only plans|lifecycle|snapshots] [--snapshots 20000 100000]``

Builds (with ``commit_files``: metadata only, no data files) a table of ``commits`` x
``files-per-commit`` data files in ``partitions`` partitions, twice: every commit touching every
partition, and each commit one partition (a daily ingestion). Then it times, each in a fresh interpreter (so the peak RSS is the step's own):

- the full plan of the latest snapshot (every live file): the lower bound of any plan that reads
  all manifests;
- a one-partition plan (``scan(filter=[("p", "=", 3)])``); its manifests' partition bounds let it
  skip the others (core/native/partition_pruning.py). Target: <= 0.1x the full plan's time.
- a selective non-partition filter: every data file carries column statistics (core/native/column_stats.py)
  for ``id``, which increases over commits (100 ids per file); a filter on an ``id`` range holding 1%
  of the rows keeps only the files whose bounds overlap it. Targets: <= 5% of the files read, in at most
  the full plan's time (core/native/data_skipping.py).

Printed: commit time at the start and the end, the plans' times and peak RSS, and the ratios.

The lifecycle part (``--only lifecycle``; the default runs both) builds the "spread" table once
more, with an empty file on disk for every data file, and then runs, each in a fresh interpreter:

- an orphan clean (dry run, every file older than the window) of the whole table, with
  ``--orphans`` unreferenced files beside the data files, and its lower bound measured in the same
  run: listing the same tree with ``os.scandir`` and reading the manifests the in-use pass must read
  once (``--only orphans`` runs this step alone; ``--table DIR`` builds the table there, or reuses it);
- "overwrite everything" (one file replaces the table: ``commit_files(..., mode="overwrite")``);
- the lower bound of the expiry that follows, measured in the same run: deleting as many
  empty files (a scratch copy of the data and manifest files it deletes) through the same
  ``Storage.delete_files``, plus reading the manifests it must read (the deltas) once and
  parsing them as Arrow tables;
- the expiry of every snapshot but the last (``retain_min=1``), which deletes every data file; the
  overwrite deletes more than ``--max-deleted-files`` (default: core's 500,000) files, its expiry
  is a plan in parts (core/lifecycle/expiry/parts.py).

Each prints its time and peak RSS (``ru_maxrss``); the expiry's per-file memory is its peak RSS
minus an empty interpreter's (the ``baseline`` step), divided by the data files it deleted.
Target (issue 15): expiry of 1M files in <= 500 MB peak RSS and <= 1.5x its lower bound.
The snapshots part (``--only snapshots [--snapshots 20000 100000]``; the default run includes it)
builds tables of 20,000 and 100,000 one-file commits and prints the commit time of the first and
last 1,000 commits, everyday operations (open, time travel by id and by timestamp, list tags, the
new-snapshot sensor's check), and the expiry of all but the last snapshot against its lower bound,
with peak RSS at both sizes (benchmarks/snapshot_history.py). Target (issue 15): flat commits,
expiry peak RSS not growing with the snapshot count, expiry <= 1.5x its lower bound.

The Spark write path is measured by benchmarks/spark_write.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import benchmark_parser, bulk_delete_bound, peak_rss_mb

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
    from airflow_snaptable.core.native.column_stats import ColumnStats, FileStats
    from airflow_snaptable.core.native.manifest import DataFile

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
    manifests = []  # manifests read (not lists): what per-manifest bounds let a plan skip
    table.storage.on_operation = lambda kind, rel: manifests.append(rel) if kind == "read" and rel.startswith("manifest/manifest-") and not rel.startswith("manifest/manifest-list-") else None
    started = time.perf_counter()
    if which == "full":
        scan = table.scan()
    elif which == "partition":
        scan = table.scan(filter=[("p", "=", 3)])
    else:
        scan = table.scan(filter=selective_filter(total_files))
    files = len(scan.files())
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "files": files, "manifests": len(manifests), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def baseline() -> dict:
    """An interpreter that imported the engine and opened nothing: what every step's peak RSS includes."""
    import airflow_snaptable.core  # noqa: F401

    return {"peak_rss_mb": peak_rss_mb()}


def make_data_files(uri: str, orphans: int) -> dict:
    """An empty file on disk for every live data file of the latest snapshot, and ``orphans`` unreferenced ones."""
    from airflow_snaptable.core import Table

    table = Table.open(uri)
    paths = [f.path for f in table.scan().files()] + [f"data/p=0/orphan-{i}.parquet" for i in range(orphans)]
    _touch(Path(uri), paths)
    return {"files": len(paths)}


def _touch(root: Path, paths: list[str]) -> None:
    made: set[Path] = set()
    for rel in paths:
        path = root / rel
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.touch()


def orphan_clean(uri: str) -> dict:
    """A dry-run orphan clean of the whole table in this (fresh) process."""
    from airflow_snaptable.core import Table

    table = Table.open(uri)
    started = time.perf_counter()
    result = table.remove_orphan_files(older_than="0 s", dry_run=True)
    return {"seconds": time.perf_counter() - started, "orphans": result.orphan_count, "peak_rss_mb": peak_rss_mb()}


def orphan_lower_bound(uri: str) -> dict:
    """What any orphan clean of the table cannot avoid, in this (fresh) process: listing every file
    under ``data/`` and ``manifest/`` (plain ``os.scandir``, nothing kept) and reading what the in-use
    pass must read once (every snapshot's two lists, the first snapshot's manifests, every later
    snapshot's delta manifests), parsing the manifests' ``path`` column as Arrow and letting it go."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_snaptable.core import Table
    from airflow_snaptable.core.native.manifest import manifest_path

    table = Table.open(uri)
    started = time.perf_counter()
    listed, pending = 0, [os.path.join(uri, "data"), os.path.join(uri, "manifest")]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir():
                    pending.append(entry.path)
                else:
                    entry.stat()
                    listed += 1
    list_seconds = time.perf_counter() - started
    started = time.perf_counter()
    snapshots = table.snapshot_manager
    io = table.manifest_io
    entries = 0
    for snapshot_id in range(snapshots.earliest_id(), snapshots.latest_id() + 1):
        snapshot = snapshots.snapshot(snapshot_id)
        lists = io.read_lists([snapshot.base_manifest_list, snapshot.delta_manifest_list])
        names = [m.file_name for name in lists for m in lists[name]] if snapshot_id == snapshots.earliest_id() else [
            m.file_name for m in lists[snapshot.delta_manifest_list]
        ]
        for name in names:
            data = table.storage.read_bytes(manifest_path(name))
            entries += pq.ParquetFile(pa.BufferReader(data)).read(columns=["path"], use_threads=False).num_rows
    read_seconds = time.perf_counter() - started
    return {
        "seconds": list_seconds + read_seconds, "list_seconds": list_seconds, "read_seconds": read_seconds, "files_listed": listed, "entries_read": entries, "peak_rss_mb": peak_rss_mb(),
    }


def verify_table(uri: str) -> dict:
    """``Table.verify()`` of the whole table in this (fresh) process (its listing and in-use pass are the orphan clean's)."""
    from airflow_snaptable.core import Table

    table = Table.open(uri)
    started = time.perf_counter()
    result = table.verify()
    return {
        "seconds": time.perf_counter() - started, "unreferenced": len(result.unreferenced_files),
        "missing": len(result.missing_files), "peak_rss_mb": peak_rss_mb(),
    }


def orphan_step(uri: str, base_mb: float) -> None:
    """The orphan clean and its lower bound, each in a fresh interpreter, printed."""
    clean = _in_fresh_process("orphan_clean", uri)
    bound = _in_fresh_process("orphan_lower_bound", uri)
    files = bound["files_listed"]
    per_file = (clean["peak_rss_mb"] - base_mb) * 1024 * 1024 / max(files, 1)
    print(
        f"    orphan clean (dry run): {clean['seconds']:.2f} s ({clean['seconds'] / bound['seconds']:.2f}x the lower bound), "
        f"{clean['orphans']:,} orphans of {files:,} files listed, peak RSS {clean['peak_rss_mb']:.0f} MB "
        f"(target <= 500 MB at 1M files), {per_file:,.0f} bytes per listed file over the empty interpreter"
    )
    print(
        f"    orphan lower bound: {bound['seconds']:.2f} s (listing {files:,} files: {bound['list_seconds']:.2f} s; "
        f"reading {bound['entries_read']:,} manifest entries: {bound['read_seconds']:.2f} s), peak RSS {bound['peak_rss_mb']:.0f} MB"
    )
    checked = _in_fresh_process("verify_table", uri)
    print(
        f"    verify: {checked['seconds']:.2f} s, {checked['unreferenced']:,} unreferenced, {checked['missing']:,} missing, "
        f"peak RSS {checked['peak_rss_mb']:.0f} MB"
    )


def overwrite(uri: str) -> dict:
    """One file replaces the whole table (what makes every earlier file expirable)."""
    from airflow_snaptable.core import Table
    from airflow_snaptable.core.native.manifest import DataFile

    table = Table.open(uri)
    kept = "data/p=0/overwrite-0.parquet"
    _touch(Path(uri), [kept])
    started = time.perf_counter()
    table.commit_files([DataFile(kept, (0,), 100, 4096)], mode="overwrite")
    return {"seconds": time.perf_counter() - started, "peak_rss_mb": peak_rss_mb()}


def lower_bound(uri: str, scratch: str) -> dict:
    """What the expiry of every snapshot but the last cannot avoid: deleting its data and metadata
    files (as many empty files, made untimed under ``scratch``, deleted through the same
    ``Storage.delete_files``) and reading the expired snapshots' delta manifests once."""
    from airflow_snaptable.core import Table
    from airflow_snaptable.core.native.manifest import manifest_path, manifest_table
    from airflow_snaptable.core.io.storage import Storage

    table = Table.open(uri)
    snapshots = table.snapshots()
    deltas = [
        manifest_path(meta.file_name)
        for s in snapshots[1:]
        for meta in table.manifest_io.read_list(s.delta_manifest_list)
    ]
    kept = {manifest_path(n) for n in table.manifest_io.names_of(snapshots[-1])}
    metadata = [rel for rel, _size, _mtime in table.storage.list_files("manifest") if rel not in kept]
    data = [rel for rel, _size, _mtime in table.storage.list_files("data") if "/overwrite-" not in rel and "/orphan-" not in rel]
    doomed = data + metadata
    _touch(Path(scratch), doomed)
    storage = Storage.from_uri(scratch)
    started = time.perf_counter()
    contents = table.storage.read_many(deltas)
    entries = sum(manifest_table(contents[rel], where=rel).num_rows for rel in deltas)
    del contents
    read_seconds = time.perf_counter() - started
    return bulk_delete_bound(storage, doomed, read_seconds, manifests_read=len(deltas), entries_read=entries)


def expire(uri: str, max_deleted_files: int | None = None) -> dict:
    """The expiry of every snapshot but the last in this (fresh) process; ``max_deleted_files``: the
    sub-range bound past which one snapshot's deletes are a plan in parts (default: core's)."""
    from airflow_snaptable.core import Table
    from airflow_snaptable.core.lifecycle.expiry import subranges as expire_subranges

    if max_deleted_files is not None:
        expire_subranges.MAX_DELETED_FILES = max_deleted_files

    table = Table.open(uri)
    latest = table.latest_snapshot().id
    started = time.perf_counter()
    result = table.expire_snapshots(retain_min=1, time_retained="0 s", limit=latest + 1)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds, "snapshots": len(result.expired_snapshot_ids), "data_files": result.deleted_data_files,
        "manifest_files": result.deleted_manifest_files, "peak_rss_mb": peak_rss_mb(),
        "operations": table.storage.snapshot_counts(), "max_deleted_files": expire_subranges.MAX_DELETED_FILES,
    }


def build_lifecycle_table(uri: str, commits: int, files_per_commit: int, partitions: int, orphans: int) -> None:
    """The "spread" table with a file on disk for every data file (reused if ``uri`` holds one: ``--table``)."""
    if (Path(uri) / "snapshot").is_dir():
        print(f"\n  lifecycle table reused: {uri}")
        return
    started = time.perf_counter()
    _in_fresh_process("build", uri, commits, files_per_commit, partitions, "spread")
    _in_fresh_process("make_data_files", uri, orphans)
    print(f"\n  lifecycle (every commit writes every partition; built in {time.perf_counter() - started:.0f} s):")


def orphans_only(commits: int, files_per_commit: int, partitions: int, orphans: int, table: str | None) -> None:
    """``--only orphans``: the lifecycle table and the orphan step, nothing else."""
    base = _in_fresh_process("baseline")["peak_rss_mb"]
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        uri = table or str(Path(tmp) / "t")
        build_lifecycle_table(uri, commits, files_per_commit, partitions, orphans)
        print(f"    empty interpreter: peak RSS {base:.0f} MB")
        orphan_step(uri, base)


def lifecycle(commits: int, files_per_commit: int, partitions: int, orphans: int, max_deleted_files: int | None = None) -> None:
    """Orphan clean, overwrite, lower bound and expiry of one table, each step in a fresh interpreter."""
    base = _in_fresh_process("baseline")["peak_rss_mb"]
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        uri, scratch = str(Path(tmp) / "t"), str(Path(tmp) / "scratch")
        build_lifecycle_table(uri, commits, files_per_commit, partitions, orphans)
        print(f"    empty interpreter: peak RSS {base:.0f} MB")
        orphan_step(uri, base)
        written = _in_fresh_process("overwrite", uri)
        print(f"    overwrite everything: {written['seconds']:.2f} s, peak RSS {written['peak_rss_mb']:.0f} MB")
        bound = _in_fresh_process("lower_bound", uri, scratch)
        print(
            f"    lower bound: {bound['seconds']:.2f} s (reading {bound['manifests_read']:,} delta manifests, "
            f"{bound['entries_read']:,} entries: {bound['read_seconds']:.2f} s; deleting {bound['files_deleted']:,} files: "
            f"{bound['delete_seconds']:.2f} s), peak RSS {bound['peak_rss_mb']:.0f} MB"
        )
        done = _in_fresh_process("expire", uri, max_deleted_files)
        per_file = (done["peak_rss_mb"] - base) * 1024 * 1024 / max(done["data_files"], 1)
        print(
            f"    expiry: {done['seconds']:.2f} s ({done['seconds'] / bound['seconds']:.2f}x the lower bound, target <= 1.5x), "
            f"{done['snapshots']:,} snapshots, {done['data_files']:,} data files, {done['manifest_files']:,} metadata files, "
            f"peak RSS {done['peak_rss_mb']:.0f} MB (target <= 500 MB at 1M files), {per_file:,.0f} bytes per data file over the empty interpreter"
        )
        print(f"    expiry operations: {done['operations']} (MAX_DELETED_FILES {done['max_deleted_files']:,}: "
              f"a snapshot deleting more is expired as a plan in parts)")


def _in_fresh_process(function: str, *args) -> dict:
    code = f"import json, sys; from benchmarks.scale import {function}; print(json.dumps({function}(*json.loads(sys.argv[1]))))"
    done = subprocess.run([sys.executable, "-c", code, json.dumps(list(args))], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("benchmarks.scale", __doc__)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--files-per-commit", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--orphans", type=int, default=1000, help="unreferenced files beside the data files (lifecycle)")
    parser.add_argument(
        "--only", choices=("plans", "lifecycle", "orphans", "snapshots"),
        help="run only the planning, the lifecycle or the snapshots part, or of the lifecycle part only the orphan clean",
    )
    parser.add_argument("--table", help="--only orphans: build the table here, or reuse the one built there before")
    parser.add_argument("--max-deleted-files", type=int,
                        help="lifecycle: expire_subranges.MAX_DELETED_FILES in the expiry (default core's 500,000)")
    parser.add_argument(
        "--snapshots", type=int, nargs="+", default=[20_000, 100_000],
        help="history lengths of the snapshots part (benchmarks/snapshot_history.py)",
    )
    args = parser.parse_args(argv)
    if args.only in (None, "snapshots"):
        from benchmarks import snapshot_history

        print(f"Snapshots: histories of {', '.join(f'{n:,}' for n in args.snapshots)} one-file commits")
        snapshot_history.run(args.snapshots)
        if args.only == "snapshots":
            return 0
    total = args.commits * args.files_per_commit
    median = lambda runs: sorted(r["seconds"] for r in runs)[1]  # noqa: E731
    print(f"Table: {args.commits} commits x {args.files_per_commit} files = {total:,} data files in {args.partitions} partitions")
    if args.only == "orphans":
        orphans_only(args.commits, args.files_per_commit, args.partitions, args.orphans, args.table)
        return 0
    if args.only != "plans":
        lifecycle(args.commits, args.files_per_commit, args.partitions, args.orphans, args.max_deleted_files)
    if args.only == "lifecycle":
        return 0
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
        print(f"    selective / full: {median(selective) / median(full):.3f}x (target <= 1x); manifests read: {selective[0]['manifests']} of {full[0]['manifests']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
