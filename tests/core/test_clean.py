"""Hudi's cleaning policies and savepoints (core/lifecycle/hudi_clean.py).

Each scenario writes down, from Hudi's rule, the earliest snapshot whose state stays (under the
commit policies, the one before Hudi's earliest commit to retain); the files that must survive
are then every file of the states from that snapshot on plus the savepointed states, and every
other data file must be gone. tests/core/test_clean_hudi_oracle.py checks random histories
against Hudi's rules written out file version by file version.
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


def test_keep_latest_commits_keeps_the_n_newest_commits_and_the_version_before(tmp_path):
    r = commits_history(tmp_path / "t")
    # Hudi's earliest commit to retain is 4; snapshot 3's state (the versions before 4) stays too.
    dry = r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2, dry_run=True)
    assert dry.expire.expired_snapshot_ids == [1, 2] and dry.earliest_commit_retained == 3
    assert dry.earliest_commit_to_retain == 4
    assert sorted(dry.expire.data_files) == sorted((r.files[1] | r.files[2]) - r.files[3] - r.files[4] - r.files[5])
    result = r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2)
    assert (result.earliest_commit_to_retain, result.earliest_commit_retained) == (4, 3)
    r.check(keep_from=3)
    # Hudi's completed clean instant
    assert [(c["earliest_commit_to_retain"], c["earliest_commit_retained"]) for c in r.table.cleans()] == [(4, 3)]


def test_a_savepoint_in_the_middle_keeps_its_files_and_restore_returns_to_it(tmp_path):
    r = commits_history(tmp_path / "t")
    r.table.create_savepoint(2)
    assert [t.name for t in r.table.savepoints()] == ["savepoint-2"]
    r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2)
    r.check(keep_from=3, savepoints=[2])
    # A later clean still keeps them.
    r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2)
    r.check(keep_from=3, savepoints=[2])
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
        rerun.check(keep_from=3, savepoints=[2])


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
    assert doc["policy"] == "KEEP_LATEST_COMMITS" and doc["dry_run"] is True
    assert (doc["earliest_commit_to_retain"], doc["earliest_commit_retained"]) == (4, 3)
    proc = subprocess.run(
        base + ["clean", r.table.uri, "--policy", "KEEP_LATEST_FILE_VERSIONS", "--commits-retained", "2"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and "InvalidArgumentError" in proc.stderr
    proc = subprocess.run(base + ["savepoints", r.table.uri, "--json"], capture_output=True, text=True, timeout=120)
    assert [t["name"] for t in json.loads(proc.stdout)] == ["savepoint-2"]
    assert [s.id for s in Table.open(r.table.uri).snapshots()] == [1, 2, 3, 4, 5]


# -- Hudi's rules, scenario by scenario (issue: items 14, 15, 16) ---------------------------------


def test_keep_latest_commits_keeps_the_version_before_the_earliest_commit_to_retain(tmp_path):
    """TestCleanPlanExecutor.testKeepLatestCommits: "We have to keep 1 version before the latest commit time to keep"."""
    r = Recorded(tmp_path / "t")
    r.commit("append", make_rows(ids_in(0, 0) + ids_in(1, 0)))  # 1: p0, p1
    r.commit("overwrite", make_rows(ids_in(0, 10) + ids_in(1, 10)), partitions=[{"p": 0}, {"p": 1}])  # 2
    r.commit("overwrite", make_rows(ids_in(0, 20)), partitions=[{"p": 0}])  # 3
    # Hudi's earliest commit to retain is 2; commit 1's versions are the last before it: nothing is cleaned.
    result = r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2)
    r.check(keep_from=1)
    assert result.expire.expired_snapshot_ids == [] and result.earliest_commit_to_retain == 2
    assert result.earliest_commit_retained == 1
    r.commit("overwrite", make_rows(ids_in(0, 30)), partitions=[{"p": 0}])  # 4
    # Now 3 is the earliest to retain and 2 the version before it: p0's and p1's first files go.
    result = r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2)
    r.check(keep_from=2)
    assert result.earliest_commit_to_retain == 3 and result.expire.expired_snapshot_ids == [1]
    assert [(c["earliest_commit_to_retain"], c["earliest_commit_retained"]) for c in r.table.cleans()] == [(2, 1), (3, 2)]


def test_keep_latest_commits_keeps_a_partition_compacted_or_dropped_at_the_earliest_commit_to_retain(tmp_path):
    """Hudi's replaced file groups go only when replaced *before* the earliest commit to retain."""
    r = Recorded(tmp_path / "t")
    r.commit("append", make_rows(ids_in(0, 0) + ids_in(1, 0)))  # 1: p0, p1
    r.commit("append", make_rows(ids_in(0, 10)))  # 2: a second small p0 file
    r.commit("compact", partitions=[{"p": 0}], min_file_num=2)  # 3: p0's two files rewritten into one
    r.commit("delete", [{"p": 1}])  # 4: p1 dropped
    r.commit("append", make_rows(ids_in(2, 20)))  # 5
    small = r.files[2] - r.files[3]
    assert len(small) == 2
    # 3 to retain: the compacted files stay, read by snapshot 2 (the version before it).
    r.table.clean("KEEP_LATEST_COMMITS", commits_retained=3)
    r.check(keep_from=2)
    assert small <= r.data_files()
    # 4 to retain: p1's file, dropped at 4, stays with snapshot 3; the compacted files go.
    assert r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2).earliest_commit_to_retain == 4
    r.check(keep_from=3)
    assert [p for p in r.data_files() if "/p=1/" in p]


