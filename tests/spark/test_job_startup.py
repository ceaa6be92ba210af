"""What a spark-submit of the job pays before its work (spark/job_session.py, spark/jvm_startup.py,
spark/executor_check.py): a SparkSession only when work needs Spark, the executors' check only before
the first work sent to them, and the driver JVM's start-up options. Run in the test session (no submits)."""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.core.actions import ExpireSnapshots
from airflow_snaptable.core.errors import ExecutionEnvironmentError
from airflow_snaptable.core.lake import Policy, list_tables
from airflow_snaptable.spark import executor_check
from airflow_snaptable.spark.job_session import JobSpark, conf_value
from airflow_snaptable.spark.jvm_startup import DRIVER_JAVA_OPTIONS, driver_java_options, submit_jvm_options
from airflow_snaptable.spark.lake import LakeJob, run_lake
from airflow_snaptable.spark.maintenance import run_action_distributed
from tests.conftest import SCHEMA, make_rows
from tests.spark.test_maintenance import history

POLICY = {"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 1, "max-snapshot-age-hours": 0}}}


class SessionCounter(JobSpark):
    """The job's JobSpark over the test session: counts the sessions it would start (never stops the shared one)."""

    def __init__(self, spark, conf=None):
        super().__init__("test", conf)
        self.shared = spark
        self.starts = 0

    @property
    def session(self):
        if self._session is None:
            self.starts += 1
            self._session = self.shared
        return self._session


@pytest.fixture
def checks(spark, monkeypatch):
    """The executors' check, recorded, failing as a cluster of another version does."""
    calls = []

    def check(spark):
        calls.append(1)
        raise ExecutionEnvironmentError("version mismatch: the driver runs airflow-snaptable 1, the executors 0")

    monkeypatch.setattr(executor_check, "check_executors", check)
    # The shared session's context passed the check in an earlier test: this one's context has not.
    monkeypatch.delattr(spark.sparkContext, "_snaptable_executors_checked", raising=False)
    return calls


def _small_lake(root) -> str:
    from airflow_snaptable.core import Table

    for name in ("a", "b"):
        table = Table.create(str(root / "ns" / name), SCHEMA)
        for i in range(3):
            table.overwrite(make_rows(range(i, i + 2)))
    return str(root)


def test_a_lake_kept_on_the_driver_starts_no_session_and_no_executor_check(spark, tmp_path, checks):
    lake = _small_lake(tmp_path)
    job_spark = SessionCounter(spark)
    done = run_lake(job_spark, LakeJob(tuple(list_tables(lake)), Policy.from_mapping(POLICY)))  # "auto": the driver
    assert done["mode"] == "driver" and len(done["tables"]) == 2
    assert job_spark.starts == 0 and checks == []


def test_a_lake_sent_to_the_executors_is_checked_before_its_first_spark_job(spark, tmp_path, checks):
    lake = _small_lake(tmp_path)
    job_spark = SessionCounter(spark)
    with pytest.raises(ExecutionEnvironmentError, match="version mismatch"):
        run_lake(job_spark, LakeJob(tuple(list_tables(lake)), Policy.from_mapping(POLICY), mode="executors"))
    assert job_spark.starts == 1 and len(checks) == 1
    from airflow_snaptable.core import Table

    assert [len(Table.open(str(tmp_path / "ns" / n)).snapshots()) for n in ("a", "b")] == [3, 3]  # nothing ran


def test_an_action_under_the_thresholds_starts_no_session_and_no_executor_check(spark, tmp_path, checks):
    table = history(str(tmp_path / "t"))
    job_spark = SessionCounter(spark)
    run = run_action_distributed(job_spark, ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2))
    assert run.result["result"]["deleted_data_files"] == 9 and run.spark_jobs == 0
    assert job_spark.starts == 0 and checks == []


def test_an_action_crossing_a_threshold_gets_the_check_error_before_any_executor_work(spark, tmp_path, checks):
    """The check's own error (not a StorageError around it), before the first executor job: the expiry's
    planning read goes to the executors first, so the table is untouched."""
    table = history(str(tmp_path / "t"))
    files = sorted(os.listdir(table.uri))
    job_spark = SessionCounter(spark, {"spark.snaptable.read.parallelThreshold": "1", "spark.snaptable.delete.parallelThreshold": "1"})
    with pytest.raises(ExecutionEnvironmentError, match="version mismatch"):
        run_action_distributed(job_spark, ExpireSnapshots(table=table.uri, retain_min=1, retain_max=2))
    assert len(checks) == 1 and job_spark.starts == 1
    assert sorted(os.listdir(table.uri)) == files and [s.id for s in table.snapshots()] == [1, 2, 3, 4, 5]


