"""Where an action runs, and running it with ``spark-submit`` of the packaged maintenance job.

:class:`RunnerSettings` is the one place the runner (``"local"``: in the task's process;
``"spark"``: spark-submit) and the spark-submit settings are checked: operators make one
when a DAG is parsed (errors show at parse time), the hook when it runs an action.

:class:`SparkSubmitRunner` submits airflow_snaptable/spark/job.py through the Spark
provider's ``SparkSubmitHook`` in client mode: the driver runs on this worker, reads the
action file and writes the result file in a private temporary directory. Credentials never
go on the command line: SparkSubmitHook logs the command (``--conf`` values included) and
turns ``env_vars`` into ``--conf`` on YARN/Kubernetes, so the storage options, the catalog
properties and every secret-looking ``spark_conf`` entry travel in a private file the job reads
once (hooks/spark_secrets.py, spark/handoff.py). :meth:`SparkSubmitRunner.run_lake` runs a whole
lake's maintenance in one application (spark/lake.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Mapping

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from airflow_snaptable.core import actions as core_actions
from airflow_snaptable.core.errors import InvalidArgumentError, UnsupportedOperationError
from airflow_snaptable.core.io.storage_options import STORAGE_OPTIONS_ENV

RUNNERS = ("local", "spark")
#: SparkSubmitHook arguments the runner sets itself.
_RESERVED_SPARK_ARGS = {"application_args", "conf", "conn_id"}


@dataclass(frozen=True)
class RunnerSettings:
    """Where an action runs; checked when made.

    :param runner: ``"local"`` runs the action in this process; ``"spark"`` runs it with
        ``spark-submit`` and the packaged maintenance job (bulk deletes on executors).
    :param spark_conn_id: The Spark connection when ``runner="spark"`` (host = master, e.g. ``local[*]``).
    :param spark_conf: Spark conf for ``--conf``; keys that look secret are masked and handed to the job
        in a private file instead (hooks/spark_secrets.py).
    :param spark_submit_kwargs: More ``SparkSubmitHook`` arguments (``driver_memory``, ``jars``,
        ``packages``, ``properties_file``, ``env_vars``, ``name`` ...).
    """

    runner: str = "local"
    spark_conn_id: str = "spark_default"
    spark_conf: Mapping[str, Any] | None = None
    spark_submit_kwargs: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.runner not in RUNNERS:
            raise InvalidArgumentError(f"runner must be one of {', '.join(RUNNERS)}; got {self.runner!r}")
        if self.spark_conf is not None and not isinstance(self.spark_conf, Mapping):
            raise InvalidArgumentError(f"spark_conf must be a dict, got {type(self.spark_conf).__name__}")
        if self.spark_submit_kwargs:
            check_spark_submit_kwargs(self.spark_submit_kwargs)


def check_spark_submit_kwargs(kwargs: Mapping[str, Any]) -> None:
    """Arguments for SparkSubmitHook, checked against its signature (clear errors at DAG parse time)."""
    import inspect

    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    reserved = sorted(set(kwargs) & _RESERVED_SPARK_ARGS)
    if reserved:
        raise InvalidArgumentError(
            f"spark_submit_kwargs may not set {reserved}: use spark_conn_id / spark_conf; the runner sets the job's arguments"
        )
    unknown = sorted(set(kwargs) - (set(inspect.signature(SparkSubmitHook.__init__).parameters) - {"self"}))
    if unknown:
        raise InvalidArgumentError(f"spark_submit_kwargs: SparkSubmitHook takes no argument(s) {unknown}")
    if kwargs.get("deploy_mode") == "cluster":
        raise InvalidArgumentError("spark runner: deploy_mode='cluster' is not supported (the driver must run on the worker)")


class SparkSubmitRunner:
    """Runs actions with ``spark-submit`` of the packaged maintenance job, one at a time."""

    def __init__(self, settings: RunnerSettings):
        self.settings = settings
        self._submit = None  # the running SparkSubmitHook, for kill()

    def run(
        self, action: core_actions.Action, storage_options: Mapping[str, Any], catalog: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Core's result ``{"action", "table", "result"}``, or the job's error raised as core's typed error.

        ``catalog``: an ``iceberg://`` table's catalog properties (in the environment, like the storage options).
        """
        if core_actions.ACTIONS.get(action.name) is not type(action):
            raise InvalidArgumentError(
                f"the Spark maintenance job runs the actions of core.actions.ACTIONS, not {type(action).__name__}; use runner='local'"
            )
        doc = self._submit_job(
            "--action-file", action.to_json(), f"snaptable-{action.name}", storage_options, catalog,
            lambda error: spark_job_error(action, error),
        )
        if doc is None:
            raise AirflowException(f"the snaptable Spark job for {action.name} on {action.table} wrote no result")
        if doc.get("error"):
            raise spark_job_error(action, doc["error"])
        return doc

    def run_lake(
        self, lake_job: Mapping[str, Any], storage_options: Mapping[str, Any] | None, catalog: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Many tables maintained in one Spark application (spark/lake.py): ``{"tables": [report, ...], ...}``.

        ``lake_job``: the lake document (``LakeJob.to_dict``), which holds no credentials."""
        tables = len(lake_job["lake"]["tables"])

        def error(doc: Mapping[str, Any]) -> Exception:
            return AirflowException(f"the snaptable lake job ({tables} tables) failed in Spark: {doc.get('type')}: {doc.get('message')}")

        doc = self._submit_job("--lake-file", json.dumps(lake_job), f"snaptable-lake-{tables}-tables", storage_options, catalog, error)
        if doc is None:
            raise AirflowException(f"the snaptable lake job ({tables} tables) wrote no result")
        if doc.get("error"):
            raise error(doc["error"])
        return doc

    def _submit_job(
        self, argument: str, document: str, name: str, storage_options: Mapping[str, Any] | None,
        catalog: Mapping[str, Any] | None, job_error,
    ) -> dict[str, Any] | None:
        """spark-submit of the job with ``argument`` naming a file holding ``document``; the result file's document.

        Credentials (storage options, catalog, secret-looking ``spark_conf`` entries) reach the job in a
        private file, never on the command line (hooks/spark_secrets.py)."""
        from airflow_snaptable.hooks.spark_secrets import SnapTableSparkSubmitHook, hand_off_secrets, mask_secret_conf
        from airflow_snaptable.spark import job_path
        from airflow_snaptable.spark.handoff import split_secret_conf

        settings = self.settings
        kwargs = dict(settings.spark_submit_kwargs or {})
        env_vars = dict(kwargs.pop("env_vars", None) or {})
        _require_connection(settings.spark_conn_id)
        mask_secret_conf(settings.spark_conf)
        conf, secret_conf = split_secret_conf(settings.spark_conf)
        with tempfile.TemporaryDirectory(prefix="snaptable-job-") as workdir:  # private (0700)
            document_file = os.path.join(workdir, "job.json")
            result_file = os.path.join(workdir, "result.json")
            with open(document_file, "w", encoding="utf-8") as handle:
                handle.write(document)  # actions and lake documents hold no credentials
            submit = SnapTableSparkSubmitHook(
                conf=conf,
                conn_id=settings.spark_conn_id,
                name=kwargs.pop("name", name),
                application_args=[argument, document_file, "--result", result_file],
                **kwargs,
            )
            connection = getattr(submit, "_connection", {})
            if connection.get("deploy_mode") == "cluster":
                raise InvalidArgumentError(
                    "spark runner: deploy mode 'cluster' is not supported (the driver must run here to read the "
                    "action file and write the result file); use client mode"
                )
            env = spark_environment(storage_options or {}, env_vars, str(connection.get("master", "")), connection.get("spark_binary"))
            require_spark_binary(connection.get("spark_binary") or "spark-submit", env.get("PATH"))
            hand_off_secrets(workdir, env, storage_options, catalog, secret_conf, keep=env_vars)
            self._submit = submit
            try:
                submit.submit(job_path(), env=env)
            except AirflowException as exc:
                doc = _read_result(result_file)
                if doc and doc.get("error"):
                    raise job_error(doc["error"]) from exc
                raise
            finally:
                self._submit = None
            return _read_result(result_file)

    def kill(self) -> None:
        """Stop the running spark-submit, if any."""
        if self._submit is not None:
            self._submit.on_kill()


def spark_job_error(action: core_actions.Action, error: Mapping[str, Any]) -> Exception:
    """The Spark job's error as core's typed error when it is one (callers catch e.g. TagAlreadyExistsError
    whatever the runner), else an AirflowException."""
    from airflow_snaptable.core import errors as core_errors

    message = f"snaptable {action.name} on {action.table} failed in Spark: {error.get('type')}: {error.get('message')}"
    cls = getattr(core_errors, str(error.get("type")), None)
    if isinstance(cls, type) and issubclass(cls, core_errors.SnapTableError):
        return cls(message)
    return AirflowException(message)


def spark_environment(storage_options: Mapping[str, Any], env_vars: Mapping[str, Any], master: str, binary: str | None) -> dict[str, str]:
    """The spark-submit process environment: credentials go here, never on the command line."""
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in env_vars.items()})
    env[STORAGE_OPTIONS_ENV] = json.dumps(dict(storage_options))
    venv_bin = os.path.dirname(sys.executable)
    if binary and shutil.which(binary, path=env.get("PATH")) is None and os.path.exists(os.path.join(venv_bin, binary)):
        env["PATH"] = os.pathsep.join(p for p in (venv_bin, env.get("PATH")) if p)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


def require_spark_binary(binary: str, path: str | None) -> None:
    """The spark-submit the Spark connection names, on this worker: without it SparkSubmitHook dies with a
    bare ``FileNotFoundError: 'spark-submit'``."""
    if shutil.which(binary, path=path) is None:
        raise UnsupportedOperationError(
            f"runner='spark' needs {binary!r} on this worker's PATH, and it is not there: install Spark with "
            "pip install 'airflow-snaptable[spark]' (pyspark brings spark-submit), or put a Spark distribution's "
            "bin/ on the PATH; runner='local' needs no Spark"
        )


def _require_connection(conn_id: str) -> None:
    """SparkSubmitHook silently uses master 'yarn' when its connection is missing: refuse instead."""
    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise AirflowNotFoundException(
            f"Spark connection {conn_id!r} is not defined (SparkSubmitHook would silently submit to YARN); "
            f"define it, e.g. AIRFLOW_CONN_{conn_id.upper()}='{{\"conn_type\": \"spark\", \"host\": \"local[*]\"}}'"
        ) from None


def _read_result(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, json.JSONDecodeError):
        return None
