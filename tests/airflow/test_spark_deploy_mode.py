"""Cluster deploy mode is refused, asked for in the operator's arguments or in the Spark connection,
with the reason (Spark's own refusal on standalone masters, the driver's files on the Airflow worker)
and the way out (client mode; what YARN / Kubernetes cluster mode would need). No spark-submit runs."""

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
    assert "driver on the Airflow worker" in message and "action file" in message and "result file" in message
    assert "Use client mode" in message
    assert "YARN or Kubernetes" in message and "shared storage" in message and "secrets file" in message
    assert "not support yet" in message


def test_cluster_deploy_mode_in_the_arguments_is_refused_with_reason_and_way_out():
    with pytest.raises(InvalidArgumentError) as caught:
        ops.SnapTableExpireSnapshotsOperator(
            task_id="t", table="x", runner="spark", spark_submit_kwargs={"deploy_mode": "cluster"}
        )
    assert "deploy_mode='cluster'" in str(caught.value)
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
