"""The example DAGs, run for real: ``airflow dags test`` subprocesses, a real triggerer, spark-submit on S3.

Each test points the examples at a table in a temporary directory through the
snaptable connection (AIRFLOW_CONN_SNAPTABLE_DEFAULT, root = tmp dir) and the
SNAPTABLE_EXAMPLE_TABLE variable, runs the DAG, then checks the table.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_snaptable.core import Table
from tests.airflow.conftest import (
    AIRFLOW_BIN,
    EXAMPLE_DAGS,
    base_env,
    conn_json,
    free_port,
    run_airflow,
    snaptable_conn,
    spark_local_env,
)

sys.path.insert(0, str(EXAMPLE_DAGS))
from snaptable_example_data import SCHEMA, demo_rows, ingest_day  # noqa: E402

pytestmark = pytest.mark.usefixtures("airflow_db")

DAY = dt.timedelta(days=1)
BASE = dt.datetime(2026, 1, 10, 12, tzinfo=dt.timezone.utc)  # snapshot i is committed at noon on Jan 10 + i - 1


def millis(when: dt.datetime) -> int:
    return int(when.timestamp() * 1000)


def make_table(uri: str, days: int, storage_options: dict | None = None) -> Table:
    """A table with one APPEND per day at noon from BASE (clock set back, as if written then)."""
    table = Table.create(uri, SCHEMA, partition_by=["day"], storage_options=storage_options)
    for i in range(days):
        when = BASE + i * DAY
        table.clock = lambda w=when: millis(w)
        table.append(demo_rows(when.date().isoformat(), 5, first_id=i * 100))
    table.clock = lambda: int(time.time() * 1000)
    return table


@pytest.fixture
def warehouse(tmp_path) -> Path:
    root = tmp_path / "warehouse"
    root.mkdir()
    return root


def dag_env(warehouse: Path, table: str = "orders", **extra: str) -> dict[str, str]:
    """The examples on ``warehouse/<table>``; their Spark jobs on local[2] (spark-submit from the venv)."""
    return base_env(
        AIRFLOW_CONN_SNAPTABLE_DEFAULT=snaptable_conn(str(warehouse)),
        SNAPTABLE_EXAMPLE_TABLE=table,
        SNAPTABLE_EXAMPLE_POKE_INTERVAL="1",
        **{**spark_local_env("local[2]"), **extra},
    )


def dags_test(dag_id: str, env: dict, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    proc = run_airflow(["dags", "test", dag_id, *args], env=env, timeout=timeout)
    output = proc.stdout + proc.stderr
    assert "state=success" in output, output[-4000:]
    return proc


def test_the_system_test_style_lifecycle_dag_sets_up_runs_every_operator_and_tears_down(warehouse, airflow_db):
    """Self-contained: its setup creates the table, every operator runs on it, its teardown removes it."""
    dags_test("snaptable_lifecycle", dag_env(warehouse))
    with sqlite3.connect(os.path.join(airflow_db, "airflow.db")) as conn:
        (run_id,) = conn.execute(
            "select run_id from dag_run where dag_id = 'snaptable_lifecycle' order by id desc limit 1"
        ).fetchone()
        states = dict(conn.execute(
            "select task_id, state from task_instance where dag_id = 'snaptable_lifecycle' and run_id = ?", (run_id,)
        ).fetchall())
    assert states == dict.fromkeys(
        ["create_table", "wait_for_new_snapshots", "advance_consumer", "create_tag", "periodic_tags", "compact",
         "expire_snapshots", "create_savepoint", "clean", "delete_savepoint", "rename_tag", "rollback_to_tag", "delete_tag", "expire_tags", "expire_consumers", "remove_orphan_files",
         "delete_table"],
        "success",
    )
    assert list(warehouse.iterdir()) == [], "the teardown left the table behind"
    source = (Path(__file__).resolve().parents[2] / "example_dags" / "example_snaptable_lifecycle.py").read_text()
    for name in ("expire_snapshots", "rollback", "create_tag", "remove_orphan_files"):
        assert f"# [START howto_operator_snaptable_{name}]" in source and f"# [END howto_operator_snaptable_{name}]" in source


def test_a_dag_maintains_a_paimon_table_that_pypaimon_reads_back(paimon, tmp_path):
    """The Paimon example DAG on a table pypaimon wrote: the operators and the sensor take its directory;
    pypaimon then reads the retained snapshots, the day's tag and the older tags with the rows from before."""
    from tests.paimon.conftest import run_client

    warehouse = paimon.copy(tmp_path / "paimon")
    table_dir = os.path.join(warehouse, "db.db", "app")
    dags_test(
        "snaptable_paimon_maintenance", dag_env(tmp_path, SNAPTABLE_PAIMON_TABLE=table_dir), "2026-01-13",
        "-c", json.dumps({"retain_max": 2, "time_retained": "1000 d"}),  # beyond the 2 newest, age does not matter
    )
    after = paimon.read(warehouse, "app")["app"]
    before = paimon.before["app"]
    assert sorted(map(int, after["snapshots"])) == [5, 6]
    assert {k: v["rows"] for k, v in after["snapshots"].items()} == {k: before["snapshots"][k]["rows"] for k in ("5", "6")}
    assert after["tags"]["2026-01-12"]["rows"] == before["snapshots"]["6"]["rows"]  # the day's tag: the latest state
    assert after["tags"]["t2"]["rows"] == before["tags"]["t2"]["rows"]  # an older tag kept its expired snapshot's files
    assert Table.open(table_dir).verify().ok
    # The CLI contract on a Paimon table directory.
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_snaptable.cli", "expire", table_dir, "--retain-max", "1", "--retain-min", "1",
         "--time-retained", "0 s", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"]["expired_snapshot_ids"] == [5]
    assert sorted(map(int, paimon.read(warehouse, "app")["app"]["snapshots"])) == [6]
    # The hook: a connection naming the Paimon warehouse, the table by name under it.
    from airflow_snaptable.hooks import SnapTableHook

    os.environ["AIRFLOW_CONN_PAIMON_WAREHOUSE"] = snaptable_conn(warehouse)
    try:
        hook = SnapTableHook("paimon_warehouse")
        assert hook.get_table("db.db/app").format == "paimon"
        assert hook.run_action(hook.build_action("create-tag", "db.db/app", tag_name="via-hook"))["result"]["snapshot_id"] == 6
    finally:
        del os.environ["AIRFLOW_CONN_PAIMON_WAREHOUSE"]
    assert paimon.read(warehouse, "app")["app"]["tags"]["via-hook"]["rows"] == before["snapshots"]["6"]["rows"]
    # The next day: the DAG waits on its consumer, not a fixed snapshot id. Its expiry (and the CLI's) removed
    # every snapshot before 6 and pypaimon committed 7: the run sees exactly (6, 7] (a fixed after_snapshot_id=0
    # failed here: snapshot 0 of a table whose earliest is 6 has expired).
    assert Table.open(table_dir).consumer("snaptable-maintenance").next_snapshot == 7
    run_client(paimon.python, warehouse, [{"write": "db.app", "rows": [["b", 10, "t"]]}])  # snapshot 7
    dags_test("snaptable_paimon_maintenance", dag_env(tmp_path, SNAPTABLE_PAIMON_TABLE=table_dir), "2026-01-14",
              "-c", json.dumps({"retain_max": 1, "time_retained": "0 s"}))
    table = Table.open(table_dir)
    # 6 stays: it is the consumer's baseline while the run works (its changes are read from 6).
    assert [s.id for s in table.snapshots()] == [6, 7]
    assert table.consumer("snaptable-maintenance").next_snapshot == 8
    assert sorted(map(int, paimon.read(warehouse, "app")["app"]["snapshots"])) == [6, 7]


