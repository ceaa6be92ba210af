"""The lake DAG on Spark under ``airflow dags test``: ONE spark-submit (local[2]) maintains a mixed lake
(our tables, a Paimon warehouse, a broken table), with four secrets planted in ``spark_conf``.

- Every table is maintained and gets its asset event; the broken one is ``Failed`` alone.
- No planted secret appears in the task log, in any command line seen by ``ps`` during the run,
  in the metadata database (rendered fields, XComs) or in Spark's event log.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import textwrap
import threading
from pathlib import Path

from airflow_snaptable.core.lake import lake_status
from tests.airflow.conftest import base_env, run_airflow, snaptable_conn, spark_local_env
from tests.airflow.test_spark_secrets import PLANTED, SECRETS
from tests.lake.conftest import NATIVE_SNAPSHOTS, NATIVE_TABLES, PAIMON_TABLES, make_mixed_lake, native_dir, write_native

DAG_ID = "snaptable_spark_lake_secrets"
#: PLANTED's secrets as Airflow Variables, read by templates.
TEMPLATES = {key: value.replace(secret, f"{{{{ var.value.planted_{i} }}}}")
             for (key, value), (i, secret) in zip(PLANTED.items(), enumerate(SECRETS))}
CONNECTION_SECRET = "plantedE-connection-6f6f"

DAG_FILE = """
import json, os
import pendulum
from airflow.sdk import DAG
from airflow_snaptable.operators.lake import lake_maintenance_group

