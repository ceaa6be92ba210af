"""The snaptable hook: a connection becomes a table location plus fsspec storage options.

Connection type ``snaptable`` (all fields optional; a table given as a full URI needs none):

- extra ``root``: the table root / warehouse URI (``s3://bucket/warehouse``, ``/data/tables``);
  a table given by name (``orders``, ``sales/orders``) lives at ``<root>/<name>``.
- extra ``storage_options``: fsspec storage options as a JSON object (or a nested object).
- login / password: S3 access key id / secret access key (s3fs ``key`` / ``secret``).
- host (+ port), or extra ``endpoint_url``: an S3-compatible endpoint (``http://minio:9000``).
- extra ``region_name``: the S3 region.

The login/password/endpoint/region fields only apply to ``s3://`` / ``s3a://`` tables.
Storage options are never logged; secret values are registered with Airflow's masker.

Everything a table can do is a core call: the hook resolves the table, builds a core
action (a JSON value) and runs it in process or through ``spark-submit`` with the
packaged maintenance job.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from airflow_snaptable.core import actions as core_actions
from airflow_snaptable.core.errors import InvalidArgumentError, InvalidNameError
from airflow_snaptable.core.incremental import (  # noqa: F401 - the sensor's table logic lives in core; re-exported
    DATA_COMMIT_KINDS,
    NewSnapshots,
    consumer_baseline,
    find_new_snapshots,
    normalize_commit_kinds,
)
from airflow_snaptable.core.names import validate_name

if TYPE_CHECKING:
    from airflow_snaptable.core.table import Table

CONN_TYPE = "snaptable"
DEFAULT_CONN_ID = "snaptable_default"
RUNNERS = ("local", "spark")
_S3_PROTOCOLS = ("s3", "s3a")
#: Environment variable the maintenance job reads storage options from (see spark/job.py).
STORAGE_OPTIONS_ENV = "SNAPTABLE_STORAGE_OPTIONS"
#: SparkSubmitHook arguments the hook sets itself.
_RESERVED_SPARK_ARGS = {"application_args", "conf", "conn_id", "env_vars"}


# -- actions -------------------------------------------------------------------------------

#: Re-exported: the action ``AdvanceConsumerOperator`` runs.
UpdateConsumer = core_actions.UpdateConsumer


def action_class(name: str) -> type[core_actions.Action]:
    """The action class registered under ``name`` in core's registry."""
    if name in core_actions.ACTIONS:
        return core_actions.ACTIONS[name]
    raise InvalidArgumentError(f"unknown action {name!r}; known: {', '.join(sorted(core_actions.ACTIONS))}")


def spark_can_run(cls: type[core_actions.Action]) -> bool:
    """The Spark job parses actions with core's registry: only those can run there."""
    return core_actions.ACTIONS.get(cls.name) is cls


# -- values ----------------------------------------------------------------------------


def _field_types(cls: type[core_actions.Action]) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


def json_value(value: Any) -> Any:
    """A JSON-ready form of an argument: timedeltas become ``"<seconds> s"``, times ISO strings."""
    if isinstance(value, dt.timedelta):
        return f"{value.total_seconds():g} s"
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    return value


def coerce_argument(name: str, value: Any, annotation: str) -> Any:
    """Rendered templates are strings: turn ``"5"`` into 5 and ``"true"`` into True where the field wants it."""
    value = json_value(value)
    if value is None or not isinstance(value, str):
        return value
    text = value.strip()
    kinds = {part.strip() for part in annotation.split("|")}
    if text == "" or text.lower() == "none":
        return None if "None" in kinds else value
    if kinds <= {"int", "None"}:
        try:
            return int(text)
        except ValueError:
            raise InvalidArgumentError(f"{name} must be an integer, got {value!r}") from None
    if kinds <= {"bool", "None"}:
        # Only the two spellings a rendered bool has ("True"/"False", "true"/"false" from JSON):
        # a guessed "no" or "0" would make a typo decide whether a rollback is forced.
        lowered = text.lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
        raise InvalidArgumentError(f"{name} must be true or false, got {value!r}")
    if kinds == {"list", "None"}:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise InvalidArgumentError(f"{name} must be a JSON list, got {value!r}") from None
    return value


