"""The manifests compaction and manifest rewriting write with fastavro are what pyiceberg writes.

pyiceberg reads them back (its own Avro reader, by field id): every entry that moved keeps its data
file record (statistics, bounds, split offsets, partition values of every type) and its sequence
numbers; the Avro header carries Iceberg's metadata keys and pyiceberg's schema; the manifest list
entry equals the one pyiceberg's writer makes for the same entries. Also: a table whose old
manifests were written by format v1 (another data_file schema), the rewriter a Spark task is sent,
and the Locator's fast path against the general rule.
"""

from __future__ import annotations

import datetime
import decimal
import json
import pickle
import random
import uuid

import fastavro
import pyarrow as pa

from airflow_snaptable.core import Table
from tests.iceberg.conftest import SCHEMA, IcebergEnv, assert_exactly_reachable_left

URI = "iceberg://db.orders"
FAR = 4_102_444_800_000
#: A v2 data file's fields, as pyiceberg reads them.
DATA_FILE_FIELDS = (
    "content", "file_path", "file_format", "partition", "record_count", "file_size_in_bytes", "column_sizes", "value_counts",
    "null_value_counts", "nan_value_counts", "lower_bounds", "upper_bounds", "key_metadata", "split_offsets", "equality_ids",
    "sort_order_id",
)


def _rows(table) -> list[str]:
    return sorted(map(repr, table.refresh().scan().to_arrow().to_pylist()))


def _fields(data_file) -> dict:
    return {name: getattr(data_file, name) for name in DATA_FILE_FIELDS}


