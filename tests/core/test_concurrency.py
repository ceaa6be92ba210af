"""Concurrent writers: processes racing for the same snapshot ids, and real conflicts."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from airflow_snaptable.core import CommitConflictError, CommitKind, Table
from airflow_snaptable.core.native.commit_request import CommitRequest
from tests.conftest import SCHEMA, make_rows, sorted_ids

WRITERS = 4
COMMITS_PER_WRITER = 12


def _append_worker(uri: str, storage_options: dict | None, writer: int, commits: int, start, results) -> None:
    table = Table.open(uri, storage_options)
    attempts = []
    table.storage.on_operation = lambda kind, path: attempts.append(path) if path.startswith("snapshot/snapshot-") and kind == "write" else None
    start.wait()
    made = []
    for i in range(commits):
        ids = [writer * 1000 + i * 10 + k for k in range(3)]
        snapshot = table.append(make_rows(ids), commit_user=f"writer-{writer}", commit_identifier=i)
        made.append((snapshot.id, writer, i))
    results.put((made, len(attempts)))


def race_appends(uri: str, storage_options: dict | None = None, commits_per_writer: int = COMMITS_PER_WRITER) -> None:
    """WRITERS processes append at once; every commit must land exactly once, ids contiguous, no row lost."""
    context = mp.get_context("spawn")
    start = context.Barrier(WRITERS)
    results = context.Queue()
    workers = [
        context.Process(target=_append_worker, args=(uri, storage_options, w, commits_per_writer, start, results))
        for w in range(WRITERS)
    ]
    for worker in workers:
        worker.start()
    reports = [results.get(timeout=300) for _ in workers]
    made = [entry for entries, _attempts in reports for entry in entries]
    lost_races = sum(attempts for _entries, attempts in reports) - len(made)
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0

    table = Table.open(uri, storage_options)
    history = table.snapshots()
    total = WRITERS * commits_per_writer
    assert [s.id for s in history] == list(range(1, total + 1))
    assert sorted(m[0] for m in made) == list(range(1, total + 1))
    by_id = {s.id: s for s in history}
    for snapshot_id, writer, i in made:
        assert (by_id[snapshot_id].commit_user, by_id[snapshot_id].commit_identifier) == (f"writer-{writer}", i)
    # The writers really raced: some snapshot ids were contended and retried.
    assert lost_races > 0
    expected = sorted(w * 1000 + i * 10 + k for w in range(WRITERS) for i in range(commits_per_writer) for k in range(3))
    assert sorted_ids(table.scan().to_arrow()) == expected
    assert history[-1].total_record_count == len(expected)
    # Every intermediate snapshot holds exactly the rows of the commits up to it.
    rows_so_far = []
    for snapshot in history:
        rows_so_far += sorted_ids(table.changes(snapshot.id - 1, snapshot.id).added_rows())
        assert snapshot.total_record_count == len(rows_so_far)


@pytest.mark.slow
def test_four_processes_append_to_local_table(tmp_path):
    uri = str(tmp_path / "t")
    Table.create(uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "4"})
    race_appends(uri)


def test_overwrite_conflicts_with_concurrent_change_to_its_partition(table):
    table.append(make_rows(range(6)))
    planned_on = table.latest_snapshot()
    table.append(make_rows([9]))  # p = 0, committed after the overwrite was planned
    doomed = table.scan(snapshot_id=planned_on.id).files()
    request = CommitRequest(
        kind=CommitKind.OVERWRITE,
        added=[],
        deleted=[f for f in doomed if f.partition == (0,)],
        base_snapshot=planned_on,
        commit_user="late",
        overwrite_scope=[{"p": 0}],
    )
    with pytest.raises(CommitConflictError, match="changed partition"):
        table.new_commit().commit(request)
    assert table.latest_snapshot().id == 2
    assert 9 in sorted_ids(table.scan().to_arrow())


def test_overwrite_of_other_partition_commits_after_concurrent_append(table):
    table.append(make_rows(range(6)))
    planned_on = table.latest_snapshot()
    table.append(make_rows([9]))  # p = 0
    request = CommitRequest(
        kind=CommitKind.DELETE,
        added=[],
        deleted=[f for f in table.scan(snapshot_id=1).files() if f.partition == (1,)],
        base_snapshot=planned_on,
        commit_user="late",
        overwrite_scope=[{"p": 1}],
    )
    snapshot = table.new_commit().commit(request)
    assert snapshot.id == 3 and snapshot.parent_id == 2
    assert sorted_ids(table.scan().to_arrow()) == [0, 2, 3, 5, 9]


def test_deleting_a_file_someone_else_deleted_conflicts(table):
    for i in range(3):
        table.append(make_rows(range(i * 3, i * 3 + 3)))
    planned_on = table.latest_snapshot()
    files = table.scan().files()
    table.compact(min_file_num=2)  # deletes every file
    request = CommitRequest(kind=CommitKind.COMPACT, added=[], deleted=files[:1], base_snapshot=planned_on, commit_user="c2")
    with pytest.raises(CommitConflictError, match="already deleted"):
        table.new_commit().commit(request)


def test_overwrite_replans_after_concurrent_compaction(table):
    for i in range(3):
        table.append(make_rows(range(i * 3, i * 3 + 3)))
    planned_on = table.latest_snapshot()
    table.compact(min_file_num=2)  # same rows, new files
    request = CommitRequest(
        kind=CommitKind.OVERWRITE,
        added=[],
        deleted=[f for f in table.scan(snapshot_id=planned_on.id).files() if f.partition == (2,)],
        base_snapshot=planned_on,
        commit_user="late",
        overwrite_scope=[{"p": 2}],
        replan_deleted=lambda latest: [f for f in table.scan(snapshot_id=latest.id).files() if f.partition == (2,)],
    )
    table.new_commit().commit(request)
    assert sorted_ids(table.scan().to_arrow()) == [0, 1, 3, 4, 6, 7]


def test_create_reported_as_lost_but_landed_is_not_committed_twice(table):
    """A client retry of a conditional PUT that landed answers 412: the commit must see its own snapshot."""
    table.append(make_rows([1]))
    real_create = table.storage.create_exclusive

    def create_then_claim_exists(rel, data):
        real_create(rel, data)
        return False

    table.storage.create_exclusive = create_then_claim_exists
    snapshot = table.append(make_rows([2]))
    table.storage.create_exclusive = real_create
    assert snapshot.id == 2
    assert [s.id for s in table.snapshots()] == [1, 2]
    assert sorted_ids(table.scan().to_arrow()) == [1, 2]
