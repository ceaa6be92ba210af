"""W2: snapshot expiry with file deletion (issue #3's benchmark).

After W1 (``appends`` small appends over 10 partitions, then one full overwrite)
every system expires its history down to the last ``retain`` snapshots and
deletes what that frees:

- ours: ``Table.open(uri).expire_snapshots(retain_min=10, time_retained="0 s", limit=<large>)``
  (the option ``snapshot.expire.limit`` defaults to 50, so the limit is passed);
- deltalake: ``DeltaTable(path)`` then ``vacuum(retention_hours=0,
  enforce_retention_duration=False, dry_run=False)`` and ``cleanup_metadata()``.
  Delta has no "keep the last N versions" rule in that call: retention 0 deletes
  every file the latest version does not use, so it does the work of ours with
  ``retain_min=1``, and both are shown. ``vacuum(..., keep_versions=<last 10>)``
  is Delta's equivalent of ours' ``retain_min=10`` and is shown too;
- pyiceberg: ``catalog.load_table(...)`` then
  ``table.maintenance.expire_snapshots().older_than(<time of the 10th newest>).commit()``.
  pyiceberg 0.12 only removes the snapshots from the table metadata (one new
  metadata.json); it deletes no data file, manifest or manifest list. The files
  it leaves behind are counted and printed.

Every timed run works on a fresh copy of the W1 table (ours, deltalake: a
directory copy; pyiceberg: the W1 metadata file registered under a new name,
which is safe because its expiry deletes nothing), ``repeats`` times, the
systems in rotated order; the median is reported. The open call is timed
separately from the expiry and the ratios use open + expiry (what a
maintenance task does), with the expiry-only ratios next to them.

For ours it also counts the storage operations of the expiry against a lower
bound (see :func:`lower_bound`), and checks that the cost is "flat in n":
expiring the same ``flat_k`` oldest snapshots of a history of ``flat_n[0]``
and of ``flat_n[1]`` snapshots (10-row appends into one partition, every
``overwrite_every``-th commit an overwrite, so expiry deletes data files too).

Validation after every expiry: ours ``verify().ok`` (no referenced file
missing, no unreferenced file left) and the latest snapshot's row count
unchanged; the peers: the latest row count unchanged (and pyiceberg: ``retain``
snapshots left, more only if commit times tie at millisecond resolution).

Setup is untimed: the W1 tables and the long histories are built with
``os.fsync`` disabled (:func:`no_fsync`; ours makes ~6 fsyncs per commit, which
on a shared disk would take most of the time budget), and ``os.sync()`` runs
before anything is timed, so the timed runs find their files at rest on disk.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from benchmarks.common import (
    OP_KINDS,
    BenchmarkError,
    DataGen,
    RunContext,
    WarningLog,
    capture_warnings,
    collect_garbage,
    fmt_ms,
    fmt_num,
    fmt_ratio,
    frozen_heap,
    heading,
    machine_load,
    describe_load,
    median,
    ratio,
    render_table,
)
from benchmarks.systems import OursHandle
from benchmarks.w1_commits import W1Config, build_w1_tables

NAME = "w2"
DESCRIPTION = (
    "snapshot expiry: after W1, expire all but the last 10 snapshots with file deletion; "
    "ops vs lower bound; expiry cost at history length n vs 10n (ours)"
)

#: A limit larger than any history here (snapshot.expire.limit defaults to 50).
LARGE_LIMIT = 1_000_000
#: Targets.
TARGET_DELTA = 0.5  # deltalake/ours >= 0.5, i.e. ours <= 2x deltalake
TARGET_ICEBERG = 20.0  # pyiceberg/ours >= 20
TARGET_OPS = 1.2  # ours' operations <= 1.2x the lower bound
FLAT_LIMIT = 1.25  # time(10n)/time(n) above this is "grows"

LOWER_BOUND_FORMULA = (
    "expiring snapshots e..e+k-1 (k of them; f = e+k is the first one kept):\n"
    "    LB_reads   = (k+1) snapshot files (e..f)\n"
    "               + sum over s = e+1..f of |delta manifests of s|\n"
    "               + 4 manifest lists (base and delta of e and of f)\n"
    "    LB_deletes = files that must go = data files no kept snapshot references\n"
    "               + manifests and manifest lists only expired snapshots reference\n"
    "               + k snapshot files\n"
    "    LB_other   = 0 (writes, lists, exists: the plan file, the EARLIEST hint and the probes are overhead)\n"
    "    LB = LB_reads + LB_deletes;  ratio = all counted operations / LB\n"
    "  Why these reads: a file deleted at snapshot s is unused once s-1 expires, so the delta manifests of\n"
    "  e+1..f name the data files to delete; each snapshot file names its delta manifests and the metadata\n"
    "  its commit wrote (lists, merged manifests), so with e's lists they give every manifest the expired\n"
    "  snapshots use, and f's lists those still used.\n"
    "  LB_deletes is measured (files gone from the directory), and verify() afterwards proves it is exactly\n"
    "  the set that had to go (nothing unreferenced left, nothing referenced missing)."
)


@dataclass(frozen=True)
class W2Config:
    appends: int = 200
    rows_per_append: int = 1000
    partitions: int = 10
    overwrite_rows: int = 1000
    retain: int = 10
    #: Timed runs per system (each on a fresh copy of the W1 table).
    repeats: int = 3
    #: Flat in n: expire flat_k snapshots from the oldest end at history lengths flat_n.
    flat_k: int = 100
    flat_n: tuple[int, int] = (500, 5000)
    flat_rounds: int = 3
    history_rows: int = 10
    overwrite_every: int = 10
    seed: int = 42

    @classmethod
    def for_context(cls, ctx: RunContext) -> "W2Config":
        config = cls(appends=50, repeats=2, flat_n=(300, 1500), flat_rounds=2) if ctx.quick else cls()
        config = replace(config, seed=ctx.seed)
        if ctx.overrides.get("appends") is not None:
            config = replace(config, appends=ctx.overrides["appends"])
        if ctx.overrides.get("repeats") is not None:
            config = replace(config, repeats=ctx.overrides["repeats"])
        config.check()
        return config

    def check(self) -> None:
        if self.repeats < 1:
            raise BenchmarkError(f"W2 needs at least one timed run per system; got repeats={self.repeats}")
        if self.appends + 1 <= self.retain:
            raise BenchmarkError(f"W2 needs more than {self.retain} snapshots after W1; got {self.appends} appends")
        small, large = self.flat_n
        if small - self.flat_k * self.flat_rounds < self.retain:
            raise BenchmarkError(
                f"flat in n: {self.flat_rounds} rounds of {self.flat_k} from a history of {small} would reach the {self.retain} kept"
            )
        if large <= small:
            raise BenchmarkError(f"flat in n: the long history ({large}) must be longer than the short one ({small})")

    def w1(self) -> W1Config:
        return W1Config(
            appends=self.appends,
            rows_per_append=self.rows_per_append,
            partitions=self.partitions,
            overwrite_rows=self.overwrite_rows,
            history_commits=0,
            seed=self.seed,
        )


@contextlib.contextmanager
def no_fsync():
    """Make os.fsync/os.fdatasync no-ops: for building tables (untimed) on a loaded disk only.

    Building is setup; on a shared machine ours' 6 fsyncs per commit (deltalake and
    pyiceberg make none from Python) would take most of W2's time budget. Every
    timed expiry runs with the real calls.
    """
    real = {name: getattr(os, name) for name in ("fsync", "fdatasync") if hasattr(os, name)}
    try:
        for name in real:
            setattr(os, name, lambda fd: None)
        yield
    finally:
        for name, fn in real.items():
            setattr(os, name, fn)


# -- files on disk ------------------------------------------------------------------------


def inventory(root: str | Path) -> dict[str, int]:
    """Every file under ``root``: relative path -> size."""
    out: dict[str, int] = {}
    root = str(root)
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            try:
                out[os.path.relpath(full, root)] = os.path.getsize(full)
            except FileNotFoundError:
                continue
    return out


def _ours_kind(rel: str) -> str:
    head, _, name = rel.partition("/")
    if head == "data":
        return "data files"
    if head == "manifest":
        return "manifest lists" if name.startswith("manifest-list-") else "manifests"
    if head == "snapshot" and name.startswith("snapshot-"):
        return "snapshot files"
    return "other"


def _delta_kind(rel: str) -> str:
    if rel.startswith("_delta_log/"):
        return "log files"
    return "data files" if rel.endswith(".parquet") else "other"


def _iceberg_kind(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    if "/data/" in f"/{rel}":
        return "data files"
    if name.endswith(".metadata.json"):
        return "metadata.json"
    if name.startswith("snap-"):
        return "manifest lists"
    if name.endswith(".avro"):
        return "manifests"
    return "other"


def diff_files(before: dict[str, int], after: dict[str, int], kind: Callable[[str], str]) -> dict[str, Any]:
    gone = [p for p in before if p not in after]
    new = [p for p in after if p not in before]
    by_kind: dict[str, int] = {}
    for p in gone:
        by_kind[kind(p)] = by_kind.get(kind(p), 0) + 1
    new_kind: dict[str, int] = {}
    for p in new:
        new_kind[kind(p)] = new_kind.get(kind(p), 0) + 1
    return {
        "deleted_files": len(gone),
        "deleted_bytes": sum(before[p] for p in gone),
        "deleted_by_kind": by_kind,
        "new_files": len(new),
        "new_by_kind": new_kind,
    }


# -- ours ---------------------------------------------------------------------------------


def lower_bound(uri: str, first: int, fence: int) -> dict[str, int]:
    """The reads part of the lower bound for expiring ``first .. fence-1`` (see LOWER_BOUND_FORMULA).

    Counted on a separate, untimed Table object, before the expiry.
    """
    from airflow_snaptable.core import Table

    table = Table.open(uri)
    snapshots, manifests = table.snapshot_manager, table.manifest_io
    delta_manifests = 0
    for snapshot_id in range(first + 1, fence + 1):
        delta_manifests += len(manifests.read_list(snapshots.snapshot(snapshot_id).delta_manifest_list))
    k = fence - first
    return {
        "k": k,
        "snapshot_files": k + 1,
        "lists": 4,
        "delta_manifests": delta_manifests,
        "reads": (k + 1) + delta_manifests + 4,
    }


def ours_rows(uri: str) -> int:
    from airflow_snaptable.core import Table

    return Table.open(uri).scan(columns=["id"]).to_arrow().num_rows


def ours_latest_and_earliest(uri: str) -> tuple[int, int]:
    from airflow_snaptable.core import Table

    sm = Table.open(uri).snapshot_manager
    return sm.latest_id(), sm.earliest_id()


def run_ours_expiry(uri: str, label: str, expected_rows: int, expected_k: int, lb_reads: int, **kwargs) -> dict[str, Any]:
    """Open ``uri``, expire with ``kwargs`` (timed), count operations, check the result."""
    from airflow_snaptable.core import Table

    before = inventory(uri)
    collect_garbage()
    t0 = time.perf_counter()
    table = Table.open(uri)
    t1 = time.perf_counter()
    table.storage.reset_counts()
    t2 = time.perf_counter()
    result = table.expire_snapshots(**kwargs)
    t3 = time.perf_counter()
    ops = {kind: int(table.storage.counts.get(kind, 0)) for kind in OP_KINDS}
    ops["total"] = sum(ops.values())
    files = diff_files(before, inventory(uri), _ours_kind)
    if len(result.expired_snapshot_ids) != expected_k:
        raise BenchmarkError(f"ours {label}: expired {len(result.expired_snapshot_ids)} snapshots, expected {expected_k}")
    v0 = time.perf_counter()
    check = Table.open(uri).verify()
    verify_s = time.perf_counter() - v0
    if not check.ok:
        raise BenchmarkError(
            f"ours {label}: verify() failed after expiry: {len(check.missing_files)} missing, "
            f"{len(check.unreferenced_files)} unreferenced (first: {(check.missing_files or check.unreferenced_files)[:1]})"
        )
    rows = ours_rows(uri)
    if rows != expected_rows:
        raise BenchmarkError(f"ours {label}: latest snapshot has {rows} rows after expiry, expected {expected_rows}")
    lb_deletes = files["deleted_files"]
    lb = lb_reads + lb_deletes
    claimed = {
        "data files": result.deleted_data_files,
        "manifests + lists": result.deleted_manifest_files,
        "snapshot files": result.deleted_snapshot_files,
    }
    seen = {
        "data files": files["deleted_by_kind"].get("data files", 0),
        "manifests + lists": files["deleted_by_kind"].get("manifests", 0) + files["deleted_by_kind"].get("manifest lists", 0),
        "snapshot files": files["deleted_by_kind"].get("snapshot files", 0),
    }
    return {
        "open_ms": (t1 - t0) * 1000,
        "expire_ms": (t3 - t2) * 1000,
        "total_ms": (t1 - t0 + t3 - t2) * 1000,
        "expired": len(result.expired_snapshot_ids),
        "expired_range": [result.earliest_before, result.earliest_after],
        "ops": ops,
        "files": files,
        "result_bytes_freed": result.bytes_freed,
        "result_counts": claimed,
        "result_matches_disk": claimed == seen,
        "lower_bound": {"reads": lb_reads, "deletes": lb_deletes, "total": lb},
        "ops_over_lb": ratio(ops["total"], lb),
        "reads_over_lb": ratio(ops["read"], lb_reads),
        "deletes_over_lb": ratio(ops["delete"], lb_deletes),
        "rows_after": rows,
        "verify_ok": True,
        "verify_s": verify_s,
    }


# -- deltalake ------------------------------------------------------------------------------


def run_delta_expiry(path: str, expected_rows: int, keep_last: int | None) -> dict[str, Any]:
    from deltalake import DeltaTable

    before = inventory(path)
    collect_garbage()
    t0 = time.perf_counter()
    table = DeltaTable(path)
    t1 = time.perf_counter()
    version = table.version()
    keep = list(range(version - keep_last + 1, version + 1)) if keep_last else None
    t2 = time.perf_counter()
    if keep is None:
        vacuumed = table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    else:
        vacuumed = table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, keep_versions=keep)
    t3 = time.perf_counter()
    table.cleanup_metadata()
    t4 = time.perf_counter()
    after_vacuum_version = DeltaTable(path).version()
    files = diff_files(before, inventory(path), _delta_kind)
    rows = DeltaTable(path).to_pyarrow_dataset().count_rows()
    if rows != expected_rows:
        raise BenchmarkError(f"deltalake: latest version has {rows} rows after vacuum, expected {expected_rows}")
    readable_oldest_kept = None
    if keep:
        # The oldest kept version must still be readable (its files were kept).
        readable_oldest_kept = DeltaTable(path, version=keep[0]).to_pyarrow_dataset().count_rows()
    return {
        "open_ms": (t1 - t0) * 1000,
        "vacuum_ms": (t3 - t2) * 1000,
        "cleanup_ms": (t4 - t3) * 1000,
        "expire_ms": (t4 - t2) * 1000,
        "total_ms": (t1 - t0 + t4 - t2) * 1000,
        "version_before": version,
        "version_after": after_vacuum_version,
        "vacuum_returned": len(vacuumed),
        "keep_versions": [keep[0], keep[-1]] if keep else None,
        "oldest_kept_rows": readable_oldest_kept,
        "files": files,
        "log_files_after": sum(1 for p in inventory(os.path.join(path, "_delta_log"))),
        "log_files_before_last_checkpoint": _delta_log_older_than_checkpoint(path),
        "rows_after": rows,
    }


def _delta_log_older_than_checkpoint(path: str) -> int | None:
    """Log files of versions below the last checkpoint (what cleanup_metadata may delete once they are old enough)."""
    import json

    log = os.path.join(path, "_delta_log")
    try:
        with open(os.path.join(log, "_last_checkpoint")) as f:
            last = int(json.load(f)["version"])
    except (OSError, ValueError, KeyError):
        return None
    count = 0
    for name in os.listdir(log):
        stem = name.split(".", 1)[0]
        if stem.isdigit() and int(stem) < last:
            count += 1
    return count


# -- pyiceberg ------------------------------------------------------------------------------


def run_iceberg_expiry(catalog, identifier: str, expected_rows: int, retain: int, how: str) -> dict[str, Any]:
    """Load ``identifier`` (a registered copy of the W1 table) and expire all but ``retain`` snapshots (timed)."""
    table_dir = catalog.load_table(identifier).metadata.location.removeprefix("file://")
    before = inventory(table_dir)
    collect_garbage()
    t0 = time.perf_counter()
    table = catalog.load_table(identifier)
    t1 = time.perf_counter()
    t2 = time.perf_counter()
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)
    expire = table.maintenance.expire_snapshots()
    if how == "older_than":
        cutoff = snapshots[-retain].timestamp_ms
        expire = expire.older_than(datetime.fromtimestamp(cutoff / 1000, tz=timezone.utc))
    else:
        expire = expire.by_ids([s.snapshot_id for s in snapshots[:-retain]])
    expire.commit()
    t3 = time.perf_counter()
    files = diff_files(before, inventory(table_dir), _iceberg_kind)
    reloaded = catalog.load_table(identifier)
    left = len(reloaded.metadata.snapshots)
    rows = reloaded.scan(selected_fields=("id",)).to_arrow().num_rows
    if rows != expected_rows:
        raise BenchmarkError(f"pyiceberg: latest snapshot has {rows} rows after expiry, expected {expected_rows}")
    if left < retain or (how == "by_ids" and left != retain):
        raise BenchmarkError(f"pyiceberg: {left} snapshots left after expiry, expected {retain}")
    return {
        "open_ms": (t1 - t0) * 1000,
        "expire_ms": (t3 - t2) * 1000,
        "total_ms": (t1 - t0 + t3 - t2) * 1000,
        "snapshots_before": len(snapshots),
        "snapshots_after": left,
        "expired": len(snapshots) - left,
        "files": files,
        "rows_after": rows,
    }


def iceberg_left_behind(catalog, identifier: str) -> dict[str, Any]:
    """Files under the table that no snapshot still in the metadata references (what expiry could have deleted)."""
    table = catalog.load_table(identifier)
    io = table.io
    used: set[str] = set()
    for snapshot in table.metadata.snapshots:
        used.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            used.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                used.add(entry.data_file.file_path)
    used = {u.removeprefix("file://") for u in used}
    table_dir = table.metadata.location.removeprefix("file://")
    out: dict[str, Any] = {"by_kind": {}, "files": 0, "bytes": 0}
    for rel, size in inventory(table_dir).items():
        kind = _iceberg_kind(rel)
        if kind == "metadata.json" or os.path.join(table_dir, rel) in used:
            continue
        out["by_kind"][kind] = out["by_kind"].get(kind, 0) + 1
        out["files"] += 1
        out["bytes"] += size
    out["metadata_json_files"] = sum(1 for rel in inventory(table_dir) if rel.endswith(".metadata.json"))
    return out


# -- flat in n (ours) -------------------------------------------------------------------------


def build_history(ctx: RunContext, directory: Path, config: W2Config) -> dict[str, Any]:
    """One table with flat_n[1] commits; a copy taken when it had flat_n[0]. Returns paths and row counts."""
    small, large = config.flat_n
    handle = OursHandle(directory, name=f"n{large}", options={"file.compression": "none"})
    gen = DataGen(config.seed + 104729, partitions=1)  # all rows in partition p=0: one data file per commit
    rows = 0
    small_uri = str(directory / f"n{small}")
    started = time.perf_counter()
    with frozen_heap(), no_fsync():
        for n in range(1, large + 1):
            batch = gen.batch(config.history_rows)
            if n % config.overwrite_every == 0:
                handle.overwrite(batch)
                rows = batch.num_rows
            else:
                handle.append(batch)
                rows += batch.num_rows
            if handle.last_commit_id() != n:
                raise BenchmarkError(f"ours: history commit {n} got snapshot id {handle.last_commit_id()}")
            if n == small:
                shutil.copytree(handle.uri, small_uri)
                small_rows = rows
            if n % 1000 == 0:
                ctx.log(f"ours: history at {n}/{large} commits")
    if handle.last_snapshot.total_record_count != rows:
        raise BenchmarkError(f"ours: history table says {handle.last_snapshot.total_record_count} rows, expected {rows}")
    return {
        "tables": {small: (small_uri, small_rows), large: (handle.uri, rows)},
        "build_s": time.perf_counter() - started,
    }


def flat_in_n(ctx: RunContext, config: W2Config) -> dict[str, Any]:
    small, large = config.flat_n
    ctx.log(f"ours: building histories of {small} and {large} snapshots ...")
    built = build_history(ctx, ctx.workdir(NAME, "flat"), config)
    os.sync()  # built without fsync: let the files reach the disk before anything is timed
    runs: dict[int, list[dict[str, Any]]] = {small: [], large: []}
    started = time.perf_counter()
    order = [small, large]
    with frozen_heap():
        for r in range(config.flat_rounds):
            for n in order[r % 2 :] + order[: r % 2]:
                uri, rows = built["tables"][n]
                latest, earliest = ours_latest_and_earliest(uri)
                lb = lower_bound(uri, earliest, earliest + config.flat_k)
                run = run_ours_expiry(
                    uri,
                    f"n={n} round {r + 1}",
                    rows,
                    config.flat_k,
                    lb["reads"],
                    retain_min=config.retain,
                    time_retained="0 s",
                    limit=config.flat_k,
                )
                run["history"] = latest - earliest + 1
                run["lb_parts"] = lb
                runs[n].append(run)
                ctx.log(f"ours: n={n} round {r + 1}: expired {run['expired']} in {run['expire_ms']:.1f} ms, {run['ops']['total']} ops")
    out: dict[str, Any] = {"k": config.flat_k, "n": [small, large], "build_s": built["build_s"], "expiry_wall_s": time.perf_counter() - started}
    for n, items in runs.items():
        out[str(n)] = {
            "runs": items,
            "expire_ms": [i["expire_ms"] for i in items],
            "median_expire_ms": median([i["expire_ms"] for i in items]),
            "median_total_ms": median([i["total_ms"] for i in items]),
            "ops_total": [i["ops"]["total"] for i in items],
            "mean_ops": sum(i["ops"]["total"] for i in items) / len(items),
            "mean_ops_over_lb": sum(i["ops_over_lb"] for i in items) / len(items),
        }
    out["time_ratio"] = ratio(out[str(large)]["median_expire_ms"], out[str(small)]["median_expire_ms"])
    out["ops_ratio"] = ratio(out[str(large)]["mean_ops"], out[str(small)]["mean_ops"])
    # Paired: each round's large/small ratio (timed back to back), then the median.
    pairs = [ratio(b["expire_ms"], a["expire_ms"]) for a, b in zip(runs[small], runs[large])]
    out["paired_ratios"] = pairs
    out["paired_ratio_median"] = median(pairs)
    # Best of the rounds: the run least disturbed by other processes.
    out["min_ratio"] = ratio(min(out[str(large)]["expire_ms"]), min(out[str(small)]["expire_ms"]))
    out["verify_s"] = {str(n): [i["verify_s"] for i in items] for n, items in runs.items()}
    return out


# -- the workload ------------------------------------------------------------------------


def _summary(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "n": len(items),
        "open_ms": median([i["open_ms"] for i in items]),
        "expire_ms": median([i["expire_ms"] for i in items]),
        "total_ms": median([i["total_ms"] for i in items]),
        "expire_ms_all": [i["expire_ms"] for i in items],
        "total_ms_all": [i["total_ms"] for i in items],
    }


def run(ctx: RunContext) -> dict[str, Any]:
    config = W2Config.for_context(ctx)
    sequential = ctx.overrides.get("order") == "sequential"
    build = []
    if "ours" in ctx.systems:
        build.append("ours")
    if "delta" in ctx.systems or "delta-open" in ctx.systems:
        build.append("delta")
    if "iceberg" in ctx.systems:
        build.append("iceberg")
    result: dict[str, Any] = {"workload": NAME, "config": asdict(config), "variants": {}, "lower_bound_formula": LOWER_BOUND_FORMULA}
    result["load_start"] = machine_load()

    ctx.log(f"W2: building the W1 tables ({', '.join(build)}) ...")
    started = time.perf_counter()
    w1 = config.w1()
    with no_fsync():
        runs = build_w1_tables(build, {s: ctx.workdir(NAME, "w1", s) for s in build}, w1, ctx=ctx, interleave=False)
    result["w1_build_s"] = time.perf_counter() - started
    expected_rows = config.overwrite_rows

    copies = ctx.workdir(NAME, "copies")
    #: (name, prepare(rep) -> target, run(target, rep) -> figures)
    variants: list[tuple[str, Callable[[int], str], Callable[[str, int], dict[str, Any]]]] = []
    warnings: dict[str, WarningLog] = {}

    if "ours" in runs:
        source = runs["ours"].handle.uri
        latest, earliest = ours_latest_and_earliest(source)
        k10 = latest - config.retain + 1 - earliest
        k1 = latest - earliest
        lb10 = lower_bound(source, earliest, earliest + k10)
        lb1 = lower_bound(source, earliest, earliest + k1)
        result["ours_snapshots"] = latest - earliest + 1
        result["lb_parts"] = {"ours": lb10, "ours-retain1": lb1}

        def ours_copy(tag: str) -> Callable[[int], str]:
            def prepare(rep: int) -> str:
                dst = copies / f"{tag}-{rep}"
                shutil.copytree(source, dst)
                return str(dst)

            return prepare

        def ours_run(retain: int, k: int, lb: dict, tag: str) -> Callable[[str, int], dict[str, Any]]:
            return lambda dst, rep: run_ours_expiry(
                dst, f"{tag} run {rep + 1}", expected_rows, k, lb["reads"], retain_min=retain, time_retained="0 s", limit=LARGE_LIMIT
            )

        variants.append(("ours", ours_copy("ours"), ours_run(config.retain, k10, lb10, "ours")))
        variants.append(("ours-retain1", ours_copy("ours-retain1"), ours_run(1, k1, lb1, "ours-retain1")))

    if "delta" in runs:
        delta_source = runs["delta"].handle.path

        def delta_copy(tag: str) -> Callable[[int], str]:
            def prepare(rep: int) -> str:
                dst = copies / f"{tag}-{rep}"
                shutil.copytree(delta_source, dst)
                return str(dst)

            return prepare

        variants.append(("delta", delta_copy("delta"), lambda dst, rep: run_delta_expiry(dst, expected_rows, None)))
        variants.append(("delta-keep", delta_copy("delta-keep"), lambda dst, rep: run_delta_expiry(dst, expected_rows, config.retain)))

    if "iceberg" in runs:
        ice = runs["iceberg"].handle
        ice_location = ice.catalog.load_table(ice.identifier).metadata_location

        def ice_register(how: str) -> Callable[[int], str]:
            def prepare(rep: int) -> str:
                identifier = f"bench.w2_{how}_{rep}"
                ice.catalog.register_table(identifier, ice_location)
                return identifier

            return prepare

        def ice_run(how: str) -> Callable[[str, int], dict[str, Any]]:
            return lambda identifier, rep: run_iceberg_expiry(ice.catalog, identifier, expected_rows, config.retain, how)

        variants.append(("iceberg", ice_register("older_than"), ice_run("older_than")))

    measured: dict[str, list[dict[str, Any]]] = {name: [] for name, _prep, _fn in variants}
    runs = None  # noqa: F841 - drop the W1 run objects (their handles stay reachable through the closures)
    # Every copy first, then one os.sync(): the timed runs then find their files at rest
    # on disk (the W1 tables were built without fsync), not as dirty pages being written back.
    ctx.log("W2: copying the W1 tables for the timed runs ...")
    targets = {(name, rep): prep(rep) for name, prep, _fn in variants for rep in range(config.repeats)}
    if "iceberg" in measured:
        by_ids_target = ice_register("by_ids")(0)
    os.sync()
    collect_garbage(3)
    result["load_timed_start"] = machine_load()
    ctx.log(f"W2: {config.repeats} timed expiry runs per system ({'sequential' if sequential else 'rotated'}) ...")
    with frozen_heap():
        if sequential:
            schedule = [(name, fn, rep) for name, _prep, fn in variants for rep in range(config.repeats)]
        else:
            schedule = []
            for rep in range(config.repeats):
                k = rep % len(variants)
                schedule.extend((name, fn, rep) for name, _prep, fn in variants[k:] + variants[:k])
        for name, fn, rep in schedule:
            log = warnings.setdefault(name, WarningLog())
            with capture_warnings(log):
                item = fn(targets[(name, rep)], rep)
            measured[name].append(item)
            ctx.log(f"{name} run {rep + 1}: open {item['open_ms']:.1f} ms + expiry {item['expire_ms']:.1f} ms")
        if "iceberg" in measured:
            # pyiceberg's other API (by_ids) for the same expiry: one run, informative.
            with capture_warnings(warnings.setdefault("iceberg-by-ids", WarningLog())):
                measured["iceberg-by-ids"] = [ice_run("by_ids")(by_ids_target, 0)]
    result["load_timed_end"] = machine_load()

    for name, items in measured.items():
        summary = _summary(items)
        summary["runs"] = items
        summary["warnings"] = warnings.get(name, WarningLog()).to_list()
        result["variants"][name] = summary
    if "iceberg" in measured:
        result["variants"]["iceberg"]["left_behind"] = iceberg_left_behind(ice.catalog, "bench.w2_older_than_0")

    ours = result["variants"].get("ours")
    ratios: dict[str, Any] = {}
    if ours:
        for peer, target in (("delta", TARGET_DELTA), ("iceberg", TARGET_ICEBERG)):
            other = result["variants"].get(peer)
            if other:
                ratios[f"{peer}/ours"] = {
                    "total": ratio(other["total_ms"], ours["total_ms"]),
                    "expire": ratio(other["expire_ms"], ours["expire_ms"]),
                    "target": target,
                    "met": bool(ratio(other["total_ms"], ours["total_ms"]) >= target),
                }
        if "delta-keep" in result["variants"]:
            other = result["variants"]["delta-keep"]
            ratios["delta-keep/ours"] = {
                "total": ratio(other["total_ms"], ours["total_ms"]),
                "expire": ratio(other["expire_ms"], ours["expire_ms"]),
            }
        if "delta" in result["variants"] and "ours-retain1" in result["variants"]:
            other, mine = result["variants"]["delta"], result["variants"]["ours-retain1"]
            ratios["delta/ours-retain1"] = {
                "total": ratio(other["total_ms"], mine["total_ms"]),
                "expire": ratio(other["expire_ms"], mine["expire_ms"]),
            }
    result["ratios"] = ratios

    if "ours" in ctx.systems and not ctx.overrides.get("skip_flat"):
        collect_garbage(3)
        result["flat"] = flat_in_n(ctx, config)
    result["load_end"] = machine_load()
    result["w2_wall_s"] = time.perf_counter() - started
    return result


# -- report --------------------------------------------------------------------------------

_LABELS = {
    "ours": "snaptable (ours), retain 10",
    "ours-retain1": "snaptable (ours), retain 1",
    "delta": "deltalake vacuum(0 h) + cleanup_metadata",
    "delta-keep": "deltalake vacuum(0 h, keep_versions=last 10) + cleanup",
    "iceberg": "pyiceberg expire_snapshots().older_than()",
    "iceberg-by-ids": "pyiceberg expire_snapshots().by_ids()",
}
_KINDS = ("data files", "manifests", "manifest lists", "snapshot files", "log files", "metadata.json", "other")


def _kinds_text(counts: dict[str, int]) -> str:
    parts = [f"{counts[k]:,} {k}" for k in _KINDS if counts.get(k)]
    return ", ".join(parts) or "nothing"


def render(result: dict[str, Any]) -> str:
    config = result["config"]
    variants = result["variants"]
    out = [
        heading(
            f"W2 expiry: after W1 ({config['appends']} appends x {config['rows_per_append']:,} rows over {config['partitions']} partitions "
            f"+ 1 overwrite), expire all but the last {config['retain']} snapshots and delete their files"
        )
    ]
    out.append(
        f"\n  W1 tables built in {result['w1_build_s']:.1f} s (untimed; fsync off while building, os.sync() before timing). Timed: {config['repeats']} runs per row, each on a fresh copy of the W1 "
        "table, rows rotated; medians. open = Table.open / DeltaTable(path) / catalog.load_table."
    )
    out.append(
        f"  machine: {describe_load(result['load_timed_start'])} before the timed runs, {describe_load(result['load_timed_end'])} after"
    )
    rows = []
    for name in ("ours", "ours-retain1", "delta", "delta-keep", "iceberg", "iceberg-by-ids"):
        v = variants.get(name)
        if not v:
            continue
        first = v["runs"][0]
        expired = first.get("expired")
        if name.startswith("delta"):
            expired = f"v{first['version_before']}: all" if name == "delta" else f"keeps v{first['keep_versions'][0]}..{first['keep_versions'][1]}"
        rows.append(
            [
                _LABELS[name],
                v["n"],
                expired,
                fmt_ms(v["open_ms"]),
                fmt_ms(v["expire_ms"]),
                fmt_ms(v["total_ms"]),
                " / ".join(fmt_ms(x, 0) for x in v["total_ms_all"]),
                fmt_num(first["files"]["deleted_files"]),
                f"{first['files']['deleted_bytes'] / 1e6:.2f}",
                first["rows_after"],
            ]
        )
    out.append("\nTime, ms (median of the runs)")
    out.append(
        render_table(
            ["system / call", "runs", "expired", "open", "expiry", "open+expiry", "each run", "files deleted", "MB deleted", "rows after"],
            rows,
            align="lrrrrrrrrr",
        )
    )

    ratios = result.get("ratios", {})
    if ratios:
        rows = []
        if "delta/ours" in ratios:
            r = ratios["delta/ours"]
            rows.append(
                [
                    "deltalake vacuum(0 h) / ours retain 10 (as specified)",
                    fmt_ratio(r["total"]),
                    fmt_ratio(r["expire"]),
                    ">= 0.50 (ours <= 2x deltalake)",
                    "MET" if r["met"] else "MISSED",
                ]
            )
        if "delta/ours-retain1" in ratios:
            r = ratios["delta/ours-retain1"]
            rows.append(["deltalake vacuum(0 h) / ours retain 1 (same files deleted)", fmt_ratio(r["total"]), fmt_ratio(r["expire"]), "", ""])
        if "delta-keep/ours" in ratios:
            r = ratios["delta-keep/ours"]
            rows.append(["deltalake keep_versions=last 10 / ours retain 10 (same states kept)", fmt_ratio(r["total"]), fmt_ratio(r["expire"]), "", ""])
        if "iceberg/ours" in ratios:
            r = ratios["iceberg/ours"]
            rows.append(
                [
                    "pyiceberg older_than / ours retain 10",
                    fmt_ratio(r["total"]),
                    fmt_ratio(r["expire"]),
                    ">= 20.00 (ours 20x faster)",
                    "MET" if r["met"] else "MISSED",
                ]
            )
        out.append("\nRatios peer / ours (> 1 means ours is faster)")
        out.append(render_table(["ratio", "open+expiry", "expiry only", "target", "verdict"], rows, align="lrrll"))

    rows = []
    for name in ("ours", "ours-retain1", "delta", "delta-keep", "iceberg"):
        v = variants.get(name)
        if not v:
            continue
        files = v["runs"][0]["files"]
        rows.append([_LABELS[name], _kinds_text(files["deleted_by_kind"]), _kinds_text(files["new_by_kind"])])
    out.append("\nWhat each deleted (first run; files gone from / new in the table directory)")
    out.append(render_table(["system / call", "deleted", "written"], rows, align="lll"))

    ours = variants.get("ours")
    if ours:
        lbp = result["lb_parts"]["ours"]
        out.append(
            f"\nStorage operations of ours' expiry (k = {lbp['k']} snapshots of {result['ours_snapshots']}; counted after Table.open) "
            "vs the lower bound"
        )
        out.append("  " + LOWER_BOUND_FORMULA.replace("\n", "\n  "))
        rows = []
        for name in ("ours", "ours-retain1"):
            v = variants.get(name)
            if not v:
                continue
            first = v["runs"][0]
            lb = first["lower_bound"]
            parts = result["lb_parts"][name]
            same = all(r["ops"] == first["ops"] for r in v["runs"])
            rows.append([f"{_LABELS[name]}: counted" + ("" if same else " (run 1; runs differ)")] + [fmt_num(first["ops"][k]) for k in (*OP_KINDS, "total")])
            rows.append(
                [f"  lower bound (k={parts['k']}: {parts['k'] + 1} snapshots + {parts['delta_manifests']} delta manifests + 4 lists; deletes measured)"]
                + [fmt_num(lb["reads"]), "0", "0", fmt_num(lb["deletes"]), "0", fmt_num(lb["total"])]
            )
            rows.append(
                ["  counted / lower bound"]
                + [fmt_ratio(first["reads_over_lb"]), "-", "-", fmt_ratio(first["deletes_over_lb"]), "-", fmt_ratio(first["ops_over_lb"])]
            )
        out.append(render_table(["", *OP_KINDS, "total"], rows))
        r = ours["runs"][0]["ops_over_lb"]
        out.append(f"  target: ops <= {TARGET_OPS:.2f}x the lower bound -> {'MET' if r <= TARGET_OPS else 'MISSED'} ({r:.2f}x, retain 10)")

    flat = result.get("flat")
    if flat:
        small, large = flat["n"]
        out.append(
            f"\nFlat in n, ours: expire the {flat['k']} oldest snapshots (retain_min={config['retain']}, limit={flat['k']}) of a history of "
            f"{small:,} vs {large:,} snapshots"
        )
        out.append(
            f"  histories: {config['history_rows']}-row appends into one partition, every {config['overwrite_every']}th commit an overwrite, "
            f"file.compression none; built in {flat['build_s']:.1f} s (untimed, fsync off, then os.sync()); {config['flat_rounds']} rounds, the two tables "
            f"alternating, each round the next oldest {flat['k']}"
        )
        rows = []
        for n in (small, large):
            f = flat[str(n)]
            first = f["runs"][0]
            rows.append(
                [
                    f"n = {n:,}",
                    " / ".join(str(r["history"]) for r in f["runs"]),
                    fmt_ms(f["median_expire_ms"]),
                    " / ".join(fmt_ms(x) for x in f["expire_ms"]),
                    " / ".join(str(x) for x in f["ops_total"]),
                    " / ".join(str(r["lower_bound"]["total"]) for r in f["runs"]),
                    fmt_ratio(f["mean_ops_over_lb"]),
                    _kinds_text(first["files"]["deleted_by_kind"]),
                ]
            )
        out.append(
            render_table(
                ["history", "snapshots at expiry", "median ms", "each round ms", "ops", "lower bound", "ops/LB", "deleted (round 1)"],
                rows,
                align="lrrrrrrl",
            )
        )
        def verdict(value: float, limit: float) -> str:
            return "FLAT" if value <= limit else "GROWS"

        paired, best, ops_ratio = flat["paired_ratio_median"], flat["min_ratio"], flat["ops_ratio"]
        out.append(f"  n={large:,} / n={small:,} (target: flat, ratio ~1.0; time flagged above {FLAT_LIMIT:.2f}, operations above 1.05):")
        out.append(f"    operations (deterministic)   {ops_ratio:.2f}  -> {verdict(ops_ratio, 1.05)}")
        out.append(f"    time, best round             {best:.2f}  -> {verdict(best, FLAT_LIMIT)}")
        out.append(
            f"    time, median of paired rounds {paired:.2f}  -> {verdict(paired, FLAT_LIMIT)} "
            f"(pairs {', '.join(f'{x:.2f}' for x in flat['paired_ratios'])}; ratio of medians {flat['time_ratio']:.2f})"
        )
        vs = flat.get("verify_s", {})
        if vs:
            out.append(
                "    (untimed verify() after each round: "
                + ", ".join(f"n={int(n):,} {sum(v) / len(v):.1f} s" for n, v in vs.items())
                + " on average; it reads the whole history)"
            )

    notes = []
    d = variants.get("delta")
    if d:
        first = d["runs"][0]
        notes.append(
            "deltalake vacuum(retention_hours=0) deletes every data file the latest version does not use "
            f"({first['vacuum_returned']:,} here): versions before the latest are no longer readable, which is ours' retain 1, "
            f"not retain 10. It also commits to the log (version {first['version_before']} -> {first['version_after']}: VACUUM START/END)."
        )
        older = first["log_files_before_last_checkpoint"]
        notes.append(
            f"deltalake cleanup_metadata() deleted {first['files']['deleted_by_kind'].get('log files', 0)} log files: it only removes log "
            "entries older than delta.logRetentionDuration (30 days by default) and before a checkpoint; "
            + ("there is no checkpoint yet (one every 100 versions)" if older is None else f"{older} log files are older than the last checkpoint and stay")
            + f" ({first['log_files_after']} files in _delta_log after)."
        )
    dk = variants.get("delta-keep")
    if dk:
        first = dk["runs"][0]
        notes.append(
            f"deltalake vacuum(keep_versions=v{first['keep_versions'][0]}..v{first['keep_versions'][1]}) keeps the files of the last "
            f"{config['retain']} versions (the oldest kept version read back: {first['oldest_kept_rows']:,} rows), like ours' retain 10."
        )
    ice = variants.get("iceberg")
    if ice:
        first = ice["runs"][0]
        left = ice["left_behind"]
        notes.append(
            f"pyiceberg 0.12 expire_snapshots() deleted {first['files']['deleted_files']} files: it only drops "
            f"{first['expired']} snapshots from the metadata and writes one new metadata.json. It left "
            f"{left['files']:,} files ({left['bytes'] / 1e6:.2f} MB: {_kinds_text(left['by_kind'])}) that no remaining snapshot uses, "
            f"and {left['metadata_json_files']} metadata.json files (write.metadata.delete-after-commit.enabled is off by default). "
            "pyiceberg 0.12 has no remove-orphan-files or file-deleting expiry. Its ratio compares a metadata-only update with ours' "
            "expiry plus deletion."
        )
        by_ids = variants.get("iceberg-by-ids")
        if by_ids:
            notes.append(
                f"pyiceberg expire_snapshots().by_ids(<{first['expired']} ids>) for the same expiry took {fmt_ms(by_ids['expire_ms'])} ms "
                f"(1 run) vs {fmt_ms(ice['expire_ms'])} ms with older_than(): by_id() checks every id against all snapshots and refs."
            )
        if first["snapshots_after"] != config["retain"]:
            notes.append(f"pyiceberg older_than() kept {first['snapshots_after']} snapshots (timestamps tie at millisecond resolution).")
    if ours:
        first = ours["runs"][0]
        gone_bytes = first["files"]["deleted_bytes"]
        if first["result_bytes_freed"] != gone_bytes:
            notes.append(
                f"ours: ExpireResult.bytes_freed = {first['result_bytes_freed']:,} but {gone_bytes:,} bytes left the disk: bytes_freed "
                "counts data files and manifests at the sizes the lists record, not manifest lists (size unknown) or snapshot files."
            )
        for name in ("ours", "ours-retain1"):
            v = variants.get(name)
            if v and not v["runs"][0]["result_matches_disk"]:
                notes.append(f"{_LABELS[name]}: ExpireResult's deleted counts {v['runs'][0]['result_counts']} differ from the files gone from disk.")
        if first["files"]["deleted_by_kind"].get("data files", 0) == 0:
            notes.append(
                f"ours retain {config['retain']} deletes no data file here: the kept snapshots (the last W1 appends) still reference every "
                "file the overwrite removed, so only metadata goes. retain 1 deletes what deltalake's vacuum(0 h) deletes."
            )
    for name, v in variants.items():
        for w in v.get("warnings", []):
            notes.append(f"{_LABELS.get(name, name)}: warning x{w['count']}: {w['message']}")
    if notes:
        out.append("\nNotes")
        out.extend(f"  - {n}" for n in notes)
    out.append(f"\n  W2 took {result['w2_wall_s']:.1f} s; machine at the end: {describe_load(result['load_end'])}")
    return "\n".join(out)
