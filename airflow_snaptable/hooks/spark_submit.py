"""Where an action runs, and running it with ``spark-submit`` of the packaged maintenance job.

:class:`RunnerSettings` is the one place the runner (``"local"``: in the task's process;
``"spark"``: spark-submit) and the spark-submit settings are checked: operators make one
when a DAG is parsed (errors show at parse time), the hook when it runs an action.

:class:`SparkSubmitRunner` submits airflow_snaptable/spark/job.py through the Spark
provider's ``SparkSubmitHook``. In client mode the driver runs on this worker, reads the
action file and writes the result file in a private temporary directory; in cluster mode (YARN,
Kubernetes) both go through a staging location on storage (hooks/spark_staging.py). Credentials never
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
import logging
import tempfile
from dataclasses import dataclass
from typing import Any, Mapping

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from airflow_snaptable.core import actions as core_actions
from airflow_snaptable.core.errors import ExecutionEnvironmentError, InvalidArgumentError, UnsupportedOperationError
from airflow_snaptable.core.io.storage_options import STORAGE_OPTIONS_ENV

log = logging.getLogger(__name__)

RUNNERS = ("local", "spark")
#: ``runner_ship`` values besides a prebuilt archive's URI (see :func:`ship_arguments`).
SHIP_MODES = ("auto", "none")
#: Seconds to wait for the Spark master to accept a connection before failing (``spark_connect_timeout``).
DEFAULT_CONNECT_TIMEOUT = 15.0
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
    :param runner_ship: What the executors get: ``"auto"`` (on a non-local master, an archive of this
        package and its dependencies, built once and cached, see spark/shipping.py), ``"none"`` (the
        cluster has the package), or the URI of a prebuilt archive (``hdfs:///libs/snaptable-env.tar.gz``).
    :param spark_connect_timeout: Seconds the Spark master (``spark://``, ``k8s://``) has to accept a
        connection before the task fails (Spark itself retries for about a minute).
    """

    runner: str = "local"
    spark_conn_id: str = "spark_default"
    spark_conf: Mapping[str, Any] | None = None
    spark_submit_kwargs: Mapping[str, Any] | None = None
    runner_ship: str = "auto"
    spark_connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    def __post_init__(self) -> None:
        if self.runner not in RUNNERS:
            raise InvalidArgumentError(f"runner must be one of {', '.join(RUNNERS)}; got {self.runner!r}")
        check_runner_ship(self.runner_ship)
        timeout = self.spark_connect_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
            raise InvalidArgumentError(f"spark_connect_timeout must be seconds in (0, 3600], got {timeout!r}")
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
    if kwargs.get("deploy_mode") not in (None, "client", "cluster"):
        raise InvalidArgumentError(f"spark_submit_kwargs deploy_mode must be 'client' or 'cluster', got {kwargs['deploy_mode']!r}")


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
            lambda error: spark_job_error(action, error), subject=f"snaptable {action.name} on {action.table}",
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

        doc = self._submit_job("--lake-file", json.dumps(lake_job), f"snaptable-lake-{tables}-tables", storage_options, catalog, error,
                               subject=f"the snaptable lake job ({tables} tables)")
        if doc is None:
            raise AirflowException(f"the snaptable lake job ({tables} tables) wrote no result")
        if doc.get("error"):
            raise error(doc["error"])
        return doc

    def _submit_job(
        self, argument: str, document: str, name: str, storage_options: Mapping[str, Any] | None,
        catalog: Mapping[str, Any] | None, job_error, *, subject: str,
    ) -> dict[str, Any] | None:
        """spark-submit of the job with ``argument`` naming a file holding ``document``; the result file's document.

        Credentials (storage options, catalog, secret-looking ``spark_conf`` entries) reach the job in a
        private file, never on the command line (hooks/spark_secrets.py)."""
        from airflow_snaptable.hooks.spark_secrets import mask_secret_conf
        from airflow_snaptable.hooks.spark_staging import accepts_cluster_mode, cluster_mode_refusal, missing_staging, staging_for
        from airflow_snaptable.spark.handoff import split_secret_conf

        settings = self.settings
        kwargs = dict(settings.spark_submit_kwargs or {})
        env_vars = dict(kwargs.pop("env_vars", None) or {})
        _require_connection(settings.spark_conn_id)
        mask_secret_conf(settings.spark_conf)
        conf, secret_conf = split_secret_conf(settings.spark_conf)
        with tempfile.TemporaryDirectory(prefix="snaptable-job-") as workdir:  # private (0700)
            connection = spark_connection(settings.spark_conn_id, kwargs)
            master = str(connection.get("master", ""))
            cluster_mode = connection.get("deploy_mode") == "cluster"
            source = ("spark_submit_kwargs deploy_mode='cluster'" if kwargs.get("deploy_mode") == "cluster"
                      else f"deploy mode 'cluster' of Spark connection {settings.spark_conn_id!r}")
            if cluster_mode and not accepts_cluster_mode(master):
                raise InvalidArgumentError(cluster_mode_refusal(source, master))
            # The job's document and result: on storage when a staging location is set (cluster mode needs one:
            # its driver does not run here), else private local files (hooks/spark_staging.py).
            staging = staging_for(settings.spark_conf, storage_options)
            if cluster_mode and staging is None:
                raise InvalidArgumentError(missing_staging(master))
            if staging is not None:
                staging.write_document(document)
                document_location, result_location = staging.document_uri, staging.result_uri
            else:
                document_location = os.path.join(workdir, "job.json")
                result_location = os.path.join(workdir, "result.json")
                with open(document_location, "w", encoding="utf-8") as handle:
                    handle.write(document)  # actions and lake documents hold no credentials
            try:
                return self._run_submit(settings, kwargs, env_vars, conf, secret_conf, workdir, master, cluster_mode, argument,
                                        document_location, result_location, staging, name, storage_options, catalog,
                                        job_error, subject)
            finally:
                if staging is not None:
                    staging.remove()

    def _run_submit(
        self, settings, kwargs, env_vars, conf, secret_conf, workdir, master, cluster_mode, argument, document_location,
        result_location, staging, name, storage_options, catalog, job_error, subject,
    ) -> dict[str, Any] | None:
        from airflow_snaptable.hooks.spark_secrets import SnapTableSparkSubmitHook, hand_off_secrets
        from airflow_snaptable.hooks.spark_staging import cluster_mode_arguments
        from airflow_snaptable.spark import job_path
        from airflow_snaptable.spark.jvm_startup import JvmStartup, submit_jvm_options

        def read_result() -> dict[str, Any] | None:
            return staging.read_result() if staging is not None else _read_result(result_location)

        check_master_reachable(master, settings.spark_connect_timeout)
        archives, ship_conf = ship_arguments(settings.runner_ship, master, conf)
        if cluster_mode:  # the driver runs on a node: the Airflow worker's Python path means nothing there
            ship_conf.pop("spark.pyspark.driver.python", None)
        conf = {**conf, **ship_conf}
        if archives:
            kwargs["archives"] = ",".join(a for a in (kwargs.get("archives"), archives) if a)
        secrets_file = os.path.join(workdir, "secrets.json")
        if cluster_mode:
            files, cluster_conf = cluster_mode_arguments(master, secrets_file, secret_conf, storage_options, catalog,
                                                         ship_conf.get("spark.executorEnv.PYTHONPATH"), log)
            conf = {**conf, **cluster_conf}
            if files:
                kwargs["files"] = ",".join(f for f in (kwargs.get("files"), files) if f)
        submit = recording_submit_hook(SnapTableSparkSubmitHook)(
            conf=conf,
            conn_id=settings.spark_conn_id,
            name=kwargs.pop("name", name),
            application_args=[argument, document_location, "--result", result_location],
            **kwargs,
        )
        connection = getattr(submit, "_connection", {})
        env = spark_environment(storage_options or {}, env_vars, str(connection.get("master", "")), connection.get("spark_binary"))
        require_spark_binary(connection.get("spark_binary") or "spark-submit", env.get("PATH"))
        jvm = JvmStartup(env["SPARK_SUBMIT_OPTS"]) if "SPARK_SUBMIT_OPTS" in env else submit_jvm_options(
            settings.spark_conf, connection.get("spark_binary") or "spark-submit", env)
        env["SPARK_SUBMIT_OPTS"] = jvm.options  # the driver JVM's start-up (spark/jvm_startup.py)
        hand_off_secrets(workdir, env, storage_options, catalog, secret_conf, keep=env_vars)
        self._submit = submit
        submitted = False
        try:
            submit.submit(job_path(), env=env)
            submitted = True
        except AirflowException as exc:
            doc = read_result()
            if doc and doc.get("error"):
                raise job_error(doc["error"]) from exc
            raise submit_failure(subject, getattr(submit, "output_tail", ())) from exc
        finally:
            self._submit = None
            jvm.finish(submitted)
        return read_result()

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


