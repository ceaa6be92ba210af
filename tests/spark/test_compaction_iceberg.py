"""Iceberg compaction through the Spark maintenance job: one task per file group on the executors, the
commit on the driver, and pyiceberg reading the same rows back."""

from __future__ import annotations

from airflow_snaptable.core.actions import Compact
from airflow_snaptable.spark.maintenance import run_action_distributed
from tests.iceberg.conftest import iceberg_env  # noqa: F401 - a fixture
from tests.iceberg.test_iceberg_compaction import URI, _live_files, _rows, _small_appends


def test_file_groups_are_rewritten_on_the_executors_one_task_each(spark, iceberg_env):
    table = _small_appends(iceberg_env, per_partition=5)
    before = _rows(table)
    run = run_action_distributed(spark, Compact(table=URI), catalog=iceberg_env.properties)
    result = run.result["result"]
    assert len(result["groups"]) == 3 and result["added_files"] == 3
    assert run.spark_jobs == 1  # the groups' job (three tasks); the commit ran on the driver
    table = table.refresh()
    assert result["snapshot_id"] == table.metadata.current_snapshot_id
    assert _rows(table) == before
    assert sorted((f.spec_id, tuple(f.partition)) for f in _live_files(table)) == [(0, ("a",)), (0, ("b",)), (1, ())]
    assert sorted(f.file_path for f in _live_files(table)) == result["added_paths"]
