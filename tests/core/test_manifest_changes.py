"""iter_changes reads a manifest's kind, path and size columns: the same entries as the full decode, failing closed."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.native.manifest import DataFile, FileKind, ManifestEntry, encode_manifest, iter_manifest
from airflow_snaptable.core.native.manifest_changes import iter_changes

ENTRIES = [
    ManifestEntry(FileKind.ADD, DataFile("data/p=1/a.parquet", (1,), 10, 1000, '{"x": 1}')),
    ManifestEntry(FileKind.DELETE, DataFile("data/p=2/b.parquet", (2,), 20, 2000)),
    ManifestEntry(FileKind.ADD, DataFile("data/p=2/c.parquet", (2,), 30, 3000)),
]


@pytest.mark.parametrize("batch_rows", [1, 2, 65_536])
def test_changes_are_the_full_decodes_kind_path_and_size_in_order(batch_rows):
    data = encode_manifest(ENTRIES)
    full = [(e.kind, e.file.path, e.file.file_size) for e in iter_manifest(data, [pa.int64()], "m")]
    changes = list(iter_changes(data, "m", batch_rows=batch_rows))
    assert [(c.kind, c.file.path, c.file.file_size) for c in changes] == full
    assert all(c.kind in (FileKind.ADD, FileKind.DELETE) and isinstance(c.kind, FileKind) for c in changes)


def test_a_manifest_written_before_column_statistics_reads():
    table = pq.read_table(pa.BufferReader(encode_manifest(ENTRIES))).drop_columns(["stats"])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    assert [c.path for c in iter_changes(sink.getvalue().to_pybytes(), "m")] == [e.file.path for e in ENTRIES]


def test_bytes_that_are_not_a_manifest_raise_corrupt_metadata():
    with pytest.raises(CorruptMetadataError, match="m: cannot read Parquet"):
        list(iter_changes(b"not parquet", "m"))
    other = pa.BufferOutputStream()
    pq.write_table(pa.table({"kind": pa.array([0], pa.int8()), "path": ["a"]}), other)
    with pytest.raises(CorruptMetadataError, match="unexpected columns"):
        list(iter_changes(other.getvalue().to_pybytes(), "m"))


def test_an_entry_of_an_unknown_kind_raises_corrupt_metadata():
    table = pq.read_table(pa.BufferReader(encode_manifest(ENTRIES)))
    kinds = pa.array([0, 7, 0], pa.int8())
    table = table.set_column(table.schema.get_field_index("kind"), table.schema.field("kind"), kinds)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    with pytest.raises(CorruptMetadataError, match="unreadable entry"):
        list(iter_changes(sink.getvalue().to_pybytes(), "m"))