def build_action(cls_or_name: type[core_actions.Action] | str, table_uri: str, **arguments: Any) -> core_actions.Action:
    """An action value for ``table_uri``; argument names are the core function's names."""
    cls = action_class(cls_or_name) if isinstance(cls_or_name, str) else cls_or_name
    types = _field_types(cls)
    unknown = sorted(set(arguments) - set(types) - {"table"})
    if unknown:
        raise InvalidArgumentError(f"action {cls.name!r} takes no argument(s) {unknown}")
    values = {k: coerce_argument(k, v, types[k]) for k, v in arguments.items() if k != "table"}
    action = cls(table=table_uri, **values)
    json.dumps(dataclasses.asdict(action))  # JSON-ready, or a clear TypeError now rather than in Spark
    return action


# -- connection -> location and storage options ------------------------------------------------


def is_full_uri(table: str) -> bool:
    """A URL (``s3://b/t``, ``file:///t``, ``memory://t``) or an absolute local path."""
    return "://" in table or table.startswith("/")


def join_table_uri(root: str | None, table: str) -> str:
    """``table`` itself when it is a full URI, else ``<root>/<table>`` with every name segment validated."""
    if not isinstance(table, str) or not table.strip():
        raise InvalidArgumentError(f"table must be a non-empty string (a URI or a name), got {table!r}")
    table = table.strip()
    if is_full_uri(table):
        return table.rstrip("/") or table
    if not root:
        raise InvalidArgumentError(
            f"table {table!r} is a name, not a URI, and the snaptable connection has no 'root' "
            "(table root / warehouse URI) to put it under"
        )
    segments = table.strip("/").split("/")
    for segment in segments:
        try:
            validate_name(segment, "table")
        except InvalidNameError as exc:
            raise InvalidArgumentError(f"table name {table!r}: {exc}") from None
    return f"{root.rstrip('/')}/{'/'.join(segments)}"


def _extra_value(extra: Mapping[str, Any], key: str) -> Any:
    value = extra.get(key)
    if value in (None, ""):
        value = extra.get(f"extra__{CONN_TYPE}__{key}")
    return None if value == "" else value


def parse_storage_options(value: Any, where: str) -> dict[str, Any]:
    """A JSON object (string or dict) of storage options. The text is never echoed (it may hold secrets)."""
    if value in (None, ""):
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"{where} is not valid JSON ({exc.msg} at position {exc.pos})") from None
        if isinstance(parsed, dict):
            return parsed
    raise InvalidArgumentError(f"{where} must be a JSON object")


@dataclasses.dataclass(frozen=True)
class ConnectionSettings:
    """What the hook takes from a snaptable connection (no Airflow objects: usable off the event loop)."""

    root: str | None = None
    storage_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    key: str | None = None
    secret: str | None = None
    endpoint_url: str | None = None
    region_name: str | None = None

    @classmethod
    def from_connection(cls, conn, extra: Mapping[str, Any]) -> "ConnectionSettings":
        endpoint = _extra_value(extra, "endpoint_url")
        if not endpoint and conn.host:
            endpoint = conn.host if "://" in conn.host else f"https://{conn.host}"
            if conn.port and not _has_port(endpoint):
                endpoint = f"{endpoint.rstrip('/')}:{conn.port}"
        return cls(
            root=_extra_value(extra, "root"),
            storage_options=parse_storage_options(
                _extra_value(extra, "storage_options"), f"connection {conn.conn_id!r}: extra 'storage_options'"
            ),
            key=conn.login or None,
            secret=conn.password or None,
            endpoint_url=endpoint or None,
            region_name=_extra_value(extra, "region_name"),
        )

    def storage_options_for(self, table_uri: str | None) -> dict[str, Any]:
        """fsspec options: the JSON options, plus the S3 fields when the table is on S3."""
        options = dict(self.storage_options)
        protocol = table_uri.split("://", 1)[0].lower() if table_uri and "://" in table_uri else None
        if table_uri is None or protocol in _S3_PROTOCOLS:
            if self.key:
                options["key"] = self.key
            if self.secret:
                options["secret"] = self.secret
            if self.endpoint_url:
                options["endpoint_url"] = self.endpoint_url
            if self.region_name:
                client_kwargs = dict(options.get("client_kwargs") or {})
                client_kwargs.setdefault("region_name", self.region_name)
                options["client_kwargs"] = client_kwargs
        return options

    def secrets(self) -> list[Any]:
        """Values to register with the secrets masker."""
        found: list[Any] = [self.secret] if self.secret else []
        if self.storage_options:
            found.append(self.storage_options)  # the masker hides values under sensitive key names
        return found


