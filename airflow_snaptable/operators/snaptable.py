"""Operators for snapshot table maintenance: one per core action, made from its definition.

An operator names its action (``action = core_actions.ExpireSnapshots``) and nothing else:
its keyword arguments are the action's fields (not the internal ones), with the action's
defaults; every one is a template field (a rendered template arrives as text, read strictly by
the field's kind: ``"True"``/``"False"`` for a flag); its docstring's
``:param`` lines are the fields' help. The values are checked when the DAG is parsed (a
template is checked once rendered: its text is read by the field's kind, ``"5"`` for a
count, ``"True"`` for a flag) and the action is made, and checked in full, when the task
runs. The hook runs it in the task's process (``runner="local"``) or with ``spark-submit``
(``runner="spark"``); the result ``{"action", "table", "result"}`` goes to XCom.
"""

from __future__ import annotations

import inspect
import textwrap
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from airflow.sdk import Asset, BaseOperator, conf

from airflow_snaptable.assets.snaptable import table_asset_uri
from airflow_snaptable.core import actions as core_actions
from airflow_snaptable.core.actions.contract import ActionField
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.hooks.snaptable import DEFAULT_CONN_ID, SnapTableHook
from airflow_snaptable.hooks.spark_submit import DEFAULT_CONNECT_TIMEOUT, RunnerSettings
from airflow_snaptable.operators.links import TableTimelineLink
from airflow_snaptable.operators.task_errors import errors_naming_task

if TYPE_CHECKING:
    from airflow.sdk import Context


