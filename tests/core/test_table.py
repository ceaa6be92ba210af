"""Unit tests of the public Table API: create/open, options, writes, history, scans."""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_snaptable.core import (
    CommitKind,
    CorruptMetadataError,
    InvalidArgumentError,
    InvalidOptionError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    Table,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from tests.conftest import SCHEMA, make_rows, sorted_ids


def tree(root) -> dict[str, bytes]:
    out = {}
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


# -- create / open -------------------------------------------------------------


def test_create_then_open_round_trips_schema_partitions_and_options(table_uri):
    options = {"snapshot.num-retained.min": "3", "snapshot.time-retained": "2 h"}
    Table.create(table_uri, SCHEMA, partition_by=["p"], options=options)
    opened = Table.open(table_uri)
    assert opened.arrow_schema.equals(SCHEMA)
    assert opened.partition_keys == ("p",)
    assert opened.options.get("snapshot.num-retained.min") == 3
    assert opened.options.get("snapshot.time-retained") == dt.timedelta(hours=2)
    assert opened.options.get("snapshot.expire.limit") == 50  # default
    assert opened.latest_snapshot() is None
    assert opened.snapshots() == []
    assert opened.scan().to_arrow().num_rows == 0


def test_create_accepts_file_url(tmp_path):
    table = Table.create(f"file://{tmp_path}/t", SCHEMA)
    table.append(make_rows(range(3)))
    assert Table.open(str(tmp_path / "t")).scan().to_arrow().num_rows == 3


def test_create_twice_is_an_error(table, table_uri):
    with pytest.raises(TableAlreadyExistsError):
        Table.create(table_uri, SCHEMA)


def test_open_missing_table(tmp_path):
    with pytest.raises(TableNotFoundError):
        Table.open(str(tmp_path / "nothing"))
    assert not Table.exists(str(tmp_path / "nothing"))


@pytest.mark.parametrize(
    "options",
    [
        {"snapshot.num-retained.mni": "3"},
        {"snapshot.num-retained.min": "zero"},
        {"snapshot.num-retained.min": "0"},
        {"snapshot.time-retained": "1 fortnight"},
        {"snapshot.time-retained": "-1 h"},
        {"snapshot.num-retained.min": "5", "snapshot.num-retained.max": "4"},
        {"tag.creation-period": "weekly"},
        {"target-file-size": "0 mb"},
    ],
)
def test_bad_options_are_typed_errors_and_write_nothing(table_uri, options):
    with pytest.raises(InvalidOptionError):
        Table.create(table_uri, SCHEMA, options=options)
    assert not os.path.exists(table_uri)


@pytest.mark.parametrize(
    "partition_by, error",
    [(["nope"], InvalidArgumentError), (["value"], InvalidArgumentError), (["p", "p"], InvalidArgumentError)],
)
def test_bad_partition_keys(table_uri, partition_by, error):
    with pytest.raises(error):
        Table.create(table_uri, SCHEMA, partition_by=partition_by)
    assert not os.path.exists(table_uri)


def test_schema_must_be_arrow(table_uri):
    with pytest.raises(InvalidArgumentError):
        Table.create(table_uri, {"a": "int"})


# -- writes ------------------------------------------------------------------------


def test_append_makes_one_snapshot_per_call_with_counts(table):
    first = table.append(make_rows(range(10)))
    second = table.append(make_rows(range(10, 15)))
    assert (first.id, first.parent_id, first.commit_kind) == (1, None, CommitKind.APPEND)
    assert (second.id, second.parent_id) == (2, 1)
    assert second.total_record_count == 15 and second.delta_record_count == 5
    assert second.summary["added_files"] == 3 and second.summary["added_records"] == 5
    assert second.time_millis >= first.time_millis
    assert sorted_ids(table.scan().to_arrow()) == list(range(15))
    assert sorted_ids(table.scan(snapshot_id=1).to_arrow()) == list(range(10))


def test_append_accepts_record_batches_and_reordered_columns(table):
    rows = make_rows(range(4))
    table.append(rows.to_batches())
    table.append(rows.select(["value", "name", "id", "p"]))
    assert table.scan().to_arrow().num_rows == 8
    assert table.scan().to_arrow().schema.equals(SCHEMA)


@pytest.mark.parametrize(
    "bad",
    [
        pa.table({"p": [1], "id": [1], "name": ["x"]}),  # missing column
        pa.table({"p": [1], "id": [1], "name": ["x"], "value": [1.0], "extra": [1]}),  # extra column
        pa.table({"p": [1], "id": pa.array([1], pa.int32()), "name": ["x"], "value": [1.0]}),  # wrong type
        {"p": [1]},
        "not data",
    ],
)
def test_schema_mismatch_is_typed_and_writes_nothing(table, table_uri, bad):
    table.append(make_rows(range(3)))
    before = tree(table_uri)
    with pytest.raises(SchemaMismatchError):
        table.append(bad)
    assert tree(table_uri) == before
    assert table.latest_snapshot().id == 1


def test_non_nullable_column_rejects_nulls(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    table = Table.create(str(tmp_path / "t"), schema)
    with pytest.raises(SchemaMismatchError, match="not nullable"):
        table.append(pa.table({"id": pa.array([1, None], pa.int64()), "v": ["a", "b"]}, schema=schema))
    assert table.latest_snapshot() is None


def test_overwrite_whole_table(table):
    table.append(make_rows(range(10)))
    snapshot = table.overwrite(make_rows(range(100, 103)))
    assert snapshot.commit_kind is CommitKind.OVERWRITE
    assert snapshot.total_record_count == 3
    assert sorted_ids(table.scan().to_arrow()) == [100, 101, 102]
    assert sorted_ids(table.scan(snapshot_id=1).to_arrow()) == list(range(10))


def test_overwrite_partitions_only_replaces_those(table):
    table.append(make_rows(range(9)))  # p = 0,1,2 with 3 rows each
    new_rows = make_rows([30, 33])  # both p = 0
    table.overwrite(new_rows, partitions=[{"p": 0}])
    result = table.scan().to_arrow()
    assert sorted_ids(result) == [1, 2, 4, 5, 7, 8, 30, 33]


def test_overwrite_partitions_rejects_rows_outside_them(table, table_uri):
    table.append(make_rows(range(9)))
    before = tree(table_uri)
    with pytest.raises(InvalidArgumentError, match="not among the overwritten partitions"):
        table.overwrite(make_rows([30, 31]), partitions=[{"p": 0}])
    assert tree(table_uri) == before


def test_delete_partitions(table):
    table.append(make_rows(range(9)))
    snapshot = table.delete(partitions=[{"p": 1}, {"p": 2}])
    assert snapshot.commit_kind is CommitKind.DELETE
    assert snapshot.total_record_count == 3 and snapshot.delta_record_count == -6
    assert sorted_ids(table.scan().to_arrow()) == [0, 3, 6]


@pytest.mark.parametrize("partitions", [[], None, [{}], [{"nope": 1}], "p=1"])
def test_delete_bad_partitions(table, partitions):
    table.append(make_rows(range(3)))
    with pytest.raises(InvalidArgumentError):
        table.delete(partitions=partitions)
    assert table.latest_snapshot().id == 1


def test_delete_on_unpartitioned_table_is_an_error(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    with pytest.raises(InvalidArgumentError, match="not partitioned"):
        table.delete(partitions=[{"p": 1}])


def test_compact_rewrites_small_files_into_fewer(table):
    for start in range(0, 30, 5):
        table.append(make_rows(range(start, start + 5)))
    files_before = len(table.scan().files())
    snapshot = table.compact(min_file_num=3)
    assert snapshot.commit_kind is CommitKind.COMPACT
    assert len(table.scan().files()) == 3 < files_before
    assert sorted_ids(table.scan().to_arrow()) == list(range(30))
    assert snapshot.total_record_count == 30 and snapshot.delta_record_count == 0
    assert table.compact(min_file_num=3) is None  # nothing small enough left
    assert table.latest_snapshot().id == snapshot.id


def test_compact_respects_partition_filter(table):
    for start in range(0, 30, 5):
        table.append(make_rows(range(start, start + 5)))
    table.compact(partitions=[{"p": 1}], min_file_num=2)
    per_partition = {}
    for data_file in table.scan().files():
        per_partition[data_file.partition] = per_partition.get(data_file.partition, 0) + 1
    assert per_partition[(1,)] == 1 and per_partition[(0,)] == 6


def test_commit_identifier_applies_once(table):
    first = table.append(make_rows(range(3)), commit_user="job", commit_identifier=7)
    again = table.append(make_rows(range(3)), commit_user="job", commit_identifier=7)
    assert again == first
    assert table.latest_snapshot().id == 1
    table.append(make_rows(range(3, 6)), commit_user="job", commit_identifier=8)
    table.append(make_rows(range(6, 9)), commit_user="other", commit_identifier=7)
    # An older identifier of the same user, retried after newer commits, is still found.
    assert table.append(make_rows(range(3)), commit_user="job", commit_identifier=7) == first
    assert table.scan().to_arrow().num_rows == 9


@pytest.mark.parametrize("kwargs", [{"commit_identifier": 1}, {"commit_user": "u", "commit_identifier": -1}, {"commit_user": "u", "commit_identifier": "x"}, {"watermark": "soon"}])
def test_bad_commit_arguments(table, kwargs):
    with pytest.raises(InvalidArgumentError):
        table.append(make_rows(range(3)), **kwargs)
    assert table.latest_snapshot() is None


def test_partition_values_of_every_supported_type(tmp_path):
    schema = pa.schema([("s", pa.string()), ("d", pa.date32()), ("b", pa.bool_()), ("v", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema, partition_by=["s", "d", "b"])
    rows = pa.table(
        {
            "s": ["a/b", "x=y", None, "ünï"],
            "d": [dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 1), None],
            "b": [True, False, None, True],
            "v": [1, 2, 3, 4],
        },
        schema=schema,
    )
    table.append(rows)
    assert sorted(table.scan().to_arrow().column("v").to_pylist()) == [1, 2, 3, 4]
    pruned = table.scan(filter=pc.field("s") == "a/b")
    assert len(pruned.files()) == 1 and pruned.to_arrow().column("v").to_pylist() == [1]
    # Partition directories never contain a raw separator from the value.
    for data_file in table.scan().files():
        assert data_file.path.count("/") == 4
    assert table.scan(filter=[("d", "=", dt.date(2026, 1, 1))]).to_arrow().num_rows == 2


# -- history ----------------------------------------------------------------------


def test_snapshot_at_is_a_binary_search(table):
    clock = iter(range(1_000, 1_000_000, 1_000))
    table.clock = lambda: next(clock)
    for i in range(64):
        table.append(make_rows([i]))
    assert table.snapshot(10).time_millis == 10_000
    table.storage.reset_counts()
    assert table.snapshot_at(10_500).id == 10
    reads = table.storage.counts["read"]
    assert reads <= 2 + 7  # two hints + log2(64) + 1 snapshot reads
    assert table.snapshot_at(999) is None
    assert table.snapshot_at(10**9).id == 64
    assert table.snapshot_at(dt.datetime.fromtimestamp(20.0, dt.timezone.utc)).id == 20
    assert table.snapshot_at("1970-01-01T00:00:30Z").id == 30
    assert table.scan(as_of=30_000).snapshot_id == 30


def test_commit_time_never_goes_backwards(table):
    times = iter([5_000, 3_000])
    table.clock = lambda: next(times)
    first = table.append(make_rows([1]))
    second = table.append(make_rows([2]))
    assert second.time_millis == first.time_millis == 5_000


def test_watermarks_are_monotonic_and_searchable(table):
    table.append(make_rows([1]))
    table.append(make_rows([2]), watermark=100)
    table.append(make_rows([3]))  # inherits 100
    table.append(make_rows([4]), watermark=50)  # never goes back
    table.append(make_rows([5]), watermark=300)
    assert [s.watermark for s in table.snapshots()] == [None, 100, 100, 100, 300]
    assert table.snapshot_at_watermark(100).id == 2
    assert table.snapshot_at_watermark(101).id == 5
    assert table.snapshot_at_watermark(1000) is None


def test_snapshot_errors(table):
    table.append(make_rows([1]))
    with pytest.raises(SnapshotNotFoundError):
        table.snapshot(5)
    with pytest.raises(SnapshotNotFoundError):
        table.scan(snapshot_id=5)
    with pytest.raises(InvalidArgumentError):
        table.snapshot(0)
    with pytest.raises(InvalidArgumentError):
        table.scan(snapshot_id=1, as_of=0)
    with pytest.raises(SnapshotNotFoundError):
        table.scan(as_of=0)
    with pytest.raises(InvalidArgumentError):
        table.snapshot_at("not a time")


def test_stale_latest_hint_is_detected(table, table_uri):
    for i in range(3):
        table.append(make_rows([i]))
    hint = os.path.join(table_uri, "snapshot", "LATEST")
    for text in ["1", "garbage", "", "99"]:
        with open(hint, "w") as f:
            f.write(text)
        assert Table.open(table_uri).latest_snapshot().id == 3, text
    os.remove(hint)
    assert Table.open(table_uri).latest_snapshot().id == 3
    assert Table.open(table_uri).append(make_rows([9])).id == 4


def test_latest_probe_is_constant_cost(table):
    for i in range(30):
        table.append(make_rows([i]))
    table.storage.reset_counts()
    assert table.snapshot_manager.latest_id() == 30
    assert table.storage.snapshot_counts() == {"read": 1, "write": 0, "list": 0, "delete": 0, "exists": 2}


def test_corrupt_snapshot_file_is_a_typed_error(table, table_uri):
    table.append(make_rows([1]))
    with open(os.path.join(table_uri, "snapshot", "snapshot-1"), "w") as f:
        f.write('{"id": 1, "trunc')
    with pytest.raises(CorruptMetadataError):
        Table.open(table_uri).scan().to_arrow()


def test_missing_manifest_is_a_typed_error(table, table_uri):
    snapshot = table.append(make_rows([1]))
    os.remove(os.path.join(table_uri, "manifest", snapshot.delta_manifest_list))
    with pytest.raises(CorruptMetadataError, match="missing"):
        Table.open(table_uri).scan().files()


def test_snapshot_json_is_readable(table, table_uri):
    table.append(make_rows([1]), commit_user="u", commit_identifier=3, watermark=42)
    with open(os.path.join(table_uri, "snapshot", "snapshot-1")) as f:
        doc = json.load(f)
    assert doc["commit_kind"] == "APPEND" and doc["commit_identifier"] == 3 and doc["watermark"] == 42


# -- scans ----------------------------------------------------------------------------


def test_scan_filter_prunes_partitions_and_filters_rows(table):
    table.append(make_rows(range(30)))
    scan = table.scan(filter=(pc.field("p") == 1) & (pc.field("id") > 10))
    assert [f.partition for f in scan.files()] == [(1,)]
    assert sorted_ids(scan.to_arrow()) == [13, 16, 19, 22, 25, 28]
    dnf = table.scan(filter=[[("p", "=", 0)], [("p", "=", 2)]])
    assert len(dnf.files()) == 2
    assert len(table.scan(filter=pc.field("id") > 10).files()) == 3  # non-partition filter: no pruning


def test_scan_columns_projection(table):
    table.append(make_rows(range(6)))
    result = table.scan(columns=["id", "name"], filter=pc.field("p") == 0).to_arrow()
    assert result.column_names == ["id", "name"]
    assert sorted(result.column("id").to_pylist()) == [0, 3]
    with pytest.raises(InvalidArgumentError):
        table.scan(columns=["nope"])


@pytest.mark.parametrize("bad_filter", ["p = 1", [("nope", "=", 1)], 42])
def test_bad_filters_are_typed_errors(table, bad_filter):
    table.append(make_rows(range(6)))
    with pytest.raises(InvalidArgumentError):
        table.scan(filter=bad_filter).to_arrow()


def test_to_batches_streams_with_exact_schema(table):
    table.append(make_rows(range(6)))
    batches = list(table.scan().to_batches())
    assert batches and all(b.schema.equals(SCHEMA) for b in batches)
    assert sum(b.num_rows for b in batches) == 6


# -- manifests stay bounded ----------------------------------------------------------------


def test_manifest_count_stays_bounded_and_full_merge_drops_deletes(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "5"})
    for i in range(40):
        table.append(make_rows([i]))
    latest = table.latest_snapshot()
    base = table.manifest_io.read_list(latest.base_manifest_list)
    assert len(base) <= 5
    assert sorted_ids(table.scan().to_arrow()) == list(range(40))
    table.overwrite(make_rows([100]))
    table.append(make_rows([101]))  # the base of this one holds 40 deletes: fully merged
    metas = table.manifest_io.read_list(table.latest_snapshot().base_manifest_list)
    assert sum(m.num_deleted_files for m in metas) == 0
    assert sorted_ids(table.scan().to_arrow()) == [100, 101]
    assert all(sorted_ids(table.scan(snapshot_id=i).to_arrow()) == list(range(i)) for i in (1, 17, 40))
