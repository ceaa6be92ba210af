"""Purge in bounded memory (issue 26): N noncurrent files, purged a journal entry at a time.

``python -m benchmarks.noncurrent_purge [--files N] [--quick]``

A table of a few snapshots gets a journal of N noncurrent data files (entries of 100,000, as the
deletion plans and orphan batches write them; the files are real, empty, under ``data/``), due at
once. Printed: the time purge takes, its peak RSS (``resource.getrusage``, a fresh interpreter) next
to the interpreter's own, and the bytes per file; and that every file was deleted.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

ENTRY_FILES = 100_000


def prepare(uri: str, files: int) -> None:
    import pyarrow as pa

    from airflow_snaptable.core import Table
    from airflow_snaptable.core.lifecycle.noncurrent.journal import JournalEntry, NoncurrentJournal, NoncurrentRun

    table = Table.create(uri, pa.schema([("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": [i]}))
    journal = NoncurrentJournal(table.storage)
    run = NoncurrentRun.start(0, "benchmark")
    os.makedirs(os.path.join(uri, "data", "gone"), exist_ok=True)
    for first in range(0, files, ENTRY_FILES):
        batch = [(f"data/gone/f-{i:08d}.parquet", 100) for i in range(first, min(files, first + ENTRY_FILES))]
        for path, _size in batch:
            open(os.path.join(uri, path), "wb").close()
        journal.write(JournalEntry(run, f"{first:09d}", data_files=batch))


def purge(uri: str) -> None:
    from airflow_snaptable.core import Table

    start = time.perf_counter()
    result = Table.open(uri).purge()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"{result.deleted_files} {seconds:.2f} {peak}")


def baseline() -> None:
    import airflow_snaptable.core  # noqa: F401 - the interpreter with the package loaded

    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.noncurrent_purge")
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100,000 files")
    args = parser.parse_args(argv)
    files = 100_000 if args.quick else args.files
    with tempfile.TemporaryDirectory(prefix="snaptable-purge-") as scratch:
        uri = os.path.join(scratch, "t")
        prepare(uri, files)
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", "")}
        code = f"import sys; sys.path.insert(0, {here!r}); from benchmarks.noncurrent_purge import purge; purge({uri!r})"
        deleted, seconds, peak = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
        base = int(subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); from benchmarks.noncurrent_purge import baseline; baseline()"],
                                  env=env, capture_output=True, text=True, check=True).stdout)
        gone_dir = os.path.join(uri, "data", "gone")
        left = len(os.listdir(gone_dir)) if os.path.isdir(gone_dir) else 0  # purge removes the emptied directory
    peak, deleted = int(peak), int(deleted)
    print(f"purge of {files} noncurrent files: {float(seconds):.1f} s, deleted {deleted}, left {left}")
    print(f"  peak RSS {peak / 2**20:.0f} MB, the interpreter with the package {base / 2**20:.0f} MB: "
          f"{(peak - base) / max(files, 1):.0f} bytes per file above it")


if __name__ == "__main__":
    main()
