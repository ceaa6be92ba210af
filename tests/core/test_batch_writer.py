"""Streaming record batches into data files (the Spark write tasks' path): grouping, flushing, failures."""

from __future__ import annotations

import datetime
import io
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.native.batch_writer import PartitionedBatchWriter
from airflow_snaptable.core.errors import InvalidArgumentError, SchemaMismatchError
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.native.data_files import dictionary_columns, split_by_partition
from tests.conftest import SCHEMA, InjectedCrash, make_rows

MIXED = pa.schema([("a", pa.string()), ("b", pa.int32()), ("d", pa.date32()), ("x", pa.int64())])


def mixed_rows(n: int, seed: int = 7) -> pa.Table:
    rng = random.Random(seed)
    return pa.table(
        {
            "a": [rng.choice(["x", "y", None, "é/ü"]) for _ in range(n)],
            "b": [rng.choice([1, -2, None]) for _ in range(n)],
            "d": [rng.choice([datetime.date(2020, 1, 1), datetime.date(1999, 12, 31), None]) for _ in range(n)],
            "x": list(range(n)),
        },
        schema=MIXED,
    )


def test_split_by_partition_groups_every_row_once_in_order_with_null_keys():
    schema = TableSchema.new(MIXED, ["a", "b", "d"], {}, 0)
    rows = mixed_rows(3000)
    expected: dict[tuple, list[int]] = {}
    for row in rows.to_pylist():
        expected.setdefault((row["a"], row["b"], row["d"]), []).append(row["x"])

    groups = split_by_partition(rows, schema)

    assert {p: g.column("x").to_pylist() for p, g in groups} == expected  # rows keep their order
    assert len(groups) == len(expected)
    assert [p for p, _ in groups] == sorted(expected, key=lambda p: tuple((v is None, str(v)) for v in p))
    assert all(g.schema == MIXED for _, g in groups)


def test_split_by_partition_of_one_partition_keeps_the_rows_as_they_are():
    schema = TableSchema.new(SCHEMA, ["p"], {}, 0)
    rows = make_rows([3, 6, 0, 9], partitions=3)
    [(partition, group)] = split_by_partition(rows, schema)
    assert partition == (0,) and group.equals(rows)
    assert split_by_partition(rows.slice(0, 0), schema) == []


def test_batches_are_buffered_and_written_per_partition_when_the_buffer_is_full(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    rows = make_rows(range(3000), partitions=4)
    writer = PartitionedBatchWriter(table.storage, table.schema, target_file_size=rows.nbytes // 3, compression="zstd")
    for batch in rows.to_batches(max_chunksize=100):
        writer.add(batch)
    flushed = list(writer.written)
    files = writer.finish()

    assert flushed, "the buffer filled up before the end: files were written while batches kept coming"
    assert len(files) > len(flushed) and files[: len(flushed)] == flushed
    assert sum(f.record_count for f in files) == 3000
    read = []
    for data_file in files:
        part = pq.read_table(io.BytesIO(table.storage.read_bytes(data_file.path)))
        assert set(part.column("p").to_pylist()) == {data_file.partition[0]}
        assert data_file.path.startswith(f"data/p={data_file.partition[0]}/")
        read.extend(part.column("id").to_pylist())
    assert sorted(read) == list(range(3000))


def test_a_batch_that_does_not_conform_is_refused_and_nothing_is_written(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    writer = PartitionedBatchWriter(table.storage, table.schema, target_file_size=1 << 20, compression="zstd")
    with pytest.raises(SchemaMismatchError):
        writer.add(make_rows(range(5)).drop_columns(["name"]))
    strict = pa.schema([pa.field("p", pa.int64()), pa.field("id", pa.int64(), nullable=False)])
    strict_table = Table.create(str(tmp_path / "s"), strict, partition_by=["p"])
    strict_writer = PartitionedBatchWriter(strict_table.storage, strict_table.schema, target_file_size=1 << 20, compression="zstd")
    with pytest.raises(SchemaMismatchError, match="not nullable"):
        strict_writer.add(pa.table({"p": [1, 1], "id": [1, None]}, schema=pa.schema([("p", pa.int64()), ("id", pa.int64())])))
    assert writer.finish() == [] and strict_writer.finish() == []
    assert table.verify().unreferenced_files == [] and strict_table.verify().unreferenced_files == []


def test_a_partition_value_that_cannot_be_a_directory_fails_before_writing(tmp_path):
    schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema, partition_by=["k"])
    writer = PartitionedBatchWriter(table.storage, table.schema, target_file_size=1, compression="zstd")
    with pytest.raises(InvalidArgumentError):
        writer.add(pa.table({"k": ["ok", "x" * 5000], "v": [1, 2]}, schema=schema))
    assert writer.written == []
    assert table.verify().unreferenced_files == []


def test_a_failing_partition_write_still_reports_the_files_the_others_wrote(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    writer = PartitionedBatchWriter(table.storage, table.schema, target_file_size=1 << 20, compression="zstd")
    writer.add(make_rows(range(40), partitions=4))

    def fail_in_partition_2(kind: str, path: str) -> None:
        if kind == "write" and path.startswith("data/p=2/"):
            raise InjectedCrash(f"injected failure writing {path}")

    table.storage.on_operation = fail_in_partition_2  # partitions are written concurrently; the others land
    with pytest.raises(InjectedCrash):
        writer.finish()
    table.storage.on_operation = None
    on_disk = set(table.verify().unreferenced_files)
    assert sorted(f.partition for f in writer.written) == [(0,), (1,), (3,)]
    assert {f.path for f in writer.written} == {p for p in on_disk if p.startswith("data/")}


def test_dictionary_encoding_only_for_columns_with_repeated_values():
    rows = pa.table(
        {
            "unique_id": list(range(20_000)),
            "low": [i % 7 for i in range(20_000)],
            "name": [f"n{i % 100}" for i in range(20_000)],
            "nested": pa.array([[i, i] for i in range(20_000)]),  # not countable: Arrow's default (dictionary on)
            "nothing": pa.nulls(20_000, pa.int64()),
        }
    )
    assert dictionary_columns(rows) == ["low", "name", "nested", "nothing"]
    assert dictionary_columns(rows.slice(0, 0)) == rows.column_names
