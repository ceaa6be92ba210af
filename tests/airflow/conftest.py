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
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = REPO / "example_dags"
AIRFLOW_BIN = str(Path(sys.executable).with_name("airflow"))

_HOME = tempfile.mkdtemp(prefix="snaptable-airflow-home-")
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)

AIRFLOW_ENV = {
    "AIRFLOW_HOME": _HOME,
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(EXAMPLE_DAGS),
    # No scheduler runs here; unpaused DAGs only matter to the AssetWatcher test (watchers need them).
    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    # No AWS config or credentials of the developer's machine.
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}
os.environ.update(AIRFLOW_ENV)
for _name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
    os.environ.pop(_name, None)


def conn_json(conn_type: str, **fields) -> str:
    """An AIRFLOW_CONN_<ID> value (JSON form)."""
    return json.dumps({"conn_type": conn_type, **fields})


def snaptable_conn(root: str | None = None, **fields) -> str:
    extra = dict(fields.pop("extra", {}) or {})
    if root is not None:
        extra["root"] = root
    return conn_json("snaptable", extra=extra, **fields)


def base_env(**extra: str) -> dict[str, str]:
    """Environment for an airflow subprocess: this process's, plus the venv's bin first on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def run_airflow(args: list[str], env: dict[str, str] | None = None, timeout: float = 240, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``airflow <args>``; on failure the output tail is in the assertion message."""
    started = time.monotonic()
    proc = subprocess.run(
        [AIRFLOW_BIN, *args],
        env=env or base_env(),
        cwd=_HOME,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    proc.seconds = time.monotonic() - started  # type: ignore[attr-defined]
    if check and proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-6000:]
        raise AssertionError(f"airflow {' '.join(args)} exited {proc.returncode}:\n{tail}")
    return proc


@pytest.fixture(scope="session")
def airflow_home() -> str:
    return _HOME


@pytest.fixture(scope="session")
def airflow_db(airflow_home) -> str:
    """``airflow db migrate`` once per session (SQLite in the temporary AIRFLOW_HOME)."""
    run_airflow(["db", "migrate"], timeout=300)
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
