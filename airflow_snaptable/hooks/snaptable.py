"""The snaptable hook: a connection becomes a table location plus fsspec storage options.

Connection type ``snaptable`` (all fields optional; a table given as a full URI needs none):

- extra ``root``: the table root / warehouse URI (``s3://bucket/warehouse``, ``/data/tables``);
  a table given by name (``orders``, ``sales/orders``) lives at ``<root>/<name>``.
- extra ``storage_options``: fsspec storage options as a JSON object (or a nested object).
- extras ``aws_access_key_id`` / ``aws_secret_access_key`` (or login / password): the S3 access key
  id / secret access key (s3fs ``key`` / ``secret``); login and password win when both are set.
- extra ``endpoint_url`` (or host + port): an S3-compatible endpoint (``http://minio:9000``).
- extra ``region_name``: the S3 region.

The UI's form shows only extra fields (get_provider_info.py): the root and the catalog first, the
S3 fields in their own section; host / port / login / password are for connections made with the
CLI or a variable.
- extra ``catalog``: for ``iceberg://<namespace>.<table>`` tables, the catalog's properties as
  pyiceberg's ``load_catalog`` takes them (a JSON object: ``{"type": "sql", "uri": ...,
  "warehouse": ...}``, ``{"type": "rest", "uri": ..., "credential": ...}``, Glue, Hive).

The login/password/endpoint/region fields only apply to ``s3://`` / ``s3a://`` tables.
Storage options and catalog properties are never logged; secret values are registered with
Airflow's masker.

Everything a table can do is a core call: the hook resolves the table and runs a core action
(core/actions/maintenance.py) in process or through ``spark-submit`` (hooks/spark_submit.py).
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_snaptable.core import actions as core_actions
from airflow_snaptable.core.errors import InvalidArgumentError, InvalidNameError
from airflow_snaptable.core.formats.foreign import is_iceberg_uri
from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.io.storage import check_malformed_uri
from airflow_snaptable.core.io.storage_options import parse_storage_options
from airflow_snaptable.hooks.spark_submit import DEFAULT_CONNECT_TIMEOUT, RunnerSettings, SparkSubmitRunner

if TYPE_CHECKING:
    from airflow_snaptable.core.table import Table

CONN_TYPE = "snaptable"
DEFAULT_CONN_ID = "snaptable_default"
_S3_PROTOCOLS = ("s3", "s3a")
_SECRET_WORDS = re.compile(r"credential|secret|token|password|key|sas|connection", re.IGNORECASE)


# -- connection -> location and storage options ------------------------------------------------


def is_full_uri(table: str) -> bool:
    """A URL (``s3://b/t``, ``file:///t``, ``memory://t``) or an absolute local path."""
    return "://" in table or table.startswith("/")


def join_table_uri(root: str | None, table: str) -> str:
    """``table`` itself when it is a full URI, else ``<root>/<table>`` with every name segment validated."""
    if not isinstance(table, str) or not table.strip():
        raise InvalidArgumentError(f"table must be a non-empty string (a URI or a name), got {table!r}")
    table = table.strip()
    check_malformed_uri(table, "table")
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


@dataclasses.dataclass(frozen=True)
class ConnectionSettings:
    """What the hook takes from a snaptable connection (no Airflow objects: usable off the event loop)."""

    root: str | None = None
    storage_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    key: str | None = None
    secret: str | None = None
    endpoint_url: str | None = None
    region_name: str | None = None
    #: pyiceberg catalog properties for iceberg:// tables.
    catalog: dict[str, Any] | None = None

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
            )
            or {},
            key=conn.login or _extra_value(extra, "aws_access_key_id") or None,
            secret=conn.password or _extra_value(extra, "aws_secret_access_key") or None,
            endpoint_url=endpoint or None,
            region_name=_extra_value(extra, "region_name"),
            catalog=parse_storage_options(_extra_value(extra, "catalog"), f"connection {conn.conn_id!r}: extra 'catalog'"),
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

    def catalog_for(self, table_uri: str, conn_id: str | None) -> dict[str, Any] | None:
        """The catalog properties an ``iceberg://`` table needs (None for a table directory)."""
        if not is_iceberg_uri(table_uri):
            return None
        if not self.catalog:
            raise InvalidArgumentError(
                f"table {table_uri!r} is an Iceberg table, and connection {conn_id!r} has no extra 'catalog' "
                "with the properties of its catalog"
            )
        return dict(self.catalog)

    def secrets(self) -> list[Any]:
        """Values to register with the secrets masker."""
        found: list[Any] = [self.secret] if self.secret else []
        if self.storage_options:
            found.append(self.storage_options)  # the masker hides values under sensitive key names
            found += secret_values(self.storage_options)
        if self.catalog:
            found.append(self.catalog)
            found += secret_values(self.catalog)
        return found


