"""The maintenance job under a real ``spark-submit --master local[2]`` (four submits, run side by side):
every action family runs through the real job, the last seven as one array of actions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.spark import job_path
from tests.conftest import SCHEMA, make_rows
from tests.spark.helpers import assert_clean

SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")


def submit(args: list[str], tmp_path: Path, env_extra: dict | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, **(env_extra or {}))
    command = [
        str(SPARK_SUBMIT),
        "--master", "local[2]",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.ui.showConsoleProgress=false",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.snaptable.delete.parallelThreshold=1",
        "--conf", "spark.snaptable.delete.filesPerTask=2",
        # C1 only: less JIT work for a short job (three of them share the test machine's cores)
        "--driver-java-options", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        job_path(),
        *args,
    ]
    return subprocess.Popen(
        command, cwd=tmp_path, env=env, text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


@pytest.mark.skipif(shutil.which(str(SPARK_SUBMIT)) is None, reason="spark-submit is not installed next to python")
def test_spark_submit_expire_rollback_and_a_failing_action(tmp_path):
    # expire-snapshots: 5 overwrites, keep the last 2
    expire_table = Table.create(str(tmp_path / "expire"), SCHEMA, partition_by=["p"])
    for i in range(5):
        expire_table.overwrite(make_rows(range(i * 10, i * 10 + 10)))
    expire_action = tmp_path / "expire.json"
    expire_action.write_text(json.dumps({"action": "expire-snapshots", "table": expire_table.uri, "retain_min": 1, "retain_max": 2}))
    expire_result = tmp_path / "expire-result.json"

    # rollback to snapshot 2 (action given inline)
    rollback_table = Table.create(str(tmp_path / "rollback"), SCHEMA, partition_by=["p"])
    for i in range(4):
        rollback_table.append(make_rows(range(i * 10, i * 10 + 10)))
    expected_state = sorted(rollback_table.scan(snapshot_id=2).to_arrow().column("id").to_pylist())
    rollback_result = tmp_path / "rollback-result.json"

    failing_result = tmp_path / "failing-result.json"
    failing_action = tmp_path / "failing.json"
    missing = tmp_path / "no-such-table"
    failing_action.write_text(json.dumps({"action": "create-tag", "table": str(missing), "tag_name": "x"}))

    # every other action family, as one array run in one Spark application
    batch_table, batch_actions, stray = _families_table(tmp_path)
    batch_result = tmp_path / "batch-result.json"
    batch_file = tmp_path / "batch.json"
    batch_file.write_text(json.dumps(batch_actions))

    rollback_json = json.dumps({"action": "rollback", "table": rollback_table.uri, "snapshot_id": 2})
    runs = {
        "batch": submit(["--action-file", str(batch_file), "--result", str(batch_result)], tmp_path),
        # storage options through the environment (credentials never on the command line)
        "expire": submit(["--action-file", str(expire_action), "--result", str(expire_result)], tmp_path,
                         env_extra={"SNAPTABLE_STORAGE_OPTIONS": json.dumps({"auto_mkdir": True})}),
        "rollback": submit(["--action", rollback_json, "--result", str(rollback_result)], tmp_path),
        "failing": submit(["--action-file", str(failing_action), "--result", str(failing_result)], tmp_path),
    }
    outputs = {}
    try:
        for name, process in runs.items():
            stdout, stderr = process.communicate(timeout=240)
            # spark-submit merges the Python driver's stderr into its stdout; Spark's own log goes to stderr
            outputs[name] = (process.returncode, stdout.splitlines(), stderr)
    finally:
        for process in runs.values():
            if process.poll() is None:  # a hung submit must not outlive the test
                process.kill()
                process.wait()

    code, lines, stderr = outputs["expire"]
    assert code == 0, "\n".join(lines[-20:]) + stderr[-3000:]
    result = json.loads(expire_result.read_text())
    assert result["action"] == "expire-snapshots" and result["table"] == expire_table.uri
    assert result["result"]["expired_snapshot_ids"] == [1, 2, 3]
    assert result["result"]["deleted_data_files"] == 9  # 3 files freed by each of snapshots 2, 3, 4
    assert result in [json.loads(line) for line in lines if line.startswith("{")]
    summary = [line for line in lines if line.startswith("snaptable-job:")]
    # The expired snapshot files go with the manifests: unpublishing renamed them aside (local disk, core/native/snapshot.py unpublish).
    counts = result["result"]
    deleted = counts["deleted_data_files"] + counts["deleted_manifest_files"] + counts["deleted_snapshot_files"]
    where = result["ranOn"]  # the deletes crossed their threshold, the planning read did not
    assert where == {"reads": "driver", "deletes": "executors", "rewrites": "driver", "sparkJobs": 2,
                     "sparkTasks": where["sparkTasks"], "filesReadOnExecutors": 0, "filesDeletedOnExecutors": deleted}
    assert where["sparkTasks"] >= 2
    assert summary == [f"snaptable-job: expire-snapshots on {expire_table.uri} done: reads on the driver, deletes on the executors"
                       f" ({deleted} files deleted on executors in 2 Spark job(s), {where['sparkTasks']} task(s))"]  # metadata, then data files
    # Deletion progress reaches the driver's output, which the Spark runner puts in the task log.
    assert "snaptable-progress: deleting data files: 9/9 (100%)" in "\n".join(lines) + stderr, "\n".join(lines[-30:])
    assert [s.id for s in expire_table.snapshots()] == [4, 5]
    assert_clean(expire_table)

    code, lines, stderr = outputs["rollback"]
    assert code == 0, "\n".join(lines[-20:]) + stderr[-3000:]
    result = json.loads(rollback_result.read_text())
    assert result["action"] == "rollback"
    assert rollback_table.latest_snapshot().id == 2
    assert sorted(rollback_table.scan().to_arrow().column("id").to_pylist()) == expected_state
    assert_clean(rollback_table)

    code, lines, stderr = outputs["batch"]
    assert code == 0, "\n".join(lines[-20:]) + stderr[-3000:]
    results = json.loads(batch_result.read_text())
    assert [r["action"] for r in results] == [a["action"] for a in batch_actions]
    by_action = {r["action"]: r["result"] for r in results}
    table = Table.open(batch_table.uri)
    assert [(t.name, t.snapshot_id) for t in table.tags()] == [
        ("2026-01-01", 1), ("2026-01-02", 2), ("2026-01-03", 3), ("savepoint-4", 4)
    ]
    # Hudi's earliest commit to retain is 4, and the version before it (snapshot 3) stays too.
    assert (by_action["clean"]["earliest_commit_to_retain"], by_action["clean"]["earliest_commit_retained"]) == (4, 3)
    assert [s.id for s in table.snapshots()] == [3, 4, 5]
    assert table.consumers() == []  # updated to 3, then expired
    assert table.latest_snapshot().commit_kind.value == "COMPACT"
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(40))
    assert not stray.exists()
    assert by_action["remove-orphan-files"]["orphan_files"] == ["data/p=0/stray.parquet"]
    assert_clean(table)

    code, lines, stderr = outputs["failing"]
    assert code == 1
    assert [line for line in lines if line.startswith("snaptable-job:")] == [
        f"snaptable-job: TableNotFoundError: no table at {missing}"
    ]
    error = json.loads(failing_result.read_text())
    assert error["action"] == "create-tag" and error["error"]["type"] == "TableNotFoundError"
    assert not missing.exists()


def _families_table(tmp_path: Path):
    """A table four days old (one append a day) and the actions of every family the other submits do not run."""
    import datetime as dt

    table = Table.create(str(tmp_path / "families"), SCHEMA, partition_by=["p"], options={"consumer.expiration-time": "1 d"})
    for day in range(4):
        table.clock = lambda day=day: int(dt.datetime(2026, 1, 1 + day, 10, tzinfo=dt.timezone.utc).timestamp() * 1000)
        table.append(make_rows(range(day * 10, day * 10 + 10)))
    stray = Path(table.uri) / "data" / "p=0" / "stray.parquet"
    stray.write_bytes(b"left by a crashed writer")
    old = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp()
    os.utime(stray, (old, old))
    far_future = "2100-01-01T00:00:00+00:00"
    uri = table.uri
    actions = [
        {"action": "create-tag", "table": uri, "tag_name": "keep", "snapshot_id": 2},
        {"action": "create-tag", "table": uri, "tag_name": "short", "time_retained": "1 s"},
        {"action": "periodic-tags", "table": uri, "period": "daily", "catch_up": True, "now": "2026-01-04T12:00:00+00:00"},
        {"action": "update-consumer", "table": uri, "consumer_id": "etl", "next_snapshot": 3},
        {"action": "expire-tags", "table": uri, "now": far_future},
        {"action": "delete-tag", "table": uri, "tag_name": "keep"},
        {"action": "compact", "table": uri, "min_file_num": 2},
        {"action": "expire-consumers", "table": uri, "now": far_future},
        {"action": "create-savepoint", "table": uri, "snapshot_id": 4},
        {"action": "clean", "table": uri, "policy": "KEEP_LATEST_COMMITS", "commits_retained": 2},
        {"action": "remove-orphan-files", "table": uri, "older_than": "1 d", "dry_run": False, "list_files": True},
    ]
    return table, actions, stray


def test_an_invalid_action_anywhere_in_an_array_fails_before_any_runs():
    from airflow_snaptable.core.errors import InvalidArgumentError
    from airflow_snaptable.core.actions import actions_from_json as parse_actions

    good = {"action": "expire-tags", "table": "/nowhere"}
    actions, many = parse_actions(json.dumps([good, good]))
    assert many and [a.name for a in actions] == ["expire-tags", "expire-tags"]
    assert parse_actions(json.dumps(good))[1] is False
    for bad in ([good, {"action": "expire-tags"}], [good, {"action": "nope", "table": "/t"}], [], [good, 3]):
        with pytest.raises(InvalidArgumentError):
            parse_actions(json.dumps(bad))
