"""Writes through the data source: one snapshot per job, overwrite modes, failures, concurrency, retries."""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_snaptable.core import CommitKind, Table
from airflow_snaptable.core.native.column_stats import FileStats
from tests.conftest import SCHEMA, make_rows
from tests.spark.helpers import FORMAT, arrow_rows, assert_clean, data_files_on_disk, rows_of


def frame(spark, ids, partitions: int = 3, slices: int = 2):
    """A DataFrame with the test schema (p, id, name, value) spread over ``slices`` Spark partitions."""
    return spark.createDataFrame(make_rows(ids, partitions).to_pandas()).repartition(slices)


def save(df, uri, mode="append", **options):
    writer = df.write.format(FORMAT).mode(mode)
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save(uri)


def test_first_write_creates_the_table_then_append_and_overwrite_read_back(spark, tmp_path):
    uri = str(tmp_path / "t")
    df = spark.range(0, 40, numPartitions=4).selectExpr(
        "cast(id % 4 as int) as p", "id", "concat('n', id) as name", "current_date() as day"
    )
    save(df, uri, **{"partition-by": "p", "snapshot.num-retained.min": 3})
    table = Table.open(uri)
    assert table.partition_keys == ("p",)
    assert table.arrow_schema.field("p").type == pa.int32() and table.arrow_schema.field("day").type == pa.date32()
    assert table.options.get("snapshot.num-retained.min") == 3
    assert [s.id for s in table.snapshots()] == [1]  # one snapshot for four tasks
    assert table.latest_snapshot().summary["added_records"] == 40
    assert table.latest_snapshot().summary["engine"] == "spark"

    save(df.filter("id < 10"), uri)
    assert table.latest_snapshot().commit_kind is CommitKind.APPEND
    assert table.scan().to_arrow().num_rows == 50
    got = spark.read.format(FORMAT).load(uri)
    assert rows_of(got) == arrow_rows(table.scan().to_arrow())

    save(df.filter("id >= 30"), uri, mode="overwrite")
    latest = table.latest_snapshot()
    assert latest.id == 3 and latest.commit_kind is CommitKind.OVERWRITE
    assert sorted(r.id for r in spark.read.format(FORMAT).load(uri).collect()) == list(range(30, 40))
    # The tasks write with core's writer: every file carries column statistics, so a filter on id skips files.
    files = table.scan().files()
    assert files and all(FileStats.decode(f.stats).columns["id"].lower >= 30 for f in files)
    assert table.scan(filter=pc.field("id") < 30).files() == []
    assert_clean(table)


def test_dynamic_partition_overwrite_replaces_only_partitions_in_the_data(spark, tmp_path):
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.append(make_rows(range(30)))  # p = 0, 1, 2
    save(frame(spark, [101, 104, 107]), uri, mode="overwrite", **{"overwrite-partitions": "true"})  # all p = 2
    got = table.scan().to_arrow()
    by_partition = {}
    for row in got.to_pylist():
        by_partition.setdefault(row["p"], []).append(row["id"])
    assert sorted(by_partition[2]) == [101, 104, 107]
    assert sorted(by_partition[0]) == list(range(0, 30, 3)) and sorted(by_partition[1]) == list(range(1, 30, 3))
    delta = table.changes(1, 2)
    assert sorted(f.partition for f in delta.deleted_files) == [(2,)]
    assert_clean(table)


def test_dynamic_partition_overwrite_without_rows_replaces_nothing(spark, tmp_path):
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.append(make_rows(range(9)))
    save(frame(spark, range(9)).filter("id < 0"), uri, mode="overwrite", **{"overwrite-partitions": "true"})
    latest = table.latest_snapshot()
    assert latest.id == 2 and latest.commit_kind is CommitKind.APPEND  # a job with no rows commits no change
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(9))
    assert_clean(table)


