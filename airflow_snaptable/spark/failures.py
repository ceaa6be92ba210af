"""Spark's failures, told as their cause and a way out.

A failed Spark job reaches Python as a Py4J error whose first line is
``An error occurred while calling ...``; the cause (a Python exception on an
executor, a lost executor, an unreachable master) is dozens of lines further down,
inside a Java stack trace. :func:`explain` finds the known causes in that text (or in
spark-submit's output) and returns one line each callers put in their exception.
Pure text work: no pyspark, usable by the job and by the Airflow runner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Cause:
    #: what went wrong, as Spark or Python said it (one line)
    what: str
    #: what the user can do
    way_out: str

    def __str__(self) -> str:
        return f"{self.what} ({self.way_out})"


_MISSING_MODULE = re.compile(r"(ModuleNotFoundError|ImportError): ([^\n\r]*)")
_PYTHON_ERROR = re.compile(r"^\s*([A-Z][A-Za-z]*(?:Error|Exception)): ([^\n\r]*)", re.M)
_LOST_EXECUTOR = re.compile(
    r"(ExecutorLostFailure[^\n\r]*|Python worker exited unexpectedly[^\n\r]*|Lost executor[^\n\r]*|Container killed[^\n\r]*"
    r"|killed by the OOM[^\n\r]*|Container from a bad node[^\n\r]*|exited with code 137[^\n\r]*)"
)
_NO_MASTER = re.compile(
    r"(All masters are unresponsive[^\n\r]*|Failed to connect to master[^\n\r]*|Connection refused: [^\n\r]*7077[^\n\r]*"
    r"|Could not parse Master URL[^\n\r]*|Master must either be yarn or start with spark, k8s, or local[^\n\r]*)"
)
_NO_FILE = re.compile(r"((?:java\.io\.)?FileNotFoundException: [^\n\r]*|File file:[^\n\r]* does not exist[^\n\r]*)")
_NO_PYTHON = re.compile(r"(Cannot run program \"[^\"]*\"[^\n\r]*)")
_VERSION = re.compile(r"(Python in worker has different version[^\n\r]*)")


def explain(text: str) -> Cause | None:
    """The first known cause in a Spark error's text or spark-submit's output, most specific first."""
    if not text:
        return None
    for pattern, way_out in (
        (_VERSION, "the executors' Python must be the driver's major.minor version: set spark.pyspark.python on the cluster"),
        (_NO_PYTHON, "the executors' Python does not exist on the nodes: set spark.pyspark.python (or PYSPARK_PYTHON in env_vars) to a Python installed there"),
        (_NO_MASTER, "check the Spark connection's host and port, and that the master is up"),
        (_NO_FILE, "a file named in the submit (an archive, --py-files, the job) is missing: build or copy it where the cluster can read it"),
    ):
        match = pattern.search(text)
        if match:
            return Cause(_tidy(match.group(1)), way_out)
    match = _MISSING_MODULE.search(text)
    if match:
        return Cause(
            _tidy(f"{match.group(1)}: {match.group(2)}"),
            "the executors lack a module the job needs: keep runner_ship='auto' (the default ships the package and its "
            "dependencies), name a complete prebuilt archive, or install airflow-snaptable on every node",
        )
    match = _LOST_EXECUTOR.search(text)
    if match:
        return Cause(
            _tidy(match.group(1)),
            "an executor died (killed, out of memory, or its node was lost); the action left its plan, so rerunning it "
            "finishes the work; give executors more memory (spark.executor.memory) or fewer files per task "
            "(spark.snaptable.delete.filesPerTask)",
        )
    return None


def python_error(text: str) -> str | None:
    """The last Python exception line in a worker traceback (``KeyError: ...``), when there is one."""
    found = _PYTHON_ERROR.findall(text or "")
    if not found:
        return None
    name, message = found[-1]
    return _tidy(f"{name}: {message}")


def describe(exc: BaseException, limit: int = 500) -> str:
    """A Spark failure in one line: its first line, then the cause found in the rest and what to do."""
    text = str(exc).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)[:limit]
    cause = explain(text)
    if cause is not None:
        return f"{first} - caused by {cause}"
    error = python_error(text)
    if error and error not in first:
        return f"{first} - caused by {error[:limit]}"
    return first


def _tidy(line: str) -> str:
    return " ".join(line.split())[:500]