def _has_port(url: str) -> bool:
    netloc = url.split("://", 1)[-1].split("/", 1)[0]
    return ":" in netloc.rsplit("@", 1)[-1]


def describe_options(options: Mapping[str, Any]) -> str:
    """Storage options for a log line: key names only, never values."""
    return "{" + ", ".join(f"{k}: ***" for k in sorted(options)) + "}" if options else "{}"


# -- the hook ----------------------------------------------------------------------------------


class SnapTableHook(BaseHook):
    """
    Open snapshot tables and run maintenance actions on them, in process or with ``spark-submit``.

    :param snaptable_conn_id: The snaptable connection: table root / warehouse URI and storage
        options (S3 key/secret from login/password, endpoint from host or extra). ``None``, or a
        default connection that does not exist, means no connection: tables must then be full URIs
        and fsspec's own credential lookup applies.
    :param storage_options: fsspec storage options laid over the connection's.
    """

    conn_name_attr = "snaptable_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = "Snapshot table (snaptable)"

    def __init__(
        self,
        snaptable_conn_id: str | None = DEFAULT_CONN_ID,
        storage_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.snaptable_conn_id = snaptable_conn_id
        self.extra_storage_options = dict(storage_options or {})
        self._settings: ConnectionSettings | None = None
        self._tables: dict[str, Table] = {}
        self._submit = None  # the running SparkSubmitHook, for on_kill

    # -- connection ------------------------------------------------------------------

    @property
    def settings(self) -> ConnectionSettings:
        if self._settings is None:
            self._settings = self._load_settings()
        return self._settings

    def _load_settings(self) -> ConnectionSettings:
        if not self.snaptable_conn_id:
            return ConnectionSettings()
        try:
            conn = self.get_connection(self.snaptable_conn_id)
        except AirflowNotFoundException:
            if self.snaptable_conn_id == self.default_conn_name:
                self.log.info("No connection %r: tables must be full URIs", self.snaptable_conn_id)
                return ConnectionSettings()
            raise
        settings = ConnectionSettings.from_connection(conn, conn.extra_dejson)
        _mask_sync(settings.secrets())
        return settings

    def get_conn(self) -> ConnectionSettings:
        return self.settings

    @property
    def root(self) -> str | None:
        return self.settings.root

    def table_uri(self, table: str) -> str:
        """The full URI of ``table`` (a full URI as is, or a name under the connection's root)."""
        if isinstance(table, str) and is_full_uri(table.strip()):
            return join_table_uri(None, table)
        return join_table_uri(self.root, table)

    def storage_options(self, table: str | None = None) -> dict[str, Any]:
        """fsspec storage options for ``table`` (S3 fields only apply to S3 tables). Never log them."""
        uri = None if table is None else self.table_uri(table)
        options = self.settings.storage_options_for(uri)
        options.update(self.extra_storage_options)
        if self.extra_storage_options:
            _mask_sync([self.extra_storage_options])
        return options

    def get_table(self, table: str, refresh: bool = False) -> "Table":
        """Open ``table`` (cached per URI: repeated pokes do not re-read the schema)."""
        from airflow_snaptable.core.table import Table

        uri = self.table_uri(table)
        if refresh or uri not in self._tables:
            self._tables[uri] = Table.open(uri, self.storage_options(uri))
        return self._tables[uri]

    def test_connection(self) -> tuple[bool, str]:
        """Check that the root (if any) can be listed with the connection's storage options."""
        from airflow_snaptable.core.storage import Storage

        try:
            root = self.root
            if not root:
                return True, "Connection has no root; tables must be given as full URIs"
            Storage.from_uri(root, self.storage_options(root)).list_names("")
            return True, f"Listed {root}"
        except Exception as exc:  # noqa: BLE001 - reported to the UI
            return False, f"{type(exc).__name__}: {exc}"

    # -- actions ----------------------------------------------------------------------

    def build_action(self, cls_or_name: type[core_actions.Action] | str, table: str, **arguments: Any) -> core_actions.Action:
        """A core action value on ``table``; argument names are the core function's names."""
        return build_action(cls_or_name, self.table_uri(table), **arguments)

    def run_action(
        self,
        action: core_actions.Action | dict | str,
        runner: str = "local",
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        spark_submit_kwargs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run ``action`` and return core's result ``{"action", "table", "result"}``.

        :param action: An action value, or its JSON (``{"action": "expire-snapshots", "table": ...}``).
        :param runner: ``"local"``: in this process (``core.actions.run_action``); ``"spark"``:
            ``spark-submit`` of the packaged maintenance job through the Spark provider's
            ``SparkSubmitHook`` (client mode: the driver runs here).
        :param spark_conn_id: The Spark connection (its host is the master, e.g. ``local[*]``, ``yarn``).
        :param spark_conf: Spark conf for ``--conf`` (it is logged: no secrets here).
        :param spark_submit_kwargs: More ``SparkSubmitHook`` arguments (``driver_memory``,
            ``jars``, ``packages``, ``properties_file``, ``env_vars`` ...).
        """
        if not isinstance(action, core_actions.Action):
            doc = json.loads(action) if isinstance(action, str) else dict(action)
            name = doc.pop("action", None)
            action = build_action(action_class(name), doc.pop("table", ""), **doc)
        if runner not in RUNNERS:
            raise InvalidArgumentError(f"runner must be one of {', '.join(RUNNERS)}; got {runner!r}")
        options = self.storage_options(action.table)
        self.log.info("Running %s on %s (%s runner, storage options %s)", action.name, action.table, runner, describe_options(options))
        if runner == "local":
            table = self._tables.get(action.table)
            result = core_actions.run_action(action, storage_options=options, table=table)
        else:
            result = self._run_spark(action, options, spark_conn_id, spark_conf, spark_submit_kwargs)
        self.log.info("%s on %s: %s", action.name, action.table, _summary(result.get("result")))
        return result

    def on_kill(self) -> None:
        """Stop a running spark-submit."""
        if self._submit is not None:
            self._submit.on_kill()

    # -- spark-submit ---------------------------------------------------------------------

    def _run_spark(
        self,
        action: core_actions.Action,
        storage_options: dict[str, Any],
        spark_conn_id: str,
        spark_conf: dict[str, Any] | None,
        spark_submit_kwargs: dict[str, Any] | None,
    ) -> dict[str, Any]:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        from airflow_snaptable.spark import job_path

        if not spark_can_run(type(action)):
            raise InvalidArgumentError(f"the Spark maintenance job cannot run {action.name!r} yet; use runner='local'")
        kwargs = check_spark_submit_kwargs(spark_submit_kwargs)
        env_vars = dict(kwargs.pop("env_vars", None) or {})
        _require_connection(self, spark_conn_id)
        with tempfile.TemporaryDirectory(prefix="snaptable-job-") as workdir:  # private (0700)
            action_file = os.path.join(workdir, "action.json")
            result_file = os.path.join(workdir, "result.json")
            with open(action_file, "w", encoding="utf-8") as handle:
                handle.write(action.to_json())  # the action holds no credentials
            submit = SparkSubmitHook(
                conf={str(k): str(v) for k, v in (spark_conf or {}).items()},
                conn_id=spark_conn_id,
                name=kwargs.pop("name", f"snaptable-{action.name}"),
                application_args=["--action-file", action_file, "--result", result_file],
                **kwargs,
            )
            master = str(getattr(submit, "_connection", {}).get("master", ""))
            deploy_mode = getattr(submit, "_connection", {}).get("deploy_mode")
            if deploy_mode == "cluster":
                raise InvalidArgumentError(
                    "spark runner: deploy mode 'cluster' is not supported (the driver must run here to read the "
                    "action file and write the result file); use client mode"
                )
            env = spark_environment(storage_options, env_vars, master, submit._connection.get("spark_binary"))
            self._submit = submit
            try:
                submit.submit(job_path(), env=env)
            except AirflowException as exc:
                doc = _read_result(result_file)
                if doc and doc.get("error"):
                    raise spark_job_error(action, doc["error"]) from exc
                raise
            finally:
                self._submit = None
            doc = _read_result(result_file)
        if doc is None:
            raise AirflowException(f"the snaptable Spark job for {action.name} on {action.table} wrote no result")
        if doc.get("error"):
            raise spark_job_error(action, doc["error"])
        return doc


def spark_job_error(action: core_actions.Action, error: Mapping[str, Any]) -> Exception:
    """The Spark job's error as core's typed error when it is one (callers catch e.g. TagAlreadyExistsError
    whatever the runner), else an AirflowException."""
    from airflow_snaptable.core import errors as core_errors

    message = f"snaptable {action.name} on {action.table} failed in Spark: {error.get('type')}: {error.get('message')}"
    cls = getattr(core_errors, str(error.get("type")), None)
    if isinstance(cls, type) and issubclass(cls, core_errors.SnapTableError):
        return cls(message)
    return AirflowException(message)


def check_spark_submit_kwargs(spark_submit_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Arguments for SparkSubmitHook, checked against its signature (clear errors at DAG parse time)."""
    import inspect

    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    kwargs = dict(spark_submit_kwargs or {})
    allowed = set(inspect.signature(SparkSubmitHook.__init__).parameters) - {"self"}
    reserved = sorted(set(kwargs) & (_RESERVED_SPARK_ARGS - {"env_vars"}))
    if reserved:
        raise InvalidArgumentError(
            f"spark_submit_kwargs may not set {reserved}: use spark_conn_id / spark_conf; the hook sets the job's arguments"
        )
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise InvalidArgumentError(f"spark_submit_kwargs: SparkSubmitHook takes no argument(s) {unknown}")
    if kwargs.get("deploy_mode") == "cluster":
        raise InvalidArgumentError("spark runner: deploy_mode='cluster' is not supported (the driver must run on the worker)")
    return kwargs


def spark_environment(storage_options: Mapping[str, Any], env_vars: Mapping[str, Any], master: str, binary: str | None) -> dict[str, str]:
    """The spark-submit process environment: credentials go here, never on the command line.

    SparkSubmitHook logs the command (``--conf`` values included, masked only when the key
    says secret/password) and turns its ``env_vars`` into ``--conf`` on YARN/Kubernetes, so
    the storage options travel as ``SNAPTABLE_STORAGE_OPTIONS`` in the process environment,
    which the driver (client mode) inherits.
    """
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


def _require_connection(hook: BaseHook, conn_id: str) -> None:
    """SparkSubmitHook silently uses master 'yarn' when its connection is missing: refuse instead."""
    try:
        hook.get_connection(conn_id)
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


def _summary(result: Any) -> str:
    """A short log line: scalars as they are, lists by length."""
    if isinstance(result, dict):
        parts = []
        for key, value in result.items():
            if isinstance(value, (list, tuple)):
                short = len(value) <= 10 and all(isinstance(v, (int, str)) for v in value)
                parts.append(f"{key}={list(value)}" if short else f"{key}=<{len(value)} items>")
            elif isinstance(value, dict):
                parts.append(f"{key}={{...}}")
            else:
                parts.append(f"{key}={value}")
        return ", ".join(parts)
    if isinstance(result, list):
        return f"{len(result)} item(s): {result[:10]}"
    return str(result)


def _mask_sync(values: Iterable[Any]) -> None:
    from airflow.sdk.log import mask_secret

    for value in values:
        if value:
            mask_secret(value)


async def amask(values: Iterable[Any]) -> None:
    from airflow.sdk.log import amask_secret

    for value in values:
        if value:
            await amask_secret(value)


async def aget_connection_settings(conn_id: str | None) -> ConnectionSettings:
    """Connection settings from the event loop: async lookup, async masking (no DeadlockImminentError)."""
    if not conn_id:
        return ConnectionSettings()
    try:
        conn = await BaseHook.aget_connection(conn_id)
    except AirflowNotFoundException:
        if conn_id == DEFAULT_CONN_ID:
            return ConnectionSettings()
        raise
    extra = await conn.aextra_dejson()
    settings = ConnectionSettings.from_connection(conn, extra)
    await amask(settings.secrets())
    return settings
