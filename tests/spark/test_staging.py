"""The job's document and result through a staging location (hooks/spark_staging.py): what cluster deploy
mode on YARN and Kubernetes needs, its driver not running on the Airflow worker. Staging on S3 (moto).

YARN and Kubernetes cannot run here: their spark-submit commands are checked as built, with the job run
in this process on the command's own arguments (FakeSubmit); one real spark-submit (client mode, local)
takes the same path through S3 end to end."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from unittest import mock

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, TableNotFoundError
from airflow_snaptable.hooks.snaptable import SnapTableHook
from airflow_snaptable.hooks.spark_staging import STAGING_CONF
from tests.airflow.conftest import conn_json, snaptable_conn
from tests.conftest import SCHEMA, make_rows

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def moto():
    from tests.s3_servers import make_server

    with make_server("moto") as server:
        yield server


@pytest.fixture
def lake(moto, monkeypatch):
    """A bucket holding an S3 table of three snapshots, the snaptable connection to it, and a staging location."""
    bucket = moto.create_bucket("staging")
    options = moto.storage_options()
    table = Table.create(f"s3://{bucket}/orders", SCHEMA, storage_options=options)
    for i in range(3):
        table.overwrite(make_rows(range(i * 10, i * 10 + 10)))
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(f"s3://{bucket}", extra={"storage_options": options}))
    return {"bucket": bucket, "options": options, "table": table, "staging": f"s3://{bucket}/staging"}


def staged(lake) -> list[str]:
    import fsspec

    fs = fsspec.filesystem("s3", **lake["options"])
    return fs.find(f"{lake['bucket']}/staging")


class FakeSubmit:
    """spark-submit on a cluster, played: records the command, then runs the real job (spark/job.py main) in this
    process on the command's application arguments and environment, as a cluster's driver would."""

    calls: list = []

    def __init__(self, cmd, env=None, **kwargs):
        from airflow_snaptable.spark import job

        FakeSubmit.calls.append({"cmd": list(cmd), "env": dict(env or {})})
        args = list(cmd[cmd.index(next(a for a in cmd if a.endswith("job.py"))) + 1:])
        err = io.StringIO()
        with mock.patch.dict(os.environ, {k: v for k, v in (env or {}).items() if k.startswith("SNAPTABLE")}), \
                contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            self._code = job.main(args)
        self.stdout = iter(err.getvalue().splitlines(keepends=True))

    def wait(self):
        return self._code


def run_on(master: str, monkeypatch, lake, action, **kwargs):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", conn_json("spark", host=master, extra={"deploy-mode": "cluster"}))
    FakeSubmit.calls = []
    hook = SnapTableHook()
    with mock.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", FakeSubmit):
        return hook.run_action(action, runner="spark", spark_conn_id="spark_cluster", runner_ship="hdfs:///libs/env.tar.gz",
                               spark_conf={STAGING_CONF: lake["staging"], "spark.ui.enabled": "false", **kwargs.pop("conf", {})},
                               **kwargs)


def test_yarn_cluster_mode_sends_the_secrets_with_the_job_and_returns_the_result_through_staging(spark, lake, monkeypatch):
    hook = SnapTableHook()
    action = hook.build_action("expire-snapshots", "orders", retain_max=1, retain_min=1, time_retained="0 s")
    done = run_on("yarn", monkeypatch, lake, action)
    assert done["result"]["expired_snapshot_ids"] == [1, 2] and done["ranOn"]["deletes"] == "driver"
    assert [s.id for s in Table.open(lake["table"].uri, lake["options"]).snapshots()] == [3]
    (call,) = FakeSubmit.calls
    command = call["cmd"]
    text = " ".join(command)
    assert command[command.index("--master") + 1] == "yarn" and command[command.index("--deploy-mode") + 1] == "cluster"
    files = command[command.index("--files") + 1]
    assert files.endswith("/secrets.json#snaptable-secrets.json")  # the secrets file, shipped by YARN
    assert "spark.yarn.appMasterEnv.SNAPTABLE_SECRETS_FILE=snaptable-secrets.json" in text
    assert "spark.yarn.appMasterEnv.PYTHONPATH=snaptable_env/site-packages" in text  # the driver imports the shipped package
    assert "--archives hdfs:///libs/env.tar.gz#snaptable_env" in text and "spark.pyspark.driver.python" not in text
    document, result = command[command.index("--action-file") + 1], command[command.index("--result") + 1]
    assert document.startswith(lake["staging"] + "/") and document.endswith("/job.json")
    assert result == document[: -len("job.json")] + "result.json"
    assert lake["options"]["secret"] not in text  # credentials never on the command line
    assert staged(lake) == []  # the run's staging directory is gone


def test_a_failed_job_returns_its_typed_error_through_staging(spark, lake, monkeypatch):
    hook = SnapTableHook()
    with pytest.raises(TableNotFoundError, match="failed in Spark: TableNotFoundError"):
        run_on("yarn", monkeypatch, lake, hook.build_action("create-tag", "missing", tag_name="x"))
    assert staged(lake) == []


def test_kubernetes_cluster_mode_ships_no_secrets_file_and_refuses_secret_conf(caplog):
    """The Kubernetes arguments (the Spark provider's SparkSubmitHook needs the kubernetes client for a k8s://
    master, which this environment lacks): the driver pod gets the package's path, no secrets file."""
    from airflow_snaptable.hooks.spark_staging import cluster_mode_arguments

    master = "k8s://https://127.0.0.1:6443"
    files, conf = cluster_mode_arguments(master, "/private/secrets.json", {}, {"key": "k"}, None, "snaptable_env/site-packages",
                                         __import__("logging").getLogger("t"))
    assert files is None and conf == {"spark.kubernetes.driverEnv.PYTHONPATH": "snaptable_env/site-packages"}
    assert "not sent to the driver pod" in caplog.text
    with pytest.raises(InvalidArgumentError, match=r"Kubernetes cannot hand the secret-looking spark_conf entries.*secretKeyRef"):
        cluster_mode_arguments(master, "/private/secrets.json", {"spark.hadoop.fs.s3a.secret.key": "s"}, None, None)
    files, conf = cluster_mode_arguments("yarn", "/private/secrets.json", {}, None, None, None)
    assert files == "/private/secrets.json#snaptable-secrets.json"
    assert conf == {"spark.yarn.appMasterEnv.SNAPTABLE_SECRETS_FILE": "snaptable-secrets.json"}


