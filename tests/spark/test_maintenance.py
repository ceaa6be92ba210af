"""Maintenance actions with deletes spread over executors (in the test session; spark-submit runs are in test_job)."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import ExpireSnapshots, RemoveOrphanFiles, run_action
from airflow_snaptable.core.errors import PathOutsideTableError, StorageError
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.spark.maintenance import DistributedStorage, SparkDeleter, run_action_distributed
from tests.conftest import SCHEMA, make_rows
from tests.spark.helpers import assert_clean, data_files_on_disk


def history(uri: str, overwrites: int = 5) -> Table:
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    for i in range(overwrites):
        table.overwrite(make_rows(range(i * 10, i * 10 + 10)))  # every overwrite frees 3 data files
    return table


def plan_files(uri: str) -> list[str]:
    return sorted(os.listdir(os.path.join(uri, "plan"))) if os.path.isdir(os.path.join(uri, "plan")) else []


def test_distributed_delete_storage_sends_big_bulk_deletes_to_the_deleter_and_counts_every_file(tmp_path):
    base = Storage.from_uri(str(tmp_path / "t"))
    names = ["data/a", "data/b", "data/c", "manifest/m", "snapshot/snapshot-1"]
    for rel in names:
        base.write_bytes(rel, b"x")
    calls: list[list[str]] = []
    announced: list[tuple[str, str]] = []

    def deleter(paths):
        # every file of the call was counted and announced before the deleter ran
        assert [rel for _kind, rel in announced[-len(paths):]] == paths
        calls.append(list(paths))
        base.delete_files(paths)

    storage = DistributedStorage(base, deleter, threshold=2)
    storage.on_operation = lambda kind, rel: announced.append((kind, rel))
    storage.delete_files(["data/a", "data/b"])  # at the threshold: the deleter
    storage.delete_files(["data/c"])  # below it: in process
    storage.delete("snapshot/snapshot-1")  # single deletes are core's, unchanged
    assert calls == [["data/a", "data/b"]]
    assert storage.deleted_by_deleter == 2
    assert storage.counts["delete"] == 4
    assert announced == [("delete", r) for r in ("data/a", "data/b", "data/c", "snapshot/snapshot-1")]
    assert [rel for rel in names if base.exists(rel)] == ["manifest/m"]


def test_distributed_deletes_never_leave_the_table(tmp_path):
    """The executors' deleter gets no path out of the table root (core/io/table_paths.py), as core's deletes."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "victim").write_bytes(b"another table's file")
    base = Storage.from_uri(str(tmp_path / "t"))
    base.write_bytes("data/a", b"x")
    calls: list[list[str]] = []
    storage = DistributedStorage(base, calls.append, threshold=1)
    with pytest.raises(PathOutsideTableError):
        storage.delete_files(["data/a", "../shared/victim"])
    assert calls == [] and storage.counts["delete"] == 0 and base.exists("data/a")


def test_expire_snapshots_deletes_on_executors_with_core_results(spark, tmp_path):
    table = history(str(tmp_path / "t"))
    action = ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2)
    predicted = run_action(ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2, dry_run=True))["result"]
    assert predicted["data_files"] and predicted["manifest_files"]
    run = run_action_distributed(spark, action, threshold=1, files_per_task=2)
    result = run.result["result"]
    assert run.result["action"] == "expire-snapshots"
    assert result["expired_snapshot_ids"] == predicted["expired_snapshot_ids"] == [1, 2, 3]
    assert result["deleted_data_files"] == len(predicted["data_files"])
    assert result["deleted_manifest_files"] == len(predicted["manifest_files"])
    # counted by the executors' tasks (a Spark accumulator), not by the driver; with the manifests go the
    # expired snapshot files, which unpublishing renamed aside on this local disk (core/native/snapshot.py unpublish)
    expired = len(predicted["expired_snapshot_ids"])
    assert run.deleted_on_executors == len(predicted["data_files"]) + len(predicted["manifest_files"]) + expired
    assert run.spark_jobs == 2  # one delete_files call for the metadata files, one for the data files
    assert not any(os.path.exists(os.path.join(table.uri, p)) for p in predicted["data_files"] + predicted["manifest_files"])
    assert table.earliest_snapshot().id == 4
    assert_clean(table)


def test_small_bulk_deletes_stay_in_process(spark, tmp_path):
    table = history(str(tmp_path / "t"))
    run = run_action_distributed(spark, ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2), threshold=10_000)
    assert run.result["result"]["deleted_data_files"] == 9
    assert run.deleted_on_executors == 0 and run.spark_jobs == 0
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
    run = run_action_distributed(spark, RemoveOrphanFiles(table=table.uri, dry_run=False, list_files=True), threshold=1)
    assert sorted(run.result["result"]["orphan_files"]) == sorted(orphans)
    assert run.deleted_on_executors == len(orphans)
    assert data_files_on_disk(table.uri) == live
    assert_clean(table)