def _path(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else uri


def _header(uri: str) -> dict:
    with open(_path(uri), "rb") as f:
        return fastavro.reader(f).metadata


def _blocks(uri: str) -> int:
    with open(_path(uri), "rb") as f:
        return sum(1 for _block in fastavro.block_reader(f))


def _without_docs(schema):
    if isinstance(schema, dict):
        return {k: _without_docs(v) for k, v in schema.items() if k != "doc"}
    if isinstance(schema, list):
        return [_without_docs(v) for v in schema]
    return schema


def _typed_table(env: IcebergEnv):
    """Partitioned by a date, a timestamp and a string whose name Avro must spell otherwise;
    doubles with NaN, a string column with bounds."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DateType, DoubleType, LongType, NestedField, StringType, TimestampType

    catalog = env.catalog()
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "d", DateType(), required=False), NestedField(2, "ts", TimestampType(), required=False),
        NestedField(3, "region-code", StringType(), required=False), NestedField(4, "id", LongType(), required=False),
        NestedField(5, "value", DoubleType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(1, 1000, IdentityTransform(), "d"), PartitionField(2, 1001, IdentityTransform(), "ts"),
        PartitionField(3, 1002, IdentityTransform(), "region-code"),
    )
    table = catalog.create_table("db.orders", schema=schema, partition_spec=spec)
    arrow = table.schema().as_arrow()
    for i in range(6):
        for region in ("eu-west", "us-east"):
            table.append(pa.table({
                "d": [datetime.date(2026, 1, 2)] * 2, "ts": [datetime.datetime(2026, 1, 2, 3, 4, 5, 6)] * 2,
                "region-code": [region] * 2, "id": [i, 100 + i], "value": [float(i), float("nan")],
            }, schema=arrow))
    return table.refresh()


def _entries_by_path(table, snapshot) -> dict:
    return {e.data_file.file_path: e for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io, discard_deleted=False)}


def _pyiceberg_manifest(table, manifest, entries, out_uri: str):
    """What pyiceberg's own writer makes of the same entries (the reference)."""
    from pyiceberg.manifest import write_manifest

    with write_manifest(
        format_version=table.metadata.format_version, spec=table.metadata.specs()[manifest.partition_spec_id], schema=table.schema(),
        output_file=table.io.new_output(out_uri), snapshot_id=manifest.added_snapshot_id, avro_compression="gzip",
    ) as writer:
        for entry in entries:
            writer.add_entry(entry)
    return writer.to_manifest_file()


def _assert_as_pyiceberg_writes(table, manifest, scratch: str) -> list:
    """The manifest reads back as pyiceberg's writer would have written its entries: same header keys and
    schema, same manifest list entry; and it is written in blocks of many entries, not one per entry."""
    entries = manifest.fetch_manifest_entry(table.io, discard_deleted=False)
    reference = _pyiceberg_manifest(table, manifest, entries, scratch)
    ours, theirs = _header(manifest.manifest_path), _header(scratch)
    assert set(ours) == set(theirs)
    for key in ("schema", "partition-spec", "partition-spec-id", "format-version", "content", "avro.codec"):
        assert ours.get(key) == theirs.get(key), key
    assert _without_docs(json.loads(ours["avro.schema"])) == _without_docs(json.loads(theirs["avro.schema"]))
    for name in ("partition_spec_id", "content", "added_snapshot_id", "added_files_count", "existing_files_count",
                 "deleted_files_count", "added_rows_count", "existing_rows_count", "deleted_rows_count", "partitions", "key_metadata"):
        assert getattr(manifest, name) == getattr(reference, name), name
    if len(entries) > 1:
        assert _blocks(manifest.manifest_path) < len(entries)  # pyiceberg's writer compresses each entry alone
    return entries


def test_compaction_manifests_are_what_pyiceberg_writes_and_keep_every_moved_entry(iceberg_env, tmp_path):
    table = _typed_table(iceberg_env)
    before_rows = _rows(table)
    head = table.metadata.current_snapshot()
    originals = _entries_by_path(table, head)
    result = Table.open(URI, catalog=iceberg_env.properties).compact(min_input_files=2)
    assert result.rewritten_files == 12 and result.added_files == 2
    table = table.refresh()
    replace = table.metadata.current_snapshot()
    assert _rows(table) == before_rows

    deleted, added = [], []
    for n, manifest in enumerate(replace.manifests(table.io)):
        entries = _assert_as_pyiceberg_writes(table, manifest, f"file://{tmp_path}/reference-{n}.avro")
        deleted += [e for e in entries if e.status.name == "DELETED"]
        added += [e for e in entries if e.status.name == "ADDED"]
    assert sorted(e.data_file.file_path for e in deleted) == sorted(originals)
    for entry in deleted:
        original = originals[entry.data_file.file_path]
        assert _fields(entry.data_file) == _fields(original.data_file)  # statistics, bounds, NaN counts, partition
        assert (entry.sequence_number, entry.file_sequence_number) == (original.sequence_number, original.file_sequence_number)
        assert entry.snapshot_id == replace.snapshot_id
    assert sorted((e.data_file.partition[2], e.data_file.record_count) for e in added) == [("eu-west", 12), ("us-east", 12)]
    for entry in added:
        assert entry.snapshot_id == replace.snapshot_id and entry.sequence_number == replace.sequence_number
        assert entry.data_file.partition[0] == (datetime.date(2026, 1, 2) - datetime.date(1970, 1, 1)).days
        assert entry.data_file.value_counts[4] == 12 and entry.data_file.null_value_counts[5] == 0
    # pyiceberg prunes by the partition values kept
    assert entry.data_file.partition[1] == 1_767_323_045_000_006  # microseconds, as pyiceberg holds a timestamp
    assert table.scan(row_filter="ts == '2026-01-02T03:04:05.000006'").to_arrow().num_rows == 24
    assert table.scan(row_filter="d == '2026-01-03'").to_arrow().num_rows == 0


def test_rewritten_manifests_keep_each_entry_as_it_was(iceberg_env, tmp_path):
    table = _typed_table(iceberg_env)
    originals = _entries_by_path(table, table.metadata.current_snapshot())
    result = Table.open(URI, catalog=iceberg_env.properties).rewrite_manifests()
    assert result.manifests_after == 1
    table = table.refresh()
    (manifest,) = table.metadata.current_snapshot().manifests(table.io)
    entries = _assert_as_pyiceberg_writes(table, manifest, f"file://{tmp_path}/reference.avro")
    assert sorted(e.data_file.file_path for e in entries) == sorted(originals)
    for entry in entries:
        original = originals[entry.data_file.file_path]
        assert entry.status.name == "EXISTING"
        assert _fields(entry.data_file) == _fields(original.data_file)
        assert (entry.snapshot_id, entry.sequence_number, entry.file_sequence_number) == (
            original.snapshot_id, original.sequence_number, original.file_sequence_number)


def test_a_table_upgraded_from_v1_moves_its_v1_entries_into_v2_manifests(iceberg_env):
    """Manifests written by format v1 have another data_file schema (no content, a block size): their
    entries are encoded again, as data files of sequence number 0."""
    table = iceberg_env.create(properties={"format-version": "1"})
    for i in range(3):
        table.append(pa.table({"p": ["a"], "id": [i]}, schema=SCHEMA))
    with table.transaction() as transaction:
        transaction.upgrade_table_version(format_version=2)
    table = table.refresh()
    for i in range(3):
        table.append(pa.table({"p": ["a"], "id": [10 + i]}, schema=SCHEMA))
    table = table.refresh()
    assert table.metadata.format_version == 2
    before = sorted(table.scan().to_arrow().column("id").to_pylist())
    originals = _entries_by_path(table, table.metadata.current_snapshot())
    ours = Table.open(URI, catalog=iceberg_env.properties)
    assert ours.compact(min_input_files=2).rewritten_files == 6
    table = table.refresh()
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == before
    deleted = [e for e in _entries_by_path(table, table.metadata.current_snapshot()).values() if e.status.name == "DELETED"]
    assert len(deleted) == 6
    for entry in deleted:
        original = originals[entry.data_file.file_path]
        assert _fields(entry.data_file) == _fields(original.data_file)
        assert entry.sequence_number == original.sequence_number
    assert sorted(e.sequence_number for e in deleted) == [0, 0, 0, 1, 2, 3]
    assert ours.rewrite_manifests().manifests_after == 1
    assert sorted(table.refresh().scan().to_arrow().column("id").to_pylist()) == before
    ours.expire_snapshots(retain_min=1, older_than=FAR)
    assert_exactly_reachable_left(iceberg_env.table(), iceberg_env.location())


def test_partition_values_of_every_type_go_through_our_reader_and_writer_as_pyiceberg_holds_them(iceberg_env, tmp_path):
    """A pyiceberg-written manifest read by us, written again by us (from the bytes read, and encoded
    from the record), and read back by pyiceberg: every partition value is the one pyiceberg holds."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.typedef import Record
    from pyiceberg.types import (
        BinaryType, BooleanType, DateType, DecimalType, DoubleType, FixedType, FloatType, IntegerType, LongType, NestedField,
        StringType, TimestampType, TimestamptzType, TimeType, UUIDType,
    )

    from airflow_snaptable.core.formats.iceberg.counted_io import CountedFileIO
    from airflow_snaptable.core.formats.iceberg.files import storage_for
    from airflow_snaptable.core.formats.iceberg.manifest_avro import ContentFile, ManifestWriter, read_entries

    types = [BooleanType(), IntegerType(), LongType(), FloatType(), DoubleType(), DecimalType(9, 2), DateType(), TimeType(),
             TimestampType(), TimestamptzType(), StringType(), UUIDType(), FixedType(3), BinaryType()]
    values = [True, -7, 2**40, 1.5, -2.25, decimal.Decimal("1234.56"), 20_455, 3_600_000_001, 1_767_312_245_000_006,
              -86_400_000_000, "ü-x", uuid.UUID("12345678-1234-5678-1234-567812345678"), b"abc", b"\x00\xff"]
    schema = Schema(*[NestedField(i + 1, f"c{i}", t, required=False) for i, t in enumerate(types)])
    spec = PartitionSpec(*[PartitionField(i + 1, 1000 + i, IdentityTransform(), f"c{i}") for i in range(len(types))])
    catalog = iceberg_env.catalog()
    catalog.create_namespace("db")
    table = catalog.create_table("db.typed", schema=schema, partition_spec=spec)
    metadata = table.metadata
    data_file = DataFile.from_args(
        content=DataFileContent.DATA, file_path=f"{table.location()}/data/x.parquet", file_format=FileFormat.PARQUET,
        partition=Record(*values), record_count=3, file_size_in_bytes=10, lower_bounds={2: b"\x01\x00\x00\x00"}, split_offsets=[4],
    )
    data_file.spec_id = spec.spec_id
    source = _pyiceberg_manifest(table, type("M", (), {"partition_spec_id": spec.spec_id, "added_snapshot_id": 7})(), [
        ManifestEntry.from_args(status=ManifestEntryStatus.EXISTING, snapshot_id=7, sequence_number=3, file_sequence_number=3, data_file=data_file),
    ], f"{table.location()}/metadata/source.avro")
    source.sequence_number = 3
    file_io = CountedFileIO(storage_for(table), table.location(), table.io.properties)
    (entry,) = read_entries(source, file_io, metadata)
    assert [entry.data_file.partition[i] for i in range(len(values))] == values
    assert entry.data_file.encoded is not None

    for n, moved in enumerate([entry.data_file, ContentFile(entry.data_file.record, entry.data_file.spec_id, entry.data_file.partition)]):
        entry.data_file = moved
        with ManifestWriter(file_io.new_output(f"{table.location()}/metadata/ours-{n}.avro"), metadata, spec.spec_id, 8, "gzip") as out:
            out.delete(entry)
        back = out.to_manifest_file().fetch_manifest_entry(table.io, discard_deleted=False)
        assert [b.data_file.partition for b in back] == [data_file.partition]
        assert _fields(back[0].data_file) == _fields(data_file)
        assert (back[0].status, back[0].snapshot_id, back[0].sequence_number) == (ManifestEntryStatus.DELETED, 8, 3)


def test_a_spark_task_is_sent_its_own_groups_files_without_their_statistics(iceberg_env):
    """What SparkGroupRunner sends each task: the rewriter of one group (pickled), opened on the task's storage."""
    from tests.iceberg.test_iceberg_compaction import _rows, _small_appends

    table = _small_appends(iceberg_env, per_partition=5, spec_change=False)
    before = _rows(table)
    ours = Table.open(URI, catalog=iceberg_env.properties)
    sent = []

    def like_spark(groups, rewrite):
        written = []
        for group in groups:
            task = pickle.loads(pickle.dumps(rewrite.for_group(group)))
            sent.append((group, task.data_files))
            written.append(task.on(ours.storage)(group))
        return written

    assert ours.compact(rewrite_groups=like_spark).added_files == 2
    for group, data_files in sent:
        assert sorted(data_files) == sorted(group.files)
        assert all("lower_bounds" not in f.record and f.encoded is None for f in data_files.values())
    assert _rows(table) == before


def test_the_locators_fast_path_agrees_with_the_general_rule():
    from airflow_snaptable.core.formats.iceberg.files import Locator
    from airflow_snaptable.core.io.table_paths import relative_to_location

    rng = random.Random(27)
    locations = ["file:///wh/t", "file:/wh/t/", "/wh/t", "s3://b/wh/t", "s3a://b/wh/./t", "file:///wh/x/../t", "file:///", "s3://b"]
    heads = ["file:///wh/t", "file:/wh/t", "/wh/t", "s3://b/wh/t", "s3a://b/wh/t", "S3://b/wh/t", "s3://b/wh/t2", "file:///wh/x/../t",
             "s3://b", "file:///", "s3://c/wh/t"]
    parts = ["a", "b.parquet", ".", "..", "", "x y", "%2e%2e", ".hidden", "data"]
    for location in locations:
        locator = Locator(location)
        for _ in range(400):
            uri = rng.choice(heads + [location, location.rstrip("/")]) + "/" + "/".join(rng.choice(parts) for _ in range(rng.randint(0, 4)))
            assert locator.relative(uri) == relative_to_location(uri, location), (location, uri)
