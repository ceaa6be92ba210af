"""changes() and stream(): incremental reads for downstream pipelines."""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.core import InvalidArgumentError, SnapshotNotFoundError, StreamPositionLostError, Table
from tests.conftest import make_rows, sorted_ids


def test_changes_reports_net_added_and_deleted_rows(table):
    table.append(make_rows(range(6)))  # 1
    table.append(make_rows(range(6, 9)))  # 2
    table.delete(partitions=[{"p": 0}])  # 3: deletes ids 0,3,6
    table.append(make_rows([9, 10]))  # 4
    changes = table.changes(1, 4)
    assert changes.snapshot_ids == [2, 3, 4]
    assert changes.commit_kinds == ["APPEND", "DELETE", "APPEND"]
    # id 6 was added and deleted inside the range: it cancels out of "added".
    assert sorted_ids(changes.added_rows()) == [7, 8, 9, 10]
    assert sorted_ids(changes.deleted_rows()) == [0, 3]
    assert changes.added_record_count == 4 and changes.deleted_record_count == 2
    assert sorted_ids(table.changes(0, 1).added_rows()) == list(range(6))
    assert table.changes(4).added_files == []  # to defaults to latest
    assert table.changes(2, 2).snapshot_ids == []


def test_changes_skip_compaction(table):
    for i in range(4):
        table.append(make_rows(range(i * 3, i * 3 + 3)))
    table.compact(min_file_num=2)
    table.append(make_rows([100]))
    changes = table.changes(2, table.latest_snapshot().id)
    assert changes.commit_kinds == ["APPEND", "APPEND", "COMPACT", "APPEND"]
    assert sorted_ids(changes.added_rows()) == [6, 7, 8, 9, 10, 11, 100]
    assert changes.deleted_files == []


@pytest.mark.parametrize("bounds", [(3, 2), (-1, 2), (0, 9)])
def test_changes_bad_ranges(table, bounds):
    table.append(make_rows([1]))
    table.append(make_rows([2]))
    with pytest.raises((InvalidArgumentError, SnapshotNotFoundError)):
        table.changes(*bounds)


def test_changes_from_an_expired_snapshot_is_an_error(table, table_uri):
    for i in range(3):
        table.append(make_rows([i]))
    os.remove(os.path.join(table_uri, "snapshot", "snapshot-1"))  # as expiry would
    with pytest.raises(SnapshotNotFoundError, match="expired"):
        table.changes(0, 3)
    assert sorted_ids(table.changes(2, 3).added_rows()) == [2]


def test_stream_latest_full_then_deltas(table):
    table.append(make_rows(range(3)))
    table.append(make_rows(range(3, 5)))
    stream = table.stream()
    first = stream.next_plan()
    assert first.full and first.snapshot_id == 2
    assert sorted_ids(stream.read(first)) == list(range(5))
    assert stream.next_plan() is None
    table.append(make_rows([5]))
    plan = stream.next_plan()
    assert (plan.snapshot_id, plan.full, plan.commit_kind) == (3, False, "APPEND")
    assert sorted_ids(stream.read(plan)) == [5]
    assert stream.checkpoint() == 4


def test_stream_start_modes(table):
    clock = iter(range(1_000, 100_000, 1_000))
    table.clock = lambda: next(clock)
    for i in range(4):
        table.append(make_rows([i]))  # snapshot i+1 at time (i+1)*1000
    latest = table.stream("latest")
    assert latest.next_plan() is None and latest.checkpoint() == 5
    from_snapshot = [p.snapshot_id for p in table.stream("from-snapshot", snapshot_id=2)]
    assert from_snapshot == [2, 3, 4]
    full = list(table.stream("from-snapshot-full", snapshot_id=2))
    assert full[0].full and sorted_ids(table.read_files(full[0].added_files)) == [0, 1]
    assert [p.snapshot_id for p in full[1:]] == [3, 4]
    by_time = [p.snapshot_id for p in table.stream("from-timestamp", timestamp=2_500)]
    assert by_time == [3, 4]
    assert [p.snapshot_id for p in table.stream("from-timestamp", timestamp=0)] == [1, 2, 3, 4]


def test_stream_on_empty_table_starts_at_the_first_snapshot(table):
    stream = table.stream()
    assert stream.next_plan() is None
    table.append(make_rows([1]))
    plan = stream.next_plan()
    assert plan.snapshot_id == 1 and not plan.full


def test_stream_skips_compaction_and_overwrite_unless_asked(table):
    for i in range(3):
        table.append(make_rows(range(i * 3, i * 3 + 3)))
    table.compact(min_file_num=2)  # 4
    table.overwrite(make_rows([50]))  # 5
    table.append(make_rows([60]))  # 6
    assert [p.snapshot_id for p in table.stream("from-snapshot", snapshot_id=1)] == [1, 2, 3, 6]
    with_overwrite = [p.snapshot_id for p in table.stream("from-snapshot", snapshot_id=1, include_overwrite=True)]
    assert with_overwrite == [1, 2, 3, 5, 6]


def test_stream_checkpoint_restore_resumes_exactly(table):
    for i in range(3):
        table.append(make_rows([i]))
    stream = table.stream("from-snapshot", snapshot_id=1)
    stream.next_plan()
    position = stream.checkpoint()
    resumed = Table.open(table.uri).stream("latest")
    resumed.restore(position)
    assert [p.snapshot_id for p in resumed] == [2, 3]


def test_stream_position_lost_is_an_error_not_a_skip(table, table_uri):
    for i in range(4):
        table.append(make_rows([i]))
    stream = table.stream("from-snapshot", snapshot_id=1)
    for name in ("snapshot-1", "snapshot-2"):
        os.remove(os.path.join(table_uri, "snapshot", name))  # as expiry would
    with pytest.raises(StreamPositionLostError):
        stream.next_plan()


@pytest.mark.parametrize(
    "kwargs",
    [{"start_mode": "earliest"}, {"start_mode": "from-snapshot"}, {"start_mode": "from-snapshot", "snapshot_id": 0}, {"start_mode": "from-timestamp"}],
)
def test_stream_bad_arguments(table, kwargs):
    with pytest.raises(InvalidArgumentError):
        table.stream(**kwargs)
