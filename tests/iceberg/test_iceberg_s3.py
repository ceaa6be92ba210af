"""Compaction and manifest rewriting of a real Iceberg table on S3 (moto and SeaweedFS on 127.0.0.1), the small
files and manifests read in parallel; the lifecycle on every object store is test_iceberg_cloud.py.
"""

from __future__ import annotations

import fsspec
import pytest

from airflow_snaptable.core import Table
from tests.iceberg.conftest import SCHEMA, reachable_files, rows
from tests.s3_servers import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = pytest.mark.s3

FAR = 4_102_444_800_000  # 2100-01-01


def test_compaction_and_manifest_rewriting_on_s3(s3_server, s3_table_uri, tmp_path):
    """On object storage the small files and the manifests are read in parallel (the I/O pool, Storage.read_many):
    pyiceberg reads the same rows after each, and an expiry afterwards leaves exactly what the metadata reaches."""
    from pyiceberg.catalog import load_catalog

    catalog_properties = {
        "type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": s3_table_uri,
        "s3.endpoint": s3_server.endpoint_url, "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY,
        "s3.region": REGION, "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
    }
    catalog = load_catalog("default", **catalog_properties)
    catalog.create_namespace("db")
    table = catalog.create_table("db.orders", schema=SCHEMA)
    for i in range(6):
        table.append(rows(i, "a" if i % 2 else "b"))
    before = sorted(map(repr, table.refresh().scan().to_arrow().to_pylist()))
    ours = Table.open("iceberg://db.orders", catalog=catalog_properties)
    rewritten = ours.rewrite_manifests()
    assert (rewritten.manifests_before, rewritten.manifests_after, rewritten.entries) == (6, 1, 6)
    assert sorted(map(repr, table.refresh().scan().to_arrow().to_pylist())) == before
    result = ours.compact()
    assert result.rewritten_files == 6 and result.added_files == 1
    table = table.refresh()
    assert sorted(map(repr, table.scan().to_arrow().to_pylist())) == before
    statuses = sorted(e.status.name for m in table.metadata.current_snapshot().manifests(table.io) for e in m.fetch_manifest_entry(table.io, discard_deleted=False))
    assert statuses == ["ADDED"] + ["DELETED"] * 6
    ours.expire_snapshots(retain_min=1, older_than=FAR)
    fs = fsspec.filesystem("s3", **s3_server.storage_options())
    prefix = table.location()[len("s3://"):] + "/"
    left = {p[len(prefix):] for p in fs.find(prefix) if not p[len(prefix):].startswith("snaptable/")}
    assert left == reachable_files(table.refresh())
    assert sorted(map(repr, table.refresh().scan().to_arrow().to_pylist())) == before
