"""Errors that say where and what (issue 28 item 3): the task id in every operator and sensor error,
when the DAG is parsed and when the task runs; a malformed URI named as such; a worker without
spark-submit told how to get it."""

from __future__ import annotations

import sys

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, TagAlreadyExistsError, UnsupportedOperationError
from airflow_snaptable.operators import (
    SnapTableCreateTagOperator,
    SnapTableExpireSnapshotsOperator,
    SnapTableRemoveOrphanFilesOperator,
)
from airflow_snaptable.operators.lake import SnapTableMaintainTableOperator
from airflow_snaptable.sensors import SnapTableNewSnapshotSensor
from tests.airflow.conftest import conn_json, snaptable_conn
from tests.conftest import SCHEMA, make_rows


@pytest.fixture
def root(tmp_path, monkeypatch):
    root = str(tmp_path / "warehouse")
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(root))
    table = Table.create(f"{root}/orders", SCHEMA, partition_by=["p"])
    table.append(make_rows(range(3)))
    return root


def run(op, **context):
    op.render_template_fields(context)
    return op.execute(context)


@pytest.mark.parametrize(
    "make",
    [
        lambda: SnapTableExpireSnapshotsOperator(task_id="expire_orders", table="x", retain_min="three"),
        lambda: SnapTableExpireSnapshotsOperator(task_id="expire_orders", table="x", runner="emr"),
        lambda: SnapTableCreateTagOperator(task_id="expire_orders", table="x", tag_name="a", if_exists="replace"),
        lambda: SnapTableNewSnapshotSensor(task_id="expire_orders", table="x", after_snapshot_id=-1),
        lambda: SnapTableNewSnapshotSensor(task_id="expire_orders", table="x", consumer_id="c", commit_kinds=["MERGE"]),
        lambda: SnapTableMaintainTableOperator(task_id="expire_orders", table={}, location="l", policy={"defaults": {"nope": {}}}),
    ],
)
def test_parse_time_errors_name_the_task(make):
    with pytest.raises(InvalidArgumentError, match=r"^expire_orders: "):
        make()


def test_run_time_errors_name_the_task_and_keep_their_type(root):
    with pytest.raises(InvalidArgumentError, match=r"^expire_orders: .*retain_min must be an integer"):
        run(SnapTableExpireSnapshotsOperator(task_id="expire_orders", table="orders", retain_min="{{ params.n }}"), params={"n": "three"})
    run(SnapTableCreateTagOperator(task_id="tag_day", table="orders", tag_name="d"))
    with pytest.raises(TagAlreadyExistsError, match=r"^tag_day: ") as raised:
        run(SnapTableCreateTagOperator(task_id="tag_day", table="orders", tag_name="d"))
    assert str(raised.value).count("tag_day: ") == 1
    with pytest.raises(Exception, match=r"^wait: ") as raised:
        run(SnapTableNewSnapshotSensor(task_id="wait", table="orders", consumer_id="c", wait_for_table=False, after_snapshot_id=None,
                                       snaptable_conn_id="no_such_connection"))


def test_a_malformed_table_uri_is_named_as_such(root):
    with pytest.raises(InvalidArgumentError, match=r"^orphans: table 'iceberg:/db.orders' is a malformed URI.*'iceberg://db.orders'"):
        run(SnapTableRemoveOrphanFilesOperator(task_id="orphans", table="iceberg:/db.orders"))


def test_spark_runner_without_spark_submit_says_how_to_install_it(root, tmp_path, monkeypatch):
    """pyspark is installed here: a worker without it is a PATH and an interpreter directory without spark-submit."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(sys, "executable", str(empty / "python"))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", conn_json("spark", host="local[1]"))
    Table.open(f"{root}/orders").append(make_rows(range(3, 6)))
    op = SnapTableExpireSnapshotsOperator(task_id="expire_orders", table="orders", retain_max=1, runner="spark")
    with pytest.raises(UnsupportedOperationError, match=r"^expire_orders: runner='spark' needs 'spark-submit'.*"
                                                        r"pip install 'airflow-snaptable\[spark\]'"):
        run(op)
    assert len(Table.open(f"{root}/orders").snapshots()) == 2  # nothing ran
