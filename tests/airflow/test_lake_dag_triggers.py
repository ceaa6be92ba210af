"""A lake DAG maps tasks only onto the tables with a job due (operators/lake.py, core/lake/due.py)."""

from __future__ import annotations

from airflow_snaptable.core.lake import Policy, maintain
from airflow_snaptable.operators.lake import SnapTableListLakeTablesOperator, lake_maintenance_group
from tests.airflow.conftest import snaptable_conn
from tests.conftest import make_rows
from tests.lake.conftest import native_dir, write_native

POLICY = {"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0, "trigger": {"snapshots": 2}}}}


def test_the_list_task_keeps_only_the_tables_that_are_due(tmp_path, monkeypatch):
    root = tmp_path / "warehouse"
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(str(root)))
    lake = str(root / "lake")
    write_native(native_dir(lake, "a.quiet"), 3)
    busy = write_native(native_dir(lake, "a.busy"), 3)
    listed = SnapTableListLakeTablesOperator(task_id="list", location="lake", policy=POLICY)
    assert [t["name"] for t in listed.execute({})] == ["a.busy", "a.quiet"]  # never ran: both due
    maintain(lake, Policy.from_mapping(POLICY))
    assert listed.execute({}) == []
    busy.append(make_rows(range(100, 103)))
    busy.append(make_rows(range(200, 203)))
    assert [t["name"] for t in listed.execute({})] == ["a.busy"]
    # Without a policy every table is listed, as before.
    assert [t["name"] for t in SnapTableListLakeTablesOperator(task_id="all", location="lake").execute({})] == ["a.busy", "a.quiet"]


def test_the_group_gives_its_policy_to_the_list_task():
    from airflow.sdk import DAG

    with DAG("lake", schedule=None) as dag:
        lake_maintenance_group(location="lake", policy=POLICY)
    assert dag.get_task("lake_maintenance.list_tables").policy == POLICY
