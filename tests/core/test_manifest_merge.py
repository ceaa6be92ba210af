"""Manifest merging keeps a commit's cost independent of the table's size: a merge's full pieces stay."""

from __future__ import annotations

import pyarrow as pa

from airflow_snaptable.core import Table
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.native.manifest_merge import BYTES_PER_ENTRY

TARGET = 8 * 1024  # a merged piece of TARGET // BYTES_PER_ENTRY entries compresses to less than this


def _base_manifests(table: Table, snapshot_id: int) -> dict[str, int]:
    snapshot = table.snapshot(snapshot_id)
    return {m.file_name: m.num_added_files + m.num_deleted_files for m in table.manifest_io.read_list(snapshot.base_manifest_list)}


def test_full_pieces_of_a_merge_are_never_rewritten_by_later_merges(tmp_path):
    schema = pa.schema([("p", pa.int64()), ("id", pa.int64())])
    table = Table.create(
        str(tmp_path / "t"), schema, partition_by=["p"],
        options={"manifest.target-file-size": f"{TARGET} b", "manifest.merge-min-count": "3"},
    )
    for c in range(120):
        table.commit_files([DataFile(f"data/p={i % 4}/f-{c}-{i}.parquet", (i % 4,), 1, 100) for i in range(10)])

    per_piece = TARGET // BYTES_PER_ENTRY
    middle, last = _base_manifests(table, 60), _base_manifests(table, 120)
    full = {name for name, entries in middle.items() if entries >= per_piece}
    assert len(full) >= 5, middle  # 600 entries by then: several pieces, each under the target size
    sizes = {m.file_name: m.file_size for m in table.manifest_io.read_list(table.snapshot(60).base_manifest_list)}
    assert all(sizes[name] < TARGET for name in full), "the test needs pieces a size rule alone calls small"
    assert full <= set(last), "a later merge rewrote a full piece: merging cost grows with the table"
    # and the table reads every file once
    assert len(table.scan().files()) == 1200
