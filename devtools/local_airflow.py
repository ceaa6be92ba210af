"""A throwaway local Airflow for the demo and the tests: no server, no scheduler.

A temporary ``AIRFLOW_HOME`` with SQLite (``airflow db migrate``), no example DAGs of
Airflow's own, the DAGs folder pointed at the repository's ``example_dags/``, connections
given as ``AIRFLOW_CONN_<ID>`` variables, and DAG runs made with ``airflow dags test`` (the
real task runner, in one process per run). Everything runs as subprocesses of this venv's
``airflow``, so this module does not import airflow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

#: The repository checkout (this module and the example DAGs are not part of the wheel).
REPO = Path(__file__).resolve().parents[1]
EXAMPLE_DAGS = REPO / "example_dags"
VENV_BIN = Path(sys.executable).parent
AIRFLOW_BIN = str(VENV_BIN / "airflow")


def airflow_environment(home: str | os.PathLike, dags_folder: str | os.PathLike = EXAMPLE_DAGS) -> dict[str, str]:
    """The settings of a local Airflow under ``home`` (SQLite there, DAGs from ``dags_folder``)."""
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        # No scheduler runs; unpaused DAGs only matter to AssetWatchers (they need them).
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # No AWS config or credentials of the developer's machine.
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def conn_json(conn_type: str, **fields: Any) -> str:
    """An ``AIRFLOW_CONN_<ID>`` value (JSON form)."""
    return json.dumps({"conn_type": conn_type, **fields})


def snaptable_conn(root: str | None = None, **fields: Any) -> str:
    """A snaptable connection: ``root`` is the table root; ``extra`` entries are merged in."""
    extra = dict(fields.pop("extra", {}) or {})
    if root is not None:
        extra["root"] = root
    return conn_json("snaptable", extra=extra, **fields)


def spark_local_env(master: str = "local[2]") -> dict[str, str]:
    """A Spark connection to a local master, and this venv's Python for the driver and workers."""
    return {
        "AIRFLOW_CONN_SPARK_DEFAULT": conn_json("spark", host=master),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def subprocess_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """Environment for an airflow subprocess: ``base`` (default: ours), the venv's bin first on PATH.

    The venv's bin holds ``spark-submit`` (pyspark's), which SparkSubmitOperator looks up on PATH.
    """
    env = dict(os.environ if base is None else base)
    env["PATH"] = os.pathsep.join([str(VENV_BIN), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


class AirflowCommandError(AssertionError):
    """An ``airflow`` command failed; the message ends with the tail of its output."""


class LocalAirflow:
    """Run this venv's ``airflow`` against one local home.

    :param home: The AIRFLOW_HOME (SQLite database, logs); created if missing.
    :param dags_folder: Where the DAG files are (default: the repository's example_dags/).
    :param env: Extra environment for every command (connections, table names ...).
    """

    def __init__(self, home: str | os.PathLike, dags_folder: str | os.PathLike = EXAMPLE_DAGS, env: Mapping[str, str] | None = None):
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.env = subprocess_env(**airflow_environment(self.home, dags_folder), **dict(env or {}))
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            self.env.pop(name, None)

    def run(self, args: list[str], env: Mapping[str, str] | None = None, timeout: float = 240, check: bool = True) -> subprocess.CompletedProcess:
        """``airflow <args>``; ``env`` replaces the home's environment (see :func:`subprocess_env`)."""
        started = time.monotonic()
        proc = subprocess.run(
            [AIRFLOW_BIN, *args],
            env=dict(env) if env is not None else self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        proc.seconds = time.monotonic() - started  # type: ignore[attr-defined]
        if check and proc.returncode != 0:
            tail = (proc.stdout + proc.stderr)[-6000:]
            raise AirflowCommandError(f"airflow {' '.join(args)} exited {proc.returncode}:\n{tail}")
        return proc

    def migrate(self, timeout: float = 300) -> None:
        """``airflow db migrate``: the SQLite metadata database."""
        self.run(["db", "migrate"], timeout=timeout)

    def dags_test(
        self,
        dag_id: str,
        logical_date: str | None = None,
        conf: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess:
        """One real run of ``dag_id`` (``airflow dags test``); fails unless the run succeeded."""
        args = ["dags", "test", dag_id]
        if logical_date is not None:
            args.append(logical_date)
        if conf is not None:
            args += ["-c", json.dumps(dict(conf))]
        proc = self.run(args, env=env, timeout=timeout)
        output = proc.stdout + proc.stderr
        if "state=success" not in output:
            raise AirflowCommandError(f"airflow {' '.join(args)}: the DAG run did not succeed:\n{output[-6000:]}")
        return proc

    def return_values(self, dag_id: str) -> dict[str, Any]:
        """The XCom return values of the latest run of ``dag_id``, by task id (read from SQLite)."""
        import sqlite3

        with sqlite3.connect(self.home / "airflow.db") as db:
            rows = db.execute(
                "select task_id, value from xcom where key = 'return_value' and dag_run_id = "
                "(select max(dag_run_id) from xcom where dag_id = ?)",
                (dag_id,),
            ).fetchall()
        values = {}
        for task_id, value in rows:
            decoded = json.loads(value) if isinstance(value, (str, bytes)) else value
            values[task_id] = decoded
        return values
