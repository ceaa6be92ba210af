"""The Spark maintenance job's distributed path on a real Iceberg table: manifests read and files
deleted on the executors (which open the table location with the catalog's FileIO properties), the
catalog commit on the driver, and pyiceberg reading back what is left."""

from __future__ import annotations

import os

from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import ExpireSnapshots, RemoveOrphanFiles
from airflow_snaptable.spark.maintenance import run_action_distributed
from tests.iceberg.conftest import assert_exactly_reachable_left, iceberg_env, read_everything, rows  # noqa: F401 - a fixture

FAR = "2100-01-01T00:00:00Z"


def test_expire_and_orphans_on_an_iceberg_table_run_on_the_executors(spark, iceberg_env):
    table = iceberg_env.create()
    for i in range(5):
        table.append(rows(i))
    table.overwrite(rows(99, "b"))  # the appended files: reachable from none of the last two snapshots
    table = table.refresh()
    ids = [s.snapshot_id for s in table.metadata.snapshots]
    before = read_everything(table)
    uri = "iceberg://db.orders"
    predicted = Table.open(uri, catalog=iceberg_env.properties).expire_snapshots(retain_min=2, older_than=FAR, dry_run=True)

    run = run_action_distributed(
        spark, ExpireSnapshots(table=uri, retain_min=2, older_than=FAR), threshold=1, files_per_task=2, read_threshold=1,
        catalog=iceberg_env.properties,
    )
    result = run.result["result"]
    assert result["expired_snapshot_ids"] == predicted.expired_snapshot_ids == ids[:-2]
    assert result["deleted_data_files"] == 5
    assert run.read_on_executors >= len(ids[:-2])  # the expired snapshots' manifest lists at least
    assert run.deleted_on_executors == result["deleted_data_files"] + result["deleted_manifest_files"]
    after = read_everything(table.refresh())
    assert sorted(after["snapshots"]) == sorted(ids[-2:])
    for snapshot_id, read in after["snapshots"].items():
        assert read == before["snapshots"][snapshot_id]
    assert_exactly_reachable_left(table.refresh(), iceberg_env.location())

    orphan = os.path.join(iceberg_env.location(), "data", "left-by-a-crashed-writer.parquet")
    with open(orphan, "wb") as handle:
        handle.write(b"never committed")
    os.utime(orphan, (1, 1))
    run = run_action_distributed(
        spark, RemoveOrphanFiles(table=uri, dry_run=False, list_files=True), threshold=1, catalog=iceberg_env.properties
    )
    assert "data/left-by-a-crashed-writer.parquet" in run.result["result"]["orphan_files"]
    assert run.deleted_on_executors == len(run.result["result"]["orphan_files"]) and not os.path.exists(orphan)
    assert_exactly_reachable_left(table.refresh(), iceberg_env.location())
