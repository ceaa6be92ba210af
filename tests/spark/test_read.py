"""Batch reads through the data source: time travel, change ranges, types, partition pruning."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.spark import read_table
from tests.conftest import SCHEMA, make_rows
from tests.spark.helpers import FORMAT, arrow_rows, rows_of


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A table with appends, a partition overwrite, a delete, a compaction and two tags."""
    uri = str(tmp_path_factory.mktemp("read") / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.append(make_rows(range(0, 12)))  # 1
    table.append(make_rows(range(12, 24)))  # 2
    table.create_tag("after-2", 2)
    table.overwrite(make_rows([100, 103, 106]), partitions=[{"p": 1}])  # 3
    table.delete(partitions=[{"p": 2}])  # 4
    table.append(make_rows(range(24, 30)))  # 5
    table.append(make_rows(range(30, 33)))  # 6
    table.compact(min_file_num=2)  # 7 (COMPACT)
    table.create_tag("final")
    return uri, table


def load(spark, uri, **options):
    reader = spark.read.format(FORMAT)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load(uri)


def test_every_snapshot_tag_as_of_and_incremental_range_match_core(spark, history):
    uri, table = history
    snapshots = table.snapshots()
    assert [s.id for s in snapshots] == list(range(1, 8))
    cases = []
    for snapshot in snapshots:
        cases.append(({"snapshot-id": snapshot.id}, table.scan(snapshot_id=snapshot.id).to_arrow()))
    cases.append(({}, table.scan().to_arrow()))
    for tag in ("after-2", "final"):
        cases.append(({"tag": tag}, table.scan(tag=tag).to_arrow()))
    third = table.snapshot(3)
    cases.append(({"as-of": third.time_millis}, table.scan(as_of=third.time_millis).to_arrow()))
    iso = dt.datetime.fromtimestamp(third.time_millis / 1000, dt.timezone.utc).isoformat()
    cases.append(({"as-of": iso}, table.scan(as_of=iso).to_arrow()))
    for start, end in [(0, 2), (1, 3), (2, 5), (3, 7), (5, 7), (0, 7)]:
        cases.append(({"incremental-between": f"{start},{end}"}, table.changes(start, end).added_rows()))

    # one Spark job for all cases: each load is planned on its own, tagged with its case number
    from functools import reduce

    from pyspark.sql import functions as F

    frames = [load(spark, uri, **options).withColumn("case", F.lit(i)) for i, (options, _expected) in enumerate(cases)]
    got: dict[int, list] = {i: [] for i in range(len(cases))}
    for row in reduce(lambda a, b: a.unionAll(b), frames).collect():
        got[row["case"]].append(tuple(row)[:-1])
    for i, (options, expected) in enumerate(cases):
        assert sorted(got[i], key=lambda r: r[1]) == sorted(arrow_rows(expected), key=lambda r: r[1]), options


def test_read_errors_are_typed_and_clear(spark, history, tmp_path):
    uri, _table = history
    with pytest.raises(Exception, match="SnapshotNotFoundError"):
        load(spark, uri, **{"snapshot-id": 99}).collect()
    with pytest.raises(Exception, match="TagNotFoundError"):
        load(spark, uri, tag="nope").collect()
    with pytest.raises(Exception, match="at most one of"):
        load(spark, uri, tag="final", **{"snapshot-id": 1}).collect()
    with pytest.raises(Exception, match="TableNotFoundError"):
        spark.read.format(FORMAT).load(str(tmp_path / "missing")).collect()


def test_pushed_filters_prune_partitions_and_skip_files_by_statistics(spark, tmp_path):
    from pyspark.sql import functions as F

    schema = pa.schema([("day", pa.date32()), ("region", pa.string()), ("id", pa.int64()), ("amount", pa.float64())])
    uri = str(tmp_path / "pruned")
    table = Table.create(uri, schema, partition_by=["day", "region"])
    days = [dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)]
    regions = ["eu", "us", None]
    rows = [(days[i % 3], regions[(i // 3) % 3], i, i * 1.5) for i in range(36)]
    for chunk in (rows[:18], rows[18:]):
        table.append(pa.table({name: [r[k] for r in chunk] for k, name in enumerate(schema.names)}, schema=schema))
    assert len(table.scan().files()) == 18  # 9 partitions x 2 appends
    jan = dict(zip((1, 2, 3), days))

    conditions = [
        # (SQL, the same in Python with SQL's null semantics, files read)
        ("day = DATE'2026-01-02'", lambda d, r, i: d == jan[2], 6),
        ("day > DATE'2026-01-01' AND region = 'eu'", lambda d, r, i: d > jan[1] and r == "eu", 4),
        ("region IN ('eu', 'us')", lambda d, r, i: r in ("eu", "us"), 12),
        ("region IS NULL", lambda d, r, i: r is None, 6),
        ("region <> 'eu' AND day <= DATE'2026-01-02'", lambda d, r, i: r is not None and r != "eu" and d <= jan[2], 4),
        ("NOT (region IN ('eu'))", lambda d, r, i: r is not None and r != "eu", 6),
        # id stays with Spark, but skips files by column statistics: the first append's us files hold ids <= 14
        ("region = 'us' AND id > 20", lambda d, r, i: r == "us" and i > 20, 3),
        ("id > 20", lambda d, r, i: i > 20, 9),  # the first append's files hold ids <= 17
        ("amount < 3.0", lambda d, r, i: i * 1.5 < 3.0, 2),  # ids 0 and 1 (one file each)
        ("region = 'us' OR id = 3", lambda d, r, i: r == "us" or i == 3, 18),  # OR across columns: not pushed
    ]
    for condition, predicate, files in conditions:
        # one task per file, so the number of input partitions counts the files read
        df = spark.read.format(FORMAT).option("read.split-size", "1").load(uri).filter(F.expr(condition))
        rdd = df.rdd
        assert rdd.getNumPartitions() == files, condition
        got = sorted((tuple(r) for r in rdd.collect()), key=lambda r: r[2])
        assert got == [r for r in rows if predicate(r[0], r[1], r[2])], condition


def test_without_filter_pushdown_reads_work_and_spark_filters(spark, history):
    from airflow_snaptable.spark import register

    uri, table = history
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        register(spark)  # Spark refuses a reader with pushFilters while the conf is off
        df = load(spark, uri).filter("p = 1")
        assert rows_of(df) == arrow_rows(table.scan(filter=[("p", "=", 1)]).to_arrow())
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        register(spark)
    # a schema given by the reader: those columns only, in that order
    narrow = spark.read.format(FORMAT).schema("id bigint, p bigint").load(uri)
    assert rows_of(narrow) == arrow_rows(table.scan(columns=["id", "p"]).to_arrow())


def test_types_reach_spark_exactly(spark, tmp_path):
    schema = pa.schema(
        [
            ("k", pa.int32()),
            ("i8", pa.int8()),
            ("i16", pa.int16()),
            ("u32", pa.uint32()),
            ("f32", pa.float32()),
            ("big", pa.large_string()),
            ("cat", pa.dictionary(pa.int32(), pa.string())),
            ("flag", pa.bool_()),
            ("day", pa.date32()),
            ("ts_ns", pa.timestamp("ns", tz="UTC")),
            ("ts_local", pa.timestamp("us")),
            ("dec", pa.decimal128(10, 2)),
            ("raw", pa.binary()),
            ("nums", pa.list_(pa.int64())),
        ]
    )
    uri = str(tmp_path / "types")
    table = Table.create(uri, schema, partition_by=["k"])
    moment = dt.datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=dt.timezone.utc)
    data = pa.table(
        {
            "k": pa.array([1, 2], pa.int32()),
            "i8": pa.array([-5, None], pa.int8()),
            "i16": pa.array([300, 7], pa.int16()),
            "u32": pa.array([4_000_000_000, 1], pa.uint32()),
            "f32": pa.array([1.5, None], pa.float32()),
            "big": pa.array(["x" * 3, "é"], pa.large_string()),
            "cat": pa.array(["a", "b"]).dictionary_encode().cast(pa.dictionary(pa.int32(), pa.string())),
            "flag": [True, None],
            "day": [dt.date(2026, 1, 1), None],
            "ts_ns": pa.array([moment, None], pa.timestamp("ns", tz="UTC")),
            "ts_local": pa.array([dt.datetime(2026, 1, 1, 12), None], pa.timestamp("us")),
            "dec": pa.array([decimal.Decimal("12.34"), None], pa.decimal128(10, 2)),
            "raw": [b"\x00\x01", None],
            "nums": [[1, 2], None],
        },
        schema=schema,
    )
    table.append(data)
    df = spark.read.format(FORMAT).load(uri)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {
        "k": "int", "i8": "tinyint", "i16": "smallint", "u32": "bigint", "f32": "float", "big": "string",
        "cat": "string", "flag": "boolean", "day": "date", "ts_ns": "timestamp", "ts_local": "timestamp_ntz",
        "dec": "decimal(10,2)", "raw": "binary", "nums": "array<bigint>",
    }
    got = {r["k"]: r.asDict() for r in df.collect()}
    assert got[1]["u32"] == 4_000_000_000 and got[1]["big"] == "xxx" and got[2]["big"] == "é"
    assert got[1]["cat"] == "a" and got[1]["dec"] == decimal.Decimal("12.34") and got[1]["nums"] == [1, 2]
    assert got[1]["ts_ns"].replace(tzinfo=dt.timezone.utc) == moment  # session time zone is UTC
    assert got[1]["ts_local"] == dt.datetime(2026, 1, 1, 12)
    assert got[2]["i8"] is None and got[2]["day"] is None and got[1]["raw"] == bytearray(b"\x00\x01")


def test_read_table_fast_path_matches_core(spark, history):
    uri, table = history
    for kwargs in ({}, {"snapshot_id": 2}, {"tag": "after-2"}, {"as_of": table.snapshot(3).time_millis}):
        expected = table.scan(**kwargs).to_arrow()
        assert rows_of(read_table(spark, uri, **kwargs)) == arrow_rows(expected), kwargs
    # partition-only filter: pruning alone decides (as core does)
    df = read_table(spark, uri, filter=[("p", "in", [0, 1])])
    assert rows_of(df) == arrow_rows(table.scan(filter=[("p", "in", [0, 1])]).to_arrow())
    assert len(df.inputFiles()) == len(table.scan(filter=[("p", "in", [0, 1])]).files())
    assert all(path.startswith("file:///") for path in df.inputFiles())
    # a term on a data column is applied by Spark too
    dnf = [[("p", "=", 0), ("id", ">", 10)], [("id", "=", 100)]]
    assert rows_of(read_table(spark, uri, filter=dnf)) == arrow_rows(table.scan(filter=dnf).to_arrow())
    assert rows_of(read_table(spark, uri, snapshot_id=2, columns=["id"])) == arrow_rows(table.scan(snapshot_id=2, columns=["id"]).to_arrow())


def test_a_pushed_filter_on_a_non_partition_column_skips_manifests_unread(tmp_path, monkeypatch):
    """Planning reads only the manifests whose column bounds may match, as core's filtered scan does."""
    from pyspark.sql.datasource import GreaterThanOrEqual

    from airflow_snaptable.core.io.storage import Storage
    from airflow_snaptable.spark.datasource import SnapTablePushdownDataSource

    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "100"})
    for start in range(0, 50, 10):  # five appends, five manifests of disjoint id ranges
        table.append(make_rows(range(start, start + 10)))
    source = SnapTablePushdownDataSource({"path": uri})
    reader = source.reader(source.schema())
    assert reader.pushFilters([GreaterThanOrEqual(("id",), 45)]) == [GreaterThanOrEqual(("id",), 45)]  # Spark still filters

    reads = []
    real_op = Storage._op
    monkeypatch.setattr(Storage, "_op", lambda self, kind, rel, n=1: (reads.append(rel) if kind == "read" else None, real_op(self, kind, rel, n))[1])
    planned = reader.planned_files()
    manifests = [rel for rel in reads if rel.startswith("manifest/manifest-") and not rel.startswith("manifest/manifest-list-")]
    assert len(manifests) == 1, manifests
    assert {f.path for f in planned} == {f.path for f in table.scan(filter=pc.field("id") >= 45).files()}
    assert planned and all(f.stats is not None for f in planned)
