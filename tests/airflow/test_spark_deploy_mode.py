"""Cluster deploy mode on a standalone (or local) master is refused, asked for in the operator's arguments
or in the Spark connection, with the reason (Spark's own refusal for Python applications) and the way out
(client mode; YARN / Kubernetes with a staging location, tests/spark/test_staging.py). No spark-submit runs."""

from __future__ import annotations

import pytest

from airflow_snaptable import operators as ops
from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.hooks.snaptable import SnapTableHook
from tests.airflow.conftest import conn_json
from tests.conftest import SCHEMA, make_rows


def assert_explains_the_refusal(message: str) -> None:
    assert "Cluster deploy mode is currently not supported for python applications on standalone clusters" in message
    assert "Use client mode" in message and "driver then runs on the Airflow worker" in message
    assert "YARN or Kubernetes" in message and "spark.snaptable.stagingLocation" in message


def test_cluster_deploy_mode_in_the_arguments_is_refused_on_a_standalone_master(tmp_path, monkeypatch):
    """The master is known only when the task runs (the connection): the operator is accepted, the run refused."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE", conn_json("spark", host="spark://127.0.0.1", port=7077))
    op = ops.SnapTableExpireSnapshotsOperator(task_id="t", table="x", runner="spark", spark_submit_kwargs={"deploy_mode": "cluster"})
    assert op.spark_submit_kwargs == {"deploy_mode": "cluster"}
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    table.append(make_rows(range(3)))
    hook = SnapTableHook(snaptable_conn_id=None)
    with pytest.raises(InvalidArgumentError) as caught:
        hook.run_action(hook.build_action("expire-snapshots", table.uri), runner="spark", spark_conn_id="spark_standalone",
                        spark_submit_kwargs={"deploy_mode": "cluster"})
    assert "deploy_mode='cluster'" in str(caught.value) and "'spark://127.0.0.1:7077'" in str(caught.value)
    assert_explains_the_refusal(str(caught.value))


def test_cluster_deploy_mode_from_the_connection_is_refused_before_spark_submit(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER_MODE",
        conn_json("spark", host="spark://127.0.0.1", port=7077, extra={"deploy-mode": "cluster"}),
    )
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    table.append(make_rows(range(3)))
    table.append(make_rows(range(3, 6)))
    hook = SnapTableHook(snaptable_conn_id=None)
    action = hook.build_action("expire-snapshots", table.uri, retain_max=1, retain_min=1, time_retained="0 s")
    with pytest.raises(InvalidArgumentError) as caught:
        hook.run_action(action, runner="spark", spark_conn_id="spark_cluster_mode")
    assert "Spark connection 'spark_cluster_mode'" in str(caught.value)
    assert_explains_the_refusal(str(caught.value))
    assert [s.id for s in Table.open(table.uri).snapshots()] == [1, 2]  # nothing ran
