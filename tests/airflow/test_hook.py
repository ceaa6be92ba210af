"""SnapTableHook: table resolution, storage options, actions in process and through spark-submit."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from unittest import mock

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from airflow_snaptable.core import actions as core_actions
from airflow_snaptable.core.actions import UpdateConsumer, build_action
from airflow_snaptable.core.errors import InvalidArgumentError, TagNotFoundError
from airflow_snaptable.core.io.storage_options import STORAGE_OPTIONS_ENV
from airflow_snaptable.hooks import SnapTableHook
from airflow_snaptable.hooks.snaptable import describe_options, join_table_uri
from airflow_snaptable.hooks.spark_submit import check_spark_submit_kwargs
from tests.airflow.conftest import conn_json, snaptable_conn
from tests.conftest import SCHEMA, make_rows

SECRET = "hook-test-SECRET-4e1b9c"


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "warehouse")


@pytest.fixture
def snap_conn(monkeypatch, root):
    monkeypatch.setenv("AIRFLOW_CONN_SNAP", snaptable_conn(root))
    return "snap"


@pytest.fixture
def orders(root):
    from airflow_snaptable.core import Table

    table = Table.create(f"{root}/orders", SCHEMA, partition_by=["p"])
    for i in range(4):
        table.append(make_rows(range(i * 10, i * 10 + 10)))
    return table


# -- table resolution ------------------------------------------------------------------------


def test_names_resolve_under_the_root_and_full_uris_need_no_connection(snap_conn, root):
    hook = SnapTableHook(snaptable_conn_id=snap_conn)
    assert hook.table_uri("orders") == f"{root}/orders"
    assert hook.table_uri("sales/orders/") == f"{root}/sales/orders"
    assert hook.table_uri("s3://bucket/t/") == "s3://bucket/t"
    assert SnapTableHook(snaptable_conn_id=None).table_uri("/data/t") == "/data/t"
    # The default connection may be missing when the table is a full URI.
    assert SnapTableHook().table_uri("memory://x/t") == "memory://x/t"


@pytest.mark.parametrize("name", ["../etc", "a/../b", "", "  ", "a//b", "bad\nname"])
def test_bad_table_names_are_refused(snap_conn, name):
    with pytest.raises(InvalidArgumentError):
        SnapTableHook(snaptable_conn_id=snap_conn).table_uri(name)


def test_a_name_needs_a_root():
    with pytest.raises(InvalidArgumentError, match="no 'root'"):
        SnapTableHook(snaptable_conn_id=None).table_uri("orders")
    with pytest.raises(InvalidArgumentError, match="no 'root'"):
        join_table_uri("", "orders")


def test_an_explicit_connection_that_does_not_exist_is_an_error():
    with pytest.raises(AirflowNotFoundException):
        SnapTableHook(snaptable_conn_id="no_such_conn").table_uri("orders")


# -- storage options --------------------------------------------------------------------------


def test_s3_options_from_login_password_host_and_extra(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_S3SNAP",
        snaptable_conn(
            "s3://bucket/warehouse",
            login="AKIDEXAMPLE",
            password=SECRET,
            host="127.0.0.1",
            port=9000,
            extra={"region_name": "eu-west-1", "storage_options": json.dumps({"config_kwargs": {"s3": {"addressing_style": "path"}}})},
        ),
    )
    hook = SnapTableHook(snaptable_conn_id="s3snap")
    options = hook.storage_options("orders")
    assert options == {
        "config_kwargs": {"s3": {"addressing_style": "path"}},
        "key": "AKIDEXAMPLE",
        "secret": SECRET,
        "endpoint_url": "https://127.0.0.1:9000",
        "client_kwargs": {"region_name": "eu-west-1"},
    }
    # S3 credentials are not handed to other file systems.
    assert hook.storage_options("/local/table") == {"config_kwargs": {"s3": {"addressing_style": "path"}}}


def test_endpoint_from_extra_wins_and_http_hosts_are_kept(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_A", snaptable_conn(host="http://minio:9000", extra={"endpoint_url": "http://other:1"}))
    monkeypatch.setenv("AIRFLOW_CONN_B", snaptable_conn(host="http://minio", port=9000, extra={"storage_options": {"anon": True}}))
    assert SnapTableHook("a").storage_options("s3://b/t")["endpoint_url"] == "http://other:1"
    assert SnapTableHook("b").storage_options("s3://b/t") == {"anon": True, "endpoint_url": "http://minio:9000"}


def test_storage_options_json_errors_do_not_echo_the_text(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_BAD", snaptable_conn(extra={"storage_options": '{"secret": "' + SECRET + '"'}))
    with pytest.raises(InvalidArgumentError) as info:
        SnapTableHook("bad").storage_options("s3://b/t")
    assert SECRET not in str(info.value)


def test_secrets_are_registered_with_the_masker_and_never_logged(monkeypatch, orders, root):
    from airflow.sdk.log import redact

    monkeypatch.setenv(
        "AIRFLOW_CONN_SECRETIVE",
        snaptable_conn(root, login="AKID", password=SECRET, extra={"storage_options": {"token": SECRET + "-token"}}),
    )
    hook = SnapTableHook("secretive")
    log = mock.Mock()
    monkeypatch.setattr(SnapTableHook, "log", log)
    hook.run_action(hook.build_action("expire-tags", "orders"))
    logged = repr(log.mock_calls)
    assert "expire-tags" in logged and "storage options" in logged
    assert SECRET not in logged
    assert "***" in describe_options({"secret": SECRET}) and SECRET not in describe_options({"secret": SECRET})
    assert SECRET not in str(redact(f"secret is {SECRET}"))
    assert SECRET + "-token" not in str(redact({"token": SECRET + "-token"}))


def test_catalog_credentials_are_masked_and_the_catalog_goes_only_to_iceberg_tables(monkeypatch, root):
    from airflow.sdk.log import redact

    catalog = {"type": "rest", "uri": "http://127.0.0.1:1", "credential": SECRET + "-cred", "s3.access-key-id": SECRET + "-akid"}
    monkeypatch.setenv("AIRFLOW_CONN_ICE", snaptable_conn(root, extra={"catalog": catalog}))
    hook = SnapTableHook("ice")
    assert hook.catalog("iceberg://db.orders") == catalog
    assert hook.catalog("orders") is None  # a table directory under the root has no catalog
    assert SECRET + "-cred" not in str(redact(f"x {SECRET}-cred")) and SECRET + "-akid" not in str(redact(f"{SECRET}-akid"))
    monkeypatch.setenv("AIRFLOW_CONN_PLAIN", snaptable_conn(root))
    with pytest.raises(InvalidArgumentError, match="no extra 'catalog'"):
        SnapTableHook("plain").catalog("iceberg://db.orders")


def test_connection_test_fails_for_a_root_that_does_not_exist(monkeypatch, tmp_path, orders, root):
    monkeypatch.setenv("AIRFLOW_CONN_MISSING", snaptable_conn(str(tmp_path / "no-such-root")))
    ok, message = SnapTableHook("missing").test_connection()
    assert not ok and "does not exist" in message
    monkeypatch.setenv("AIRFLOW_CONN_THERE", snaptable_conn(root))
    ok, message = SnapTableHook("there").test_connection()
    assert ok and "1 entries" in message


# -- actions --------------------------------------------------------------------------------


def test_build_action_coerces_rendered_templates_and_checks_names():
    action = build_action(
        core_actions.ExpireSnapshots, "/t", retain_min="2", retain_max=" 10 ", time_retained=dt.timedelta(hours=1), dry_run="true"
    )
    assert (action.retain_min, action.retain_max, action.time_retained, action.dry_run) == (2, 10, "1 h", True)
    assert build_action("create-tag", "/t", tag_name="d", as_of=dt.datetime(2026, 1, 2)).as_of == "2026-01-02T00:00:00+00:00"
    assert build_action("compact", "/t", partitions='[{"p": 1}]').partitions == [{"p": 1}]
    assert build_action(UpdateConsumer, "/t", consumer_id="c", next_snapshot="7").next_snapshot == 7
    with pytest.raises(InvalidArgumentError, match="retain_min must be an integer"):
        build_action(core_actions.ExpireSnapshots, "/t", retain_min="ten")
    with pytest.raises(InvalidArgumentError, match="takes no argument"):
        build_action(core_actions.ExpireSnapshots, "/t", retain=3)
    with pytest.raises(InvalidArgumentError, match="unknown action"):
        build_action("explode", "/t")


def test_run_action_locally_returns_cores_result(snap_conn, orders):
    hook = SnapTableHook(snaptable_conn_id=snap_conn)
    result = hook.run_action(hook.build_action("create-tag", "orders", tag_name="t1", snapshot_id=2))
    assert result == {
        "action": "create-tag",
        "table": orders.uri,
        "result": result["result"],
    }
    assert result["result"]["snapshot_id"] == 2
    # The JSON form works too (what the Spark job reads).
    again = hook.run_action({"action": "delete-tag", "table": orders.uri, "tag_name": "t1"})
    assert again["action"] == "delete-tag"
    assert [t.name for t in orders.tags()] == []
    consumer = hook.run_action(hook.build_action(UpdateConsumer, "orders", consumer_id="c", next_snapshot=3))
    assert consumer["result"]["next_snapshot"] == 3


# -- spark-submit -----------------------------------------------------------------------------


class FakePopen:
    """Records the spark-submit call; plays the job by running the action in process."""

    calls: list = []

    def __init__(self, cmd, env=None, **kwargs):
        import os
        import stat

        from airflow_snaptable.spark.handoff import SECRETS_FILE_ENV, take_secrets

        secrets_file = env[SECRETS_FILE_ENV]
        mode = stat.S_IMODE(os.stat(secrets_file).st_mode)
        secrets = take_secrets(env)  # as the job does: read once, deleted
        FakePopen.calls.append({"cmd": list(cmd), "env": dict(env or {}), "secrets": secrets, "secrets_mode": mode,
                                "secrets_file": secrets_file})
        args = cmd[cmd.index("--action-file"):]
        action_file, result_file = args[1], args[3]
        options = secrets.storage_options or {}
        with open(action_file) as handle:
            action = core_actions.action_from_json(handle.read())
        try:
            doc = core_actions.run_action(action, storage_options={k: v for k, v in options.items() if k != "secret"})
            code = 0
        except Exception as exc:  # noqa: BLE001 - the job's behaviour
            doc = {"action": action.name, "table": action.table, "error": {"type": type(exc).__name__, "message": str(exc)}}
            code = 1
        with open(result_file, "w") as handle:
            json.dump(doc, handle)
        self.stdout = iter([f"snaptable-job: {action.name} done\n"])
        self._code = code

    def wait(self):
        return self._code


@pytest.fixture
def spark_conn(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", conn_json("spark", host="local[2]"))
    FakePopen.calls = []
    return "spark_local"


def test_spark_runner_keeps_credentials_off_the_command_line(monkeypatch, spark_conn, orders, root):
    monkeypatch.setenv("AIRFLOW_CONN_SECRETIVE", snaptable_conn(root, extra={"storage_options": {"secret": SECRET}}))
    hook = SnapTableHook("secretive")
    with mock.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", FakePopen):
        result = hook.run_action(
            hook.build_action("expire-snapshots", "orders", retain_max=2, retain_min=1, time_retained="0 s"),
            runner="spark",
            spark_conn_id=spark_conn,
            spark_conf={"spark.ui.enabled": "false"},
            spark_submit_kwargs={"driver_memory": "1g", "env_vars": {"EXTRA_VAR": "1"}},
        )
    assert result["result"]["expired_snapshot_ids"] == [1, 2, 3]
    (call,) = FakePopen.calls
    command = " ".join(call["cmd"])
    assert SECRET not in command
    assert call["cmd"][:3] == ["spark-submit", "--master", "local[2]"]
    assert "--conf spark.ui.enabled=false" in command and "--driver-memory 1g" in command
    # In a file only this user reads, named in the environment; not in the environment itself.
    assert call["secrets"].storage_options == {"secret": SECRET} and call["secrets_mode"] == 0o600
    assert STORAGE_OPTIONS_ENV not in call["env"], call["env"].get(STORAGE_OPTIONS_ENV)
    assert SECRET not in json.dumps(call["env"])
    assert call["env"]["EXTRA_VAR"] == "1"
    assert call["env"]["PYSPARK_PYTHON"]  # local master: the driver's interpreter for the workers


def test_spark_runner_reports_the_jobs_error(spark_conn, orders):
    hook = SnapTableHook(snaptable_conn_id=None)
    with mock.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", FakePopen):
        # Core's typed error, whatever the runner: callers can catch it (SnapTableCreateTagOperator's if_exists="skip" does).
        with pytest.raises(TagNotFoundError, match="failed in Spark: TagNotFoundError"):
            hook.run_action(hook.build_action("delete-tag", orders.uri, tag_name="nope"), runner="spark", spark_conn_id=spark_conn)


def test_spark_runner_runs_update_consumer_through_the_job(spark_conn, orders):
    hook = SnapTableHook(snaptable_conn_id=None)
    with mock.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", FakePopen):
        result = hook.run_action(
            hook.build_action(UpdateConsumer, orders.uri, consumer_id="reader", next_snapshot="3"), runner="spark", spark_conn_id=spark_conn
        )
    (call,) = FakePopen.calls
    assert "--action-file" in call["cmd"]
    assert result["action"] == "update-consumer" and result["result"]["next_snapshot"] == 3
    assert orders.consumer("reader").next_snapshot == 3


def test_spark_runner_refuses_a_missing_connection_cluster_mode_and_unknown_arguments(monkeypatch, orders):
    hook = SnapTableHook(snaptable_conn_id=None)
    action = hook.build_action("expire-tags", orders.uri)
    with pytest.raises(AirflowNotFoundException, match="silently submit to YARN"):
        hook.run_action(action, runner="spark", spark_conn_id="no_spark_here")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", conn_json("spark", host="spark://h:7077", extra={"deploy-mode": "cluster"}))
    with pytest.raises(InvalidArgumentError, match="cluster"):
        hook.run_action(action, runner="spark", spark_conn_id="spark_cluster")
    with pytest.raises(InvalidArgumentError, match="takes no argument"):
        check_spark_submit_kwargs({"driver_mem": "1g"})
    with pytest.raises(InvalidArgumentError, match="may not set"):
        check_spark_submit_kwargs({"application_args": ["x"]})
    with pytest.raises(InvalidArgumentError, match="runner"):
        hook.run_action(action, runner="emr")


def test_spark_submit_logs_conf_values_unmasked_so_secrets_must_not_go_there(monkeypatch, spark_conn):
    """Why credentials travel in the environment: SparkSubmitHook logs --conf values (masking only *secret*/*password* keys)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    submit = SparkSubmitHook(conn_id=spark_conn, conf={"spark.hadoop.fs.s3a.access.key": "AKIDLEAK", "spark.x.secret.key": "hidden"})
    log = mock.Mock()
    monkeypatch.setattr(SparkSubmitHook, "log", log)
    submit._build_spark_submit_command("job.py")
    logged = repr(log.mock_calls)
    assert "AKIDLEAK" in logged and "hidden" not in logged


def test_spark_environment_finds_the_venvs_spark_submit(monkeypatch):
    import os
    import sys

    from airflow_snaptable.hooks.spark_submit import spark_environment

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    env = spark_environment({"k": 1}, {}, "yarn", "spark-submit")
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert "PYSPARK_PYTHON" not in env  # remote executors have their own interpreter
    assert json.loads(env[STORAGE_OPTIONS_ENV]) == {"k": 1}


def test_job_path_is_runnable_help():
    """The packaged job answers --help with the CLI the hook uses (no Spark started)."""
    import sys

    from airflow_snaptable.spark import job_path

    out = subprocess.run([sys.executable, job_path(), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--action-file" in out.stdout and "--result" in out.stdout


def test_azure_and_gcs_credentials_in_storage_options_are_masked(monkeypatch, root):
    # Airflow's masker hides values under names it knows ("token", "secret", ...); Azure's account key and
    # connection string and a GCS service-account key go by names it does not (docs/storage.md).
    from airflow.sdk.log import redact

    options = {
        "account_name": "myaccount",
        "account_key": SECRET + "-key",
        "connection_string": f"AccountName=myaccount;AccountKey={SECRET}-conn;",
        "credential": SECRET + "-credential",
    }
    monkeypatch.setenv("AIRFLOW_CONN_AZ", snaptable_conn("abfs://lake/warehouse", extra={"storage_options": options}))
    assert SnapTableHook("az").storage_options("orders") == options
    for leaked in ("-key", "-conn", "-credential"):
        assert SECRET + leaked not in str(redact(f"failed with {options['connection_string']} {SECRET}{leaked}"))
    assert "myaccount" in str(redact("account myaccount"))  # names are not secrets


def test_runner_ship_and_connect_timeout_are_checked_when_made():
    from airflow_snaptable.hooks.spark_submit import RunnerSettings

    for bad in ("", "maybe", "s3://b/env.whl", 3):
        with pytest.raises(InvalidArgumentError, match="runner_ship"):
            RunnerSettings("spark", runner_ship=bad)
    for bad in (0, -1, True, "15"):
        with pytest.raises(InvalidArgumentError, match="spark_connect_timeout"):
            RunnerSettings("spark", spark_connect_timeout=bad)
    RunnerSettings("spark", runner_ship="hdfs:///libs/snaptable-env.tar.gz#env", spark_connect_timeout=2.5)


def test_shipping_puts_the_archive_on_the_executors_path_and_keeps_the_driver_here(tmp_path):
    import sys

    from airflow_snaptable.hooks.spark_submit import ship_arguments

    assert ship_arguments("auto", "local[2]", {}) == (None, {})  # local executors are this Python
    assert ship_arguments("none", "spark://h:7077", {}) == (None, {})
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    archives, conf = ship_arguments(str(archive), "spark://h:7077", {"spark.pyspark.python": "/opt/py/bin/python", "spark.executorEnv.PYTHONPATH": "/x"})
    assert archives == f"{archive}#snaptable_env"
    assert conf["spark.executorEnv.PYTHONPATH"].startswith("snaptable_env/site-packages") and conf["spark.executorEnv.PYTHONPATH"].endswith(":/x")
    assert conf["spark.pyspark.driver.python"] == sys.executable
    archives, conf = ship_arguments("hdfs:///libs/venv.tar.gz#env", "yarn", {})
    assert archives == "hdfs:///libs/venv.tar.gz#env" and "env/lib/python" in conf["spark.executorEnv.PYTHONPATH"]


def test_this_workers_python_is_not_sent_to_a_cluster(monkeypatch):
    import sys

    from airflow_snaptable.hooks.spark_submit import spark_environment

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert spark_environment({}, {}, "local[2]", None)["PYSPARK_PYTHON"] == sys.executable
    assert "PYSPARK_PYTHON" not in spark_environment({}, {}, "spark://h:7077", None)
    assert spark_environment({}, {"PYSPARK_PYTHON": sys.executable}, "spark://h:7077", None)["PYSPARK_PYTHON"] == sys.executable