def test_keep_latest_commits_a_partition_dropped_after_the_window_start_keeps_only_what_is_read(tmp_path):
    """Pinned difference: Hudi keeps every version of a file group replaced at or after the earliest commit
    to retain until the replace falls before it; here the versions no retained snapshot reads go at once."""
    r = Recorded(tmp_path / "t")
    r.commit("append", make_rows(ids_in(0, 0) + ids_in(1, 0)))  # 1: a, b
    r.commit("overwrite", make_rows(ids_in(0, 10)), partitions=[{"p": 0}])  # 2: a
    r.commit("overwrite", make_rows(ids_in(0, 20)), partitions=[{"p": 0}])  # 3: a
    r.commit("delete", [{"p": 0}])  # 4: a dropped (Hudi: replaced at 4)
    r.commit("append", make_rows(ids_in(1, 30)))  # 5: b
    assert r.table.clean("KEEP_LATEST_COMMITS", commits_retained=2).earliest_commit_to_retain == 4
    r.check(keep_from=3)  # a's first two versions are gone, Hudi would still have them
    assert not ((r.files[1] | r.files[2]) - r.files[3]) & r.data_files()
    # Once the drop is before the earliest commit to retain, both agree: a's last version goes too.
    assert r.table.clean("KEEP_LATEST_COMMITS", commits_retained=1).earliest_commit_to_retain == 5
    r.check(keep_from=4)
    assert not [p for p in r.data_files() if "/p=0/" in p]


def test_keep_latest_by_hours_keeps_the_version_before_a_commit_at_the_window_start(tmp_path):
    """Hudi's earliest commit to retain is the first committed at or after now - H; the state before it stays."""
    r = Recorded(tmp_path / "t", [T - 3 * HOUR, T - HOUR, T - 10 * 60_000])
    for k in range(3):
        r.commit("overwrite", make_rows(ids_in(0, 10 * k)), partitions=[{"p": 0}])
    r.table.clock = lambda: T
    result = r.table.clean("KEEP_LATEST_BY_HOURS", hours_retained=1)
    r.check(keep_from=1)
    assert result.earliest_commit_to_retain == 2


def test_keep_latest_by_hours_cleans_nothing_without_a_commit_in_the_window(tmp_path):
    """Hudi: no commit in the last H hours, no earliest commit to retain, nothing to clean."""
    r = Recorded(tmp_path / "t", [T - 5 * HOUR, T - 4 * HOUR, T - 3 * HOUR])
    for k in range(3):
        r.commit("overwrite", make_rows(ids_in(0, 10 * k)), partitions=[{"p": 0}])
    r.table.clock = lambda: T
    result = r.table.clean("KEEP_LATEST_BY_HOURS", hours_retained=1)
    r.check(keep_from=1)
    assert result.earliest_commit_to_retain is None and result.expire.expired_snapshot_ids == []


@pytest.mark.parametrize(
    "policy, kwargs, second_kept",
    [
        ("KEEP_LATEST_COMMITS", {"commits_retained": 1}, True),
        ("KEEP_LATEST_BY_HOURS", {"hours_retained": 30}, True),
        ("KEEP_LATEST_FILE_VERSIONS", {}, False),
    ],
)
def test_clean_of_deleted_partitions(tmp_path, policy, kwargs, second_kept):
    """TestCleanPlanExecutor.testCleanDeletePartition: a commit 49 h ago, partition 1 deleted 48 h ago, partition 2
    24 h ago. The commit policies' earliest commit to retain is the second delete: partition 1 goes, partition 2
    stays with the state before it. KEEP_LATEST_FILE_VERSIONS cleans both (replaced file groups)."""
    r = Recorded(tmp_path / "t", [T - 49 * HOUR, T - 48 * HOUR, T - 24 * HOUR])
    r.commit("append", make_rows(ids_in(1, 0) + ids_in(2, 0)))
    r.commit("delete", [{"p": 1}])
    r.commit("delete", [{"p": 2}])
    r.table.clock = lambda: T
    result = r.table.clean(policy, **kwargs)
    r.check(keep_from=2 if second_kept else 3)
    assert bool([p for p in r.data_files() if "/p=2/" in p]) is second_kept
    assert result.earliest_commit_to_retain == (3 if second_kept else None)


