"""Airflow in tests: a temporary AIRFLOW_HOME, no examples, SQLite migrated once per session.

The environment is set when this file is imported, before any test module imports
airflow (its configuration is read at import time). DAG files are the repository's
example_dags/ (AIRFLOW__CORE__DAGS_FOLDER); connections come from AIRFLOW_CONN_<ID>
variables. Subprocess helpers run the ``airflow`` CLI of this venv.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from devtools.local_airflow import (  # noqa: F401 - re-exported to the test modules
    AIRFLOW_BIN,
    EXAMPLE_DAGS,
    REPO,
    LocalAirflow,
    airflow_environment,
    conn_json,
    snaptable_conn,
    spark_local_env,
    subprocess_env,
)

_HOME = tempfile.mkdtemp(prefix="snaptable-airflow-home-")
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)

AIRFLOW_ENV = airflow_environment(_HOME, EXAMPLE_DAGS)
os.environ.update(AIRFLOW_ENV)
for _name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
    os.environ.pop(_name, None)

LOCAL_AIRFLOW = LocalAirflow(_HOME, EXAMPLE_DAGS)


def base_env(**extra: str) -> dict[str, str]:
    """Environment for an airflow subprocess: this process's, plus the venv's bin first on PATH."""
    return subprocess_env(**extra)


def run_airflow(args: list[str], env: dict[str, str] | None = None, timeout: float = 240, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``airflow <args>``; on failure the output tail is in the assertion message."""
    return LOCAL_AIRFLOW.run(args, env=env or base_env(), timeout=timeout, check=check)


@pytest.fixture(scope="session")
def airflow_home() -> str:
    return _HOME


@pytest.fixture(scope="session")
def airflow_db(airflow_home) -> str:
    """``airflow db migrate`` once per session (SQLite in the temporary AIRFLOW_HOME)."""
    LOCAL_AIRFLOW.migrate()
    return airflow_home


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DummyStateStore:
    """Stands in for the triggerer's AssetStateStoreAccessors (aget/aset), backed by a dict."""

    def __init__(self, data: dict | None = None):
        self.data = {} if data is None else data
        self.sets = 0

    async def aget(self, key, default=None):
        return self.data.get(key, default)

    async def aset(self, key, value):
        if value is None:
            raise ValueError("Cannot set value as None")
        json.dumps(value)  # values must be JSON
        self.sets += 1
        self.data[key] = value