def test_a_failing_executor_task_fails_the_action_and_a_rerun_finishes_the_plan(spark, tmp_path):
    table = history(str(tmp_path / "t"))
    action = ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2)
    predicted = run_action(ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2, dry_run=True))["result"]
    doomed = predicted["data_files"]
    assert len(doomed) == 9
    # A storage failure on one executor: the file's path is now a non-empty directory, which
    # no delete removes (even as root), so that task fails.
    blocked = os.path.join(table.uri, doomed[4])
    os.remove(blocked)
    os.makedirs(blocked)
    with open(os.path.join(blocked, "keep"), "wb") as handle:
        handle.write(b"x")

    with pytest.raises(StorageError, match="on Spark executors failed"):
        run_action_distributed(spark, action, threshold=1, files_per_task=2)
    # the plan was published and the snapshots unpublished, but the plan is not finished
    assert [name for name in plan_files(table.uri) if name.startswith("plan-")]
    assert table.earliest_snapshot().id == 4
    assert os.path.isdir(blocked)
    # files in other tasks were deleted: the failure happened mid-delete
    assert sum(os.path.exists(os.path.join(table.uri, p)) for p in doomed) < len(doomed)

    shutil.rmtree(blocked)  # the storage problem is fixed
    rerun = run_action_distributed(spark, action, threshold=1, files_per_task=2)
    assert rerun.result["result"]["recovered_data_files"] == len(doomed)
    assert rerun.deleted_on_executors > 0
    assert plan_files(table.uri) == []
    assert not any(os.path.exists(os.path.join(table.uri, p)) for p in doomed)
    assert [s.id for s in table.snapshots()] == [4, 5]
    assert_clean(table)


class DriverCrash(Exception):
    pass


@pytest.mark.parametrize("crash_at_delete", [1, 5, 12])
def test_a_crash_while_announcing_distributed_deletes_leaves_a_state_a_rerun_completes(spark, tmp_path, crash_at_delete):
    table = history(str(tmp_path / "t"))
    expected_state = sorted(table.scan().to_arrow().column("id").to_pylist())
    deleter = SparkDeleter(spark.sparkContext, table.uri, files_per_task=2)
    storage = DistributedStorage(Storage.from_uri(table.uri), deleter, threshold=1)
    seen = {"bulk": 0}

    def crash(kind, rel):
        # count only the deletes of delete_files runs (data files and manifests)
        if kind == "delete" and rel.startswith(("data/", "manifest/")):
            seen["bulk"] += 1
            if seen["bulk"] == crash_at_delete:
                raise DriverCrash(rel)

    storage.on_operation = crash
    with pytest.raises(DriverCrash):
        run_action(ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2), table=Table.open(table.uri, storage=storage))
    assert table.verify().missing_files == []  # no retained snapshot lost a file

    rerun = run_action_distributed(spark, ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2), threshold=1)
    # the crash hit the published plan's deletes: the rerun finishes that plan, nothing more is due
    assert rerun.result["result"]["recovered_data_files"] == 9
    assert rerun.result["result"]["expired_snapshot_ids"] == []
    assert plan_files(table.uri) == []
    assert [s.id for s in table.snapshots()] == [4, 5]
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == expected_state
    assert_clean(table)


def test_a_failing_action_changes_nothing(spark, tmp_path):
    from airflow_snaptable.core import InvalidArgumentError, TableNotFoundError

    with pytest.raises(TableNotFoundError):
        run_action_distributed(spark, ExpireSnapshots(table=str(tmp_path / "none")))
    table = history(str(tmp_path / "t"), overwrites=2)
    with pytest.raises(InvalidArgumentError):
        run_action_distributed(spark, ExpireSnapshots(table=table.uri, retain_min=3, retain_max=2))
    assert [s.id for s in table.snapshots()] == [1, 2]


def test_metadata_is_read_on_executors_with_the_same_results_as_in_process(spark, tmp_path):
    """Orphan cleaning (every snapshot's lists and deltas) and expiry planning (the expired deltas) read
    through ``Storage.read_many``; above the read threshold that runs on the executors."""
    table = history(str(tmp_path / "t"), overwrites=4)
    copy = str(tmp_path / "copy")
    shutil.copytree(table.uri, copy)
    action = {"dry_run": True, "older_than": "0 s"}
    on_executors = run_action_distributed(spark, RemoveOrphanFiles(table=table.uri, **action), read_threshold=1)
    in_process = run_action(RemoveOrphanFiles(table=copy, **action))
    assert on_executors.read_on_executors >= 2 * len(table.snapshots())  # every list of every snapshot
    assert on_executors.result["result"]["orphan_count"] == in_process["result"]["orphan_count"]

    expire = {"retain_min": 1, "retain_max": 1}
    on_executors = run_action_distributed(spark, ExpireSnapshots(table=table.uri, **expire), read_threshold=1)
    in_process = run_action(ExpireSnapshots(table=copy, **expire))
    assert on_executors.read_on_executors > 0
    assert on_executors.result["result"] == in_process["result"]
    assert sorted(data_files_on_disk(table.uri)) == sorted(p for p in data_files_on_disk(copy))
    assert_clean(table)