def check_runner_ship(value: Any) -> None:
    """``"auto"``, ``"none"`` or an archive's path or URI (a ``#alias`` fragment names its directory)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"runner_ship must be 'auto', 'none' or an archive's URI, got {value!r}")
    if value in SHIP_MODES:
        return
    path = value.split("#", 1)[0]
    if not path.endswith((".tar.gz", ".tgz", ".tar", ".zip", ".jar")):
        raise InvalidArgumentError(
            f"runner_ship must be 'auto', 'none' or an archive Spark unpacks (.tar.gz, .tgz, .tar, .zip), got {value!r}"
        )


def spark_connection(conn_id: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The master and deploy mode SparkSubmitHook resolves from the connection (and ``spark_binary``)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    extra = {k: kwargs[k] for k in ("spark_binary", "deploy_mode") if k in kwargs}
    return dict(getattr(SparkSubmitHook(conn_id=conn_id, **extra), "_connection", {}) or {})


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The host:port pairs a master URL names: ``spark://h1:7077,h2:7077`` (standalone, with standby
    masters), ``k8s://https://h:6443``; none for ``local``, ``yarn`` (found from the Hadoop config)."""
    from urllib.parse import urlsplit

    if master.startswith("spark://"):
        pairs = []
        for part in master[len("spark://"):].split(","):
            host, _, port = part.strip().rstrip("/").rpartition(":")
            pairs.append((host or part, int(port) if port.isdigit() else 7077))
        return pairs
    if master.startswith("k8s://"):
        url = urlsplit(master[len("k8s://"):] if "://" in master[len("k8s://"):] else "https://" + master[len("k8s://"):])
        return [(url.hostname or "", url.port or (443 if url.scheme == "https" else 80))]
    return []