def test_keep_latest_file_versions_never_cuts_a_partition_below_its_versions(tmp_path):
    """Writes to one partition never cost another one its N newest versions (or all it has, when fewer)."""
    r = Recorded(tmp_path / "t")
    r.commit("append", make_rows(ids_in(0, 0) + ids_in(1, 0)))  # 1: a, b
    r.commit("overwrite", make_rows(ids_in(0, 10)), partitions=[{"p": 0}])  # 2: a
    r.commit("overwrite", make_rows(ids_in(1, 20)), partitions=[{"p": 1}])  # 3: b
    r.commit("overwrite", make_rows(ids_in(1, 30)), partitions=[{"p": 1}])  # 4: b
    # a's two versions (from 1 and 2) need snapshot 1, which reads b's first version too: nothing goes.
    # (Hudi would delete b's first version: the difference docs/lifecycle.md states.)
    result = r.table.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=2)
    r.check(keep_from=1)
    assert result.expire.expired_snapshot_ids == [] and result.earliest_commit_to_retain is None
    # Fewer versions than N: a has 2 of 3, and all must stay.
    r.commit("overwrite", make_rows(ids_in(1, 40)), partitions=[{"p": 1}])  # 5: b
    r.table.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=3)
    r.check(keep_from=1)
    # a's third version: its 2 newest (from 2 and 6) need snapshot 5 on, b's (from 4 and 5) snapshot 4 on.
    r.commit("overwrite", make_rows(ids_in(0, 50)), partitions=[{"p": 0}])  # 6: a
    r.table.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=2)
    r.check(keep_from=4)


def test_keep_latest_file_versions_cleans_dropped_partitions(tmp_path):
    """Hudi cleans replaced file groups whole under this policy: a dropped partition keeps no version."""
    r = Recorded(tmp_path / "t")
    r.commit("append", make_rows(ids_in(1, 0) + ids_in(2, 0)))  # 1: partitions 1 and 2
    r.commit("append", make_rows(ids_in(1, 10) + ids_in(2, 10)))  # 2: a second file in each
    r.commit("delete", [{"p": 1}])  # 3
    r.commit("delete", [{"p": 2}])  # 4
    assert len(r.data_files()) == 4
    r.table.clean("KEEP_LATEST_FILE_VERSIONS")
    r.check(keep_from=4)
    assert r.data_files() == set()


def test_keep_latest_file_versions_a_recreated_partition_starts_over(tmp_path):
    """A partition dropped and written again is a new file group: the old one's versions all go."""
    r = Recorded(tmp_path / "t")
    r.commit("append", make_rows(ids_in(0, 0)))  # 1
    r.commit("overwrite", make_rows(ids_in(0, 10)), partitions=[{"p": 0}])  # 2
    r.commit("delete", [{"p": 0}])  # 3
    r.commit("append", make_rows(ids_in(0, 20)))  # 4: one version of the new file group
    r.table.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=2)
    r.check(keep_from=4)


def test_keep_latest_file_versions_a_partition_that_needs_old_snapshots_keeps_a_dropped_ones_files(tmp_path):
    """Pinned difference: Hudi cleans a replaced file group at once; here its files go with the last
    snapshot reading them, which a live partition's versions may still need."""
    r = Recorded(tmp_path / "t")
    r.commit("append", make_rows(ids_in(0, 0) + ids_in(1, 0)))  # 1: a, b
    r.commit("overwrite", make_rows(ids_in(0, 10)), partitions=[{"p": 0}])  # 2: a
    r.commit("delete", [{"p": 1}])  # 3: b dropped
    r.table.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=2)
    r.check(keep_from=1)  # a's first version needs snapshot 1, which holds b's file
    r.table.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=1)
    r.check(keep_from=3)


def test_keep_latest_file_versions_savepointed_versions_stay_beyond_n(tmp_path):
    """HUDI-4515: a savepointed file version is never cleaned by this policy; deleting the savepoint frees it."""
    r = Recorded(tmp_path / "t")
    r.commit("append", make_rows(ids_in(0, 0) + ids_in(1, 0)))  # 1: a, b
    r.commit("overwrite", make_rows(ids_in(0, 10)), partitions=[{"p": 0}])  # 2: a
    r.commit("overwrite", make_rows(ids_in(0, 20)), partitions=[{"p": 0}])  # 3: a
    r.commit("delete", [{"p": 1}])  # 4: b dropped
    r.table.create_savepoint(1)
    r.table.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=1)
    r.check(keep_from=4, savepoints=[1])  # a's second version goes; the first and b's file stay for the savepoint
    r.table.delete_savepoint(1)
    r.check(keep_from=4)
