"""The table format on object storage, against real servers on 127.0.0.1: S3 (moto and SeaweedFS,
tests/s3_servers.py), Google Cloud Storage and Azure Blob Storage (fake-gcs-server and Azurite,
tests/cloud_servers.py): the lifecycle and processes racing to commit on every store; the commit point and
bulk deletes of GCS and Azure (S3's: tests/test_s3_servers.py)."""

from __future__ import annotations

import time

import pytest

from airflow_snaptable.core import Table, TableAlreadyExistsError
from airflow_snaptable.core.errors import UnsupportedStorageError
from airflow_snaptable.core.io.storage import Storage
from tests.conftest import SCHEMA, make_rows, sorted_ids
from tests.core.test_concurrency import race_appends
from tests.core.test_lifecycle_races import _race



@pytest.mark.cloud
def test_the_commit_point_is_a_create_if_absent(cloud_server, cloud_table_uri):
    options = cloud_server.storage_options()
    first = Storage.from_uri(cloud_table_uri, options)
    other = Storage(cloud_server.filesystem(), first.root, first.uri)  # another client, as another process has
    assert first.create_exclusive("snapshot/snapshot-1", b"first")
    assert not other.create_exclusive("snapshot/snapshot-1", b"second")
    assert not first.create_exclusive("snapshot/snapshot-1", b"third")
    assert other.read_bytes("snapshot/snapshot-1") == b"first"


def test_table_lifecycle(object_store, object_store_uri):
    options = object_store.storage_options()
    uri = f"{object_store_uri}/table"
    table = Table.create(uri, SCHEMA, partition_by=["p"], storage_options=options)
    with pytest.raises(TableAlreadyExistsError):
        Table.create(uri, SCHEMA, storage_options=options)
    for start in range(0, 12, 3):
        table.append(make_rows(range(start, start + 3)))
    table.overwrite(make_rows([30, 33]), partitions=[{"p": 0}])
    table.delete(partitions=[{"p": 1}])
    table.compact(min_file_num=2)
    table.create_tag("before-expiry", 2)

    reopened = Table.open(uri, options)
    assert [s.id for s in reopened.snapshots()] == list(range(1, 8))
    assert sorted_ids(reopened.scan().to_arrow()) == [2, 5, 8, 11, 30, 33]
    assert sorted_ids(reopened.scan(snapshot_id=2).to_arrow()) == list(range(6))
    assert sorted_ids(reopened.changes(4, 6).deleted_rows()) == [0, 1, 3, 4, 6, 7, 9, 10]
    reopened.storage.reset_counts()
    assert reopened.snapshot_manager.latest_id() == 7
    assert reopened.storage.counts["read"] == 1 and reopened.storage.counts["exists"] == 2

    result = reopened.expire_snapshots(retain_min=1, time_retained="0 s")
    assert result.expired_snapshot_ids == list(range(1, 7))
    assert result.deleted_data_files > 0
    assert sorted_ids(reopened.scan(tag="before-expiry").to_arrow()) == list(range(6))
    assert reopened.verify().ok
    reopened.delete_tag("before-expiry")
    assert reopened.verify().ok
    assert sorted_ids(reopened.scan().to_arrow()) == [2, 5, 8, 11, 30, 33]

    reopened.rollback_to(snapshot_id=7)
    assert reopened.append(make_rows([99])).id == 8
    stray = "data/p=0/data-from-a-crashed-writer.parquet"
    reopened.storage.write_bytes(stray, b"never committed")
    time.sleep(1.5)
    orphans = Table.open(uri, options).remove_orphan_files(older_than="1 s", dry_run=False)
    assert orphans.orphan_files == [stray]
    assert not reopened.storage.exists(stray)
    assert Table.open(uri, options).verify().ok
    assert sorted_ids(Table.open(uri, options).scan().to_arrow()) == [2, 5, 8, 11, 30, 33, 99]


def test_rollback(object_store, object_store_uri):
    options = object_store.storage_options()
    table = Table.create(object_store_uri, SCHEMA, partition_by=["p"], storage_options=options)
    for i in range(5):
        table.append(make_rows([i]))
    table.rollback_to(snapshot_id=2)
    assert sorted_ids(table.scan().to_arrow()) == [0, 1]
    assert table.append(make_rows([9])).id == 3
    assert table.verify().ok


@pytest.mark.cloud
def test_bulk_deletes_go_in_the_stores_batches(cloud_server, cloud_table_uri, monkeypatch):
    storage = Storage.from_uri(cloud_table_uri, cloud_server.storage_options())
    names = [f"data/part-{i:04d}" for i in range(300)]  # three GCS batches, two Azure ones
    storage.fs.pipe({storage.full_path(name): b"x" for name in names})
    assert len(storage.list_files("data")) == 300

    def one_by_one(*args, **kwargs):
        raise AssertionError("a delete of one object, where the store has a batch API")

    # The per-object delete calls of gcsfs/adlfs and of Azure's SDK, refused: only the batch requests can delete.
    for name in ("rm_file", "_rm_file"):
        monkeypatch.setattr(storage.fs, name, one_by_one)
    if cloud_server.scheme == "abfs":
        from azure.storage.blob.aio import ContainerClient

        monkeypatch.setattr(ContainerClient, "delete_blob", one_by_one)
    storage.delete_files(names + ["data/never-there"])  # a missing object is success
    assert storage.list_files("data") == []
    assert storage.counts["delete"] == 301


