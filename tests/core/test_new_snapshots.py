"""core.incremental.find_new_snapshots: what a sensor, a trigger or a job sees after a baseline."""

from __future__ import annotations

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, SnapshotNotFoundError
from airflow_snaptable.core.incremental import (
    DATA_COMMIT_KINDS,
    NewSnapshots,
    consumer_baseline,
    find_new_snapshots,
    normalize_commit_kinds,
)
from tests.conftest import make_rows


def appends(table: Table, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        table.append(make_rows(range(i * 10, i * 10 + 10)))


def test_nothing_new_on_an_empty_table_and_at_the_latest(table):
    empty = find_new_snapshots(table, after_snapshot_id=0)
    assert not empty.found and (empty.from_snapshot_id, empty.to_snapshot_id, empty.latest_snapshot_id) == (0, 0, 0)
    appends(table, 2)
    at_latest = find_new_snapshots(table, after_snapshot_id=2)
    assert not at_latest.found and at_latest.latest_snapshot_id == 2 and at_latest.snapshot_ids == []


def test_the_range_after_a_baseline_matches_table_changes(table):
    appends(table, 3)
    table.delete(partitions=[{"p": 0}])  # snapshot 4
    new = find_new_snapshots(table, after_snapshot_id=1, commit_kinds=DATA_COMMIT_KINDS)
    changes = table.changes(1, 4)
    assert isinstance(new, NewSnapshots) and new.found
    assert (new.from_snapshot_id, new.to_snapshot_id, new.latest_snapshot_id) == (1, 4, 4)
    assert new.snapshot_ids == changes.snapshot_ids == [2, 3, 4]
    assert new.commit_kinds == changes.commit_kinds == ["APPEND", "APPEND", "DELETE"]
    assert new.matching_snapshot_ids == [2, 3, 4]
    assert new.added_records == changes.added_record_count and new.deleted_records == changes.deleted_record_count
    assert new.deleted_records > 0
    assert new.to_dict() == {
        "table": table.uri,
        "from_snapshot_id": 1,
        "to_snapshot_id": 4,
        "snapshot_ids": [2, 3, 4],
        "commit_kinds": ["APPEND", "APPEND", "DELETE"],
        "matching_snapshot_ids": [2, 3, 4],
        "added_records": changes.added_record_count,
        "deleted_records": changes.deleted_record_count,
    }
    lean = find_new_snapshots(table, after_snapshot_id=1, with_changes=False)
    assert lean.added_records is None and "added_records" not in lean.to_dict()


def test_compaction_alone_is_not_new_data_but_is_looked_at(table):
    table.append(make_rows(range(3), partitions=1))
    table.append(make_rows(range(3, 6), partitions=1))
    assert table.compact(min_file_num=2).commit_kind.value == "COMPACT"  # snapshot 3
    quiet = find_new_snapshots(table, after_snapshot_id=2, commit_kinds=["append", "DELETE"])
    assert not quiet.found and quiet.latest_snapshot_id == 3 and quiet.commit_kinds == ["COMPACT"]
    assert find_new_snapshots(table, after_snapshot_id=2).found  # None: every kind counts
    table.delete(partitions=[{"p": 0}])
    new = find_new_snapshots(table, after_snapshot_id=2, commit_kinds=DATA_COMMIT_KINDS)
    assert new.snapshot_ids == [3, 4] and new.matching_snapshot_ids == [4]


def test_the_baseline_of_a_consumer(table, table_uri):
    appends(table, 3)
    assert consumer_baseline(table, "reader") == 0  # a new consumer starts before snapshot 1
    assert find_new_snapshots(table, consumer_id="reader").snapshot_ids == [1, 2, 3]
    table.update_consumer("reader", 3)
    new = find_new_snapshots(table, consumer_id="reader")
    assert (new.from_snapshot_id, new.snapshot_ids) == (2, [3])
    table.update_consumer("reader", 4)
    assert not find_new_snapshots(table, consumer_id="reader").found
    table.expire_snapshots(retain_min=1, time_retained="0 s")
    with pytest.raises(InvalidArgumentError, match="consumer 'late' does not exist"):
        find_new_snapshots(table, consumer_id="late")


def test_an_expired_baseline_is_an_error_not_a_silent_skip(table):
    appends(table, 5)
    table.expire_snapshots(retain_min=2, time_retained="0 s")
    with pytest.raises(SnapshotNotFoundError, match="has expired"):
        find_new_snapshots(table, after_snapshot_id=1)
    assert not find_new_snapshots(table, after_snapshot_id=5).found  # nothing new: no need to read history


def test_after_a_rollback_below_the_baseline_latest_is_reported(table):
    appends(table, 4)
    table.rollback_to(snapshot_id=2)
    new = find_new_snapshots(table, after_snapshot_id=4)
    assert not new.found and new.latest_snapshot_id == 2 and new.to_snapshot_id == 4


@pytest.mark.parametrize("history", [5, 60])
def test_nothing_new_costs_o1_storage_operations(table_uri, history):
    table = Table.create(table_uri, make_rows([]).schema, partition_by=["p"])
    appends(table, history)
    table = Table.open(table_uri)
    find_new_snapshots(table, after_snapshot_id=history)
    table.storage.reset_counts()
    assert not find_new_snapshots(table, after_snapshot_id=history).found
    counts = table.storage.snapshot_counts()
    assert counts["list"] == counts["write"] == counts["delete"] == 0
    assert counts["read"] + counts["exists"] <= 4, counts  # LATEST hint + checks, whatever the history
    table.update_consumer("reader", history + 1)
    table.storage.reset_counts()
    assert not find_new_snapshots(table, consumer_id="reader").found
    assert sum(table.storage.snapshot_counts().values()) <= 5  # plus one consumer read


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "exactly one"),
        ({"after_snapshot_id": 1, "consumer_id": "c"}, "exactly one"),
        ({"after_snapshot_id": -1}, ">= 0"),
        ({"after_snapshot_id": True}, ">= 0"),
        ({"consumer_id": " "}, "non-empty"),
        ({"after_snapshot_id": 0, "commit_kinds": ["MERGE"]}, "unknown commit kind"),
        ({"after_snapshot_id": 0, "commit_kinds": []}, "must not be empty"),
    ],
)
def test_bad_arguments(table, kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        find_new_snapshots(table, **kwargs)


def test_normalize_commit_kinds():
    assert normalize_commit_kinds(None) is None
    assert normalize_commit_kinds("append") == ["APPEND"]
    assert normalize_commit_kinds(["delete", "APPEND", "append"]) == ["APPEND", "DELETE"]
