"""The lifecycle on a real Iceberg table on S3 (moto and SeaweedFS on 127.0.0.1).

pyiceberg writes the table straight to the bucket (an SQL catalog on SQLite whose warehouse is
``s3://``, its S3 settings among the catalog properties, as a DAG author would put them in the
connection); expiry, tags, rollback and orphan removal run through the same properties; pyiceberg
then reads every snapshot and ref left with the rows from before, and the objects under the
table location are exactly what pyiceberg's walk of the metadata reaches.
"""

from __future__ import annotations

import time

import fsspec
import pytest

from airflow_snaptable.core import Table
from tests.iceberg.conftest import SCHEMA, read_everything, reachable_files, rows
from tests.s3_servers import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = pytest.mark.s3

FAR = 4_102_444_800_000  # 2100-01-01


def test_expire_tag_rollback_and_orphans_on_s3(s3_server, s3_table_uri, tmp_path):
    from pyiceberg.catalog import load_catalog

    catalog_properties = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": s3_table_uri,
        "s3.endpoint": s3_server.endpoint_url,
        "s3.access-key-id": ACCESS_KEY,
        "s3.secret-access-key": SECRET_KEY,
        "s3.region": REGION,
        # pyiceberg through s3fs, as this package reads the table (pyarrow's S3 client fails SeaweedFS's multipart auth).
        "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
    }
    catalog = load_catalog("default", **catalog_properties)
    catalog.create_namespace("db")
    table = catalog.create_table("db.orders", schema=SCHEMA)
    for i in range(5):
        table.append(rows(i))
    table.overwrite(rows(99, "b"))
    table = table.refresh()
    ids = [s.snapshot_id for s in table.metadata.snapshots]
    location = table.location()
    assert location.startswith("s3://")

    ours = Table.open("iceberg://db.orders", catalog=catalog_properties)
    ours.create_tag("kept", ids[1])
    before = read_everything(table)
    result = ours.expire_snapshots(retain_min=2, older_than=FAR)
    assert sorted(result.expired_snapshot_ids) == sorted(set(ids[:-2]) - {ids[1]})
    assert result.deleted_data_files == 3  # the files appended at 2, 3 and 4: no snapshot left reaches them
    ours.rollback_to(tag="kept")  # Iceberg's setCurrentSnapshot: nothing is deleted

    fs = fsspec.filesystem("s3", **s3_server.storage_options())
    stray = location[len("s3://"):] + "/data/stray-from-a-crashed-writer.parquet"
    fs.pipe_file(stray, b"never committed")
    time.sleep(1.5)
    orphans = Table.open("iceberg://db.orders", catalog=catalog_properties).remove_orphan_files(older_than="1 s", dry_run=False)
    assert "data/stray-from-a-crashed-writer.parquet" in orphans.orphan_files

    after = read_everything(table.refresh())
    assert after["refs"]["main"] == ids[1] and after["refs"]["kept"] == ids[1]
    for snapshot_id, read in after["snapshots"].items():
        assert read == before["snapshots"][snapshot_id]
    prefix = location[len("s3://"):] + "/"
    left = {p[len(prefix):] for p in fs.find(prefix) if not p[len(prefix):].startswith("snaptable/")}
    assert left == reachable_files(table.refresh())


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
