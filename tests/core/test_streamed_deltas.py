"""Expiry planning reads deltas streamed: a manifest decoded in batches gives exactly its entries,
and the native store's DeltaEntries hands each snapshot's entries out once, decoded lazily."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.manifest import DataFile, FileKind, ManifestEntry, decode_manifest, encode_manifest, iter_manifest
from airflow_snaptable.core.native_files import DeltaEntries

TYPES = [pa.int64()]


def _entries(count: int, kind: FileKind = FileKind.ADD, prefix: str = "f") -> list[ManifestEntry]:
    return [ManifestEntry(kind, DataFile(f"data/p={i % 3}/{prefix}-{i}.parquet", (i % 3,), i, 10 * i)) for i in range(count)]


@pytest.mark.parametrize("batch_rows", [1, 3, 7, 1000])
def test_batches_decode_to_the_whole_manifest(batch_rows):
    entries = _entries(10) + _entries(4, FileKind.DELETE)
    data = encode_manifest(entries)
    assert list(iter_manifest(data, TYPES, where="m", batch_rows=batch_rows)) == decode_manifest(data, TYPES, where="m") == entries


def test_an_empty_manifest_has_no_entries():
    assert list(iter_manifest(encode_manifest([]), TYPES, where="m")) == []


def test_unreadable_or_foreign_bytes_are_corruption():
    with pytest.raises(CorruptMetadataError):
        list(iter_manifest(b"not parquet", TYPES, where="m"))
    import io

    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.table({"other": [1, 2]}), sink)
    with pytest.raises(CorruptMetadataError, match="unexpected columns"):
        list(iter_manifest(sink.getvalue(), TYPES, where="m"))


def test_delta_entries_hand_out_each_snapshot_once_and_skip_missing_manifests():
    a, b = _entries(3, prefix="a"), _entries(2, FileKind.DELETE, prefix="b")
    contents = {"ma": encode_manifest(a), "mb": encode_manifest(b)}
    decoded = []

    def decode(name, data):
        decoded.append(name)
        return iter_manifest(data, TYPES, where=name)

    # "gone" was skipped as missing (the repair path); "ma" is listed under two snapshots.
    changes = DeltaEntries({2: ["ma", "gone"], 3: ["mb", "ma"]}, contents, decode)
    third = changes.pop(3)
    assert decoded == []  # nothing decoded before the entries are iterated
    assert list(changes.pop(2)) == a
    assert list(third) == b + a
    with pytest.raises(KeyError):
        changes.pop(2)
