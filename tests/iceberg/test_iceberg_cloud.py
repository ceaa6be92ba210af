"""The lifecycle on a real Iceberg table on S3 (moto, SeaweedFS), GCS and Azure (fake-gcs-server, Azurite), all
on 127.0.0.1.

pyiceberg writes the table straight to the bucket (an SQL catalog on SQLite whose warehouse is ``s3://``,
``gs://`` or ``abfs://``, the store's settings among the catalog properties, as a DAG author puts them in
the connection); expiry, tags, rollback and orphan removal run through the same properties; pyiceberg then
reads every snapshot and ref left with the rows from before, and the objects under the table location are
exactly what pyiceberg's walk of the metadata reaches.
"""

from __future__ import annotations

import time

from airflow_snaptable.core import Table
from tests.cloud_servers import AZURITE_ACCOUNT, GCS_PROJECT
from tests.iceberg.conftest import SCHEMA, read_everything, reachable_files, rows
from tests.s3_servers import ACCESS_KEY, REGION, SECRET_KEY

FAR = 4_102_444_800_000  # 2100-01-01


def io_properties(server) -> dict:
    """pyiceberg's FileIO properties for the server (pyiceberg.io: s3.*, gcs.*, adls.*)."""
    if server.scheme == "s3":
        return {"s3.endpoint": server.endpoint_url, "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY,
                "s3.region": REGION}
    if server.scheme == "gs":
        return {"gcs.service.host": server.endpoint_url, "gcs.oauth2.token": "anon", "gcs.project-id": GCS_PROJECT}
    return {"adls.connection-string": server.connection_string()}


def test_expire_tag_rollback_and_orphans(object_store, object_store_uri, tmp_path):
    from pyiceberg.catalog import load_catalog

    warehouse = object_store_uri
    if object_store.scheme == "abfs":
        # The form Iceberg tables on ADLS carry: abfs://<container>@<account>.dfs.core.windows.net/<path>.
        container, path = object_store_uri[len("abfs://"):].split("/", 1)
        warehouse = f"abfs://{container}@{AZURITE_ACCOUNT}.dfs.core.windows.net/{path}"
    catalog_properties = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": warehouse,
        **io_properties(object_store),
        # pyiceberg through fsspec, as this package reads the table (pyarrow's S3 client fails SeaweedFS's multipart auth).
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
    assert location.startswith(f"{object_store.scheme}://")

    ours = Table.open("iceberg://db.orders", catalog=catalog_properties)
    ours.create_tag("kept", ids[1])
    before = read_everything(table)
    result = ours.expire_snapshots(retain_min=2, older_than=FAR)
    assert sorted(result.expired_snapshot_ids) == sorted(set(ids[:-2]) - {ids[1]})
    assert result.deleted_data_files == 3  # the files appended at 2, 3 and 4: no snapshot left reaches them
    ours.rollback_to(tag="kept")  # Iceberg's setCurrentSnapshot: nothing is deleted

    fs = object_store.filesystem()
    root = fs._strip_protocol(location)  # <container>/<path> on Azure, whatever account the URI names
    fs.pipe_file(root + "/data/stray-from-a-crashed-writer.parquet", b"never committed")
    time.sleep(1.5)
    orphans = Table.open("iceberg://db.orders", catalog=catalog_properties).remove_orphan_files(older_than="1 s", dry_run=False)
    assert "data/stray-from-a-crashed-writer.parquet" in orphans.orphan_files

    after = read_everything(table.refresh())
    assert after["refs"]["main"] == ids[1] and after["refs"]["kept"] == ids[1]
    for snapshot_id, read in after["snapshots"].items():
        assert read == before["snapshots"][snapshot_id]
    prefix = root + "/"
    left = {p[len(prefix):] for p in fs.find(prefix) if not p[len(prefix):].startswith("snaptable/")}
    assert left == reachable_files(table.refresh())