def _renders_later(value: Any) -> bool:
    """A Jinja template: its value is known once Airflow renders it, when the task runs."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


class SnapTableBaseOperator(BaseOperator):
    """
    Shared plumbing of the snaptable operators: table, connection and runner.

    A subclass sets ``action`` to a core action class; its arguments are then that action's.

    :param table: The table: a full URI (``s3://bucket/orders``, ``/data/orders``), which needs
        no connection, or a name under the connection's root (``orders``). (templated)
    :param snaptable_conn_id: The snaptable connection (root and storage options). (templated)
    :param runner: ``"local"`` runs the action in the task's process; ``"spark"`` runs it with
        ``spark-submit`` and the packaged maintenance job (bulk deletes on executors).
    :param spark_conn_id: The Spark connection when ``runner="spark"`` (host = master, e.g. ``local[*]``).
    :param spark_conf: Spark conf for ``--conf``; entries whose key looks secret (``key``, ``secret``,
        ``token``, ``password``, ``storage-options``, ``credential``) are masked in the log and rendered
        fields and handed to the job in a private file, not on the command line. (templated)
    :param spark_submit_kwargs: More ``SparkSubmitHook`` arguments (``driver_memory``,
        ``executor_memory``, ``num_executors``, ``jars``, ``packages``, ``properties_file``,
        ``env_vars``, ``name`` ...), checked when the DAG is parsed.
    :param runner_ship: With ``runner="spark"``, what the executors get: ``"auto"`` (on a cluster, an
        archive of this package and its dependencies, built once per version and cached), ``"none"``
        (the nodes have them), or the URI of a prebuilt archive (docs/spark-cluster.md).
    :param spark_connect_timeout: Seconds the Spark master has to accept a connection (default 15).
    :param openlineage_inject_parent_job_info: With ``runner="spark"``, pass this task's OpenLineage
        parent job information to the Spark job's conf (default: the ``[openlineage]
        spark_inject_parent_job_info`` setting, as for the Spark provider).
    """

    action: ClassVar[type[core_actions.Action]]
    template_fields: Sequence[str] = ("table", "snaptable_conn_id", "spark_conf")
    template_fields_renderers = {"spark_conf": "json"}
    ui_color = "#c9e4f6"
    operator_extra_links = (TableTimelineLink(),)

    def __init__(
        self,
        *,
        table: str,
        snaptable_conn_id: str | None = DEFAULT_CONN_ID,
        runner: str = "local",
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        spark_submit_kwargs: dict[str, Any] | None = None,
        runner_ship: str = "auto",
        spark_connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        openlineage_inject_parent_job_info: bool = conf.getboolean(
            "openlineage", "spark_inject_parent_job_info", fallback=False
        ),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(table, str) or not table.strip():
            raise InvalidArgumentError(f"{self.task_id}: table must be a non-empty string (a URI or a name), got {table!r}")
        with errors_naming_task(self.task_id):  # checked when the DAG is parsed
            RunnerSettings(runner, spark_conn_id, spark_conf, spark_submit_kwargs, runner_ship, spark_connect_timeout)
        self.table = table
        self.snaptable_conn_id = snaptable_conn_id
        self.runner = runner
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf
        self.spark_submit_kwargs = spark_submit_kwargs
        self.runner_ship = runner_ship
        self.spark_connect_timeout = spark_connect_timeout
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "action" in cls.__dict__:
            _derive_from_action(cls)

    @classmethod
    def action_fields(cls) -> tuple[ActionField, ...]:
        """The action's fields this operator takes (every one but the internal ones)."""
        return tuple(field for field in cls.action.parameters() if not field.param.internal)

    def _do_render_template_fields(self, *args: Any, **kwargs: Any) -> None:
        from airflow_snaptable.hooks.spark_secrets import mask_secret_conf

        # Airflow renders a task, mapped or not, through this method; the rendered fields are stored after
        # it: secret-looking spark_conf values are registered with the secrets masker first, so they show as ***.
        super()._do_render_template_fields(*args, **kwargs)
        mask_secret_conf(self.spark_conf, warn=False)

    @cached_property
    def hook(self) -> SnapTableHook:
        return SnapTableHook(snaptable_conn_id=self.snaptable_conn_id)

    def _set_action_values(self, values: dict[str, Any]) -> None:
        """Check the action's values as far as they are known (templates render later), and keep them."""
        templated = [field.name for field in self.action_fields()]
        pending = [name for name, value in values.items() if _renders_later(value)]
        with errors_naming_task(self.task_id):
            self.action.check_known(values, text=templated, pending=pending)
        for name, value in values.items():
            setattr(self, name, value)

    def build_action(self) -> core_actions.Action:
        """The action on the table, from the (rendered) values; a template's text is read by its field's kind."""
        values = {field.name: getattr(self, field.name) for field in self.action_fields()}
        templated = [field.name for field in self.action_fields()]
        return self.action.from_python(self.hook.table_uri(self.table), values, text=templated)

    def execute(self, context: Context) -> dict[str, Any]:
        with errors_naming_task(self.task_id):
            return self._execute(context)

    def _execute(self, context: Context) -> dict[str, Any]:
        action = self.build_action()
        spark_conf = self.spark_conf
        if self.runner == "spark" and self.openlineage_inject_parent_job_info:
            # As the Spark provider does: the Spark job's OpenLineage events name this task as their parent.
            from airflow.providers.openlineage.utils.spark import inject_parent_job_information_into_spark_properties

            spark_conf = inject_parent_job_information_into_spark_properties(dict(spark_conf or {}), context)
        result = self.hook.run_action(
            action,
            runner=self.runner,
            spark_conn_id=self.spark_conn_id,
            spark_conf=spark_conf,
            spark_submit_kwargs=self.spark_submit_kwargs,
            runner_ship=self.runner_ship,
            spark_connect_timeout=self.spark_connect_timeout,
        )
        self._lineage = (result["action"], result["table"], self._latest_snapshot_id(result["table"]))
        self._describe_asset_event(context, result)
        return result

    def _latest_snapshot_id(self, table_uri: str) -> int | None:
        """The table's latest snapshot after the action (the lineage's dataset version); lineage never fails a task."""
        try:
            return self.hook.get_table(table_uri, refresh=True).snapshot_manager.latest_id()
        except Exception as exc:  # noqa: BLE001
            self.log.debug("No dataset version for lineage: %s", exc)
            return None

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The table as input and output dataset, its latest snapshot id as the dataset version, and
        the lifecycle state change of expiry, orphan removal, compaction (ALTER) or rollback (OVERWRITE)."""
        from airflow_snaptable.operators.lineage import operator_lineage

        action, table_uri, latest = getattr(self, "_lineage", (self.action.name, self.hook.table_uri(self.table), None))
        return operator_lineage(action, table_uri, latest)

    def _describe_asset_event(self, context: Context, result: dict[str, Any]) -> None:
        """When the table's asset (assets/snaptable.py) is an outlet, its event says what the task did:
        the action and the result's scalars (counts, ids, bytes; never file lists)."""
        asset_uri = table_asset_uri(result["table"])
        events = context.get("outlet_events") if hasattr(context, "get") else None
        if events is None:
            return
        outcome = result.get("result")
        scalars = (int, float, str, bool, type(None))
        summary = {k: v for k, v in outcome.items() if isinstance(v, scalars)} if isinstance(outcome, dict) else {}
        for outlet in self.outlets or []:
            if isinstance(outlet, Asset) and outlet.uri == asset_uri:
                events[outlet].extra = {"action": result["action"], "table": result["table"], **summary}

    def on_kill(self) -> None:
        if "hook" in self.__dict__:
            self.hook.on_kill()


