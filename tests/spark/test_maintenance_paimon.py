"""The Spark maintenance job's distributed path on a real Paimon table: manifests read and files
deleted on the executors, with core's results, and pypaimon reading back what is left."""

from __future__ import annotations

import os

from airflow_snaptable.core.actions import ExpireSnapshots, RemoveOrphanFiles, run_action
from airflow_snaptable.spark.maintenance import run_action_distributed
from tests.paimon.conftest import table_files
from tests.paimon.test_paimon_lifecycle import check


def test_expire_and_orphans_on_a_paimon_table_run_on_the_executors(spark, paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    root = os.path.join(warehouse, "db.db", "lsm")
    action = dict(table=root, retain_min=1, retain_max=1, time_retained="0 s")
    predicted = run_action(ExpireSnapshots(**action, dry_run=True))["result"]
    assert predicted["data_files"] and predicted["manifest_files"]

    run = run_action_distributed(spark, ExpireSnapshots(**action), threshold=1, files_per_task=2, read_threshold=1)
    result = run.result["result"]
    assert result["expired_snapshot_ids"] == predicted["expired_snapshot_ids"] == [1, 2, 3, 4]
    assert run.deleted_on_executors == len(predicted["data_files"]) + len(predicted["manifest_files"])
    assert run.read_on_executors > 0
    assert not set(predicted["data_files"]) & table_files(root)
    check(paimon, warehouse, "lsm", [5], ["compacted"])

    orphan = os.path.join(root, "p=b", "bucket-0", "data-orphan-0.parquet")
    with open(orphan, "wb") as handle:
        handle.write(b"left by a crashed writer")
    os.utime(orphan, (1, 1))
    run = run_action_distributed(spark, RemoveOrphanFiles(table=root, dry_run=False, list_files=True), threshold=1)
    assert run.result["result"]["orphan_files"] == ["p=b/bucket-0/data-orphan-0.parquet"]
    assert run.deleted_on_executors == 1 and not os.path.exists(orphan)
    check(paimon, warehouse, "lsm", [5], ["compacted"])