with DAG(dag_id={dag_id!r}, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    lake_maintenance_group(
        location="lake",
        policy={{"defaults": {{"snapshot-expiry": {{"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}}, "tag-expiry": {{}}}}}},
        runner="spark",
        fail_on_job_failure=False,
        # As a DAG author should: templates, rendered when the task runs (a value computed when the DAG is
        # parsed is stored by Airflow in the serialized DAG, as the DAG file's source is).
        spark_conf={{**json.loads(os.environ["TEST_PLANTED_TEMPLATES"]),
                    "spark.ui.enabled": "false", "spark.eventLog.enabled": "true",
                    "spark.eventLog.dir": os.environ["TEST_EVENT_LOG_DIR"], "spark.eventLog.compress": "false",
                    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
                    # the author's own redaction regex is widened by the job's, not replaced
                    "spark.redaction.regex": "(?i)mycompany", "spark.mycompany.tenant": "tenant-hidden-by-own-regex"}},
    )
"""


class CommandLines:
    """Every process's command line, sampled with ``ps`` while the DAG runs."""

    def __init__(self):
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.is_set():
            out = subprocess.run(["ps", "-eww", "-o", "args="], capture_output=True, text=True).stdout
            self.seen.update(out.splitlines())
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def test_one_spark_submit_maintains_the_lake_and_no_planted_secret_leaks(paimon, tmp_path, airflow_db):
    lake = make_mixed_lake(paimon, tmp_path)
    write_native(native_dir(lake.path, "sales.broken"))
    with open(os.path.join(native_dir(lake.path, "sales.broken"), "snapshot", "snapshot-2"), "w") as f:
        f.write("{not json")
    dags, events = tmp_path / "dags", tmp_path / "spark-events"
    dags.mkdir()
    events.mkdir()
    (dags / "spark_lake.py").write_text(textwrap.dedent(DAG_FILE.format(dag_id=DAG_ID)))
    env = base_env(
        **spark_local_env("local[2]"),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW_CONN_SNAPTABLE_DEFAULT=snaptable_conn(str(tmp_path), extra={"storage_options": {"secret": CONNECTION_SECRET}}),
        TEST_PLANTED_TEMPLATES=json.dumps(TEMPLATES),
        **{f"AIRFLOW_VAR_PLANTED_{i}": secret for i, secret in enumerate(SECRETS)},
        TEST_EVENT_LOG_DIR=f"file://{events}",
    )
    with CommandLines() as ps:
        proc = run_airflow(["dags", "test", DAG_ID], env=env, timeout=420)
    output = proc.stdout + proc.stderr
    assert "state=success" in output, output[-4000:]

    # ONE spark-submit for the lake; its command logged as it is (no "******" for "--conf").
    assert output.count("Spark-Submit cmd:") == 1, output[-4000:]
    assert "--conf spark.ui.enabled=false" in output and "******" not in output
    assert "look secret" in output  # the warning suggesting the connection
    assert any("job.py --lake-file" in line for line in ps.seen), "ps never saw the spark-submit"

    # Every table maintained as in process; the broken one Failed alone.
    status = {t.table: t.jobs["snapshot-expiry"] for t in lake_status(lake.path).tables}
    assert sorted(status) == sorted([*NATIVE_TABLES, *PAIMON_TABLES, "sales.broken"])
    assert status["sales.broken"]["status"] == "Failed" and "CorruptMetadataError" in status["sales.broken"]["failureMessage"]
    assert {name: s["status"] for name, s in status.items() if name != "sales.broken"} == {
        name: "Successful" for name in status if name != "sales.broken"}
    assert len(lake.native("sales.orders").snapshots()) == 2 and status["sales.orders"]["snapshotsExpired"] == NATIVE_SNAPSHOTS - 2
    assert all(s["runId"].startswith(f"{DAG_ID}/") for s in status.values())
    read = lake.read_paimon("app")
    assert sorted(map(int, read["app"]["snapshots"])) == [5, 6]

    db = os.path.join(airflow_db, "airflow.db")
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute(f"select run_id from dag_run where dag_id = '{DAG_ID}' order by id desc limit 1").fetchone()
        tasks = conn.execute("select task_id, map_index, rendered_map_index, state from task_instance where dag_id = ? and run_id = ?",
                             (DAG_ID, run_id)).fetchall()
        asset_events = conn.execute(
            "select a.uri, e.extra from asset_event e join asset a on a.id = e.asset_id where e.source_dag_id = ? and e.source_run_id = ?",
            (DAG_ID, run_id)).fetchall()
        (rendered,) = conn.execute(
            "select rendered_fields from rendered_task_instance_fields where dag_id = ? and run_id = ? "
            "and task_id = 'lake_maintenance.maintain_tables'", (DAG_ID, run_id)).fetchone()
    tables = len(NATIVE_TABLES) + len(PAIMON_TABLES) + 1
    assert sorted(tasks) == [("lake_maintenance.list_tables", -1, None, "success"),
                             ("lake_maintenance.maintain_tables", 0, f"{tables} tables from db.app", "success")]
    by_uri = {uri: json.loads(extra) for uri, extra in asset_events}
    assert len(by_uri) == tables
    assert by_uri["snaptable://file" + native_dir(lake.path, "sales.broken")]["jobs"]["snapshot-expiry"] == "Failed"
    assert by_uri["snaptable://file" + os.path.join(lake.path, "db.db", "app")]["jobs"]["snapshot-expiry"] == "Successful"
    spark_conf = json.loads(rendered)["spark_conf"]
    assert {key: spark_conf[key] for key in PLANTED} == {key: "***" for key in PLANTED}

    # No planted secret anywhere: the task log, command lines, every file under AIRFLOW_HOME (logs, the
    # metadata database), Spark's event log (which holds the redacted confs).
    secrets = (*SECRETS, CONNECTION_SECRET)
    assert [s for s in secrets if s in output] == []
    assert [s for s in secrets if any(s in line for line in ps.seen)] == []
    leaks = [(str(p), s) for p in Path(airflow_db).rglob("*") if p.is_file() for s in secrets if s.encode() in p.read_bytes()]
    assert leaks == []
    event_log = "".join(p.read_text() for p in events.rglob("*") if p.is_file())  # Spark 4 rolls it in a directory
    assert "SparkListenerEnvironmentUpdate" in event_log and [s for s in secrets if s in event_log] == []
    assert "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net" in event_log  # there, redacted
    assert "spark.mycompany.tenant" in event_log and "tenant-hidden-by-own-regex" not in event_log