def test_a_dag_maintains_an_iceberg_table_that_pyiceberg_reads_back(tmp_path):
    """The Iceberg example DAG on a table pyiceberg wrote, its catalog in the connection's extra: the day's tag,
    expiry that deletes the files only expired snapshots reached, orphan removal; pyiceberg then reads every
    snapshot and ref left with the rows from before, and exactly the reachable files are left."""
    from tests.iceberg.conftest import IcebergEnv, assert_exactly_reachable_left, read_everything, rows

    (tmp_path / "iceberg").mkdir()
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/iceberg"},
                     str(tmp_path / "iceberg"))
    table = env.create()
    for i in range(6):
        table.append(rows(i))
    table.manage_snapshots().create_tag(table.refresh().metadata.snapshots[1].snapshot_id, "keep").commit()
    table.overwrite(rows(99, "b"))  # a delete snapshot, then an append: the appended files are unreachable from both
    table = table.refresh()
    ids = [s.snapshot_id for s in table.metadata.snapshots]
    before = read_everything(table)
    stray = Path(env.location()) / "data" / "stray-from-a-crashed-writer.parquet"
    stray.write_bytes(b"never committed")
    os.utime(stray, (time.time() - 4 * 86400,) * 2)
    tomorrow = (dt.datetime.now(dt.timezone.utc) + DAY).date().isoformat()  # the interval ends after every commit
    dags_test(
        "snaptable_iceberg_maintenance",
        base_env(AIRFLOW_CONN_SNAPTABLE_ICEBERG=snaptable_conn(extra={"catalog": env.properties})),
        tomorrow, "-c", json.dumps({"retain_min": 2}),
    )
    after = read_everything(table.refresh())
    assert sorted(after["snapshots"]) == sorted([ids[1], ids[-2], ids[-1]])  # the tag's, and main's newest two
    for snapshot_id, read in after["snapshots"].items():
        assert read == before["snapshots"][snapshot_id]
    day_tag = f"day-{dt.date.fromisoformat(tomorrow) - DAY}"
    assert after["refs"] == {"main": ids[-1], "keep": ids[1], day_tag: ids[-1]}
    assert not stray.exists()
    assert_exactly_reachable_left(table.refresh(), env.location())


