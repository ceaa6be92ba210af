"""Peak memory and time of an Iceberg expiry over a long history written directly.

``python -m benchmarks.iceberg_long_history [--snapshots 70000] [--width 20]``

pyiceberg commits one append (the templates); ``--snapshots`` more appends are written directly
(tests/iceberg/long_history.py: each list its own manifest, then the first ``width - 1`` of its
parent's, so every snapshot drops the oldest manifest), and registered. In a fresh interpreter,
a dry-run expiry of every snapshot but the newest plans everything (every list, every manifest
only expired snapshots use, every manifest the kept one uses) and deletes nothing. Printed: the
time of the table's load and of the expiry, the peak RSS, and the interpreter's RSS before the
expiry (the package imported and the metadata loaded): what the expiry itself holds is the
difference.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import benchmark_parser

ROOT = Path(__file__).resolve().parents[1]

_MEASURE = r"""
import json, resource, sys, time
from airflow_snaptable.core import Table
props = json.loads(sys.argv[1])
started = time.perf_counter()
table = Table.open("iceberg://db.long", catalog=props)
opened = time.perf_counter()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = table.expire_snapshots(retain_min=1, older_than=4_102_444_800_000, dry_run=True)
done = time.perf_counter()
print(json.dumps({"open_s": opened - started, "expire_s": done - opened, "rss_before_kb": before,
                  "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "expired": len(result.expired_snapshot_ids), "manifests": result.deleted_manifest_files,
                  "data_files": result.deleted_data_files}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("benchmarks.iceberg_long_history", __doc__)
    parser.add_argument("--snapshots", type=int, default=70_000)
    parser.add_argument("--width", type=int, default=20, help="manifests per list (default 20)")
    parser.add_argument("--quick", action="store_true", help="5,000 snapshots")
    args = parser.parse_args(argv)
    n = 5_000 if args.quick else args.snapshots
    sys.path.insert(0, str(ROOT))
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog

    from tests.iceberg.long_history import build_long_history

    with tempfile.TemporaryDirectory(prefix="iceberg-long-") as tmp:
        (Path(tmp) / "w").mkdir()
        props = {"type": "sql", "uri": f"sqlite:///{tmp}/c.db", "warehouse": f"file://{tmp}/w"}
        catalog = load_catalog("default", **props)
        catalog.create_namespace("db")
        schema = pa.schema([("p", pa.string()), ("id", pa.int64())])
        template = catalog.create_table("db.template", schema=schema)
        template.append(pa.table({"p": ["a"], "id": [1]}, schema=schema))
        started = time.perf_counter()
        build_long_history(catalog, "db.template", "db.long", n, width=args.width)
        built = time.perf_counter() - started
        done = subprocess.run([sys.executable, "-c", _MEASURE, json.dumps(props)], capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        figures = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"Iceberg history of {n + 1} snapshots, lists of {args.width} manifests (written in {built:.0f} s)")
    print(f"  open (catalog + metadata): {figures['open_s']:.1f} s; dry-run expiry of {figures['expired']} snapshots: "
          f"{figures['expire_s']:.1f} s ({figures['manifests']} manifests and lists, {figures['data_files']} data files would go)")
    print(f"  RSS before the expiry {figures['rss_before_kb'] / 1024:.0f} MB, peak {figures['peak_rss_kb'] / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
