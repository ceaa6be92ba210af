"""The spark runner on a real standalone cluster (master and worker on 127.0.0.1) whose executors run
a bare Python that never had this package: the runner ships it (spark/shipping.py), the job checks
the executors before the first work it sends them (spark/executor_check.py), and every failure names its cause.

One cluster for the module; five spark-submits: three operators (our table, Paimon, Iceberg, deletes
on the executors, thresholds at 1), one expiry at the default thresholds of a table big enough to
cross them, and a version mismatch. A bad master and a missing archive fail before spark-submit
starts; executors without the package are refused by the same check (tests/spark/test_executor_check.py).
"""

from __future__ import annotations

import glob
import io
import json
import os
import tarfile
import time

import pytest

from airflow_snaptable import operators as ops
from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import ExpireSnapshots, run_action
from airflow_snaptable.core.errors import ExecutionEnvironmentError
from airflow_snaptable.hooks.snaptable import SnapTableHook
from tests.airflow.conftest import conn_json, snaptable_conn
from tests.conftest import SCHEMA, make_rows
from tests.iceberg.conftest import assert_exactly_reachable_left, iceberg_env, read_everything, rows  # noqa: F401 - a fixture
from tests.paimon.conftest import table_files
from tests.paimon.test_paimon_lifecycle import check

pytest.importorskip("pyspark")

CONN = "spark_standalone"


@pytest.fixture(scope="module")
def cluster():
    from tests.standalone_spark import remove, start_cluster

    cluster = start_cluster()
    yield cluster
    remove(cluster)


@pytest.fixture
def standalone(cluster, monkeypatch, tmp_path):
    host, port = cluster.master.rsplit(":", 1)
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", conn_json("spark", host=host, port=int(port)))
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    return cluster


def spark_conf(cluster, events: str | None = None) -> dict:
    conf = {
        # The nodes' Python, as a cluster's spark-defaults.conf names it: the bare one.
        "spark.pyspark.python": cluster.python,
        "spark.snaptable.delete.parallelThreshold": "1",
        "spark.snaptable.read.parallelThreshold": "1",
        "spark.snaptable.delete.filesPerTask": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "512m",
        "spark.driver.memory": "512m",
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    }
    if events:
        os.makedirs(events, exist_ok=True)
        conf.update({
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{events}",
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false",
        })
    return conf


def executor_work(events: str) -> dict[str, int]:
    """From Spark's event logs: tasks that ran on executors (not the driver), by job description kind."""
    descriptions: dict[int, str] = {}
    stage_job: dict[int, int] = {}
    done: dict[str, int] = {}
    for path in [p for p in glob.glob(os.path.join(events, "**", "*"), recursive=True) if os.path.isfile(p)]:
        with open(path) as handle:
            for line in handle:
                event = json.loads(line)
                kind = event.get("Event")
                if kind == "SparkListenerJobStart":
                    descriptions[event["Job ID"]] = (event.get("Properties") or {}).get("spark.job.description", "")
                    for stage in event.get("Stage IDs", []):
                        stage_job[stage] = event["Job ID"]
                elif kind == "SparkListenerTaskEnd" and event["Task End Reason"]["Reason"] == "Success":
                    assert event["Task Info"]["Executor ID"] != "driver"
                    what = descriptions.get(stage_job.get(event["Stage ID"]), "").split(" ")[1:2]
                    done[what[0] if what else "?"] = done.get(what[0] if what else "?", 0) + 1
    return done


def run(op):
    op.render_template_fields({})
    return op.execute({})


def test_expiry_of_our_paimon_and_iceberg_tables_deletes_on_executors_without_the_package(
    standalone, tmp_path, monkeypatch, paimon, iceberg_env
):
    root = str(tmp_path / "warehouse")
    ours = Table.create(f"{root}/orders", SCHEMA, partition_by=["p"])
    for i in range(4):
        ours.overwrite(make_rows(range(i * 10, i * 10 + 10)))
    paimon_warehouse = paimon.copy(tmp_path / "paimon")
    paimon_root = os.path.join(paimon_warehouse, "db.db", "lsm")
    table = iceberg_env.create()
    for i in range(3):
        table.append(rows(i))
    table.overwrite(rows(99, "b"))
    iceberg_ids = [s.snapshot_id for s in table.refresh().metadata.snapshots]
    iceberg_before = read_everything(table.refresh())
    predicted = run_action(
        ExpireSnapshots(table="iceberg://db.orders", retain_min=1, retain_max=2, time_retained="0 s", dry_run=True),
        catalog=iceberg_env.properties,
    )["result"]
    assert predicted["expired_snapshot_ids"] and predicted["data_files"]
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(root, extra={"catalog": iceberg_env.properties}))

    events = str(tmp_path / "events")
    common = dict(runner="spark", spark_conn_id=CONN, spark_conf=spark_conf(standalone, events), retain_min=1, time_retained="0 s")
    started = time.monotonic()
    ours_result = run(ops.SnapTableExpireSnapshotsOperator(task_id="ours", table="orders", retain_max=1, **common))["result"]
    paimon_result = run(ops.SnapTableExpireSnapshotsOperator(task_id="paimon", table=paimon_root, retain_max=1, **common))["result"]
    iceberg_result = run(
        ops.SnapTableExpireSnapshotsOperator(task_id="iceberg", table="iceberg://db.orders", retain_max=2, **common)
    )["result"]
    print(f"three submits to the standalone cluster: {time.monotonic() - started:.1f} s")

    assert ours_result["expired_snapshot_ids"] == [1, 2, 3] and ours_result["deleted_data_files"] > 0
    assert [s.id for s in Table.open(ours.uri).snapshots()] == [4]
    assert paimon_result["expired_snapshot_ids"] == [1, 2, 3, 4]
    assert not set(paimon_result["data_files"]) & table_files(paimon_root)
    check(paimon, paimon_warehouse, "lsm", [5], ["compacted"])
    assert iceberg_result["expired_snapshot_ids"] == predicted["expired_snapshot_ids"]
    assert iceberg_result["deleted_data_files"] == len(predicted["data_files"])
    kept = [i for i in iceberg_ids if i not in predicted["expired_snapshot_ids"]]
    after = read_everything(table.refresh())
    assert sorted(after["snapshots"]) == sorted(kept)
    assert all(after["snapshots"][i] == iceberg_before["snapshots"][i] for i in kept)
    assert_exactly_reachable_left(table.refresh(), iceberg_env.location())

    # The work ran on the cluster's executors: the start-up check, the reads and the deletes of each table.
    work = executor_work(events)
    assert work.get("check", 0) >= 3 and work.get("read", 0) >= 3 and work.get("delete", 0) >= 3, work