def test_daily_maintenance(warehouse):
    table = make_table(str(warehouse / "orders"), days=6)
    table.clock = lambda: millis(BASE - 10 * DAY)
    table.create_tag("old", snapshot_id=1, time_retained="1 d")  # expired long ago
    table.clock = lambda: int(time.time() * 1000)
    stray = warehouse / "orders" / "data" / "stray.parquet"  # left by a crashed writer two days ago
    stray.write_bytes(b"not committed")
    os.utime(stray, (time.time() - 2 * 86400,) * 2)

    # The run for Jan 12th (interval Jan 12th -> 13th) runs late: it must tag the state at the boundary.
    dags_test("snaptable_daily_maintenance", dag_env(warehouse), "2026-01-13", "-c", json.dumps({"retain_max": 3, "time_retained": "1000 d"}))

    table = Table.open(str(warehouse / "orders"))
    tags = {t.name: t.snapshot_id for t in table.tags()}
    assert tags == {"2026-01-12": 3}  # the daily tag at the state of Jan 12th's end; "old" expired
    assert [s.id for s in table.snapshots()] == [4, 5, 6]  # retain_max=3
    assert not stray.exists()
    assert table.scan(tag="2026-01-12").to_arrow().num_rows == 15  # the tag still reads after expiry
    assert table.verify().missing_files == []


def test_incremental_with_a_deferrable_sensor_inside_dags_test(warehouse, tmp_path):
    table = make_table(str(warehouse / "orders"), days=3)
    table.update_consumer("orders_downstream", 4)  # everything read: the sensor must wait
    log = tmp_path / "dags-test.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [AIRFLOW_BIN, "dags", "test", "snaptable_incremental"], env=dag_env(warehouse), stdout=out, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + 120
            while "running trigger in line" not in log.read_text():
                assert proc.poll() is None, log.read_text()[-4000:]
                assert time.monotonic() < deadline, "the sensor never deferred"
                time.sleep(0.5)
            time.sleep(2)  # the trigger polls and finds nothing
            ingest_day(str(warehouse / "orders"), "2026-01-20", count=7, conn_id=None)
            assert proc.wait(timeout=120) == 0, log.read_text()[-4000:]
        finally:
            if proc.poll() is None:
                proc.kill()
    output = log.read_text()
    assert "Pausing task as DEFERRED" in output and "Trigger completed" in output
    # The Spark job read exactly the new range (3, 4]: the 7 rows ingested while the sensor waited.
    assert 'order changes: {"between": "3,4", "added_rows": 7,' in output
    assert '"rows_per_day": {"2026-01-20": 7}' in output
    assert Table.open(str(warehouse / "orders")).consumer("orders_downstream").next_snapshot == 5


