"""A lake DAG's tasks and discovery's refusals (issue 34, items 3 and 14): ``list_tables`` hands a table
two paths name, or a directory that cannot be read, to its own task with the reason, even when only
due tables are listed; that task fails with the reason and emits no asset event; the rest run."""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.operators.lake import LAKE_ASSET_ALIAS, SnapTableListLakeTablesOperator, SnapTableMaintainTableOperator
from tests.airflow.conftest import snaptable_conn
from tests.lake.conftest import native_dir, storage_image, write_native
from tests.lake.test_lake_walk_errors import unreadable  # noqa: F401 - the fixture

#: Every job waits for a trigger: only due tables (and refusals) are listed.
POLICY = {"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 1, "max-snapshot-age-hours": 0, "trigger": {"snapshots": 1}}}}


def test_a_refused_table_gets_a_task_that_fails_with_the_reason_and_no_event(tmp_path, monkeypatch, unreadable):  # noqa: F811
    from airflow.sdk import AssetAlias
    from airflow.sdk.exceptions import AirflowException
    from airflow.sdk.execution_time.context import OutletEventAccessors

    root = tmp_path / "warehouse"
    lake = root / "lake"
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(str(root)))
    write_native(str(lake / "a.b" / "t"), snapshots=2)
    write_native(native_dir(str(lake), "a.b.t"), snapshots=2)
    write_native(native_dir(str(lake), "ok.t"), snapshots=2)
    unreadable(str(lake / "locked"))
    tables = SnapTableListLakeTablesOperator(task_id="list", location="lake", policy=POLICY).execute({})
    assert [(t["name"], "problem" in t) for t in tables] == [("a.b.t", True), ("a.b.t", True), ("locked", True), ("ok.t", False)]

    before = {t["uri"]: storage_image(t["uri"]) for t in tables[:2]}
    for table, match in ((tables[0], "TableNameConflictError"), (tables[1], "TableNameConflictError"), (tables[2], "PermissionError")):
        events = OutletEventAccessors()
        task = SnapTableMaintainTableOperator(task_id="maintain", table=table, policy=POLICY, location="lake")
        with pytest.raises(AirflowException, match=f"is not maintained: {match}"):
            task.execute({"run_id": "manual__1", "outlet_events": events})
        assert events[AssetAlias(LAKE_ASSET_ALIAS)].asset_alias_events == []
    assert {uri: storage_image(uri) for uri in before} == before
    done = SnapTableMaintainTableOperator(task_id="maintain", table=tables[3], policy=POLICY, location="lake").execute(
        {"run_id": "manual__1", "outlet_events": OutletEventAccessors()})
    assert done["jobs"]["snapshot-expiry"]["snapshotsExpired"] == 1


def test_the_spark_task_fails_on_a_refused_table_and_maintains_the_rest(tmp_path, monkeypatch, unreadable):  # noqa: F811
    """The Spark runner's task: the application itself runs in process on its driver (spark/lake.py's
    run_lake, mode driver, which needs no session); only spark-submit is left out."""
    from airflow.sdk.exceptions import AirflowException
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_snaptable.hooks.spark_submit import SparkSubmitRunner
    from airflow_snaptable.operators.lake import SnapTableMaintainLakeOnSparkOperator
    from airflow_snaptable.spark.lake import LakeJob, run_lake

    def in_process(self, lake_job, storage_options, catalog=None):
        return run_lake(None, LakeJob.from_dict(lake_job), storage_options, catalog)

    monkeypatch.setattr(SparkSubmitRunner, "run_lake", in_process)
    root = tmp_path / "warehouse"
    lake = root / "lake"
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(str(root)))
    write_native(str(lake / "a.b" / "t"), snapshots=2)
    write_native(native_dir(str(lake), "a.b.t"), snapshots=2)
    write_native(native_dir(str(lake), "ok.t"), snapshots=2)
    unreadable(str(lake / "locked"))
    [tables] = SnapTableListLakeTablesOperator(task_id="list", location="lake", chunk_size=0).execute({})
    task = SnapTableMaintainLakeOnSparkOperator(task_id="spark", tables=tables, policy=POLICY, location="lake", spark_lake_mode="driver")
    events = OutletEventAccessors()
    with pytest.raises(AirflowException, match="jobs failed on .*TableNameConflictError.*'locked'.*PermissionError"):
        task.execute({"run_id": "manual__1", "outlet_events": events})
    from airflow.sdk import AssetAlias

    assert [e.extra["table"] for e in events[AssetAlias(LAKE_ASSET_ALIAS)].asset_alias_events] == ["ok.t"]
