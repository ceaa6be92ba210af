"""OpenLineage (the provider installed): datasets, version and lifecycle facets, hook lineage, Spark parent info."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.openlineage.facet import LifecycleStateChange

from airflow_snaptable import operators as ops
from airflow_snaptable.core import Table
from airflow_snaptable.operators.lineage import dataset_naming
from tests.airflow.conftest import snaptable_conn
from tests.airflow.test_operators import run
from tests.conftest import SCHEMA, make_rows


@pytest.fixture
def orders(tmp_path, monkeypatch):
    root = str(tmp_path / "warehouse")
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(root))
    table = Table.create(f"{root}/orders", SCHEMA, partition_by=["p"])
    for i in range(4):
        table.append(make_rows(range(i * 10, i * 10 + 10)))
    return table


def test_dataset_naming_follows_the_openlineage_spec():
    assert dataset_naming("/data/wh/orders") == ("file", "/data/wh/orders")
    assert dataset_naming("file:///data/wh/orders/") == ("file", "/data/wh/orders")
    assert dataset_naming("s3a://bucket/wh/orders") == ("s3://bucket", "wh/orders")
    assert dataset_naming("gs://bucket/orders") == ("gs://bucket", "orders")
    assert dataset_naming("iceberg://db.orders") == ("iceberg", "db.orders")


@pytest.mark.parametrize(
    "make, change, version",
    [
        (lambda: ops.SnapTableExpireSnapshotsOperator(task_id="t", table="orders", retain_min=1, time_retained="0 s"), "ALTER", "4"),
        (lambda: ops.SnapTableRollbackOperator(task_id="t", table="orders", snapshot_id=2), "OVERWRITE", "2"),
        (lambda: ops.SnapTableRemoveOrphanFilesOperator(task_id="t", table="orders", dry_run=False), "ALTER", "4"),
        (lambda: ops.SnapTableCreateTagOperator(task_id="t", table="orders", tag_name="t1"), None, "4"),
    ],
    ids=["expire", "rollback", "orphans", "tag"],
)
def test_every_operator_reports_the_table_its_version_and_its_lifecycle_change(orders, make, change, version):
    op = make()
    run(op)
    lineage = op.get_openlineage_facets_on_complete(None)
    (read,), (written,) = lineage.inputs, lineage.outputs
    assert (read.namespace, read.name) == (written.namespace, written.name) == ("file", orders.uri)
    assert written.facets["version"].datasetVersion == read.facets["version"].datasetVersion == version
    if change is None:
        assert "lifecycleStateChange" not in written.facets
    else:
        assert written.facets["lifecycleStateChange"].lifecycleStateChange == LifecycleStateChange[change]
    assert "lifecycleStateChange" not in read.facets


HOOK_LINEAGE_SCRIPT = """
import json, sys
from airflow.sdk.lineage import get_hook_lineage_collector
from airflow_snaptable.hooks import SnapTableHook

hook = SnapTableHook()
hook.run_action(hook.build_action("expire-tags", sys.argv[1]))
collected = get_hook_lineage_collector().collected_assets
print(json.dumps({"collector": type(get_hook_lineage_collector()).__name__,
                  "inputs": [a.asset.uri for a in collected.inputs], "outputs": [a.asset.uri for a in collected.outputs]}))
"""


def test_the_hook_reports_the_table_to_the_hook_lineage_collector(orders):
    """With OpenLineage configured (a transport), its hook lineage reader turns Airflow's collector on.
    A fresh process: Airflow decides that once per process."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "AIRFLOW__OPENLINEAGE__TRANSPORT": '{"type": "console"}'}
    proc = subprocess.run([sys.executable, "-c", HOOK_LINEAGE_SCRIPT, orders.uri], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    uri = f"snaptable://file{orders.uri}"
    assert seen == {"collector": "HookLineageCollector", "inputs": [uri], "outputs": [uri]}


def test_the_spark_runner_passes_openlineage_parent_job_information(orders, monkeypatch):
    """As the Spark provider does; the spark-submit itself is run by tests/airflow/test_hook.py."""
    from airflow_snaptable.hooks import SnapTableHook

    seen = {}

    def run_action(self, action, runner, spark_conn_id, spark_conf, spark_submit_kwargs, **more):
        seen.update(spark_conf or {})
        return {"action": action.name, "table": action.table, "result": {}}

    monkeypatch.setattr(SnapTableHook, "run_action", run_action)
    op = ops.SnapTableExpireTagsOperator(
        task_id="t", table="orders", runner="spark", spark_conf={"spark.ui.enabled": "false"}, openlineage_inject_parent_job_info=True
    )
    ti = _task_instance(op)
    run(op, ti=ti, task_instance=ti, dag_run=ti.dag_run)
    assert seen["spark.ui.enabled"] == "false"
    assert seen["spark.openlineage.parentJobName"].endswith(".t")
    assert seen["spark.openlineage.parentRunId"] and seen["spark.openlineage.rootParentJobName"]


def _task_instance(op):
    """What the parent-job injection reads of the running task (dag id, task id, try, dates)."""
    import datetime as dt
    import uuid
    from types import SimpleNamespace

    when = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    dag_run = SimpleNamespace(
        dag_id="lineage_dag", run_id="manual__1", logical_date=when, run_after=when, data_interval_start=when,
        clear_number=0, conf={}, run_type="manual", start_date=when,
    )
    ti = SimpleNamespace(
        dag_id="lineage_dag", task_id="t", try_number=1, map_index=-1, logical_date=when, dag_run=dag_run,
        id=uuid.uuid4(), start_date=when, task=op,
    )
    ti.get_template_context = lambda: {"dag_run": dag_run, "ti": ti}
    return ti
