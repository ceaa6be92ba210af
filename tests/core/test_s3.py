"""The table format on real S3-compatible servers (moto and SeaweedFS on 127.0.0.1)."""

from __future__ import annotations

import pytest

from airflow_snaptable.core import Table, TableAlreadyExistsError
from tests.conftest import SCHEMA, make_rows, sorted_ids
from tests.core.test_concurrency import race_appends

pytestmark = pytest.mark.s3


def test_table_lifecycle_on_s3(s3_server, s3_table_uri):
    options = s3_server.storage_options()
    table = Table.create(s3_table_uri, SCHEMA, partition_by=["p"], storage_options=options)
    with pytest.raises(TableAlreadyExistsError):
        Table.create(s3_table_uri, SCHEMA, storage_options=options)
    for start in range(0, 12, 3):
        table.append(make_rows(range(start, start + 3)))
    table.overwrite(make_rows([30, 33]), partitions=[{"p": 0}])
    table.delete(partitions=[{"p": 1}])
    table.compact(min_file_num=2)
    table.create_tag("before-expiry", 2)

    reopened = Table.open(s3_table_uri, options)
    assert [s.id for s in reopened.snapshots()] == list(range(1, 8))
    assert sorted_ids(reopened.scan().to_arrow()) == [2, 5, 8, 11, 30, 33]
    assert sorted_ids(reopened.scan(snapshot_id=2).to_arrow()) == list(range(6))
    assert sorted_ids(reopened.changes(4, 6).deleted_rows()) == [0, 1, 3, 4, 6, 7, 9, 10]
    reopened.storage.reset_counts()
    assert reopened.snapshot_manager.latest_id() == 7
    assert reopened.storage.counts["read"] == 1 and reopened.storage.counts["exists"] == 2

    result = reopened.expire_snapshots(retain_min=1, time_retained="0 s")
    assert result.expired_snapshot_ids == list(range(1, 7))
    assert sorted_ids(reopened.scan(tag="before-expiry").to_arrow()) == list(range(6))
    assert reopened.verify().ok
    reopened.delete_tag("before-expiry")
    assert reopened.verify().ok
    assert sorted_ids(reopened.scan().to_arrow()) == [2, 5, 8, 11, 30, 33]


def test_rollback_on_s3(s3_server, s3_table_uri):
    options = s3_server.storage_options()
    table = Table.create(s3_table_uri, SCHEMA, partition_by=["p"], storage_options=options)
    for i in range(5):
        table.append(make_rows([i]))
    table.rollback_to(snapshot_id=2)
    assert sorted_ids(table.scan().to_arrow()) == [0, 1]
    assert table.append(make_rows([9])).id == 3
    assert table.verify().ok


@pytest.mark.slow
def test_four_processes_append_to_s3_table(s3_server, s3_table_uri):
    options = s3_server.storage_options()
    Table.create(s3_table_uri, SCHEMA, partition_by=["p"], storage_options=options, options={"manifest.merge-min-count": "4"})
    race_appends(s3_table_uri, options, commits_per_writer=6)