def _derive_from_action(cls: type[SnapTableBaseOperator]) -> None:
    """Give an operator its action's arguments: ``__init__`` (with a real signature, so Airflow's
    ``default_args`` and ``help()`` see them), ``template_fields`` and the ``:param`` docs."""
    fields = cls.action_fields()
    defaults = {field.name: field.default for field in fields if not field.required}

    def __init__(self, **kwargs: Any) -> None:
        # Airflow's own check has refused a call without a required argument before this runs.
        values = {field.name: kwargs.pop(field.name) for field in fields if field.name in kwargs}
        super(cls, self).__init__(**kwargs)
        self._set_action_values({**defaults, **values})

    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [
            inspect.Parameter(
                field.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if field.required else field.default,
            )
            for field in fields
        ]
        + [inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)]
    )
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = __init__
    cls.template_fields = (*SnapTableBaseOperator.template_fields, *(f.name for f in fields))
    params = [
        textwrap.fill(
            f":param {field.name}: {field.param.help} (templated)",
            width=100,
            subsequent_indent="    ",
            break_on_hyphens=False,
            break_long_words=False,
        )
        for field in fields
    ]
    own = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
    cls.__doc__ = "\n\n".join(part for part in (inspect.getdoc(cls.action), own, "\n".join(params)) if part)


class SnapTableExpireSnapshotsOperator(SnapTableBaseOperator):
    action = core_actions.ExpireSnapshots


class SnapTableCreateTagOperator(SnapTableBaseOperator):
    """A daily tag of the state at the period's end: ``tag_name="{{ data_interval_start | ds }}"``,
    ``as_of="{{ data_interval_end }}"``, ``if_exists="skip"`` (a retry keeps the tag of the first try)."""

    action = core_actions.CreateTag


class SnapTableDeleteTagOperator(SnapTableBaseOperator):
    action = core_actions.DeleteTag


class SnapTableRenameTagOperator(SnapTableBaseOperator):
    action = core_actions.RenameTag


class SnapTableCleanOperator(SnapTableBaseOperator):
    """Hudi's cleaning policies: ``policy="KEEP_LATEST_COMMITS", commits_retained=10`` and so on."""

    action = core_actions.Clean


class SnapTableCreateSavepointOperator(SnapTableBaseOperator):
    action = core_actions.CreateSavepoint


class SnapTableDeleteSavepointOperator(SnapTableBaseOperator):
    action = core_actions.DeleteSavepoint


class SnapTableRestoreSavepointOperator(SnapTableBaseOperator):
    """A backfill: restore the savepoint, then re-run the work after it."""

    action = core_actions.RestoreSavepoint


class SnapTablePeriodicTagOperator(SnapTableBaseOperator):
    action = core_actions.CreatePeriodicTags


class SnapTableExpireTagsOperator(SnapTableBaseOperator):
    action = core_actions.ExpireTags


class SnapTableExpireConsumersOperator(SnapTableBaseOperator):
    action = core_actions.ExpireConsumers


class SnapTableRollbackOperator(SnapTableBaseOperator):
    action = core_actions.Rollback


class SnapTableRemoveOrphanFilesOperator(SnapTableBaseOperator):
    action = core_actions.RemoveOrphanFiles


class SnapTableCompactOperator(SnapTableBaseOperator):
    action = core_actions.Compact


class SnapTableRewriteManifestsOperator(SnapTableBaseOperator):
    """Iceberg tables: after many small commits, so that planning a partition reads few manifests."""

    action = core_actions.RewriteManifests


class SnapTableAdvanceConsumerOperator(SnapTableBaseOperator):
    """Run it after downstream work succeeded. With
    :class:`~airflow_snaptable.sensors.snaptable.SnapTableNewSnapshotSensor`, pass
    ``next_snapshot="{{ ti.xcom_pull(task_ids='wait')['to_snapshot_id'] + 1 }}"``."""

    action = core_actions.UpdateConsumer



class SnapTableUndoOperator(SnapTableBaseOperator):
    """Undo a run that kept what it removed noncurrent: pass the deleting task's XCom ``run_id``
    (``run_id="{{ ti.xcom_pull('expire')['run_id'] }}"``)."""

    action = core_actions.Undo


class SnapTablePurgeOperator(SnapTableBaseOperator):
    """Delete the noncurrent files whose retention has passed (never one the live metadata references)."""

    action = core_actions.Purge


class SnapTableExpireDataOperator(SnapTableBaseOperator):
    """Delete the rows older than a retention by a time column (``snaptable expire-data``)."""

    action = core_actions.ExpireData


# The short names the package was specified with ("DAG authors adding SnapshotExpireOperator, ...,
# backfills via rollback-to-tag tasks"): public, documented names of the same classes, beside the
# prefixed ones, for good. A public name is never removed without a deprecation
# (tests/test_public_names.py guards every one).
SnapshotExpireOperator = SnapTableExpireSnapshotsOperator
CreateTagOperator = SnapTableCreateTagOperator
DeleteTagOperator = SnapTableDeleteTagOperator
PeriodicTagOperator = SnapTablePeriodicTagOperator
ExpireTagsOperator = SnapTableExpireTagsOperator
ExpireConsumersOperator = SnapTableExpireConsumersOperator
RollbackOperator = SnapTableRollbackOperator
RemoveOrphanFilesOperator = SnapTableRemoveOrphanFilesOperator
CompactOperator = SnapTableCompactOperator
AdvanceConsumerOperator = SnapTableAdvanceConsumerOperator
