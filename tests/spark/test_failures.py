"""Failures on the executors reach the task's exception with their real cause and a way out
(spark/failures.py): Py4J's first line says only which call failed."""

from __future__ import annotations

import pytest

from airflow_snaptable.core.errors import StorageError
from airflow_snaptable.spark.failures import describe, explain
from airflow_snaptable.spark.maintenance import SparkDeleter, SparkReader


def _missing_module():
    def opener():
        raise ModuleNotFoundError("No module named 'airflow_snaptable'")

    return opener


def _killed_worker():
    def opener():
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)

    return opener


@pytest.mark.parametrize("kind", [SparkDeleter, SparkReader])
def test_a_module_missing_on_the_executors_is_named_in_the_storage_error(spark, tmp_path, kind):
    run = kind(spark.sparkContext, str(tmp_path), None, 1, opener=_missing_module())
    with pytest.raises(StorageError) as caught:
        run(["data/a", "data/b"])
    message = str(caught.value)
    assert "ModuleNotFoundError: No module named 'airflow_snaptable'" in message
    assert "runner_ship" in message  # the way out


def test_a_killed_executor_worker_is_named_with_the_way_out(spark, tmp_path):
    run = SparkDeleter(spark.sparkContext, str(tmp_path), None, 1, opener=_killed_worker())
    with pytest.raises(StorageError) as caught:
        run(["data/a"])
    message = str(caught.value)
    assert "Python worker exited unexpectedly" in message
    assert "rerunning it finishes the work" in message


@pytest.mark.parametrize(
    ("text", "what", "way_out"),
    [
        ("WARN StandaloneAppClient$ClientEndpoint: Failed to connect to master 127.0.0.1:1\n"
         "ERROR StandaloneSchedulerBackend: Application has been killed. Reason: All masters are unresponsive! Giving up.",
         "Failed to connect to master 127.0.0.1:1", "master is up"),
        ("Exception in thread \"main\" java.io.FileNotFoundException: File file:/libs/env.tar.gz does not exist",
         "FileNotFoundException: File file:/libs/env.tar.gz does not exist", "archive"),
        ("java.io.IOException: Cannot run program \"/opt/py3.12/bin/python\": error=2, No such file or directory",
         "Cannot run program \"/opt/py3.12/bin/python\"", "spark.pyspark.python"),
        ("org.apache.spark.SparkException: Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited "
         "caused by one of the running tasks) Reason: Container killed by YARN for exceeding memory limits",
         "ExecutorLostFailure (executor 1 exited", "spark.executor.memory"),
        ("PySparkRuntimeError: [PYTHON_VERSION_MISMATCH] Python in worker has different version: 3.10 than that in driver: 3.11",
         "Python in worker has different version: 3.10", "major.minor"),
    ],
)
def test_spark_failures_are_explained(text, what, way_out):
    cause = explain("py4j.protocol.Py4JJavaError: An error occurred while calling o42.collect.\n" + text)
    assert cause is not None and what in cause.what and way_out in cause.way_out


def test_an_unknown_python_error_on_an_executor_is_still_named():
    text = (
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        "  File \"/x/worker.py\", line 1, in main\n"
        "KeyError: 'snapshot'\n"
        "\tat org.apache.spark.api.python.BasePythonRunner..."
    )
    assert describe(Exception(text)).endswith("caused by KeyError: 'snapshot'")
