"""Paimon tables whose manifests use each codec pypaimon writes (``manifest.compression``), with data files
in each Parquet compression (``file.compression``): the lifecycle runs on them, and pypaimon reads them back.

pypaimon writes ``null``, ``deflate``, ``snappy``, ``zstd`` (Avro's ``zstandard``), ``bzip2`` and ``xz``
manifests. Avro's ``lz4`` (fastavro's, no Paimon writer's) is read too: a table's manifests re-encoded
with it read as before.
"""

from __future__ import annotations

import glob
import io
import os
import shutil

import fastavro
import pytest

from airflow_snaptable.core import Table
from tests.paimon.conftest import FAR_FUTURE, run_client, table_files

#: (manifest.compression, the Avro codec it writes, file.compression of the data files).
CODECS = [
    ("null", "null", "none"),
    ("deflate", "deflate", "gzip"),
    ("snappy", "snappy", "snappy"),
    ("zstd", "zstandard", "zstd"),
    ("bzip2", "bzip2", "lz4"),
    ("xz", "xz", "zstd"),
]
COLUMNS = [["p", "string"], ["id", "int64"], ["v", "string"]]


def _steps(name: str, manifest_compression: str, file_compression: str) -> list:
    table = f"db.{name}"
    return [
        {"create": table, "columns": COLUMNS, "partition": ["p"],
         "options": {"bucket": "-1", "manifest.compression": manifest_compression, "file.compression": file_compression}},
        {"write": table, "rows": [["a", 1, "x"], ["b", 2, "y"]]},  # 1
        {"write": table, "rows": [["a", 3, "x"], ["c", 4, "y"]]},  # 2
        {"write": table, "rows": [["a", 5, "z"]], "overwrite": {"p": "a"}},  # 3: p=a's files of 1 and 2 deleted
        {"write": table, "rows": [["b", 6, "w"]]},  # 4
        {"tag": table, "name": "keep", "snapshot": 2},
        {"read": table},
    ]


@pytest.fixture(scope="module")
def tables(paimon, tmp_path_factory):
    """(warehouse, {table name: what pypaimon read}) of one table per codec, written once."""
    warehouse = str(tmp_path_factory.mktemp("codecs") / "warehouse")
    steps = [step for name, _codec, file_compression in CODECS for step in _steps(f"t_{name}", name, file_compression)]
    read = run_client(paimon.python, warehouse, steps)
    return warehouse, {name.split(".", 1)[1]: answer for name, answer in read.items()}


def _codecs(table_dir: str) -> set[str]:
    """The Avro codecs of the table's manifest lists and manifests, from their headers."""
    found = set()
    for path in glob.glob(os.path.join(table_dir, "manifest", "*")):
        with open(path, "rb") as handle:
            found.add(fastavro.reader(handle).codec)
    return found


def _data_files(read: dict) -> set[str]:
    return {f for f in read["files"] if not f.startswith("manifest/")}


@pytest.mark.parametrize("manifest_compression,codec,file_compression", CODECS, ids=[c[0] for c in CODECS])
def test_the_lifecycle_on_manifests_of_every_codec(paimon, tables, tmp_path, manifest_compression, codec, file_compression):
    source, before = tables
    name = f"t_{manifest_compression}"
    warehouse = str(tmp_path / "w")
    shutil.copytree(source, warehouse)
    table_dir = os.path.join(warehouse, "db.db", name)
    assert _codecs(table_dir) == {codec}
    before = before[name]
    table = Table.open(table_dir)
    assert table.verify().ok
    assert [s.id for s in table.snapshots()] == [1, 2, 3, 4]
    assert set(table.store.files.state(table.snapshot(4))) == _data_files(before["snapshots"]["4"])

    # Expiry keeps the latest snapshot and what the tag holds; a new tag; the old tag's deletion frees its files.
    assert table.expire_snapshots(retain_min=1, retain_max=1, now=FAR_FUTURE).expired_snapshot_ids == [1, 2, 3]
    table.create_tag("latest", 4)
    table.delete_tag("keep")
    assert table.verify().ok

    after = run_client(paimon.python, warehouse, [{"read": f"db.{name}"}])[f"db.{name}"]
    assert list(after["snapshots"]) == ["4"] and sorted(after["tags"]) == ["latest"]
    for read in list(after["snapshots"].values()) + list(after["tags"].values()):
        assert "error" not in read, read
        assert read["rows"] == before["snapshots"]["4"]["rows"]
    assert table_files(table_dir) == set(before["snapshots"]["4"]["files"]) | set(after["tags"]["latest"]["files"])


def test_manifests_in_lz4_read_as_before(tables, tmp_path):
    """Avro's lz4 codec (fastavro's): every manifest list and manifest of a table re-encoded with it."""
    source, _before = tables
    original = os.path.join(source, "db.db", "t_zstd")
    copy = str(tmp_path / "t_lz4")
    shutil.copytree(original, copy)
    for path in glob.glob(os.path.join(copy, "manifest", "*")):
        with open(path, "rb") as handle:
            reader = fastavro.reader(handle)
            schema, records = reader.writer_schema, list(reader)
        out = io.BytesIO()
        fastavro.writer(out, schema, records, codec="lz4")
        with open(path, "wb") as handle:
            handle.write(out.getvalue())
    assert _codecs(copy) == {"lz4"}
    ours, theirs = Table.open(copy), Table.open(original)
    for snapshot_id in (1, 2, 3, 4):
        assert set(ours.store.files.state(ours.snapshot(snapshot_id))) == set(theirs.store.files.state(theirs.snapshot(snapshot_id)))
    assert ours.expire_snapshots(retain_min=1, retain_max=1, now=FAR_FUTURE).expired_snapshot_ids == [1, 2, 3]
    assert ours.verify().missing_files == []
