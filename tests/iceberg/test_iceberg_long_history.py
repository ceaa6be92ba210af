"""Expiry over a long Iceberg history (issue 27 item 4): each manifest list is read at the cost of
what it adds (core/formats/iceberg/manifest_lists.py), memory stays bounded, and lists laid out
otherwise than Iceberg's writers do (new manifests not first) still lose nothing.

pyiceberg writes the tables; the long history is written directly (tests/iceberg/long_history.py).
After each expiry, the files left are exactly those pyiceberg's walk of the metadata reaches.
"""

from __future__ import annotations

import gc
import io
import tracemalloc

import fastavro
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.formats.iceberg import manifest_lists
from tests.iceberg.conftest import assert_exactly_reachable_left, read_everything, rows
from tests.iceberg.long_history import build_long_history

FAR = 4_102_444_800_000  # 2100-01-01


def _open(env, name: str = "db.orders") -> Table:
    return Table.open(f"iceberg://{name}", catalog=env.properties)


def _reorder_list(path: str, snapshot_id: int, where: str) -> None:
    """Rewrite a manifest list with the snapshot's own manifests last (or second), as no Iceberg writer does."""
    with open(path, "rb") as f:
        reader = fastavro.reader(io.BytesIO(f.read()))
        schema, meta, records = reader.writer_schema, dict(reader.metadata), list(reader)
    own = [r for r in records if r["added_snapshot_id"] == snapshot_id]
    others = [r for r in records if r["added_snapshot_id"] != snapshot_id]
    assert own and others and records[: len(own)] == own  # pyiceberg wrote them first
    reordered = others + own if where == "last" else others[:1] + own + others[1:]
    with open(path, "wb") as f:
        fastavro.writer(f, schema, reordered, codec="deflate", metadata={k: v for k, v in meta.items() if not k.startswith("avro.")})


@pytest.mark.parametrize("where", ["last", "middle"])
def test_a_list_with_its_new_manifests_not_first_loses_nothing(iceberg_env, where):
    """An expired append whose list puts its new manifest last (or between the parent's) is read whole:
    its manifest and data file, freed by the overwrite, are deleted like every other."""
    table = iceberg_env.create()
    for i in range(5):
        table.append(rows(i))
    table = table.refresh()
    third = table.metadata.snapshots[2]
    _reorder_list(third.manifest_list[len("file://"):], third.snapshot_id, where)
    table.overwrite(rows(99, "b"))  # a delete snapshot then an append: every earlier file is freed
    before = read_everything(table)
    result = _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
    assert result.deleted_data_files == 5
    after = read_everything(table)
    assert list(after["snapshots"].values()) == [before["snapshots"][table.refresh().metadata.current_snapshot_id]]
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_a_list_whose_manifest_was_rewritten_in_place_loses_nothing(iceberg_env):
    """A pyiceberg delete of part of a file rewrites it (an overwrite snapshot whose new manifests stand
    where the replaced ones stood, not first): its list is read whole, and every file the final
    overwrite frees goes (0, 1, 1's rewrite without id 1, 2)."""
    table = iceberg_env.create()
    table.append(rows(0))
    table.append(rows(1))
    from pyiceberg.expressions import EqualTo

    table.delete(EqualTo("id", 1))  # the file holding ids 1 and 1001 is rewritten with 1001 only
    table.append(rows(2))
    table.overwrite(rows(99, "b"))
    result = _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
    assert result.deleted_data_files == 4
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_an_expiry_of_a_long_history_holds_memory_bounded_and_deletes_what_the_peer_would(iceberg_env):
    """400 appends written directly, each list naming every manifest before it (80,000 list records):
    a dry-run expiry of all but the newest holds far less than one object per list record (reading
    every list into memory peaked at 65 MB here, and grows with the square of the history)."""
    template = iceberg_env.create("db.template")
    template.append(rows(0))
    build_long_history(iceberg_env.catalog(), "db.template", "db.long", 400)
    table = _open(iceberg_env, "db.long")
    gc.collect()
    tracemalloc.start()
    try:
        result = table.expire_snapshots(retain_min=1, older_than=FAR, dry_run=True)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.expired_snapshot_ids) == 400
    # Every manifest stays in the newest list: only the expired lists themselves go.
    assert result.deleted_data_files == 0 and result.deleted_manifest_files == 400
    assert peak < 20 * 2**20, f"peak {peak / 2**20:.1f} MB"


@pytest.mark.parametrize("operation", ["orphans", "verify"])
def test_the_walk_reads_each_shared_record_once(iceberg_env, monkeypatch, operation):
    """Orphan removal and verify read every list exactly: a list ending with its parent's exact bytes
    is decoded only up to them (the records decoded are the distinct ones, not n(n+1)/2)."""
    template = iceberg_env.create("db.template")
    template.append(rows(0))
    build_long_history(iceberg_env.catalog(), "db.template", "db.long", 300)
    decoded = []
    original = manifest_lists.ListDecoder._records

    def counting(self, where, body, schema, start, end):
        out = original(self, where, body, schema, start, end)
        decoded.append(len(out))
        return out

    monkeypatch.setattr(manifest_lists.ListDecoder, "_records", counting)
    table = _open(iceberg_env, "db.long")
    if operation == "orphans":
        result = table.remove_orphan_files(older_than="0 s", dry_run=True)
    else:
        result = table.verify()
        # The appends' data files were never written: each is missing, named by the snapshot that added it.
        assert len(result.missing_files) == 300 and not result.corrupt_metadata
    # The template's record; the first written list (another writer schema than pyiceberg's: nothing
    # shared) 2; then each list its one new record.
    assert decoded == [1, 2] + [1] * 299
    assert result is not None
