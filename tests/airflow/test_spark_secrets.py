"""Secrets of the Spark runner: off the command line, masked in logs and rendered fields (hooks/spark_secrets.py).

The spark-submit process is played by tests/airflow/test_hook.py's FakePopen (it reads the secrets
file as the job does); tests/airflow/test_spark_lake_dag.py runs the real thing under ``airflow dags test``.
"""

from __future__ import annotations

import json
import logging
import os
from unittest import mock

import pytest

from airflow_snaptable.hooks import SnapTableHook
from airflow_snaptable.spark.handoff import looks_secret, split_secret_conf
from tests.airflow.conftest import snaptable_conn
from tests.airflow.test_hook import FakePopen, orders, root, spark_conn  # noqa: F401 - fixtures

#: Four secrets a DAG author might put in spark_conf (issue 25): the package's own storage-options JSON,
#: an Azure account key, a GCS token and an S3A secret key.
PLANTED = {
    "spark.snaptable.storage-options": json.dumps({"auto_mkdir": True, "secret": "plantedA-storage-7c1e"}),
    "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "plantedB-azure-4d2a",
    "spark.hadoop.google.cloud.auth.access.token": "plantedC-gcs-9b3f",
    "spark.hadoop.fs.s3a.secret.key": "plantedD-s3a-1e8c",
}
SECRETS = ("plantedA-storage-7c1e", "plantedB-azure-4d2a", "plantedC-gcs-9b3f", "plantedD-s3a-1e8c")


def test_which_keys_look_secret():
    assert all(looks_secret(key) for key in PLANTED)
    assert all(looks_secret(key) for key in ("spark.x.password", "spark.hadoop.fs.s3a.session.token", "a.credentials.file"))
    assert not any(looks_secret(key) for key in ("spark.ui.enabled", "spark.redaction.regex", "spark.executor.memory"))
    # Files and Kubernetes secret references spark-submit reads itself are no credentials: they stay on --conf.
    assert not any(looks_secret(key) for key in (
        "spark.kerberos.keytab", "spark.ssl.keyStore", "spark.ssl.trustStore",
        "spark.kubernetes.authenticate.driver.oauthTokenFile", "spark.kubernetes.driver.secretKeyRef.AWS_KEY",
        "spark.kubernetes.executor.secrets.gcs-key"))
    assert looks_secret("spark.ssl.keyStorePassword") and looks_secret("spark.kubernetes.authenticate.submission.oauthToken")
    public, secret = split_secret_conf({**PLANTED, "spark.ui.enabled": False})
    assert public == {"spark.ui.enabled": "False"} and secret == PLANTED


def test_secret_conf_reaches_the_job_in_a_private_file_never_on_the_command_line(monkeypatch, spark_conn, orders, root, caplog):
    from airflow.sdk.log import redact

    monkeypatch.setenv("AIRFLOW_CONN_WITHSECRET", snaptable_conn(root, extra={"storage_options": {"secret": "plantedE-conn-5a5a"}}))
    monkeypatch.setenv("AIRFLOW_VAR_OTHER", "plantedF-variable-2b2b")  # the worker's own secrets stay with it
    hook = SnapTableHook("withsecret")
    caplog.set_level(logging.WARNING)
    with mock.patch("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", FakePopen):
        hook.run_action(
            hook.build_action("expire-snapshots", "orders", retain_max=2, retain_min=1, time_retained="0 s"),
            runner="spark", spark_conn_id=spark_conn, spark_conf={**PLANTED, "spark.ui.enabled": "false"},
            spark_submit_kwargs={"env_vars": {"AIRFLOW_VAR_WANTED": "kept-by-the-author"}},
        )
    (call,) = FakePopen.calls
    command, env = " ".join(call["cmd"]), json.dumps(call["env"])
    for secret in (*SECRETS, "plantedE-conn-5a5a", "plantedF-variable-2b2b"):
        assert secret not in command and secret not in env, secret
    assert "--conf spark.ui.enabled=false" in command
    assert call["secrets"].spark_conf == PLANTED and call["secrets"].storage_options == {"secret": "plantedE-conn-5a5a"}
    assert call["secrets_mode"] == 0o600
    assert call["env"]["AIRFLOW_VAR_WANTED"] == "kept-by-the-author"
    assert not os.path.exists(os.path.dirname(call["secrets_file"]))  # the private directory is gone after the run
    # Masked wherever Airflow logs them, and the author is told where credentials belong.
    for secret in (*SECRETS, "plantedE-conn-5a5a"):
        assert redact(f"x {secret} y") == "x *** y", secret
    assert redact("auto_mkdir") == "auto_mkdir"  # a storage option that is no credential stays readable
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "look secret" in warning and "spark.hadoop.fs.s3a.secret.key" in warning and "connection" in warning


def test_the_logged_command_is_not_mangled_by_keyword_masking(spark_conn):
    """The provider masks the token after any word holding 'secret' or 'password': a conf value naming them
    turns the next ``--conf`` into ``******``. The runner's command holds no secret: it is logged as it is."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from airflow_snaptable.hooks.spark_secrets import SnapTableSparkSubmitHook

    conf = {"spark.sql.redaction.string.regex": "secret|password", "spark.ui.enabled": "false"}
    logged = {}
    for cls in (SparkSubmitHook, SnapTableSparkSubmitHook):
        hook = cls(conn_id=spark_conn, conf=conf, name="nightly")
        with mock.patch.object(cls, "log") as log:
            hook._build_spark_submit_command("job.py")
        logged[cls] = log.info.call_args.args[1]
    assert "****** spark.ui.enabled=false" in logged[SparkSubmitHook]
    assert "--conf spark.sql.redaction.string.regex=secret|password --conf spark.ui.enabled=false" in logged[SnapTableSparkSubmitHook]


def test_rendered_spark_conf_shows_secret_values_masked(orders):
    from airflow.sdk.log import redact

    from airflow_snaptable.operators import SnapTableExpireSnapshotsOperator

    op = SnapTableExpireSnapshotsOperator(task_id="t", table=orders.uri, runner="spark",
                                spark_conf={"spark.hadoop.fs.s3a.secret.key": "{{ params.key }}", "spark.ui.enabled": "false"})
    op.render_template_fields({"params": {"key": "plantedG-rendered-3c3c"}})
    rendered = redact(op.spark_conf, "spark_conf")  # what Airflow stores as the rendered field
    assert rendered == {"spark.hadoop.fs.s3a.secret.key": "***", "spark.ui.enabled": "false"}


@pytest.mark.parametrize("options, masked, readable", [
    ({"key": "AKIDplanted1", "secret": "plantedH-1", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"}},
     ["AKIDplanted1", "plantedH-1"], ["http://127.0.0.1:9000"]),
    ({"account_name": "acct", "connection_string": "DefaultEndpointsProtocol=https;AccountKey=plantedI-2"},
     ["DefaultEndpointsProtocol=https;AccountKey=plantedI-2"], ["acct"]),
    ({"uri": "postgresql://user:plantedJ-3@db:5432/catalog", "s3.secret-access-key": "plantedK-4"},
     ["plantedJ-3", "plantedK-4"], ["postgresql://user:"]),
])
def test_credentials_among_storage_options_and_catalog_properties_are_masked(options, masked, readable):
    from airflow.sdk.log import redact

    from airflow_snaptable.hooks.spark_secrets import mask_credentials

    mask_credentials(options)
    text = str(redact(json.dumps(options)))
    assert not any(secret in text for secret in masked) and all(word in text for word in readable), text
