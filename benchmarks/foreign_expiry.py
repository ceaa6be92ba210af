"""Expiry on tables other engines wrote: Apache Paimon (pypaimon) and Apache Iceberg (pyiceberg).

``python -m benchmarks.foreign_expiry [--snapshots N] [--appends N ...] [--only paimon|iceberg] [--quick]``

Paimon: pypaimon writes an append table of N snapshots (small appends over 10 partitions,
every 20th commit an overwrite of one partition); ours expires everything but the newest
snapshot. Printed: time, storage operations by kind, the lower bound and the ratio, and the
same expiry on this package's own format, a table of the same shape, in the same run.
Lower bound: read the k+1 snapshot files (expired ones and the first kept), each delta list
of snapshots e+1..f and each manifest it names once (the data files to delete), the base and
delta lists of every expired snapshot and of f (a Paimon snapshot does not record which
manifests its commit wrote, so the freed manifests are found in those lists: Paimon's
ExpireSnapshotsImpl reads them too); delete each freed file once (measured: files gone from
the directory). Ours records what each commit wrote, so its bound (benchmarks/w2_expiry.py)
needs only the 4 lists of e and f.

Iceberg: pyiceberg writes a W1-shaped table (N appends, one overwrite) for each ``--appends``
(default 200 and 2,000), once; before each run the table is put back as built (hard links, the
SQLite catalog copied), so both sides expire the same files. pyiceberg 0.12's
``expire_snapshots().older_than(now)`` (metadata only: it deletes nothing) and ours
(``retain_min=1, older_than=now``, deleting every file no retained snapshot reaches) each run in a
fresh interpreter after a warm-up expiry of a small table there (the first run of either pays
imports and caches worth 3x pyiceberg's whole expiry), three alternated rounds. Printed per size:
the median times and their ratio (target: ours within 2x), files deleted and left unreachable,
ours' operations against the lower bound (each expired snapshot's manifest list read once, each
manifest only expired snapshots use read once, each manifest the kept snapshot uses read once
(Java's ReachableFileCleanup reads them to keep what they name live: a file put back has no
other trace), each freed file deleted once). ``--table-cache DIR`` keeps the built tables for the
next run. Above 200 appends the table's appends are written directly (``build_iceberg_directly``:
pyiceberg's own layout from its first append, then its overwrite): pyiceberg takes hours to
commit 2,000 appends one by one.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import benchmark_parser

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
PAIMON_CLIENT = ROOT / "tests" / "paimon" / "pypaimon_client.py"
PARTITIONS = 10
FAR = 4_102_444_800_000


def _files(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, _s, names in os.walk(root) for n in names}


# -- Paimon --------------------------------------------------------------------------------


def build_paimon(directory: Path, snapshots: int) -> str:
    subprocess.run([str(ROOT / "scripts" / "pypaimon-venv")], check=True)
    steps = [{"create": "db.t", "columns": [["p", "string"], ["id", "int64"], ["v", "string"]], "partition": ["p"], "options": {"bucket": "-1"}}]
    for i in range(snapshots):
        step = {"write": "db.t", "rows": [[f"p{i % PARTITIONS}", i, "x" * 20], [f"p{(i + 1) % PARTITIONS}", i + 10**6, "y"]]}
        if i % 20 == 19:
            step = {"write": "db.t", "rows": [[f"p{i % PARTITIONS}", i, "o"]], "overwrite": {"p": f"p{i % PARTITIONS}"}}
        steps.append(step)
    warehouse = str(directory / "paimon")
    done = subprocess.run(
        [str(ROOT / ".venv-pypaimon" / "bin" / "python"), str(PAIMON_CLIENT)],
        input=json.dumps({"warehouse": warehouse, "steps": steps}), capture_output=True, text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"pypaimon failed: {done.stderr[-2000:]}")
    return os.path.join(warehouse, "db.db", "t")


def paimon_lower_bound(table_dir: str) -> dict:
    from airflow_snaptable.core import Table

    table = Table.open(table_dir)
    ids = [s.id for s in table.snapshots()]
    first, fence = ids[0], ids[-1]
    files = table.store.files
    delta_manifests = 0
    for snapshot_id in range(first + 1, fence + 1):
        snapshot = table.snapshot(snapshot_id)
        delta_manifests += len(files._entries(snapshot, files._lists([snapshot]), "delta"))
    k = fence - first
    reads = (k + 1) + 2 * k + 2 + delta_manifests  # snapshot files, both lists of e..f-1 and of f, the delta manifests of e+1..f
    return {"k": k, "reads": reads}


def run_expiry(uri: str) -> dict:
    from airflow_snaptable.core import Table

    before = _files(uri)
    table = Table.open(uri)
    table.storage.reset_counts()
    started = time.perf_counter()
    result = table.expire_snapshots(retain_min=1, retain_max=1, time_retained="0 s", limit=10**6, now=FAR)
    elapsed = time.perf_counter() - started
    counts = table.storage.snapshot_counts()
    assert Table.open(uri).verify().ok, "verify after expiry"
    return {"seconds": elapsed, "ops": counts, "deleted": len(before - _files(uri)), "expired": len(result.expired_snapshot_ids)}


def build_ours(directory: Path, snapshots: int) -> str:
    from airflow_snaptable.core import Table

    schema = pa.schema([("p", pa.string()), ("id", pa.int64()), ("v", pa.string())])
    uri = str(directory / "ours")
    table = Table.create(uri, schema, partition_by=["p"])
    for i in range(snapshots):
        if i % 20 == 19:
            table.overwrite(pa.table({"p": [f"p{i % PARTITIONS}"], "id": [i], "v": ["o"]}, schema=schema), partitions=[{"p": f"p{i % PARTITIONS}"}])
        else:
            table.append(pa.table({"p": [f"p{i % PARTITIONS}", f"p{(i + 1) % PARTITIONS}"], "id": [i, i + 10**6], "v": ["x" * 20, "y"]}, schema=schema))
    return uri


def ours_lower_bound(uri: str) -> dict:
    from airflow_snaptable.core import Table
    from benchmarks.w2_expiry import lower_bound

    ids = [s.id for s in Table.open(uri).snapshots()]
    return lower_bound(uri, ids[0], ids[-1])


def paimon_section(directory: Path, snapshots: int) -> dict:
    table_dir = build_paimon(directory, snapshots)
    ours = build_ours(directory, snapshots)
    out = {}
    for label, uri, bound in (("paimon (pypaimon-written)", table_dir, paimon_lower_bound), ("ours", ours, ours_lower_bound)):
        lb = bound(uri)
        run = run_expiry(uri)
        total = sum(run["ops"].values())
        lower = lb["reads"] + run["deleted"]
        out[label] = {**run, "lower_bound": lower, "ratio": total / lower, "total_ops": total}
    return out


# -- Iceberg -----------------------------------------------------------------------------------


def build_iceberg(directory: Path, name: str, appends: int):
    """The W1 shape: ``appends`` appends of 5 rows, then an overwrite, each a pyiceberg commit."""
    from pyiceberg.catalog import load_catalog

    warehouse = directory / f"iceberg-{name}"
    warehouse.mkdir()
    props = {"type": "sql", "uri": f"sqlite:///{warehouse}/catalog.db", "warehouse": f"file://{warehouse}"}
    catalog = load_catalog("default", **props)
    catalog.create_namespace("db")
    schema = pa.schema([("p", pa.string()), ("id", pa.int64())])
    table = catalog.create_table("db.w1", schema=schema)
    for i in range(appends):
        table.append(pa.table({"p": [f"p{i % PARTITIONS}"] * 5, "id": list(range(i * 5, i * 5 + 5))}, schema=schema))
    table.overwrite(pa.table({"p": ["p0"], "id": [-1]}, schema=schema))
    return props, table.refresh()


def build_iceberg_directly(directory: Path, name: str, appends: int):
    """The W1 shape for a long history: pyiceberg commits one append (the templates); the other
    appends' manifest lists, manifests and data files (copies of the first's) are written directly
    with fastavro, as pyiceberg lays them out (each list: the new manifest, then the parent's),
    and registered; pyiceberg then commits the overwrite. pyiceberg alone takes hours to commit
    2,000 appends: each commit reads and rewrites every manifest list record and the metadata."""
    sys.path.insert(0, str(ROOT))
    from pyiceberg.catalog import load_catalog

    from tests.iceberg.long_history import build_long_history

    warehouse = directory / f"iceberg-{name}"
    warehouse.mkdir()
    props = {"type": "sql", "uri": f"sqlite:///{warehouse}/catalog.db", "warehouse": f"file://{warehouse}"}
    catalog = load_catalog("default", **props)
    catalog.create_namespace("db")
    schema = pa.schema([("p", pa.string()), ("id", pa.int64())])
    template = catalog.create_table("db.template", schema=schema)
    template.append(pa.table({"p": ["p0"] * 5, "id": list(range(5))}, schema=schema))
    build_long_history(catalog, "db.template", "db.w1", appends - 1, data_files=True)
    catalog.drop_table("db.template")  # the catalog entry only: its files are the new table's first snapshot
    table = catalog.load_table("db.w1")
    table.overwrite(pa.table({"p": ["p0"], "id": [-1]}, schema=schema))
    return props, table.refresh()


#: Above this many appends the W1 table is written directly (build_iceberg_directly).
DIRECT_ABOVE = 200


def iceberg_lower_bound(table) -> dict:
    metadata = table.metadata
    current = metadata.current_snapshot_id
    kept = {m.manifest_path for m in metadata.snapshot_by_id(current).manifests(table.io)}
    expired = [s for s in metadata.snapshots if s.snapshot_id != current]
    exclusive = {m.manifest_path for s in expired for m in s.manifests(table.io)} - kept
    return {"reads": len(expired) + len(exclusive) + len(kept)}


def load_catalog_table(props: dict):
    from pyiceberg.catalog import load_catalog

    return load_catalog("default", **props).load_table("db.w1")


def expire_iceberg(side: str, props: dict) -> float:
    """Seconds one side's expiry of everything older than now takes (catalog load included, as for both)."""
    import datetime as dt

    from airflow_snaptable.core import Table

    started = time.perf_counter()
    if side == "pyiceberg":
        load_catalog_table(props).maintenance.expire_snapshots().older_than(dt.datetime.now(dt.timezone.utc)).commit()
    else:
        Table.open("iceberg://db.w1", catalog=props).expire_snapshots(retain_min=1, older_than=int(time.time() * 1000) + 1)
    return time.perf_counter() - started


def measure_in_fresh_process(side: str, props: dict, warm_props: dict) -> float:
    """One side's expiry in a new interpreter, after the same expiry of a small table there (imports, caches):
    neither side pays the other's warm-up, nor the garbage of the tables built in this process."""
    code = (
        "import json, sys; from benchmarks.foreign_expiry import expire_iceberg; "
        "side, props, warm = json.loads(sys.argv[1]); expire_iceberg(side, warm); print(expire_iceberg(side, props))"
    )
    done = subprocess.run([sys.executable, "-c", code, json.dumps([side, props, warm_props])],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    return float(done.stdout.strip().splitlines()[-1])


class PristineTable:
    """A W1 table built once, put back as built before each run: both sides expire the same table.

    Iceberg metadata names files by absolute path, so a copy lives beside the table and each run
    restores the table at its own path (hard links for the immutable files; the SQLite catalog,
    which commits rewrite in place, copied)."""

    def __init__(self, directory: Path, appends: int):
        self.root = directory / f"b{appends}"
        self.table_dir = self.root / "iceberg-t"
        self.pristine = self.root / "pristine"
        if not self.pristine.exists():
            if self.table_dir.exists():  # a build killed before it was copied
                shutil.rmtree(self.table_dir)
            self.root.mkdir(parents=True, exist_ok=True)
            (build_iceberg if appends <= DIRECT_ABOVE else build_iceberg_directly)(self.root, "t", appends)
            shutil.copytree(self.table_dir, self.pristine.with_suffix(".tmp"), copy_function=os.link)
            os.replace(self.pristine.with_suffix(".tmp"), self.pristine)
        self.props = {"type": "sql", "uri": f"sqlite:///{self.table_dir}/catalog.db", "warehouse": f"file://{self.table_dir}"}

    def restore(self) -> dict:
        shutil.rmtree(self.table_dir, ignore_errors=True)

        def link_or_copy(src, dst):
            if os.path.basename(src) == "catalog.db":
                return shutil.copy2(src, dst)
            return os.link(src, dst)

        shutil.copytree(self.pristine, self.table_dir, copy_function=link_or_copy)
        return self.props


def iceberg_section(directory: Path, appends: int, rounds: int = 3) -> dict:
    """``rounds`` alternated rounds on the same table put back as built; the median time of each side."""
    from airflow_snaptable.core import Table

    table = PristineTable(directory, appends)
    warm = PristineTable(directory, 5)
    peer_times, ours_times = [], []
    for r in range(rounds):
        for side in (("pyiceberg", "ours") if r % 2 == 0 else ("ours", "pyiceberg")):
            warm_props = warm.restore()
            props = table.restore()
            (peer_times if side == "pyiceberg" else ours_times).append(measure_in_fresh_process(side, props, warm_props))
    table.restore()
    peer_files_left = len(_files(str(table.table_dir)))  # pyiceberg deletes no file: what it leaves is the table as built

    # The operations and the files deleted: one more run of ours, counted, on the table as built.
    props_ours = table.restore()
    ours_table = load_catalog_table(props_ours)
    location = ours_table.location()[len("file://"):]
    before = _files(location)
    lb = iceberg_lower_bound(ours_table)
    opened = Table.open("iceberg://db.w1", catalog=props_ours)
    opened.storage.reset_counts()
    result = opened.expire_snapshots(retain_min=1, older_than=int(time.time() * 1000) + 1)
    counts = opened.storage.snapshot_counts()
    deleted = len(before - _files(location))
    lower = lb["reads"] + deleted
    peer_seconds, ours_seconds = statistics.median(peer_times), statistics.median(ours_times)
    return {
        "appends": appends,
        "pyiceberg_seconds": peer_seconds,
        "pyiceberg_runs": peer_times,
        "pyiceberg_files_deleted": 0,
        "pyiceberg_files_left": peer_files_left,
        "ours_seconds": ours_seconds,
        "ours_runs": ours_times,
        "time_ratio": ours_seconds / peer_seconds,
        "ours_deleted": deleted,
        "ours_expired": len(result.expired_snapshot_ids),
        "ours_files_left": len(_files(location)),
        "ops": counts,
        "total_ops": sum(counts.values()),
        "lower_bound": lower,
        "ops_ratio": sum(counts.values()) / lower,
    }


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("benchmarks.foreign_expiry", __doc__)
    parser.add_argument("--snapshots", type=int, default=200, help="snapshots of the Paimon tables; default 200")
    parser.add_argument("--appends", type=int, nargs="+", default=[200, 2000], help="appends of each Iceberg W1 table; default 200 2000")
    parser.add_argument("--quick", action="store_true", help="60 snapshots, 60 appends")
    parser.add_argument("--only", choices=("paimon", "iceberg"), help="one of the two sections")
    parser.add_argument("--table-cache", type=Path, help="keep the built Iceberg tables here for the next run (building 2,000 appends takes pyiceberg a long time)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    n = 60 if args.quick else args.snapshots
    appends = [60] if args.quick else args.appends
    with tempfile.TemporaryDirectory(prefix="foreign-expiry-") as tmp:
        figures: dict = {"snapshots": n}
        if args.only != "iceberg":
            figures["paimon"] = paimon_section(Path(tmp), n)
        if args.only != "paimon":
            cache = args.table_cache or Path(tmp)
            figures["iceberg"] = [iceberg_section(cache, a) for a in appends]
    if "paimon" in figures:
        print(f"Expiry of everything but the newest snapshot, {n} snapshots, local disk, one run\n")
        print(f"  {'table':<28}{'time':>10}{'ops':>8}{'lower bound':>13}{'ratio':>8}{'files deleted':>15}   ops by kind")
        for label, row in figures["paimon"].items():
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(row["ops"].items()) if v)
            print(f"  {label:<28}{row['seconds'] * 1000:>8.0f}ms{row['total_ops']:>8}{row['lower_bound']:>13}{row['ratio']:>7.2f}x{row['deleted']:>15}   {kinds}")
    for ice in figures.get("iceberg", []):
        a = ice["appends"]
        print(f"\n  Iceberg, W1 shape ({a} appends + an overwrite), the same table put back as built before each run:")
        runs = lambda key: ", ".join(f"{t * 1000:.0f}" for t in ice[key])  # noqa: E731
        print("    each side in a fresh process after a warm-up expiry there; median of 3 alternated rounds (ms: runs)")
        print(f"    pyiceberg expire_snapshots().older_than(now): {ice['pyiceberg_seconds'] * 1000:.0f} ms ({runs('pyiceberg_runs')}), "
              f"deletes 0 files, {ice['pyiceberg_files_left']} files left")
        print(f"    ours (retain_min=1, files deleted):          {ice['ours_seconds'] * 1000:.0f} ms ({runs('ours_runs')}), {ice['ours_expired']} snapshots expired, "
              f"{ice['ours_deleted']} files deleted, {ice['ours_files_left']} left")
        print(f"    time ours / pyiceberg at {a} appends: {ice['time_ratio']:.2f}x (target <= 2x)")
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(ice["ops"].items()) if v)
        print(f"    ours' storage operations: {ice['total_ops']} ({kinds}) vs lower bound {ice['lower_bound']}: {ice['ops_ratio']:.2f}x (target <= 1.2x)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
