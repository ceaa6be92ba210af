"""Hudi's cleaning policies and savepoints (core/lifecycle/hudi_clean.py).

Each scenario writes down, from Hudi's rule, the earliest commit to retain; the files that
must survive are then every file of the states from that commit on plus the savepointed
states, and every other data file must be gone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, TagNotFoundError
from tests.conftest import SCHEMA, make_rows, sorted_ids

HOUR = 3_600_000
T = int(time.time() * 1000)  # commits in the past hours: verify() flags snapshots from the future


def ids_in(partition: int, first: int, count: int = 2) -> list[int]:
    """``count`` fresh ids in ``partition`` (p = id % 3)."""
    return [3 * (first + k) + partition for k in range(count)]


class Recorded:
    """A table whose every snapshot's data files and rows are written down when committed."""

    def __init__(self, path, times=None):
        self.table = Table.create(str(path), SCHEMA, partition_by=["p"])
        self.files: dict[int, set[str]] = {}
        self.rows: dict[int, list[int]] = {}
        self.times = list(times or [])

    def commit(self, action, *args, **kwargs):
        if self.times:
            when = self.times.pop(0)
            self.table.clock = lambda: when
        snapshot = getattr(self.table, action)(*args, **kwargs)
        self.files[snapshot.id] = {f.path for f in self.table.scan(snapshot_id=snapshot.id).files()}
        self.rows[snapshot.id] = sorted_ids(self.table.scan(snapshot_id=snapshot.id).to_arrow())
        return snapshot

    def data_files(self) -> set[str]:
        root = self.table.uri
        return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(os.path.join(root, "data")) for f in fs}

    def check(self, keep_from: int, savepoints=()):
        """Hudi's outcome: the states from ``keep_from`` on and the savepoints' read completely; nothing else is left."""
        table = Table.open(self.table.uri)
        latest = max(self.files)
        assert [s.id for s in table.snapshots()] == list(range(keep_from, latest + 1))
        for snapshot_id in range(keep_from, latest + 1):
            assert sorted_ids(table.scan(snapshot_id=snapshot_id).to_arrow()) == self.rows[snapshot_id]
        for snapshot_id in savepoints:
            assert sorted_ids(table.scan(tag=f"savepoint-{snapshot_id}").to_arrow()) == self.rows[snapshot_id]
        survivors = set().union(*(self.files[i] for i in range(keep_from, latest + 1)), *(self.files[i] for i in savepoints))
        assert self.data_files() == survivors
        assert table.verify().ok


def commits_history(path) -> Recorded:
    """1 p0; 2 p0 rewritten; 3 p0 rewritten; 4 p1 added; 5 p0 rewritten."""
    r = Recorded(path)
    r.commit("append", make_rows(ids_in(0, 0)))
    r.commit("overwrite", make_rows(ids_in(0, 10)), partitions=[{"p": 0}])
    r.commit("overwrite", make_rows(ids_in(0, 20)), partitions=[{"p": 0}])
    r.commit("append", make_rows(ids_in(1, 30)))
    r.commit("overwrite", make_rows(ids_in(0, 40)), partitions=[{"p": 0}])
    return r


def test_keep_latest_commits_keeps_the_n_newest_commits(tmp_path):
    r = commits_history(tmp_path / "t")
    dry = r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2, dry_run=True)
    assert dry.expire.expired_snapshot_ids == [1, 2, 3] and dry.earliest_commit_retained == 4
    assert sorted(dry.expire.data_files) == sorted((r.files[1] | r.files[2] | r.files[3]) - r.files[4] - r.files[5])
    result = r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2)
    assert result.earliest_commit_retained == 4
    r.check(keep_from=4)
    assert [c["earliest_commit_retained"] for c in r.table.cleans()] == [4]  # Hudi's completed clean instant


def test_a_savepoint_in_the_middle_keeps_its_files_and_restore_returns_to_it(tmp_path):
    r = commits_history(tmp_path / "t")
    r.table.create_savepoint(2)
    assert [t.name for t in r.table.savepoints()] == ["savepoint-2"]
    r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2)
    r.check(keep_from=4, savepoints=[2])
    # A later clean still keeps them; deleting the savepoint frees what only it held.
    r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2)
    r.check(keep_from=4, savepoints=[2])
    restored = r.table.restore_savepoint(2)
    assert restored is not None
    assert sorted_ids(Table.open(r.table.uri).scan().to_arrow()) == r.rows[2]
    with pytest.raises(TagNotFoundError):
        r.table.restore_savepoint(3)


def test_keep_latest_by_hours_keeps_every_state_of_the_window(tmp_path):
    times = [T - 5 * HOUR, T - 3 * HOUR, T - 90 * 60_000, T - 30 * 60_000, T - 10 * 60_000]
    r = Recorded(tmp_path / "t", times)
    for k in range(5):
        r.commit("overwrite", make_rows(ids_in(0, 10 * k)), partitions=[{"p": 0}])
    r.table.clock = lambda: T
    # The state at T - 1 h is snapshot 3's (committed at T - 90 min): it and everything after stay.
    assert r.table.clean("KEEP_LATEST_BY_HOURS", hours_retained=1).earliest_commit_retained == 3
    r.check(keep_from=3)