def test_the_check_runs_once_per_context_and_a_failed_check_fails_every_use(spark, monkeypatch):
    calls = []
    monkeypatch.setattr(executor_check, "check_executors", lambda s: calls.append(1))
    monkeypatch.delattr(spark.sparkContext, "_snaptable_executors_checked", raising=False)
    executor_check.ensure_executors_checked(spark.sparkContext)
    executor_check.ensure_executors_checked(spark.sparkContext)
    assert calls == [1]
    monkeypatch.delattr(spark.sparkContext, "_snaptable_executors_checked")
    monkeypatch.setattr(executor_check, "check_executors", lambda s: (_ for _ in ()).throw(ExecutionEnvironmentError("no")))
    for _ in range(2):
        with pytest.raises(ExecutionEnvironmentError):
            executor_check.ensure_executors_checked(spark.sparkContext)


def test_the_job_conf_is_read_without_a_session_and_secret_confs_win(spark):
    job_spark = SessionCounter(spark, {"spark.snaptable.lake.driverMaxTables": "7"})
    assert job_spark.get_conf("spark.master") == "local[2]"  # the submitted conf, through the gateway
    assert conf_value(job_spark, "spark.snaptable.lake.driverMaxTables") == "7"
    assert job_spark.get_conf("spark.snaptable.nothing", "d") == "d"
    assert job_spark.starts == 0
    assert conf_value(spark, "spark.master") == "local[2]"  # a SparkSession reads the same


def test_the_driver_jvm_options_keep_a_collector_the_user_picked():
    assert driver_java_options(None) == DRIVER_JAVA_OPTIONS
    picked = driver_java_options({"spark.driver.extraJavaOptions": "-Dx=1 -XX:+UseG1GC"})
    assert "GC" not in picked and "-XX:TieredStopAtLevel=1" in picked


def test_the_class_data_archive_is_written_once_then_mapped(tmp_path):
    env = {**os.environ}
    first = submit_jvm_options(None, "spark-submit", env, str(tmp_path))
    if first.archive is None:
        pytest.skip("no java or Spark jars found")
    assert "-XX:ArchiveClassesAtExit=" in first.options and first.writing.startswith(first.archive)
    with open(first.writing, "w") as handle:  # what the JVM writes at its exit
        handle.write("archive")
    failed = submit_jvm_options(None, "spark-submit", env, str(tmp_path))
    with open(failed.writing, "w") as handle:
        handle.write("cut short")
    failed.finish(succeeded=False)
    assert not os.path.exists(failed.writing) and not os.path.exists(failed.archive)  # a failed run's: dropped
    first.finish(succeeded=True)
    assert os.listdir(tmp_path) == [os.path.basename(first.archive)]
    later = submit_jvm_options(None, "spark-submit", env, str(tmp_path))
    assert f"-XX:SharedArchiveFile={first.archive}" in later.options and later.writing is None
    assert submit_jvm_options(None, "spark-submit", env, str(tmp_path / "with space")).options == DRIVER_JAVA_OPTIONS


def test_the_job_imports_no_client_it_does_not_use():
    """The job's modules, as a spark-submit's driver imports them before its first table: no pandas (pyarrow
    imports it for ``pyarrow.dataset`` and ``pa.array`` at import time), no pyspark, no table-format client."""
    import subprocess
    import sys

    code = ("import sys, airflow_snaptable.spark.job, airflow_snaptable.spark.lake, airflow_snaptable.spark.maintenance, "
            "airflow_snaptable.spark.job_session, airflow_snaptable.core.actions; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'pyspark', 'pyiceberg', 'pypaimon', 'sqlalchemy'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("conf, starts", [
    ({}, False), ({"spark.snaptable.lazySession": "false"}, True), ({"spark.eventLog.enabled": "true"}, True),
    ({"spark.submit.deployMode": "cluster"}, True)])
def test_the_session_starts_at_once_when_asked_in_cluster_mode_or_with_an_event_log(spark, conf, starts):
    assert SessionCounter(spark, conf).must_start() is starts
