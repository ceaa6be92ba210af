"""Shared helpers of the Spark tests."""

from __future__ import annotations

import os

import pyarrow as pa

from airflow_snaptable.core import Table

FORMAT = "snaptable"


def rows_of(df) -> list[tuple]:
    """A DataFrame's rows as sorted tuples (None sorts first)."""
    return sorted((tuple(r) for r in df.collect()), key=_key)


def arrow_rows(table: pa.Table, columns: list[str] | None = None) -> list[tuple]:
    table = table if columns is None else table.select(columns)
    return sorted((tuple(d.values()) for d in table.to_pylist()), key=_key)


def _key(row: tuple):
    return tuple((v is not None, v) for v in row)


def data_files_on_disk(uri: str) -> set[str]:
    root = os.path.join(uri, "data")
    found = set()
    for directory, _dirs, files in os.walk(root):
        for name in files:
            found.add(os.path.relpath(os.path.join(directory, name), uri))
    return found


def assert_clean(table: Table, lost_commit_races: bool = False) -> None:
    """Every referenced file exists and nothing unreferenced lies around.

    ``lost_commit_races``: core's commit leaves the manifest list of an attempt that
    lost the snapshot race, and the delta manifest + lists of a commit that failed
    with a conflict, behind (reported on issue 4); tolerate metadata leftovers, never
    data files.
    """
    result = table.verify()
    assert result.missing_files == [], result.missing_files
    leftovers = result.unreferenced_files
    if lost_commit_races:
        leftovers = [p for p in leftovers if not p.startswith("manifest/")]
    assert leftovers == [], leftovers