def test_backfill_rolls_back_to_a_tag_and_reingests_with_spark(warehouse):
    table = make_table(str(warehouse / "orders"), days=5)
    table.create_tag("good", snapshot_id=3)
    table.create_tag("bad", snapshot_id=5)
    table.update_consumer("reader", 6)

    conf = {"tag": "good", "days": ["2026-01-13", "2026-01-14"], "force": True}
    dags_test("snaptable_backfill_from_tag", dag_env(warehouse), "-c", json.dumps(conf))

    table = Table.open(str(warehouse / "orders"))
    assert [s.id for s in table.snapshots()] == [1, 2, 3, 4, 5]  # 4 and 5 are the re-ingested days
    assert [s.commit_kind.value for s in table.snapshots()][3:] == ["OVERWRITE", "OVERWRITE"]
    names = sorted(t.name for t in table.tags())
    assert names[0].startswith("backfill-") and names[1:] == ["good"]  # "bad" was discarded
    days = sorted(set(table.scan().to_arrow().column("day").to_pylist()))
    assert days == ["2026-01-10", "2026-01-11", "2026-01-12", "2026-01-13", "2026-01-14"]
    assert table.scan().to_arrow().num_rows == 15 + 20
    assert table.consumer("reader").next_snapshot == 4  # moved back to the rollback target (force)


def test_event_driven_dag_run_by_hand_reads_from_its_consumer(warehouse):
    ingest_day(str(warehouse / "orders"), "2026-01-10", conn_id=None)
    ingest_day(str(warehouse / "orders"), "2026-01-11", conn_id=None)
    proc = dags_test("snaptable_event_driven", dag_env(warehouse))
    assert "snapshots [1, 2]: 20 new rows" in proc.stdout + proc.stderr
    assert Table.open(str(warehouse / "orders")).consumer("orders_event_driven").next_snapshot == 3


# -- AssetWatcher in a real triggerer ----------------------------------------------------------------


def _events(db: str) -> list[dict]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "select e.extra from asset_event e join asset a on a.id = e.asset_id "
            "where a.name = 'snaptable_orders_snapshots' order by e.id"
        ).fetchall()
    return [json.loads(r[0])["payload"] for r in rows]


def _position(db: str) -> dict | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("select value from asset_state_store where key = 'snaptable_position'").fetchone()
    return None if row is None else json.loads(row[0])


