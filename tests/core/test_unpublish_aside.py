"""Unpublishing on local disks renames each expired snapshot file aside, then deletes it in bulk.

SnapshotManager.unpublish moves ``snapshot/snapshot-<id>`` to ``snapshot/.snapshot-<id>.unpublished.tmp``
one file at a time in ascending order (a crash leaves a prefix removed, DESIGN.md invariant 1), and the
plan executor deletes the moved files with the manifests. A crash between the two leaves a readable
table with contiguous ids; the rerun, or else an orphan clean, removes what was moved aside.
"""

from __future__ import annotations

import os
import time

import fsspec
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.native.snapshot import UNPUBLISHED, SnapshotManager
from airflow_snaptable.core.io.storage import Storage
from tests.conftest import InjectedCrash
from tests.core.test_lifecycle import FAR_FUTURE, Clock, check_clean, check_readable, make_table

EXPIRE = dict(retain_min=2, time_retained="0 s", now=FAR_FUTURE)


def _aside_files(uri: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(uri, "snapshot")) if n.endswith(".unpublished.tmp"))


def _history(uri: str) -> dict[int, list[int]]:
    """Six appends, then a full overwrite: the model of snapshots 1..7."""
    history = make_table(uri)
    for _ in range(6):
        history.append()
    history.overwrite()
    return history.model


def _crash_after_renames(uri: str, renames: int) -> None:
    """Expire until ``renames`` snapshot files were moved aside, then crash at the next operation."""
    table = Table.open(uri)
    table.clock = Clock(FAR_FUTURE)
    seen = []

    def hook(kind: str, path: str) -> None:
        if len(seen) >= renames:
            raise InjectedCrash(f"after {len(seen)} snapshot removals, at {kind} {path}")
        if kind == "delete" and path.startswith("snapshot/snapshot-"):
            seen.append(path)

    table.storage.on_operation = hook
    with pytest.raises(InjectedCrash):
        table.expire_snapshots(**EXPIRE)


def test_expiry_leaves_no_file_moved_aside(tmp_path):
    uri = str(tmp_path / "t")
    model = _history(uri)
    result = Table.open(uri).expire_snapshots(**EXPIRE)
    assert result.deleted_snapshot_files == 5 and result.expired_snapshot_ids == [1, 2, 3, 4, 5]
    assert _aside_files(uri) == []
    check_clean(uri, {i: model[i] for i in (6, 7)})


@pytest.mark.parametrize("renames", [1, 3, 5])
def test_crash_after_moving_aside_keeps_a_prefix_and_the_rerun_deletes_the_rest(tmp_path, renames):
    uri = str(tmp_path / "t")
    model = _history(uri)
    _crash_after_renames(uri, renames)
    # The first `renames` snapshots are out of the history, in order; the others are whole.
    assert Table.open(uri).snapshot_manager.list_ids() == list(range(renames + 1, 8))
    assert _aside_files(uri) == sorted(os.path.basename(UNPUBLISHED.format(i)) for i in range(1, renames + 1))
    check_readable(uri, model)
    # The rerun finishes the plan, the files moved aside included.
    rerun = Table.open(uri)
    rerun.clock = Clock(FAR_FUTURE)
    rerun.expire_snapshots(**EXPIRE)
    assert _aside_files(uri) == []
    check_clean(uri, {i: model[i] for i in (6, 7)})


def test_files_moved_aside_are_leftovers_that_verify_reports_and_orphan_cleaning_removes(tmp_path):
    uri = str(tmp_path / "t")
    _history(uri)
    _crash_after_renames(uri, 2)
    table = Table.open(uri)
    aside = [f"snapshot/{n}" for n in _aside_files(uri)]
    assert aside and set(aside) <= set(table.verify().unreferenced_files)
    now = int(time.time() * 1000)  # orphan cleaning holds against the real clock
    table.remove_orphan_files(older_than=now, dry_run=False, now=now + 1000)
    assert _aside_files(uri) == []


def test_unpublish_deletes_in_place_where_storage_has_no_cheap_rename(tmp_path):
    """Object stores (memory here) have no rename: the files are deleted one at a time, nothing is returned."""
    storage = Storage(fsspec.filesystem("memory"), "/unpublish-aside")
    for i in (1, 2, 3):
        storage.write_bytes(f"snapshot/snapshot-{i}", b"{}")
    assert SnapshotManager(storage).unpublish([1, 2]) == []
    assert storage.list_names("snapshot") == ["snapshot-3"]


def test_unpublish_moves_aside_locally_and_a_rerun_returns_the_same_paths(tmp_path):
    storage = Storage.from_uri(str(tmp_path / "t"))
    for i in (1, 2, 3):
        storage.write_bytes(f"snapshot/snapshot-{i}", b"{}")
    manager = SnapshotManager(storage)
    aside = manager.unpublish([1, 2])
    assert aside == [UNPUBLISHED.format(1), UNPUBLISHED.format(2)]
    assert manager.list_ids() == [3]
    assert manager.unpublish([1, 2]) == aside  # gone already: success, same paths to delete
    storage.delete_files(aside)
    assert storage.list_names("snapshot") == ["snapshot-3"]