@pytest.mark.slow
# Four plain writers on each S3 server and on Azure (the lifecycle race below runs on both emulators and checks
# the same among expiries, tags and a consumer): every commit in the history exactly once.
@pytest.mark.parametrize("object_store", [pytest.param("moto", marks=pytest.mark.s3), pytest.param("seaweedfs", marks=pytest.mark.s3),
                                          pytest.param("azure", marks=pytest.mark.cloud)], indirect=True)
def test_four_processes_append(object_store, object_store_uri):
    options = object_store.storage_options()
    Table.create(object_store_uri, SCHEMA, partition_by=["p"], storage_options=options, options={"manifest.merge-min-count": "4"})
    race_appends(object_store_uri, options, commits_per_writer=6 if object_store.scheme == "s3" else 4)


#: How busy each emulator lets the race get in its 12 s (the "it really raced" minimums scale with it): Azurite
#: answers at ~20 ms an operation, fake-gcs-server faster.
RACE_ACTIVITY = {"fake-gcs-server": 0.35, "azurite": 0.2}


@pytest.mark.slow
@pytest.mark.cloud
@pytest.mark.parametrize("cloud_server", ["gcs", "azure"], indirect=True)
def test_writers_expiry_tags_and_a_consumer_race(cloud_server, cloud_table_uri):
    # The S3 race of tests/core/test_lifecycle_races.py: every operation is a few HTTP round trips here too.
    _race(cloud_table_uri, cloud_server.storage_options(), activity=RACE_ACTIVITY[cloud_server.name])


@pytest.mark.parametrize("cloud_server", ["azure"], indirect=True)
@pytest.mark.cloud
def test_an_azure_account_without_blob_batch_deletes_blob_by_blob(cloud_server, cloud_table_uri, monkeypatch):
    # Azure documented blob batch as unavailable on hierarchical namespace accounts, which Azurite does not
    # emulate: the refusal of the whole batch request is what cannot run here, so it alone is simulated.
    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob.aio import ContainerClient

    async def refused(self, *blobs, **kwargs):
        raise HttpResponseError(message="This operation is not permitted on a hierarchical namespace account.")

    monkeypatch.setattr(ContainerClient, "delete_blobs", refused)
    storage = Storage.from_uri(cloud_table_uri, cloud_server.storage_options())
    names = [f"data/part-{i}" for i in range(5)]
    storage.fs.pipe({storage.full_path(name): b"x" for name in names})
    storage.delete_files(names + ["data/never-there"])
    assert storage.list_files("data") == []


@pytest.fixture(scope="module")
def gcs_emulator_without_preconditions():
    """gcp-storage-emulator (PyPI) on 127.0.0.1, in this process: a GCS emulator that ignores ifGenerationMatch."""
    from gcp_storage_emulator.server import create_server

    from tests.s3_servers import free_port

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    try:
        yield {"endpoint_url": f"http://127.0.0.1:{port}", "token": "anon", "project": "snaptable-test"}
    finally:
        server.stop()


@pytest.mark.cloud
def test_a_gcs_server_that_ignores_the_condition_is_refused(gcs_emulator_without_preconditions):
    import fsspec

    options = gcs_emulator_without_preconditions
    fs = fsspec.filesystem("gs", skip_instance_cache=True, **options)
    fs.mkdir("unsafe")
    with pytest.raises(UnsupportedStorageError, match="ignores the create-if-absent condition"):
        Table.create("gs://unsafe/orders", SCHEMA, storage_options=options)
    assert fs.find("unsafe") == []  # the probe is gone, and no table was started


@pytest.mark.cloud
@pytest.mark.parametrize(("uri", "extra"), [("gs://bucket/orders", "gcs"), ("abfs://lake/orders", "azure"), ("s3://bucket/orders", "s3")])
def test_a_store_whose_package_is_missing_names_the_extra(uri, extra, monkeypatch):
    # fsspec's registry, as on a machine without gcsfs / adlfs / s3fs: its class path names a module that is not there.
    import importlib
    import types

    registry = importlib.import_module("fsspec.registry")  # the module (fsspec.registry is also a mapping's name)
    protocol = uri.split("://")[0]
    known = dict(registry.known_implementations)
    known[protocol] = {"class": "not_installed_here.FileSystem", "err": f"Install the package for {protocol}"}
    loaded = {k: v for k, v in registry._registry.items() if k != protocol}  # as if never imported
    monkeypatch.setattr(registry, "known_implementations", known)
    monkeypatch.setattr(registry, "_registry", loaded)
    monkeypatch.setattr(registry, "registry", types.MappingProxyType(loaded))
    with pytest.raises(UnsupportedStorageError, match=rf"pip install 'airflow-snaptable\[{extra}\]'"):
        Table.create(uri, SCHEMA)
