"""The executors' answers to the start-up check (spark/executor_check.py) become one clear error."""

from __future__ import annotations

import pytest

from airflow_snaptable.core.errors import ExecutionEnvironmentError
from airflow_snaptable.spark.executor_check import ExecutorReport, check_reports, probe_executors


def test_matching_executors_pass():
    check_reports([ExecutorReport("3.11.7", "0.1.0", None, "n1"), ExecutorReport("3.11.2", "0.1.0", None, "n2")], "0.1.0", (3, 11))


def test_another_python_on_the_executors_is_named_with_both_versions():
    with pytest.raises(ExecutionEnvironmentError, match=r"executors run Python 3\.10\.4, the driver Python 3\.11.*spark\.pyspark\.python"):
        check_reports([ExecutorReport("3.10.4", "0.1.0", None, "n1")], "0.1.0", (3, 11))
    # pyarrow built for 3.11 does not import on 3.10: the import error and the Python both named
    with pytest.raises(ExecutionEnvironmentError, match=r"Python 3\.10\.4.*ImportError: bad magic.*Python 3\.11"):
        check_reports([ExecutorReport("3.10.4", "0.1.0", "ImportError: bad magic", "n1")], "0.1.0", (3, 11))


def test_another_package_version_on_the_executors_is_named_with_both_versions():
    reports = [ExecutorReport("3.11.7", "0.1.0", None, "n1"), ExecutorReport("3.11.7", "0.0.9", "ModuleNotFoundError: x", "n2")]
    with pytest.raises(ExecutionEnvironmentError, match=r"driver runs airflow-snaptable 0\.1\.0, the executors 0\.0\.9"):
        check_reports(reports, "0.1.0", (3, 11))


def test_a_missing_package_names_the_import_error_and_how_to_ship_it():
    with pytest.raises(ExecutionEnvironmentError, match=r"No module named 'airflow_snaptable'.*runner_ship='auto'"):
        check_reports([ExecutorReport("3.11.7", None, "ModuleNotFoundError: No module named 'airflow_snaptable'", "n1")], "0.1.0", (3, 11))


def test_the_probe_reports_each_executor_python_and_version(spark):
    import sys

    import airflow_snaptable

    reports = probe_executors(spark.sparkContext)
    assert reports and all(r.error is None for r in reports)
    assert {r.version for r in reports} == {airflow_snaptable.__version__}
    assert {r.python for r in reports} == {"%d.%d.%d" % sys.version_info[:3]}
