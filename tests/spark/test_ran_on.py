"""Where the work ran, in every result (``ranOn``, spark/maintenance.py ``ran_on``): the job decides from
the table's size (the thresholds) whether the executors are worth it, and says so. In the test session."""

from __future__ import annotations

import json

import pytest

from airflow_snaptable.core.actions import ExpireSnapshots, RemoveOrphanFiles
from airflow_snaptable.core.lake import Policy, list_tables
from airflow_snaptable.spark.lake import LakeJob, run_lake
from airflow_snaptable.spark.maintenance import run_action_distributed
from tests.spark.test_job_startup import POLICY, _small_lake
from tests.spark.test_maintenance import history

ON_DRIVER = {"reads": "driver", "deletes": "driver", "rewrites": "driver", "sparkJobs": 0, "sparkTasks": 0}


def test_at_thresholds_of_one_the_result_says_executors(spark, tmp_path):
    table = history(str(tmp_path / "t"))
    run = run_action_distributed(spark, ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2),
                                 threshold=1, read_threshold=1, files_per_task=2)
    where = run.job_result()["ranOn"]
    assert where["reads"] == where["deletes"] == "executors" and where["rewrites"] == "driver"
    assert where["sparkJobs"] == run.spark_jobs >= 3  # the planning read, the metadata and the data deletes
    assert where["sparkTasks"] >= where["sparkJobs"] * 2  # two cores: at least two tasks a job
    assert where["filesDeletedOnExecutors"] == run.deleted_on_executors > 0
    assert where["filesReadOnExecutors"] == run.read_on_executors > 0


def test_at_the_default_thresholds_a_small_table_says_driver(spark, tmp_path):
    table = history(str(tmp_path / "t"))
    for action in (ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2), RemoveOrphanFiles(table=table.uri, dry_run=False, list_files=True)):
        doc = run_action_distributed(spark, action).job_result()
        assert doc["ranOn"] == {**ON_DRIVER, "filesReadOnExecutors": 0, "filesDeletedOnExecutors": 0}, action.name
        assert doc["result"]  # core's result beside it


def test_only_the_kind_that_crosses_its_threshold_goes_to_the_executors(spark, tmp_path):
    table = history(str(tmp_path / "t"))
    run = run_action_distributed(spark, ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2), threshold=1)
    assert run.ran_on["reads"] == "driver" and run.ran_on["deletes"] == "executors"


@pytest.mark.parametrize("mode, where", [("driver", ON_DRIVER), ("executors", {
    "reads": "executors", "deletes": "executors", "rewrites": "executors", "sparkJobs": 1, "sparkTasks": 1})])
def test_each_lake_table_says_where_it_ran(spark, tmp_path, mode, where):
    lake = _small_lake(tmp_path)
    done = run_lake(spark, LakeJob(tuple(list_tables(lake)), Policy.from_mapping(POLICY), mode=mode))
    assert [t["ranOn"] for t in done["tables"]] == [where, where]


def test_the_operator_result_carries_where_the_work_ran(spark, tmp_path, monkeypatch):
    """The action operator with runner="spark" (its job run in this session: only spark-submit is left out,
    tests/spark/test_job.py runs it): ``ranOn`` reaches the task's result, hence XCom."""
    from airflow_snaptable import operators as ops
    from airflow_snaptable.hooks.spark_submit import SparkSubmitRunner
    from tests.airflow.conftest import snaptable_conn

    history(str(tmp_path / "warehouse" / "orders"))
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(str(tmp_path / "warehouse")))

    def run_here(self, action, storage_options, catalog=None):
        conf = self.settings.spark_conf or {}
        run = run_action_distributed(spark, action, dict(storage_options), int(conf.get("spark.snaptable.delete.parallelThreshold", 10_000)),
                                     catalog=catalog)
        return json.loads(json.dumps(run.job_result()))

    monkeypatch.setattr(SparkSubmitRunner, "run", run_here)
    done = []
    for threshold in ("1", "10000"):
        op = ops.SnapTableExpireSnapshotsOperator(task_id=f"expire_{threshold}", table="orders", retain_max=2 if threshold == "1" else 1,
                                                  retain_min=1, runner="spark", spark_conf={"spark.snaptable.delete.parallelThreshold": threshold})
        op.render_template_fields({})
        done.append(op.execute({}))
    assert done[0]["ranOn"]["deletes"] == "executors" and done[0]["ranOn"]["sparkJobs"] >= 2
    assert done[1]["ranOn"]["deletes"] == "driver" and done[1]["ranOn"]["sparkJobs"] == 0
    assert done[1]["result"]["expired_snapshot_ids"] == [4]
