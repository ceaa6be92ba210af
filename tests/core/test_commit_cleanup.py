"""A commit leaves nothing behind but what its snapshot references (issue 9 item 9 and its siblings).

A commit may write metadata several times: the base list and merged manifests of each
attempt, and a new delta when it re-plans after a concurrent compaction. Whatever the
snapshot it finally publishes does not reference must go, on success and on failure.
"""

from __future__ import annotations

import pytest

from airflow_snaptable.core import CommitConflictError, Table
from tests.conftest import SCHEMA, make_rows, sorted_ids


def _run_once_before(table: Table, kind: str, prefix: str, action) -> None:
    state = {"done": False}

    def hook(op_kind, path):
        if not state["done"] and op_kind == kind and path.startswith(prefix):
            state["done"] = True
            table.storage.on_operation = None
            action()

    table.storage.on_operation = hook


def _merging_table(uri: str) -> Table:
    """Three appends: the base of snapshot 4 merges their three small manifests into one."""
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "3"})
    for i in range(3):
        table.append(make_rows([i]))
    return table


def test_a_commit_that_lost_a_race_after_merging_manifests_leaves_no_merged_manifest(tmp_path):
    """Item 9: only the losing attempt's base list was cleaned up; its merged manifests leaked."""
    uri = str(tmp_path / "t")
    _merging_table(uri)
    committer = Table.open(uri)
    _run_once_before(committer, "write", "snapshot/snapshot-4", lambda: Table.open(uri).append(make_rows([100])))
    snapshot = committer.append(make_rows([200]))
    assert snapshot.id == 5
    assert sorted_ids(committer.scan().to_arrow()) == [0, 1, 2, 100, 200]
    assert Table.open(uri).verify().ok, Table.open(uri).verify()


def test_a_commit_that_fails_after_merging_manifests_leaves_nothing(tmp_path):
    """The same, when the commit finally fails (a conflicting overwrite): nothing of it remains."""
    uri = str(tmp_path / "t")
    _merging_table(uri)
    committer = Table.open(uri)
    _run_once_before(
        committer, "write", "snapshot/snapshot-4", lambda: Table.open(uri).overwrite(make_rows([300]), partitions=[{"p": 0}])
    )
    with pytest.raises(CommitConflictError):
        committer.overwrite(make_rows([0]), partitions=[{"p": 0}])
    assert Table.open(uri).verify().ok, Table.open(uri).verify()


def test_an_overwrite_that_re_plans_after_a_compaction_leaves_no_stale_delta(tmp_path):
    """Sibling: after a concurrent compaction the overwrite writes a new delta; the first one leaked."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    for i in range(3):
        table.append(make_rows([i * 3]))
    committer = Table.open(uri)
    _run_once_before(committer, "write", "snapshot/snapshot-4", lambda: Table.open(uri).compact(min_file_num=2))
    committer.overwrite(make_rows([30]), partitions=[{"p": 0}])
    assert sorted_ids(committer.scan().to_arrow()) == [30]
    assert Table.open(uri).verify().ok, Table.open(uri).verify()


def test_an_idempotent_commit_losing_races_reads_only_the_new_snapshots_on_each_retry(tmp_path):
    """Item 15: each retry re-walked the whole history looking for its identifier (1 commit in 4 s
    against a fast appender's 405). The first check walks history once; retries read only what landed since."""
    uri = str(tmp_path / "t")
    fast = Table.create(uri, SCHEMA, partition_by=["p"])
    for i in range(60):
        fast.append(make_rows([i]), commit_user="fast")
    committer = Table.open(uri)
    races = {"left": 5}
    snapshot_reads = []

    def hook(kind, path):
        if kind == "read" and path.startswith("snapshot/snapshot-"):
            snapshot_reads.append(path)
        if kind == "write" and path.startswith("snapshot/snapshot-") and races["left"]:
            races["left"] -= 1
            committer.storage.on_operation = None
            fast.append(make_rows([1000 + races["left"]]), commit_user="fast")
            committer.storage.on_operation = hook

    committer.storage.on_operation = hook
    snapshot = committer.append(make_rows([5000]), commit_user="slow", commit_identifier=1)
    assert snapshot.id == 66 and races["left"] == 0
    # One walk of the 60-snapshot history, then a few reads per lost race (not 60 per race).
    assert len(snapshot_reads) < 60 + 5 * 6, len(snapshot_reads)
    assert committer.append(make_rows([5001]), commit_user="slow", commit_identifier=1).id == 66