def secret_values(options: Mapping[str, Any]) -> list[str]:
    """The values of ``options`` under secret-like names Airflow's masker does not know: Azure's
    ``account_key`` and ``connection_string``, a catalog's ``credential`` or ``s3.access-key-id``."""
    found: list[str] = []
    for key, value in options.items():
        if isinstance(value, Mapping):
            found += secret_values(value)
        elif isinstance(value, str) and value and _SECRET_WORDS.search(str(key)):
            found.append(value)
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
        self._spark: SparkSubmitRunner | None = None  # the running spark-submit, for on_kill

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
        mask_secrets(settings.secrets())
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
            mask_secrets([self.extra_storage_options, *secret_values(self.extra_storage_options)])
        return options

    def get_table(self, table: str, refresh: bool = False) -> "Table":
        """Open ``table`` (cached per URI: repeated pokes do not re-read the schema)."""
        from airflow_snaptable.core.table import Table

        uri = self.table_uri(table)
        if refresh or uri not in self._tables:
            self._tables[uri] = Table.open(uri, self.storage_options(uri), catalog=self.catalog(uri))
        return self._tables[uri]

    def catalog(self, table: str) -> dict[str, Any] | None:
        """The catalog properties for ``table`` when it is an ``iceberg://`` table (the connection's extra ``catalog``)."""
        return self.settings.catalog_for(self.table_uri(table), self.snaptable_conn_id)

    def test_connection(self) -> tuple[bool, str]:
        """Check that the root (if any) exists and can be listed with the connection's storage options."""
        from airflow_snaptable.core.io.storage import Storage

        try:
            root = self.root
            if not root:
                return True, "Connection has no root; tables must be given as full URIs"
            storage = Storage.from_uri(root, self.storage_options(root))
            if not storage.fs.exists(storage.root):
                # An object store has no empty directories: a root there exists once a table is under it.
                return False, f"{root} does not exist (nothing is stored under it)"
            names = storage.list_names("")
            return True, f"Listed {root}: {len(names)} entries"
        except Exception as exc:  # noqa: BLE001 - reported to the UI
            return False, f"{type(exc).__name__}: {exc}"

    # -- actions ----------------------------------------------------------------------

    def build_action(self, cls_or_name: type[core_actions.Action] | str, table: str, **arguments: Any) -> core_actions.Action:
        """A core action on ``table`` from Python values or rendered text (``core.actions.build_action``)."""
        return core_actions.build_action(cls_or_name, self.table_uri(table), **arguments)

    def run_action(
        self,
        action: core_actions.Action | Mapping | str,
        runner: str = "local",
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        spark_submit_kwargs: dict[str, Any] | None = None,
        runner_ship: str = "auto",
        spark_connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> dict[str, Any]:
        """Run ``action`` and return core's result ``{"action", "table", "result"}``.

        :param action: An action value, or its JSON (``{"action": "expire-snapshots", "table": ...}``).
        :param runner: ``"local"``: in this process (the action's ``run``); ``"spark"``:
            ``spark-submit`` of the packaged maintenance job through the Spark provider's
            ``SparkSubmitHook`` (client mode: the driver runs here).
        :param spark_conn_id: The Spark connection (its host is the master, e.g. ``local[*]``, ``yarn``).
        :param spark_conf: Spark conf for ``--conf``; keys that look secret are masked and handed to the
            job in a private file instead (hooks/spark_secrets.py).
        :param spark_submit_kwargs: More ``SparkSubmitHook`` arguments (``driver_memory``,
            ``jars``, ``packages``, ``properties_file``, ``env_vars`` ...).
        :param runner_ship: What the executors get: ``"auto"`` (this package and its dependencies, as
            an archive built once and cached), ``"none"`` (the cluster has them), or a prebuilt archive's URI.
        :param spark_connect_timeout: Seconds the Spark master has to accept a connection.
        """
        if not isinstance(action, core_actions.Action):
            action = core_actions.action_from_json(action)
        settings = RunnerSettings(runner, spark_conn_id, spark_conf, spark_submit_kwargs, runner_ship, spark_connect_timeout)
        options = self.storage_options(action.table)
        self.log.info("Running %s on %s (%s runner, storage options %s)", action.name, action.table, runner, describe_options(options))
        if settings.runner == "local":
            result = core_actions.run_action(
                action, storage_options=options, table=self._tables.get(action.table), catalog=self.catalog(action.table)
            )
        else:
            result = self._run_spark(action, options, settings)
        self.log.info("%s on %s: %s", action.name, action.table, _summary(result.get("result")))
        self._report_lineage(action.table)
        return result

    def _report_lineage(self, table_uri: str) -> None:
        """The table read and written, for Airflow's hook lineage collector (OpenLineage reads it)."""
        from airflow_snaptable.assets.snaptable import table_asset_uri
        from airflow.sdk.lineage import get_hook_lineage_collector

        asset_uri = table_asset_uri(table_uri)
        collector = get_hook_lineage_collector()
        collector.add_input_asset(context=self, uri=asset_uri)
        collector.add_output_asset(context=self, uri=asset_uri)

    def _run_spark(self, action: core_actions.Action, storage_options: dict[str, Any], settings: RunnerSettings) -> dict[str, Any]:
        self._spark = SparkSubmitRunner(settings)
        try:
            return self._spark.run(action, storage_options, self.catalog(action.table))
        finally:
            self._spark = None

    def on_kill(self) -> None:
        """Stop a running spark-submit."""
        if self._spark is not None:
            self._spark.kill()


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


def mask_secrets(values: Iterable[Any]) -> None:
    """Register secret values with Airflow's masker (sync callers; the triggers have an async form)."""
    from airflow.sdk.log import mask_secret

    for value in values:
        if value:
            mask_secret(value)