def test_keep_latest_file_versions_counts_versions_per_partition(tmp_path):
    """The example of core/lifecycle/hudi_clean.py, with a partition (p=2) that is never touched again."""
    r = Recorded(tmp_path / "t")
    r.commit("append", make_rows(ids_in(0, 0) + ids_in(1, 0) + ids_in(2, 0)))  # 1: a, b, c
    r.commit("overwrite", make_rows(ids_in(0, 10)), partitions=[{"p": 0}])  # 2: a
    r.commit("overwrite", make_rows(ids_in(0, 20)), partitions=[{"p": 0}])  # 3: a
    r.commit("overwrite", make_rows(ids_in(1, 30)), partitions=[{"p": 1}])  # 4: b
    # a's versions start at 1, 2, 3; b's at 1, 4; c's at 1. The 2nd newest: a -> 2, b -> 1: keep from 2.
    assert r.table.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=2).earliest_commit_retained == 2
    r.check(keep_from=2)
    c_file = [p for p in r.files[1] if "/p=2/" in p]
    assert c_file and set(c_file) <= r.data_files()  # the untouched partition keeps its old file
    # One version each: a's and b's older ones go; snapshots that need them expire with them.
    assert r.table.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=1).earliest_commit_retained == 4
    r.check(keep_from=4)
    assert set(c_file) <= r.data_files()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"policy": "KEEP_EVERYTHING"}, "policy must be one of"),
        ({"policy": "KEEP_LATEST_COMMITS", "commits_retained": 0}, "commits_retained must be an integer >= 1"),
        ({"policy": "KEEP_LATEST_FILE_VERSIONS", "file_versions_retained": -1}, "file_versions_retained"),
        ({"policy": "KEEP_LATEST_COMMITS", "hours_retained": 3}, "takes commits_retained, not hours_retained"),
        ({"policy": "KEEP_LATEST_BY_HOURS"}, "needs hours_retained"),
    ],
)
def test_bad_policies_are_typed_errors_that_change_nothing(tmp_path, kwargs, match):
    r = commits_history(tmp_path / "t")
    before = r.data_files()
    with pytest.raises(InvalidArgumentError, match=match):
        r.table.clean(**kwargs)
    assert r.data_files() == before and [s.id for s in r.table.snapshots()] == [1, 2, 3, 4, 5]


def test_a_clean_killed_at_any_storage_operation_is_finished_by_the_next_one(tmp_path):
    template = commits_history(tmp_path / "template")
    template.table.create_savepoint(2)
    operations = []
    probe = tmp_path / "probe"
    shutil.copytree(template.table.uri, probe)
    table = Table.open(str(probe))
    table.storage.on_operation = lambda kind, path: operations.append((kind, path))
    table.clean("KEEP_LATEST_COMMITS", commits_retained=2)
    assert len(operations) > 10
    for crash_at in range(len(operations)):  # every storage operation: reads and listings too
        copy = tmp_path / f"crash-{crash_at}"
        shutil.copytree(template.table.uri, copy)
        crashing = Table.open(str(copy))
        count = {"n": 0}

        def crash(kind, path, crash_at=crash_at, count=count):
            count["n"] += 1
            if count["n"] - 1 == crash_at:
                raise OSError(f"killed at {kind} {path}")

        crashing.storage.on_operation = crash
        with pytest.raises(OSError):
            crashing.clean("KEEP_LATEST_COMMITS", commits_retained=2)
        Table.open(str(copy)).clean("KEEP_LATEST_COMMITS", commits_retained=2)
        rerun = Recorded.__new__(Recorded)
        rerun.table, rerun.files, rerun.rows = Table.open(str(copy)), template.files, template.rows
        rerun.check(keep_from=4, savepoints=[2])


def test_the_cli_contract(tmp_path):
    r = commits_history(tmp_path / "t")
    base = [sys.executable, "-m", "airflow_snaptable.cli"]
    proc = subprocess.run(base + ["savepoint", "create", r.table.uri, "2", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(
        base + ["clean", r.table.uri, "--policy", "KEEP_LATEST_COMMITS", "--commits-retained", "2", "--dry-run", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["result"]
    assert doc["policy"] == "KEEP_LATEST_COMMITS" and doc["earliest_commit_retained"] == 4 and doc["dry_run"] is True
    proc = subprocess.run(
        base + ["clean", r.table.uri, "--policy", "KEEP_LATEST_FILE_VERSIONS", "--commits-retained", "2"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and "InvalidArgumentError" in proc.stderr
    proc = subprocess.run(base + ["savepoints", r.table.uri, "--json"], capture_output=True, text=True, timeout=120)
    assert [t["name"] for t in json.loads(proc.stdout)] == ["savepoint-2"]
    assert [s.id for s in Table.open(r.table.uri).snapshots()] == [1, 2, 3, 4, 5]
