"""A whole lake in one DAG: list the tables when it runs, one mapped task per table (operators/lake.py)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import pytest

from airflow_snaptable.core.errors import InvalidArgumentError, InvalidPolicyError
from airflow_snaptable.core.lake import lake_status
from airflow_snaptable.operators.lake import (
    LAKE_ASSET_ALIAS,
    SnapTableListLakeTablesOperator,
    SnapTableMaintainTableOperator,
    lake_maintenance_group,
)
from tests.airflow.conftest import base_env, run_airflow, snaptable_conn
from tests.lake.conftest import NATIVE_SNAPSHOTS, NATIVE_TABLES, PAIMON_TABLES, make_mixed_lake, native_dir, write_native

POLICY = {"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}, "tag-expiry": {}}}


def test_the_group_lists_then_maps_one_task_per_table_in_a_pool():
    from airflow.sdk import DAG

    with DAG("lake", schedule=None) as dag:
        lake_maintenance_group(location="lake", policy=POLICY, pool="lake_pool", max_active_tis_per_dagrun=3, retries=2)
    listed, mapped = dag.get_task("lake_maintenance.list_tables"), dag.get_task("lake_maintenance.maintain_table")
    assert isinstance(listed, SnapTableListLakeTablesOperator) and listed.retries == 2
    assert mapped.partial_kwargs["pool"] == "lake_pool" and mapped.partial_kwargs["max_active_tis_per_dagrun"] == 3
    assert mapped.partial_kwargs["retries"] == 2 and [o.name for o in mapped.partial_kwargs["outlets"]] == [LAKE_ASSET_ALIAS]
    assert mapped.upstream_task_ids == {"lake_maintenance.list_tables"}
    with pytest.raises(InvalidPolicyError, match="unknown job 'snapshot-expire'"):
        with DAG("bad", schedule=None):
            lake_maintenance_group(location="lake", policy={"defaults": {"snapshot-expire": {}}})


@pytest.mark.parametrize(
    ("make", "match"),
    [
        # The per-table and Spark tasks check their location when the DAG is parsed, as the list task does.
        (lambda: SnapTableMaintainTableOperator(task_id="m", table={}, policy=POLICY, location=" "), "m: location must be"),
        (lambda: _spark_operator(location=None), "s: location must be"),
        (lambda: _spark_operator(dry_run="no"), "s: dry_run and fail_on_job_failure"),
        (lambda: _spark_operator(parallel=0), "s: parallel must be"),
        # The group's mapped tasks are made when the DAG runs: the group checks their flags when it is parsed.
        (lambda: lake_maintenance_group(location="lake", policy=POLICY, dry_run="yes"), "^dry_run and fail_on_job_failure"),
        (lambda: lake_maintenance_group(location="lake", policy=POLICY, runner="spark", fail_on_job_failure=1),
         "^dry_run and fail_on_job_failure"),
        (lambda: lake_maintenance_group(location="", policy=POLICY), "^location must be"),
        (lambda: lake_maintenance_group(location="lake", policy=None), "^policy must be"),
    ],
)
def test_every_lake_task_and_the_group_check_their_shared_arguments_when_the_dag_is_parsed(make, match):
    from airflow.sdk import DAG

    with pytest.raises(InvalidArgumentError, match=match):
        with DAG("bad_arguments", schedule=None):
            make()


def _spark_operator(**changed):
    from airflow_snaptable.operators.lake import SnapTableMaintainLakeOnSparkOperator

    return SnapTableMaintainLakeOnSparkOperator(**{"task_id": "s", "tables": [], "policy": POLICY, "location": "lake", **changed})


def test_a_table_task_stores_its_status_emits_its_asset_event_and_fails_on_a_failed_job(tmp_path, monkeypatch):
    from airflow.sdk import AssetAlias
    from airflow.sdk.exceptions import AirflowException
    from airflow.sdk.execution_time.context import OutletEventAccessors

    root = tmp_path / "warehouse"
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(str(root)))
    for name in ("a.good", "a.broken"):
        write_native(native_dir(str(root / "lake"), name))
    with open(os.path.join(native_dir(str(root / "lake"), "a.broken"), "snapshot", "snapshot-2"), "w") as f:
        f.write("{")
    tables = SnapTableListLakeTablesOperator(task_id="list", location="lake").execute({})
    assert [t["name"] for t in tables] == ["a.broken", "a.good"]

    events = OutletEventAccessors()
    good = SnapTableMaintainTableOperator(task_id="maintain", table=tables[1], policy=POLICY, location="lake")
    result = good.execute({"run_id": "manual__1", "outlet_events": events})
    assert result["jobs"]["snapshot-expiry"]["snapshotsExpired"] == NATIVE_SNAPSHOTS - 2
    assert result["jobs"]["snapshot-expiry"]["runId"] == "adhoc_airflow/manual__1"
    [event] = events[AssetAlias(LAKE_ASSET_ALIAS)].asset_alias_events
    assert event.dest_asset_key.uri == "snaptable://file" + native_dir(str(root / "lake"), "a.good")
    assert event.extra["jobs"]["snapshot-expiry"] == "Successful" and event.extra["table"] == "a.good"
    lineage = good.get_openlineage_facets_on_complete(None)
    assert lineage.outputs[0].name == native_dir(str(root / "lake"), "a.good")
    assert lineage.outputs[0].facets["lifecycleStateChange"].lifecycleStateChange.name == "ALTER"

    broken = SnapTableMaintainTableOperator(task_id="maintain", table=tables[0], policy=POLICY, location="lake")
    with pytest.raises(AirflowException, match="1 job\\(s\\) failed on a.broken.*CorruptMetadataError"):
        broken.execute({"run_id": "manual__1", "outlet_events": OutletEventAccessors()})
    stored = {t.table: t.jobs["snapshot-expiry"]["status"] for t in lake_status(str(root / "lake")).tables}
    assert stored == {"a.broken": "Failed", "a.good": "Successful"}


def test_the_example_dag_maintains_a_mixed_lake(paimon, tmp_path, airflow_db):
    """``airflow dags test`` of example_snaptable_lake.py on our tables and a Paimon warehouse side by side."""
    lake = make_mixed_lake(paimon, tmp_path)
    env = base_env(
        AIRFLOW_CONN_SNAPTABLE_DEFAULT=snaptable_conn(str(tmp_path)),
        SNAPTABLE_EXAMPLE_LAKE="lake",
        SNAPTABLE_EXAMPLE_LAKE_AGE_HOURS="0",
    )
    proc = run_airflow(["dags", "test", "snaptable_lake_maintenance"], env=env, timeout=300)
    assert "state=success" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-4000:]
    status = {t.table: t.jobs for t in lake_status(lake.path).tables}
    assert sorted(status) == sorted([*NATIVE_TABLES, *PAIMON_TABLES])
    kept = {name: len(lake.native(name).snapshots()) for name in NATIVE_TABLES}
    assert kept == {"sales.orders": 2, "sales.returns": NATIVE_SNAPSHOTS, "ops.metrics.daily": 4, "ops.audit": 4}
    assert status["sales.returns"]["snapshot-expiry"]["status"] == "Disabled"
    assert all(status[name]["snapshot-expiry"]["runId"].startswith("snaptable_lake_maintenance/") for name in PAIMON_TABLES)
    read = lake.read_paimon("app", "pk")
    assert sorted(map(int, read["app"]["snapshots"])) == [5, 6] and sorted(map(int, read["pk"]["snapshots"])) == [4, 5]
    for name in ("app", "pk"):
        for snapshot, rows in read[name]["snapshots"].items():
            assert rows["rows"] == paimon.before[name]["snapshots"][snapshot]["rows"]
    with sqlite3.connect(os.path.join(airflow_db, "airflow.db")) as conn:
        (run_id,) = conn.execute(
            "select run_id from dag_run where dag_id = 'snaptable_lake_maintenance' order by id desc limit 1"
        ).fetchone()
        mapped = conn.execute(
            "select rendered_map_index, state from task_instance where dag_id = 'snaptable_lake_maintenance' and run_id = ? "
            "and task_id = 'lake_maintenance.maintain_table'", (run_id,)
        ).fetchall()
        events = conn.execute(
            "select a.uri, e.extra from asset_event e join asset a on a.id = e.asset_id "
            "where e.source_dag_id = 'snaptable_lake_maintenance' and e.source_run_id = ?", (run_id,)
        ).fetchall()
    assert sorted(mapped) == sorted((name, "success") for name in [*NATIVE_TABLES, *PAIMON_TABLES])
    by_uri = {uri: json.loads(extra) for uri, extra in events}
    assert by_uri["snaptable://file" + os.path.join(lake.path, "db.db", "app")]["jobs"]["snapshot-expiry"] == "Successful"
    assert len(by_uri) == len(NATIVE_TABLES) + len(PAIMON_TABLES)
    # The CLI reads what the DAG stored.
    out = subprocess.run([os.path.join(os.path.dirname(os.sys.executable), "snaptable"), "status", lake.path, "--json"],
                         capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout)["tables"][0]["jobs"]["snapshot-expiry"]["status"] in ("Successful", "Disabled")


def test_the_spark_group_maps_one_spark_submit_per_chunk_of_tables(tmp_path, monkeypatch):
    from airflow.sdk import DAG

    from airflow_snaptable.operators.lake import SnapTableMaintainLakeOnSparkOperator

    with DAG("lake_spark", schedule=None) as dag:
        lake_maintenance_group(location="lake", policy=POLICY, runner="spark", tables_per_submit=2, spark_lake_mode="driver",
                               spark_conf={"spark.ui.enabled": "false"}, pool="spark_pool")
    listed, mapped = dag.get_task("lake_maintenance.list_tables"), dag.get_task("lake_maintenance.maintain_tables")
    assert listed.chunk_size == 2 and mapped.operator_class is SnapTableMaintainLakeOnSparkOperator
    assert mapped.partial_kwargs["spark_lake_mode"] == "driver" and mapped.partial_kwargs["pool"] == "spark_pool"
    assert [o.name for o in mapped.partial_kwargs["outlets"]] == [LAKE_ASSET_ALIAS]
    with DAG("lake_spark_one", schedule=None) as one:
        lake_maintenance_group(location="lake", policy=POLICY, runner="spark")
    assert one.get_task("lake_maintenance.list_tables").chunk_size == 0  # the whole lake in one application

    root = tmp_path / "warehouse"
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(str(root)))
    for name in ("a.one", "a.two", "b.three"):
        write_native(native_dir(str(root / "lake"), name), snapshots=1)
    chunks = SnapTableListLakeTablesOperator(task_id="list", location="lake", chunk_size=2).execute({})
    assert [[t["name"] for t in chunk] for chunk in chunks] == [["a.one", "a.two"], ["b.three"]]
    whole = SnapTableListLakeTablesOperator(task_id="list", location="lake", chunk_size=0).execute({})
    assert [[t["name"] for t in chunk] for chunk in whole] == [["a.one", "a.two", "b.three"]]

    for bad, match in (
        (lambda: lake_maintenance_group(location="lake", policy=POLICY, runner="spark", tables_per_submit=0), "tables_per_submit"),
        (lambda: lake_maintenance_group(location="lake", policy=POLICY, runner="spark", spark_lake_mode="cluster"), "spark_lake_mode"),
        (lambda: lake_maintenance_group(location="lake", policy=POLICY, runner="emr"), "runner must be"),
        (lambda: SnapTableListLakeTablesOperator(task_id="l", location="lake", chunk_size=-1), "chunk_size"),
    ):
        with pytest.raises(InvalidArgumentError, match=match):
            with DAG("bad_spark", schedule=None):
                bad()


def test_a_table_task_skipped_by_another_run_s_lease_does_not_fail_on_an_old_failure(tmp_path, monkeypatch):
    """Issue 34 item 10: a failed task means a job failed in this run, not the stored status of a table it skipped."""
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from tests.lake.test_skipped_verdict import failed_then_held

    root = tmp_path / "warehouse"
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(str(root)))
    held = failed_then_held(str(root / "lake"), "a.held")
    try:
        [table] = SnapTableListLakeTablesOperator(task_id="list", location="lake").execute({})
        task = SnapTableMaintainTableOperator(task_id="maintain", table=table, policy=POLICY, location="lake")
        result = task.execute({"run_id": "manual__2", "outlet_events": OutletEventAccessors()})
        assert result["skipped"]["runId"] == "another-run" and result["jobs"]["snapshot-expiry"]["status"] == "Failed"
    finally:
        held.release()
