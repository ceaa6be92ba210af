"""Data skipping by column statistics: selective filters on sorted and on unsorted columns against the full plan.

``python -m benchmarks.data_skipping [--commits 40] [--files-per-commit 500] [--manifest-target-size 256kb]``

Builds (with ``commit_files``: metadata only, no data files) an unpartitioned table whose files carry
statistics (core/native/column_stats.py) for three columns: ``id``, rising over commits (100 ids per file, as
in benchmarks/scale.py); ``r``, an int range of width 5,000 at a random place in 0..1,000,000 (seeded),
with nulls; ``s``, the same range as zero-padded strings. Then times, median of 3 plans each on a freshly
opened table (no manifest cache), with the manifests each reads, and each filter once more reading every manifest (as without manifest column
bounds, core/native/column_bounds.py): the full plan (every live file: the lower bound of a plan that reads
all manifests), and filters keeping about 1% of the files on each column, and an OR of two of them. Target: each selective plan
costs at most the full plan (core/native/data_skipping.py judges blocks of files in the order of the filtered
column's lower bound, so unsorted files are skipped as cheaply as sorted ones).
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import benchmark_parser

RANGE = 1_000_000
WIDTH = 5_000


def build(uri: str, commits: int, files_per_commit: int, manifest_target_size: str | None = None) -> None:
    import pyarrow as pa

    from airflow_snaptable.core import Table
    from airflow_snaptable.core.native.column_stats import ColumnStats, FileStats
    from airflow_snaptable.core.native.manifest import DataFile

    rng = random.Random(15)
    options = {} if manifest_target_size is None else {"manifest.target-file-size": manifest_target_size}
    table = Table.create(uri, pa.schema([("id", pa.int64()), ("r", pa.int64()), ("s", pa.string())]), options=options)
    n = 0
    for c in range(commits):
        files = []
        for i in range(files_per_commit):
            low = rng.randrange(0, RANGE)
            columns = {
                "id": ColumnStats(0, n * 100, n * 100 + 99),
                "r": ColumnStats(3, low, low + WIDTH),
                "s": ColumnStats(0, f"k{low:07d}", f"k{low + WIDTH:07d}"),
            }
            files.append(DataFile(f"data/data-{c}-{i}.parquet", (), 100, 4096, FileStats(100, columns).encode()))
            n += 1
        table.commit_files(files)


def _is_manifest(rel: str) -> bool:
    return rel.startswith("manifest/manifest-") and not rel.startswith("manifest/manifest-list-")


def timed(uri: str, expression, manifest_bounds: bool = True) -> tuple[float, int, int]:
    """Median seconds of 3 plans, the files planned and the manifests (not lists) read; ``manifest_bounds=False``:
    as if the manifests had no column bounds (none skipped unread), the peer of the same run."""
    import airflow_snaptable.core.native.partition_pruning as pruning

    judge = pruning._by_column_bounds
    if not manifest_bounds:
        pruning._by_column_bounds = lambda schema, metas, *judged_by: metas
    try:
        return _timed(uri, expression)
    finally:
        pruning._by_column_bounds = judge


def _timed(uri: str, expression) -> tuple[float, int, int]:
    from airflow_snaptable.core import Table

    runs = []
    for _ in range(3):
        table = Table.open(uri)
        manifests = []
        table.storage.on_operation = lambda kind, rel: manifests.append(rel) if kind == "read" and _is_manifest(rel) else None
        started = time.perf_counter()
        planned = len(table.scan(filter=expression).files())
        runs.append(time.perf_counter() - started)
    return sorted(runs)[1], planned, len(manifests)


def main(argv: list[str] | None = None) -> int:
    from airflow_snaptable.core.native.scan import dnf_expression

    parser = benchmark_parser("benchmarks.data_skipping", __doc__)
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--files-per-commit", type=int, default=500)
    parser.add_argument("--manifest-target-size", help="the table's manifest.target-file-size (default: the option's default)")
    args = parser.parse_args(argv)
    total = args.commits * args.files_per_commit
    middle = total * 100 // 2
    # Each filter as DNF (judged from its terms, core/native/dnf_pruning.py) and as an Expression (judged by Arrow).
    dnf = {
        "sorted id, 1% of the ids": [("id", ">=", middle), ("id", "<", middle + total)],
        "unsorted int r, ~1% of the range": [("r", ">=", RANGE // 2), ("r", "<", RANGE // 2 + RANGE // 200)],
        "unsorted string s, one value": [("s", "=", f"k{RANGE // 2:07d}")],
        "id range OR r range (0.5% each)": [[("id", ">=", middle), ("id", "<", middle + total // 2)],
                                            [("r", ">=", RANGE // 2), ("r", "<", RANGE // 2 + RANGE // 400)]],
    }
    filters = {}
    for label, terms in dnf.items():
        filters[f"{label} (DNF)"] = terms
        filters[f"{label} (Expression)"] = dnf_expression(terms)
    with tempfile.TemporaryDirectory(prefix="skipping-") as tmp:
        uri = str(Path(tmp) / "t")
        build(uri, args.commits, args.files_per_commit, args.manifest_target_size)
        full, _, all_manifests = timed(uri, None)
        print(f"Table: {args.commits} commits x {args.files_per_commit} files = {total:,} data files (unpartitioned)")
        print(f"  full plan: {full:.3f} s, {all_manifests} manifests read")
        for label, expression in filters.items():
            seconds, planned, manifests = timed(uri, expression)
            unskipped, _, _ = timed(uri, expression, manifest_bounds=False)
            print(f"  {label}: {seconds:.3f} s, {planned:,} files = {100 * planned / total:.2f}%, {seconds / full:.2f}x the full plan (target <= 1x), "
                  f"{manifests} of {all_manifests} manifests read; reading every manifest: {unskipped:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
