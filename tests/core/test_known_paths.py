"""Issue 9 item 4: ``commit_files`` and paths the table knows.

Every deletion rule relies on a file never being added back under its name (except by a
keep-history rollback, which registers its re-adds). ``commit_files`` takes paths from its
caller, so it must refuse one the table knows; a live file given again to an overwrite of
its own partition stays as it is (Paimon's in-place upgrade).
"""

from __future__ import annotations

import threading

import pytest

from airflow_snaptable.core import CommitConflictError, InvalidArgumentError, Table
from tests.conftest import SCHEMA, make_rows, sorted_ids
from tests.core.test_commit_files import assert_clean, files_on_disk, write_files


def _tree(uri: str) -> dict[str, bytes]:
    import os

    found = {}
    for rel in files_on_disk(uri):
        with open(os.path.join(uri, rel), "rb") as handle:
            found[rel] = handle.read()
    return found


def test_a_path_the_table_deleted_is_refused_and_nothing_changes(table, table_uri):
    """The issue's repro: append; delete its partition; commit_files the deleted file; expire; the file was missing."""
    table.append(make_rows([0]))
    (x,) = table.scan().files()
    table.delete(partitions=[{"p": 0}])
    before = _tree(table_uri)
    with pytest.raises(InvalidArgumentError, match="already known"):
        table.commit_files([x])
    assert _tree(table_uri) == before
    table.expire_snapshots(retain_min=1, time_retained="0 s")
    assert_clean(table)


def test_a_path_a_tag_still_holds_is_refused(table):
    table.append(make_rows([0]))
    (x,) = table.scan().files()
    table.create_tag("t", 1)
    table.delete(partitions=[{"p": 0}])
    table.append(make_rows([1]))
    table.expire_snapshots(retain_min=1, time_retained="0 s")  # only tag t holds x now
    with pytest.raises(InvalidArgumentError, match="tag t"):
        table.commit_files([x])
    assert sorted_ids(table.scan(tag="t").to_arrow()) == [0]


def test_appending_a_live_file_again_is_refused(table, table_uri):
    table.append(make_rows([0, 1]))
    files = table.scan().files()
    before = _tree(table_uri)
    with pytest.raises(InvalidArgumentError, match="already known"):
        table.commit_files(files[:1])
    assert _tree(table_uri) == before


def test_a_live_file_given_to_an_overwrite_of_its_partition_stays(table):
    """It used to be dropped (the DELETE won: 0 rows, summary 'added 1') and then leaked."""
    table.append(make_rows([0, 3, 1]))
    p0 = [f for f in table.scan().files() if f.partition == (0,)]
    new = write_files(table, make_rows([6]))
    snapshot = table.commit_files(p0 + new, mode="overwrite", partitions=[{"p": 0}])
    assert sorted_ids(table.scan().to_arrow()) == [0, 1, 3, 6]
    assert snapshot.summary["added_files"] == 1 and snapshot.summary["deleted_files"] == 0
    table.expire_snapshots(retain_min=1, time_retained="0 s")
    assert sorted_ids(table.scan().to_arrow()) == [0, 1, 3, 6]
    assert_clean(table)


def test_a_live_file_with_other_metadata_is_refused(table):
    from dataclasses import replace

    table.append(make_rows([0]))
    (x,) = table.scan().files()
    with pytest.raises(InvalidArgumentError, match="already known"):
        table.commit_files([replace(x, record_count=5)], mode="overwrite", partitions=[{"p": 0}])


def test_a_retry_of_a_committed_commit_files_still_returns_its_snapshot(table):
    """The known-path rule must not turn an idempotent retry with the same files into an error."""
    files = write_files(table, make_rows([0, 1]))
    first = table.commit_files(files, commit_user="job", commit_identifier=1)
    assert table.commit_files(files, commit_user="job", commit_identifier=1).id == first.id


def test_two_commits_of_the_same_new_file_racing_cannot_both_land(table):
    """The check before committing cannot see a racing commit of the same path: the commit's conflict check does."""
    files = write_files(table, make_rows([0]))
    barrier = threading.Barrier(2)
    real = table.new_commit

    def synchronised_commit():
        commit = real()
        original = commit._attempt

        def attempt(*args, **kwargs):
            barrier.wait(timeout=10)
            return original(*args, **kwargs)

        commit._attempt = attempt
        return commit

    table.new_commit = synchronised_commit
    outcomes = []

    def run():
        try:
            outcomes.append(table.commit_files(files).id)
        except CommitConflictError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len([o for o in outcomes if isinstance(o, int)]) == 1, outcomes
    assert sorted_ids(table.scan().to_arrow()) == [0]


def test_a_path_a_snapshot_that_replaced_a_rolled_back_id_holds_is_refused(tmp_path):
    """The known-path check keeps the snapshots it read between commits. Another writer rolls back and
    commits new snapshots under the same ids: the check must see those, not the ones it kept (the chain
    of parent identities from the latest snapshot breaks at the replaced id). Manifests merge at every
    other commit, so the latest state's manifests no longer name the deleted file: only the delta of
    the new snapshot 3, which the kept snapshots would hide, does."""
    table_uri = str(tmp_path / "t")
    table = Table.create(table_uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "2"})
    for i in (0, 1, 2, 4):
        table.commit_files(write_files(table, make_rows([i])))  # 1..4; the last check kept 1..3
    other = Table.open(table_uri)
    other.rollback_to(snapshot_id=1)
    replaced = write_files(other, make_rows([3]))  # partition 0
    other.commit_files(replaced)  # a new snapshot 2 adds it
    other.delete(partitions=[{"p": 0}])  # a new snapshot 3 deletes it: only snapshot 2 still holds it
    other.commit_files(write_files(other, make_rows([5])))  # a new snapshot 4; the check kept an append as 3
    before = _tree(table_uri)
    with pytest.raises(InvalidArgumentError, match="snapshot 2"):
        table.commit_files(replaced)
    assert _tree(table_uri) == before


def test_only_manifests_whose_partition_bounds_may_hold_the_files_are_read(tmp_path):
    """A commit into one partition reads that partition's manifests, not the table's (manifest-list bounds)."""
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "1000"})
    for i in range(12):
        table.append(make_rows([i]))  # make_rows: p = id % 3, one manifest per commit
    reads = []
    table.storage.on_operation = lambda kind, path: reads.append(path) if kind == "read" and path.startswith("manifest/manifest-") and "list" not in path else None
    table.manifest_io._cache.clear()
    table.commit_files(write_files(table, make_rows([12])))  # partition 0
    table.storage.on_operation = None
    assert 4 <= len(reads) <= 5, reads  # the 4 earlier commits into partition 0 (and the new delta, once written)