def _wait(what: str, check, timeout: float, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = log.read_text()[-5000:] if log and log.exists() else ""
            raise AssertionError(f"timed out waiting for {what}\n{tail}")
        time.sleep(0.5)


class Triggerer:
    """``airflow triggerer`` as a child process (its own process group, stopped by pid)."""

    def __init__(self, env: dict, log: Path):
        self.log = log
        self.handle = open(log, "a")
        self.proc = subprocess.Popen(
            [AIRFLOW_BIN, "triggerer"], env=env, stdout=self.handle, stderr=subprocess.STDOUT, start_new_session=True
        )

    def stop(self, timeout: float = 30) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.handle.close()


def test_asset_watcher_in_a_real_triggerer_neither_loses_nor_repeats_events_across_a_restart(warehouse, airflow_home, tmp_path):
    ingest_day(str(warehouse / "orders"), "2026-01-10", conn_id=None)  # snapshot 1: there before the watcher
    env = dag_env(warehouse, AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(free_port()))
    # Watchers run only for unpaused DAGs (DAGs are created unpaused in these tests); their triggers are
    # registered when the DAG is parsed. The trigger's arguments name the table ("orders"); the root comes
    # from the connection when the trigger runs, so this test's warehouse needs no new registration.
    # (Airflow 3.3 needs two parses to replace a watcher whose trigger arguments changed.)
    run_airflow(["dags", "reserialize"], env=env)
    db = os.path.join(airflow_home, "airflow.db")
    uri = str(warehouse / "orders")
    log = tmp_path / "triggerer.log"
    already = len(_events(db))

    triggerer = Triggerer(env, log)
    try:
        _wait("the watcher to start", lambda: "Watching " + uri in log.read_text(), 120, log)
        ingest_day(uri, "2026-01-11", conn_id=None)  # snapshot 2
        _wait("the first event", lambda: len(_events(db)) == already + 1, 60, log)
        _wait("the position to be stored", lambda: (_position(db) or {}).get("last_snapshot_id") == 2, 30, log)
        triggerer.stop()

        ingest_day(uri, "2026-01-12", conn_id=None)  # snapshots 3 and 4 land while no triggerer runs
        ingest_day(uri, "2026-01-13", conn_id=None)

        triggerer = Triggerer(env, log)
        _wait("the event after the restart", lambda: len(_events(db)) == already + 2, 120, log)
        _wait("the position to be stored", lambda: (_position(db) or {}).get("last_snapshot_id") == 4, 30, log)
        time.sleep(3)  # two more polls: nothing new must be emitted
    finally:
        triggerer.stop()

    events = _events(db)[already:]
    assert [(e["from_snapshot_id"], e["to_snapshot_id"]) for e in events] == [(1, 2), (2, 4)]
    assert [e["snapshot_ids"] for e in events] == [[2], [3, 4]]
    assert all(e["table"] == uri and e["added_records"] > 0 for e in events)
    position = _position(db)
    assert {k: v for k, v in position.items() if k != "lineage"} == {"table": uri, "last_snapshot_id": 4}
    assert max(int(i) for i in position["lineage"]["commits"]) == 4  # the lineage it continues from (core/incremental.py)
    assert "Watching " + uri + " from stored position: snapshot 2" in log.read_text()


# -- spark-submit on S3: credentials from the connection, never on a command line or in a log -----------


SECRET = "spark-dag-SECRET-d41d8cd9"


@pytest.fixture
def moto():
    from tests.s3_servers import MotoS3Server

    with MotoS3Server() as server:
        yield server


def test_spark_maintenance_on_s3_keeps_secrets_off_command_lines_and_out_of_logs(moto, tmp_path, airflow_home):
    bucket = moto.create_bucket("spark")
    test_options = moto.storage_options()
    table = make_table(f"s3://{bucket}/warehouse/orders", days=4, storage_options=test_options)

    # A spark-submit that records its command line, then runs the real one.
    wrapper_dir = tmp_path / "bin"
    wrapper_dir.mkdir()
    argv_log = tmp_path / "spark-submit-argv.log"
    wrapper = wrapper_dir / "spark-submit"
    real = Path(sys.executable).with_name("spark-submit")
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{argv_log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)

    env = base_env(
        AIRFLOW_CONN_SNAPTABLE_DEFAULT=snaptable_conn(
            f"s3://{bucket}/warehouse",
            login="AKIDSPARKTEST",
            password=SECRET,
            host=moto.endpoint_url,
            extra={
                "region_name": "eu-west-1",
                "storage_options": json.dumps({"config_kwargs": {"s3": {"addressing_style": "path"}}}),
            },
        ),
        AIRFLOW_CONN_SPARK_DEFAULT=conn_json("spark", host="local[1]"),
        SNAPTABLE_EXAMPLE_TABLE="orders",
        SPARK_LOCAL_IP="127.0.0.1",
        NO_PROXY="127.0.0.1",
        no_proxy="127.0.0.1",
    )
    env["PATH"] = os.pathsep.join([str(wrapper_dir), env["PATH"]])
    proc = dags_test("snaptable_spark_maintenance", env, "-c", json.dumps({"retain_max": 2}), timeout=300)
    output = proc.stdout + proc.stderr

    table = Table.open(table.uri, test_options)
    assert [s.id for s in table.snapshots()] == [4]  # older than a day: all but retain_min=1
    assert table.verify().missing_files == []
    assert output.count("Spark-Submit cmd:") == 2
    commands = argv_log.read_text()
    assert commands.count("--action-file") == 2
    assert SECRET not in commands
    assert SECRET not in output
    # Nor anywhere under AIRFLOW_HOME: log files, the metadata database (XComs, rendered fields).
    leaks = [p for p in Path(airflow_home).rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaks == []


def test_every_example_dag_parses_and_spark_jobs_are_not_dag_files():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(EXAMPLE_DAGS))  # AIRFLOW__CORE__LOAD_EXAMPLES=False (conftest)
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == [
        "snaptable_backfill_from_tag",
        "snaptable_daily_maintenance",
        "snaptable_event_driven",
        "snaptable_iceberg_maintenance",
        "snaptable_incremental",
        "snaptable_lake_maintenance",
        "snaptable_lifecycle",
        "snaptable_paimon_maintenance",
        "snaptable_spark_ingest",
        "snaptable_spark_maintenance",
    ]
    assert not any("spark_jobs" in path for path in bag.file_last_changed)  # not DAG files (.airflowignore)
