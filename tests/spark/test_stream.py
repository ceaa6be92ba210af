"""Streaming reads: start modes, consumers across restarts, admission control, expiry with a lagging consumer."""

from __future__ import annotations

import pytest

from airflow_snaptable.core import Table
from tests.conftest import SCHEMA, make_rows
from tests.spark.helpers import FORMAT


def run_available_now(spark, uri, checkpoint=None, **options) -> list[list[int]]:
    """Run one Trigger.AvailableNow query; returns the sorted ids of each non-empty micro-batch."""
    batches: list[list[int]] = []

    def collect(df, _batch_id):
        ids = sorted(r.id for r in df.select("id").collect())
        if ids:
            batches.append(ids)

    reader = spark.readStream.format(FORMAT)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    writer = reader.load(uri).writeStream.foreachBatch(collect).trigger(availableNow=True)
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", str(checkpoint))
    query = writer.start()
    query.awaitTermination(120)
    assert not query.isActive
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return batches


def flat(batches) -> list[int]:
    return sorted(i for batch in batches for i in batch)


@pytest.fixture
def table(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    return table


def test_consumer_and_checkpoint_resume_exactly_where_the_stream_stopped(spark, table, tmp_path):
    uri = table.uri
    table.append(make_rows(range(0, 10)))  # 1
    table.append(make_rows(range(10, 20)))  # 2
    checkpoint = tmp_path / "checkpoint"

    first = run_available_now(spark, uri, checkpoint, **{"consumer-id": "etl"})
    assert flat(first) == list(range(20))  # latest-full: the state of snapshot 2
    assert table.consumer("etl").next_snapshot == 3

    table.append(make_rows(range(20, 25)))  # 3
    table.compact(min_file_num=2)  # 4: COMPACT, no new rows
    table.append(make_rows(range(25, 30)))  # 5
    second = run_available_now(spark, uri, checkpoint, **{"consumer-id": "etl"})
    assert flat(second) == list(range(20, 30))  # exactly the new rows, once
    assert table.consumer("etl").next_snapshot == 6

    # nothing new: a restart reads nothing
    assert run_available_now(spark, uri, checkpoint, **{"consumer-id": "etl"}) == []

    # a new query without the checkpoint resumes from the consumer
    table.append(make_rows(range(30, 33)))  # 6
    fresh = run_available_now(spark, uri, tmp_path / "other-checkpoint", **{"consumer-id": "etl"})
    assert flat(fresh) == list(range(30, 33))
    assert table.consumer("etl").next_snapshot == 7


def test_start_modes(spark, table):
    uri = table.uri
    table.append(make_rows(range(0, 5)))  # 1
    table.append(make_rows(range(5, 10)))  # 2
    table.append(make_rows(range(10, 15)))  # 3
    second = table.snapshot(2)
    assert flat(run_available_now(spark, uri, **{"scan.mode": "latest"})) == []
    assert flat(run_available_now(spark, uri, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 2})) == list(range(5, 15))
    full = run_available_now(spark, uri, **{"scan.mode": "from-snapshot-full", "scan.snapshot-id": 2})
    assert full[0] == list(range(10)) or flat(full) == list(range(15))
    assert flat(full) == list(range(15))
    assert flat(run_available_now(spark, uri, **{"scan.mode": "from-timestamp", "scan.timestamp": second.time_millis})) == list(range(10, 15))


def test_max_files_per_trigger_is_a_soft_limit(spark, table):
    uri = table.uri
    table.append(make_rows(range(0, 6)))  # 1: 3 files (one per partition)
    table.append(make_rows(range(6, 7)))  # 2: 1 file
    table.append(make_rows(range(7, 8)))  # 3: 1 file
    table.append(make_rows(range(8, 14)))  # 4: 3 files
    batches = run_available_now(
        spark, uri, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "max-files-per-trigger": 2}
    )
    # snapshot 1 alone is over the limit but is read (at least one snapshot per batch);
    # snapshots 2 and 3 fit together; snapshot 4 alone is over the limit again.
    assert batches == [list(range(0, 6)), [6, 7], list(range(8, 14))]


def test_expiry_keeps_what_a_lagging_stream_consumer_still_needs(spark, table, tmp_path):
    uri = table.uri
    table.append(make_rows(range(0, 5)))  # 1
    checkpoint = tmp_path / "checkpoint"
    assert flat(run_available_now(spark, uri, checkpoint, **{"consumer-id": "slow"})) == list(range(5))
    assert table.consumer("slow").next_snapshot == 2
    for start in range(5, 30, 5):  # 2..6, which the stream has not read yet
        table.append(make_rows(range(start, start + 5)))
    result = table.expire_snapshots(retain_min=1, retain_max=1, time_retained="0 s")
    # The consumer's next snapshot (2) and the base of its next change set (1) survive retain_max.
    assert table.earliest_snapshot().id == 1
    assert result.expired_snapshot_ids == []
    assert flat(run_available_now(spark, uri, checkpoint, **{"consumer-id": "slow"})) == list(range(5, 30))
    assert table.consumer("slow").next_snapshot == 7
    # now the consumer has moved on, expiry can go further
    table.expire_snapshots(retain_min=1, retain_max=1, time_retained="0 s")
    assert table.earliest_snapshot().id == 6