def test_cluster_mode_without_a_staging_location_is_refused_with_the_way_out(lake, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", conn_json("spark", host="yarn", extra={"deploy-mode": "cluster"}))
    hook = SnapTableHook()
    with pytest.raises(InvalidArgumentError, match=rf"cluster deploy mode on 'yarn'.*set {STAGING_CONF}"):
        hook.run_action(hook.build_action("expire-snapshots", "orders"), runner="spark", spark_conn_id="spark_cluster")


def test_one_spark_submit_returns_its_result_through_staging_on_s3(lake, monkeypatch):
    """Client mode on local[1], the document and result on S3 (as a cluster-mode driver would read and write them)."""
    from airflow_snaptable.hooks.spark_secrets import SnapTableSparkSubmitHook

    commands = []
    build = SnapTableSparkSubmitHook._build_spark_submit_command
    monkeypatch.setattr(SnapTableSparkSubmitHook, "_build_spark_submit_command",
                        lambda self, application: commands.append(build(self, application)) or commands[-1])
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", conn_json("spark", host="local[1]"))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    hook = SnapTableHook()
    action = hook.build_action("expire-snapshots", "orders", retain_max=1, retain_min=1, time_retained="0 s")
    done = hook.run_action(action, runner="spark", spark_conn_id="spark_local", spark_conf={
        STAGING_CONF: lake["staging"], "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    assert done["action"] == "expire-snapshots" and done["result"]["expired_snapshot_ids"] == [1, 2]
    assert done["ranOn"] == {"reads": "driver", "deletes": "driver", "rewrites": "driver", "sparkJobs": 0, "sparkTasks": 0,
                             "filesReadOnExecutors": 0, "filesDeletedOnExecutors": 0}
    assert [s.id for s in Table.open(lake["table"].uri, lake["options"]).snapshots()] == [3]
    command = " ".join(commands[0])  # the real command spark-submit ran
    assert f"--action-file {lake['staging']}/" in command and f"--result {lake['staging']}/" in command
    assert staged(lake) == []
