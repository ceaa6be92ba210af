"""Partition directories left empty by expiry and orphan cleaning are removed, never under a writer's feet."""

from __future__ import annotations

import os
import time

from airflow_snaptable.core import Table
from airflow_snaptable.core.io import local_files
from tests.conftest import SCHEMA, make_rows, sorted_ids


def _dirs(table: Table) -> set[str]:
    data = os.path.join(table.uri, "data")
    return {os.path.relpath(d, data) for d, _, _ in os.walk(data)} - {"."}


def test_expiry_and_orphan_cleaning_remove_the_partition_directories_they_empty(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.append(make_rows(range(9)))  # p=0, p=1, p=2
    table.overwrite(make_rows([0, 3]))  # only p=0 left in the state
    assert _dirs(table) == {"p=0", "p=1", "p=2"}
    table.expire_snapshots(retain_min=1, time_retained="0 s")
    assert _dirs(table) == {"p=0"}
    # A crashed writer's file in a partition of its own: the clean removes it and its directory.
    stray = os.path.join(table.uri, "data", "p=7", "stray.parquet")
    os.makedirs(os.path.dirname(stray))
    with open(stray, "wb") as handle:
        handle.write(b"x")
    old = time.time() - 3 * 86400
    os.utime(stray, (old, old))
    table.remove_orphan_files(older_than="1 d", dry_run=False)
    assert _dirs(table) == {"p=0"} and os.path.isdir(os.path.join(table.uri, "data"))
    assert sorted_ids(table.scan().to_arrow()) == [0, 3] and table.verify().ok


def test_a_directory_removed_between_a_writers_mkdir_and_its_open_is_made_again(tmp_path, monkeypatch):
    """The race, forced: right after the writer creates its partition directory, the cleaner removes it."""
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    real = os.makedirs
    removed = []

    def makedirs_then_cleaner_runs(path, exist_ok=False):
        real(path, exist_ok=exist_ok)
        if "/data/p=" in path and not removed:
            removed.append(table.storage.remove_empty_dirs([os.path.relpath(path, table.uri) + "/f"], stop_at="data"))

    monkeypatch.setattr(local_files.os, "makedirs", makedirs_then_cleaner_runs)
    table.append(make_rows([1]))
    monkeypatch.undo()
    assert removed == [1]  # the cleaner did remove the empty directory once
    assert sorted_ids(Table.open(table.uri).scan().to_arrow()) == [1]


def test_a_directory_with_a_file_is_never_removed(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.append(make_rows([0, 1]))
    files = [f.path for f in table.scan().files()]
    assert table.storage.remove_empty_dirs(files, stop_at="data") == 0
    assert sorted_ids(table.scan().to_arrow()) == [0, 1]