def test_a_failing_task_leaves_no_snapshot_and_no_files(spark, tmp_path):
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.append(make_rows(range(10)))
    before = data_files_on_disk(uri)

    def explode_on_777(value):
        if value == 777:
            import time

            time.sleep(1.0)  # let the other tasks finish and write their files first
            raise ValueError("bad row 777")
        return value

    boom = F.udf(explode_on_777, LongType())
    # Several tasks finish (and write files) before the last one fails.
    df = frame(spark, range(100, 800), slices=1).withColumn("id", boom("id")).repartition(6, "id")
    with pytest.raises(Exception, match="bad row 777"):
        save(df, uri)
    assert table.latest_snapshot().id == 1
    assert data_files_on_disk(uri) == before
    assert_clean(table)


def test_a_task_failing_after_it_wrote_files_removes_them(spark, tmp_path):
    uri = str(tmp_path / "t")
    # id is not nullable in the table. With a tiny target file size the task writes files for
    # its first Arrow batch (spark.sql.execution.arrow.maxRecordsPerBatch: 10,000 rows), then
    # fails on the null id in its second batch.
    schema = pa.schema([pa.field("p", pa.int64()), pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    table = Table.create(uri, schema, partition_by=["p"], options={"target-file-size": "1 kb"})
    table.append(pa.table({"p": [0, 1], "id": [1, 2], "name": ["a", "b"]}, schema=schema))
    before = data_files_on_disk(uri)
    df = spark.range(0, 15_000, numPartitions=1).selectExpr(
        "id % 3 as p", "if(id = 14999, null, id) as id", "concat('name-', id) as name"
    )
    with pytest.raises(Exception, match="not nullable"):
        save(df, uri)
    assert table.latest_snapshot().id == 1
    assert data_files_on_disk(uri) == before
    assert_clean(table)


def test_concurrent_appends_both_commit(spark, tmp_path):
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    errors = []

    def run(ids):
        try:
            save(frame(spark, ids), uri)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(range(start, start + 50),)) for start in (0, 1000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [s.id for s in table.snapshots()] == [1, 2]
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(50)) + list(range(1000, 1050))
    assert_clean(table, lost_commit_races=True)


def test_concurrent_overwrites_one_wins_or_both_commit_in_turn(spark, tmp_path):
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.append(make_rows(range(5)))
    outcomes: dict[int, Exception | None] = {}
    barrier = threading.Barrier(2)

    def run(start):
        df = frame(spark, range(start, start + 30))
        barrier.wait()
        try:
            save(df, uri, mode="overwrite")
            outcomes[start] = None
        except Exception as exc:  # noqa: BLE001
            outcomes[start] = exc

    threads = [threading.Thread(target=run, args=(start,)) for start in (100, 200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("concurrent overwrites:", {k: type(v).__name__ for k, v in outcomes.items()})
    succeeded = [start for start, error in outcomes.items() if error is None]
    failed = [error for error in outcomes.values() if error is not None]
    assert succeeded, outcomes
    for error in failed:
        assert "CommitConflictError" in str(error)
    assert table.latest_snapshot().id == 1 + len(succeeded)
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    assert ids in (list(range(100, 130)), list(range(200, 230)))
    assert_clean(table, lost_commit_races=True)  # the loser's data files were removed by abort


def test_commit_identifier_makes_a_retried_job_apply_once(spark, tmp_path):
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    options = {"commit-user": "nightly", "commit-identifier": 20261122}
    save(frame(spark, range(20)), uri, **options)
    first = table.latest_snapshot()
    assert (first.commit_user, first.commit_identifier) == ("nightly", 20261122)
    save(frame(spark, range(20)), uri, **options)  # the retry of a job that did commit
    assert table.latest_snapshot().id == first.id
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(20))
    assert_clean(table)  # the retry's files are gone
    save(frame(spark, range(20, 25)), uri, **{**options, "commit-identifier": 20261123})
    assert table.latest_snapshot().id == first.id + 1


def test_write_errors_are_clear_and_change_nothing(spark, tmp_path):
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    wrong = spark.range(3).selectExpr("id as p", "id")
    with pytest.raises(Exception, match="SchemaMismatchError"):
        save(wrong, uri)
    with pytest.raises(Exception, match="commit-identifier needs commit-user"):
        save(frame(spark, [1]), uri, **{"commit-identifier": 1})
    with pytest.raises(Exception, match="partition-by"):
        save(frame(spark, [1]), uri, **{"partition-by": "id"})
    assert table.latest_snapshot() is None
    assert data_files_on_disk(uri) == set()
