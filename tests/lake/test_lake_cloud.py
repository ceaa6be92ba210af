"""A lake on S3 (moto, SeaweedFS), GCS (fake-gcs-server) and Azure (Azurite), all on 127.0.0.1: discovery over
prefixes, leases by conditional create (a conditional PUT, ifGenerationMatch=0, If-None-Match), the status
beside each table."""

from __future__ import annotations

from airflow_snaptable.core import Table
from airflow_snaptable.core.lake import SUCCESSFUL, Policy, lake_status, maintain
from airflow_snaptable.core.lake import lease as leases
from airflow_snaptable.core.lake.status import NATIVE_STATUS_DIR
from airflow_snaptable.core.io.storage import Storage
from tests.conftest import SCHEMA, make_rows


def test_a_lake_on_object_storage(object_store, object_store_uri):
    options = object_store.storage_options()
    lake = f"{object_store_uri}/lake"
    for name in ("sales/orders", "ops/metrics/daily"):
        table = Table.create(f"{lake}/{name}", SCHEMA, partition_by=["p"], storage_options=options)
        for i in range(4):
            table.overwrite(make_rows(range(i * 10, i * 10 + 4)))
    assert [t.jobs["snapshot-expiry"]["status"] for t in lake_status(lake, storage_options=options).tables] == ["Not_Yet_Run"] * 2

    held = leases.acquire(Storage.from_uri(f"{lake}/sales/orders", options), f"{NATIVE_STATUS_DIR}/lease", "other-run")
    policy = Policy.from_mapping({"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 1, "max-snapshot-age-hours": 0}}})
    report = maintain(lake, policy, storage_options=options, parallel=2)
    by_name = {t.table: t for t in report.tables}
    assert sorted(by_name) == ["ops.metrics.daily", "sales.orders"]
    assert by_name["sales.orders"].skipped["runId"] == "other-run"
    assert by_name["ops.metrics.daily"].jobs["snapshot-expiry"]["snapshotsExpired"] == 3
    held.release()

    again = {t.table: t for t in maintain(lake, policy, storage_options=options).tables}
    assert again["sales.orders"].skipped is None and again["sales.orders"].jobs["snapshot-expiry"]["status"] == SUCCESSFUL
    for name in ("sales/orders", "ops/metrics/daily"):
        table = Table.open(f"{lake}/{name}", options)
        assert len(table.snapshots()) == 1 and table.verify().ok
    stored = {t.table: t.jobs["snapshot-expiry"] for t in lake_status(lake, storage_options=options).tables}
    assert stored["sales.orders"] == again["sales.orders"].jobs["snapshot-expiry"]