def test_at_the_default_thresholds_a_table_big_enough_deletes_on_the_executors(standalone, tmp_path, monkeypatch):
    """No threshold set: an expiry of exactly DEFAULT_PARALLEL_THRESHOLD data files (tiny real Parquet
    files, one commit) crosses the default delete threshold, so its deletes run on the cluster's executors.
    Its 2 manifests stay under the default read threshold: no reads on the executors."""
    from airflow_snaptable.spark.maintenance import DEFAULT_PARALLEL_THRESHOLD
    from benchmarks.spark_delete import build_table

    root = str(tmp_path / "warehouse")
    table, doomed = build_table(f"{root}/big", DEFAULT_PARALLEL_THRESHOLD, None)
    assert len(doomed) == DEFAULT_PARALLEL_THRESHOLD and [s.id for s in table.snapshots()] == [1, 2]
    rows_before = table.scan().to_arrow().sort_by("p")
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(root))
    events = str(tmp_path / "events")
    conf = {k: v for k, v in spark_conf(standalone, events).items() if not k.startswith("spark.snaptable.")}

    started = time.monotonic()
    result = run(ops.SnapTableExpireSnapshotsOperator(
        task_id="big", table="big", runner="spark", spark_conn_id=CONN, spark_conf=conf,
        retain_min=1, retain_max=1, time_retained="0 s",
    ))["result"]
    print(f"one submit, {DEFAULT_PARALLEL_THRESHOLD} files at the default thresholds: {time.monotonic() - started:.1f} s")

    assert result["expired_snapshot_ids"] == [1] and result["deleted_data_files"] == DEFAULT_PARALLEL_THRESHOLD
    work = executor_work(events)
    assert work.get("delete", 0) >= 1 and work.get("read", 0) == 0, work
    after = Table.open(table.uri)
    assert not any(os.path.exists(os.path.join(after.uri, path)) for path in doomed)
    assert [s.id for s in after.snapshots()] == [2]
    verified = after.verify()
    assert verified.missing_files == [] and verified.unreferenced_files == [], verified
    assert after.scan().to_arrow().sort_by("p").equals(rows_before)


def test_a_bad_master_fails_fast_with_the_address_and_the_way_out(standalone, tmp_path, monkeypatch):
    from tests.airflow.conftest import free_port

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_NOWHERE", conn_json("spark", host="spark://127.0.0.1", port=free_port()))
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    hook = SnapTableHook(snaptable_conn_id=None)
    action = hook.build_action("expire-snapshots", table.uri)
    with pytest.raises(ExecutionEnvironmentError, match=r"master spark://127\.0\.0\.1:\d+ did not accept a connection within 2 s.*master is up"):
        hook.run_action(action, runner="spark", spark_conn_id="spark_nowhere", spark_connect_timeout=2)


def test_a_missing_prebuilt_archive_is_named_before_spark_starts(standalone, tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    hook = SnapTableHook(snaptable_conn_id=None)
    missing = str(tmp_path / "libs" / "snaptable-env.tar.gz")
    with pytest.raises(ExecutionEnvironmentError, match=r"archive .*snaptable-env\.tar\.gz, which does not exist"):
        hook.run_action(hook.build_action("expire-snapshots", table.uri), runner="spark", spark_conn_id=CONN, runner_ship=missing)


def _archive_of_another_version(path: str) -> str:
    """A prebuilt archive holding airflow-snaptable 0.0.9 (its top module only)."""
    with tarfile.open(path, "w:gz") as tar:
        data = b'__version__ = "0.0.9"\n'
        info = tarfile.TarInfo("site-packages/airflow_snaptable/__init__.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_executors_of_another_version_are_refused_naming_both_versions(standalone, tmp_path):
    import airflow_snaptable

    table = Table.create(str(tmp_path / "t"), SCHEMA)
    table.append(make_rows(range(3)))
    table.append(make_rows(range(3, 6)))
    hook = SnapTableHook(snaptable_conn_id=None)
    # Work for the executors (thresholds at 1): the check runs before the first of it, the expiry's planning read.
    action = hook.build_action("expire-snapshots", table.uri, retain_max=1, retain_min=1, time_retained="0 s")
    conf = spark_conf(standalone)
    archive = _archive_of_another_version(str(tmp_path / "old-env.tar.gz"))
    with pytest.raises(ExecutionEnvironmentError) as caught:
        hook.run_action(action, runner="spark", spark_conn_id=CONN, spark_conf=conf, runner_ship=archive)
    assert f"driver runs airflow-snaptable {airflow_snaptable.__version__}, the executors 0.0.9" in str(caught.value)
    assert [s.id for s in Table.open(table.uri).snapshots()] == [1, 2]  # refused before the executors did anything
