"""The short names the package was specified with ("DAG authors adding ``SnapshotExpireOperator``,
``NewSnapshotSensor``-triggered downstream jobs, backfills via rollback-to-tag tasks"): public names of the
same classes as the prefixed ones, importable where DAG authors look, run by Airflow, and listed where the
provider info says its classes are. tests/airflow/test_public_names.py keeps them from being removed."""

from __future__ import annotations

import importlib

import pytest

from airflow_snaptable.core import Table
from tests.airflow.conftest import snaptable_conn
from tests.conftest import SCHEMA, make_rows

#: (package, short name, prefixed name): every name the prefix rename kept (commit 34147cc) and 8861907 dropped.
SHORT_NAMES = [
    ("operators", "SnapshotExpireOperator", "SnapTableExpireSnapshotsOperator"),
    ("operators", "CreateTagOperator", "SnapTableCreateTagOperator"),
    ("operators", "DeleteTagOperator", "SnapTableDeleteTagOperator"),
    ("operators", "PeriodicTagOperator", "SnapTablePeriodicTagOperator"),
    ("operators", "ExpireTagsOperator", "SnapTableExpireTagsOperator"),
    ("operators", "ExpireConsumersOperator", "SnapTableExpireConsumersOperator"),
    ("operators", "RollbackOperator", "SnapTableRollbackOperator"),
    ("operators", "RemoveOrphanFilesOperator", "SnapTableRemoveOrphanFilesOperator"),
    ("operators", "CompactOperator", "SnapTableCompactOperator"),
    ("operators", "AdvanceConsumerOperator", "SnapTableAdvanceConsumerOperator"),
    ("sensors", "NewSnapshotSensor", "SnapTableNewSnapshotSensor"),
    ("triggers", "NewSnapshotTrigger", "SnapTableNewSnapshotTrigger"),
    ("triggers", "SnapshotEventTrigger", "SnapTableSnapshotEventTrigger"),
]


@pytest.mark.parametrize(("package", "short", "prefixed"), SHORT_NAMES, ids=[s for _, s, _ in SHORT_NAMES])
def test_a_short_name_is_the_prefixed_class(package, short, prefixed):
    """Importable from the package and from its module (where the provider info points), the same class."""
    outer = importlib.import_module(f"airflow_snaptable.{package}")
    inner = importlib.import_module(f"airflow_snaptable.{package}.snaptable")
    assert short in outer.__all__
    assert getattr(outer, short) is getattr(outer, prefixed) is getattr(inner, short) is getattr(inner, prefixed)


def test_the_documented_imports():
    from airflow_snaptable.operators import RollbackOperator, SnapshotExpireOperator, SnapTableExpireSnapshotsOperator
    from airflow_snaptable.sensors import NewSnapshotSensor, SnapTableNewSnapshotSensor

    assert SnapshotExpireOperator is SnapTableExpireSnapshotsOperator and NewSnapshotSensor is SnapTableNewSnapshotSensor
    assert RollbackOperator.__name__ == "SnapTableRollbackOperator"


def test_the_provider_info_lists_the_modules_of_every_name():
    """Airflow finds a provider's classes through the modules its info lists: every name, short or prefixed, is in one."""
    from airflow_snaptable.get_provider_info import get_provider_info

    info = get_provider_info()
    for package, short, prefixed in SHORT_NAMES:
        (listed,) = [e["python-modules"] for e in info[package]]
        for name in (short, prefixed):
            assert any(hasattr(importlib.import_module(m), name) for m in listed), (package, name, listed)


def test_a_trigger_serialized_under_a_short_name_deserializes():
    """The triggerer stores a deferred task's trigger by classpath; one stored under a short name still loads."""
    from airflow.sdk.module_loading import import_string

    from airflow_snaptable.triggers import NewSnapshotTrigger, SnapshotEventTrigger

    trigger = NewSnapshotTrigger(table="orders", after_snapshot_id=3)
    classpath, kwargs = trigger.serialize()
    old = import_string(classpath.replace("SnapTableNewSnapshotTrigger", "NewSnapshotTrigger"))
    assert old(**kwargs).serialize() == (classpath, kwargs)
    assert import_string("airflow_snaptable.triggers.snaptable.SnapshotEventTrigger") is SnapshotEventTrigger


#: A DAG written with the short names: wait for snapshots, tag, roll back to the tag (the backfill), expire.
SHORT_NAMES_DAG = '''
import pendulum
from airflow.sdk import DAG

from airflow_snaptable.operators import CreateTagOperator, RollbackOperator, SnapshotExpireOperator
from airflow_snaptable.sensors import NewSnapshotSensor

with DAG("snaptable_short_names", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    wait = NewSnapshotSensor(task_id="wait", table="orders", after_snapshot_id=0, poke_interval=1)
    tag = CreateTagOperator(task_id="tag", table="orders", tag_name="good", snapshot_id=2)
    back = RollbackOperator(task_id="back", table="orders", tag="good")
    expire = SnapshotExpireOperator(task_id="expire", table="orders", retain_min=1, retain_max=1)
    wait >> tag >> back >> expire
'''


def test_a_dag_written_with_the_short_names_runs(airflow_db, tmp_path, monkeypatch):
    """``dag.test()`` of a DAG file in its own DAGs folder (dag.test() syncs the folder to the metadata database)."""
    import importlib.util

    root = tmp_path / "warehouse"
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(str(root)))
    table = Table.create(f"{root}/orders", SCHEMA, partition_by=["p"])
    for i in range(4):
        table.append(make_rows(range(i * 3, i * 3 + 3)))
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "short_names.py").write_text(SHORT_NAMES_DAG, encoding="utf-8")
    from airflow import settings

    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    monkeypatch.setattr(settings, "DAGS_FOLDER", str(dags))  # read once, when airflow was first imported
    spec = importlib.util.spec_from_file_location("snaptable_short_names_dag", dags / "short_names.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test()
    assert run.state == "success"
    assert table.tag("good").snapshot.id == 2 and [s.id for s in table.snapshots()] == [2]
