"""Maintenance actions with deletes spread over executors (in the test session; spark-submit runs are in test_job)."""

from __future__ import annotations

import os
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import ExpireSnapshots, RemoveOrphanFiles, run_action
from airflow_snaptable.core.storage import Storage
from airflow_snaptable.spark.maintenance import DistributedDeleteStorage, run_action_distributed
from tests.conftest import SCHEMA, make_rows
from tests.spark.helpers import assert_clean, data_files_on_disk


def history(uri: str, overwrites: int = 5) -> Table:
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    for i in range(overwrites):
        table.overwrite(make_rows(range(i * 10, i * 10 + 10)))  # every overwrite frees 3 data files
    return table


def test_distributed_delete_storage_keeps_core_order_and_batches_bulk_deletes(tmp_path):
    calls: list[tuple] = []
    base = Storage.from_uri(str(tmp_path / "t"))
    for rel in ("data/a", "data/b", "manifest/m", "plan/plan-1.json", "snapshot/snapshot-1"):
        base.write_bytes(rel, b"x")

    def deleter(paths):
        calls.append(("bulk", tuple(paths)))
        for rel in paths:
            base.delete(rel)

    storage = DistributedDeleteStorage(base, deleter, threshold=2)
    storage.delete("snapshot/snapshot-1")  # not bulk: at once
    storage.delete("manifest/m")
    storage.delete("data/a")
    assert storage.exists("data/b")  # any other operation first runs the held-back deletes
    assert calls == [("bulk", ("manifest/m", "data/a"))]
    assert not base.exists("data/a") and not base.exists("manifest/m")
    storage.delete("data/b")  # a run below the threshold is deleted on the driver
    storage.delete("plan/plan-1.json")
    assert calls == [("bulk", ("manifest/m", "data/a"))]
    assert not base.exists("data/b") and not base.exists("plan/plan-1.json")


def test_expire_snapshots_deletes_on_executors_with_core_results(spark, tmp_path):
    table = history(str(tmp_path / "t"))
    action = ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2)
    predicted = run_action(ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2, dry_run=True))["result"]
    assert predicted["data_files"]
    run = run_action_distributed(spark, action, threshold=1, files_per_task=2)
    result = run.result["result"]
    assert run.result["action"] == "expire-snapshots"
    assert result["expired_snapshot_ids"] == predicted["expired_snapshot_ids"] == [1, 2, 3]
    assert result["deleted_data_files"] == len(predicted["data_files"])
    assert result["deleted_manifest_files"] == len(predicted["manifest_files"])
    assert run.deleted_on_executors == len(predicted["data_files"]) + len(predicted["manifest_files"])
    assert run.spark_jobs >= 1
    assert not any(os.path.exists(os.path.join(table.uri, p)) for p in predicted["data_files"])
    assert table.earliest_snapshot().id == 4
    assert_clean(table)


def test_remove_orphan_files_deletes_on_executors(spark, tmp_path):
    table = history(str(tmp_path / "t"), overwrites=2)
    live = data_files_on_disk(table.uri)
    orphans = []
    for i in range(6):
        rel = f"data/p=1/data-orphan-{i}.parquet"
        path = os.path.join(table.uri, rel)
        with open(path, "wb") as handle:
            handle.write(b"left by a crashed writer")
        old = time.time() - 3 * 86400
        os.utime(path, (old, old))
        orphans.append(rel)
    run = run_action_distributed(spark, RemoveOrphanFiles(table=table.uri, dry_run=False), threshold=1)
    assert sorted(run.result["result"]["orphan_files"]) == sorted(orphans)
    assert run.deleted_on_executors == len(orphans)
    assert data_files_on_disk(table.uri) == live
    assert_clean(table)


def test_a_failing_action_changes_nothing(spark, tmp_path):
    from airflow_snaptable.core import InvalidArgumentError, TableNotFoundError

    with pytest.raises(TableNotFoundError):
        run_action_distributed(spark, ExpireSnapshots(table=str(tmp_path / "none")))
    table = history(str(tmp_path / "t"), overwrites=2)
    with pytest.raises(InvalidArgumentError):
        run_action_distributed(spark, ExpireSnapshots(table=table.uri, retain_min=3, retain_max=2))
    assert [s.id for s in table.snapshots()] == [1, 2]