def check_master_reachable(master: str, timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
    """Fail in ``timeout`` seconds when no master named by the URL accepts a connection.

    Spark's own client retries a dead standalone master for about a minute and then reports a
    stopped SparkContext; one TCP connection answers the same question at once.
    """
    import socket
    import time

    addresses = master_addresses(master)
    if not addresses:
        return
    deadline = time.monotonic() + timeout
    errors = []
    while True:
        for host, port in addresses:
            try:
                with socket.create_connection((host, port), timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
                    return
            except socket.gaierror as exc:  # an unknown name does not come to exist by waiting
                errors.append(f"{host}:{port}: {exc.strerror or exc}")
                deadline = time.monotonic()
            except OSError as exc:
                errors.append(f"{host}:{port}: {exc.strerror or exc}")
        if time.monotonic() >= deadline:
            break
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    raise ExecutionEnvironmentError(
        f"the Spark master {master} did not accept a connection within {timeout:g} s ({errors[-1]}): check the "
        "Spark connection's host and port and that the master is up; spark_connect_timeout sets how long to wait"
    )


def ship_arguments(runner_ship: str, master: str, conf: Mapping[str, str]) -> tuple[str | None, dict[str, str]]:
    """The ``--archives`` entry and the Spark conf that put the package on the executors' Python path.

    ``"auto"`` ships the cached archive of this environment (spark/shipping.py) to a non-local master
    (a local master's executors are this Python); ``"none"`` ships nothing; any other value is a
    prebuilt archive's URI, shipped as it is (a missing local file fails here, before Spark starts).
    """
    import logging

    from airflow_snaptable.spark.shipping import ARCHIVE_ALIAS, cached_archive, executor_pythonpath

    if runner_ship == "none" or (runner_ship == "auto" and master.startswith("local")):
        return None, {}
    if runner_ship == "auto":
        archive = cached_archive()
        logging.getLogger(__name__).info(
            "Shipping %s (%.1f MB, %s in %.1f s) to the executors",
            archive.path, archive.size / 1e6, "built" if archive.built else "found in the cache", archive.seconds,
        )
        uri, alias = archive.path, ARCHIVE_ALIAS
    else:
        uri, _, alias = runner_ship.partition("#")
        alias = alias or ARCHIVE_ALIAS
        local = uri[len("file://"):] if uri.startswith("file://") else (uri if "://" not in uri else None)
        if local is not None and not os.path.isfile(local):
            raise ExecutionEnvironmentError(
                f"runner_ship names the archive {uri}, which does not exist: build it with "
                "'python -m airflow_snaptable.spark.shipping DIR' and copy it there, or use runner_ship='auto'"
            )
    path = executor_pythonpath(alias)
    extra = {"spark.executorEnv.PYTHONPATH": os.pathsep.join(p for p in (path, conf.get("spark.executorEnv.PYTHONPATH")) if p)}
    if "spark.pyspark.python" in conf and "spark.pyspark.driver.python" not in conf:
        # spark.pyspark.python names the nodes' Python; without this the driver (here) would run it too.
        extra["spark.pyspark.driver.python"] = sys.executable
    return f"{uri}#{alias}", extra


def recording_submit_hook(base: type | None = None):
    """``base`` (default: the Spark provider's SparkSubmitHook) keeping the last lines spark-submit printed:
    the cause of a failure that never reached the job (no master, a missing archive) is only there."""
    from collections import deque

    if base is None:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook as base

    class RecordingSparkSubmitHook(base):
        output_tail: deque

        def _process_spark_submit_log(self, itr):
            self.output_tail = deque(maxlen=400)

            def recorded():
                for line in itr:
                    self.output_tail.append(line)
                    yield line

            return super()._process_spark_submit_log(recorded())

    return RecordingSparkSubmitHook


def submit_failure(name: str, output: Any) -> Exception:
    """A spark-submit that failed before the job wrote a result: the cause found in its output, and a way out."""
    from airflow_snaptable.spark.failures import explain, python_error

    lines = [str(line).rstrip() for line in output or ()]
    text = "\n".join(lines)
    cause = explain(text)
    where = f"spark-submit of {name} failed"
    if cause is not None:
        return ExecutionEnvironmentError(f"{where}: {cause.what}; {cause.way_out}")
    error = python_error(text)
    tail = " | ".join(line.strip() for line in lines[-5:] if line.strip())
    return AirflowException(f"{where}: {error or tail or 'no output'}")


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
    elif env.get("PYSPARK_PYTHON") == sys.executable and "PYSPARK_PYTHON" not in env_vars:
        # This worker's own interpreter, inherited: a path of this host that the nodes do not have.
        # The nodes' Python comes from spark.pyspark.python, env_vars, or the cluster's default.
        del env["PYSPARK_PYTHON"]
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
