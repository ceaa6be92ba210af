"""Operators for snapshot table maintenance.

Every operator is a thin front end over one core action (``airflow_snaptable.core.actions``):
it builds the action value from its (templated) arguments, runs it through
:class:`~airflow_snaptable.hooks.snaptable.SnapTableHook` in process (``runner="local"``) or
with ``spark-submit`` (``runner="spark"``), and returns core's result
``{"action", "table", "result"}``, which Airflow pushes to XCom.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from airflow.sdk import BaseOperator

from airflow_snaptable.core import actions as core_actions
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.hooks.snaptable import (
    DEFAULT_CONN_ID,
    RUNNERS,
    SnapTableHook,
    check_spark_submit_kwargs,
    spark_can_run,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


def _templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def check_int(name: str, value: Any, minimum: int | None = None) -> None:
    """None, an int (>= minimum), a template, or a string of digits; else a clear error at parse time."""
    if value is None or _templated(value):
        return
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise InvalidArgumentError(f"{name} must be an integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {value}")


def check_bool(name: str, value: Any) -> None:
    if isinstance(value, bool) or _templated(value):
        return
    raise InvalidArgumentError(f"{name} must be True or False, got {value!r}")


def check_one_of(names_values: dict[str, Any], required: bool) -> None:
    given = [name for name, value in names_values.items() if value is not None]
    if len(given) > 1:
        raise InvalidArgumentError(f"give only one of {', '.join(names_values)}; got {', '.join(given)}")
    if required and not given:
        raise InvalidArgumentError(f"give one of {', '.join(names_values)}")


class SnapTableBaseOperator(BaseOperator):
    """
    Shared plumbing of the snaptable operators: table, connection and runner.

    Subclasses name their core action (``action``) and return its arguments from
    :meth:`action_arguments`, using the core function's argument names.

    :param table: The table: a full URI (``s3://bucket/orders``, ``/data/orders``), which needs
        no connection, or a name under the connection's root (``orders``). (templated)
    :param snaptable_conn_id: The snaptable connection (root and storage options). (templated)
    :param runner: ``"local"`` runs the action in the task's process; ``"spark"`` runs it with
        ``spark-submit`` and the packaged maintenance job (bulk deletes on executors).
    :param spark_conn_id: The Spark connection when ``runner="spark"`` (host = master, e.g. ``local[*]``).
    :param spark_conf: Spark conf for ``--conf`` (logged: put no secrets here). (templated)
    :param spark_submit_kwargs: More ``SparkSubmitHook`` arguments (``driver_memory``,
        ``executor_memory``, ``num_executors``, ``jars``, ``packages``, ``properties_file``,
        ``env_vars``, ``name`` ...), checked when the DAG is parsed.
    """

    action: ClassVar[type[core_actions.Action]]
    template_fields: Sequence[str] = ("table", "snaptable_conn_id", "spark_conf")
    template_fields_renderers = {"spark_conf": "json"}
    ui_color = "#c9e4f6"

    def __init__(
        self,
        *,
        table: str,
        snaptable_conn_id: str | None = DEFAULT_CONN_ID,
        runner: str = "local",
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        spark_submit_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(table, str) or not table.strip():
            raise InvalidArgumentError(f"{self.task_id}: table must be a non-empty string (a URI or a name), got {table!r}")
        if runner not in RUNNERS:
            raise InvalidArgumentError(f"{self.task_id}: runner must be one of {', '.join(RUNNERS)}; got {runner!r}")
        if runner == "spark" and not spark_can_run(self.action):
            raise InvalidArgumentError(
                f"{self.task_id}: the Spark maintenance job cannot run {self.action.name!r} (not in core's action "
                "registry); use runner='local'"
            )
        if spark_conf is not None and not isinstance(spark_conf, dict):
            raise InvalidArgumentError(f"{self.task_id}: spark_conf must be a dict, got {type(spark_conf).__name__}")
        if spark_submit_kwargs:
            check_spark_submit_kwargs(spark_submit_kwargs)
        self.table = table
        self.snaptable_conn_id = snaptable_conn_id
        self.runner = runner
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf
        self.spark_submit_kwargs = spark_submit_kwargs

    @cached_property
    def hook(self) -> SnapTableHook:
        return SnapTableHook(snaptable_conn_id=self.snaptable_conn_id)

    def action_arguments(self) -> dict[str, Any]:
        """The core action's arguments (templates rendered)."""
        return {}

    def build_action(self) -> core_actions.Action:
        return self.hook.build_action(self.action, self.table, **self.action_arguments())

    def run(self, action: core_actions.Action) -> dict[str, Any]:
        return self.hook.run_action(
            action,
            runner=self.runner,
            spark_conn_id=self.spark_conn_id,
            spark_conf=self.spark_conf,
            spark_submit_kwargs=self.spark_submit_kwargs,
        )

    def execute(self, context: Context) -> dict[str, Any]:
        return self.run(self.build_action())

    def on_kill(self) -> None:
        if "hook" in self.__dict__:
            self.hook.on_kill()


class SnapshotExpireOperator(SnapTableBaseOperator):
    """
    Expire old snapshots and delete the files nothing retained still uses.

    Tags and consumers always protect what they hold. Unset bounds come from the table
    options (``snapshot.num-retained.min`` / ``.max``, ``snapshot.time-retained``,
    ``snapshot.expire.limit``).

    :param retain_min: Always keep at least this many newest snapshots. (templated)
    :param retain_max: Keep at most this many snapshots, whatever their age. (templated)
    :param older_than: Expire only snapshots whose successor is older than this time,
        e.g. ``"{{ data_interval_start }}"``. (templated)
    :param time_retained: Or: keep snapshots younger than this duration (``"7 d"``, a timedelta). (templated)
    :param limit: Expire at most this many snapshots in one run. (templated)
    :param dry_run: Plan only: report what would be deleted, delete nothing.
    :param skip_missing: Repair path: skip metadata of the snapshots being expired that is already
        missing (what it named is left for orphan cleaning); what protects must still read.
    """

    action = core_actions.ExpireSnapshots
    template_fields: Sequence[str] = (*SnapTableBaseOperator.template_fields, "retain_min", "retain_max", "older_than", "time_retained", "limit")

    def __init__(
        self,
        *,
        retain_min: int | str | None = None,
        retain_max: int | str | None = None,
        older_than: Any = None,
        time_retained: Any = None,
        limit: int | str | None = None,
        dry_run: bool = False,
        skip_missing: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, value in (("retain_min", retain_min), ("retain_max", retain_max), ("limit", limit)):
            check_int(name, value, minimum=1)
        check_one_of({"older_than": older_than, "time_retained": time_retained}, required=False)
        check_bool("dry_run", dry_run)
        check_bool("skip_missing", skip_missing)
        self.skip_missing = skip_missing
        self.retain_min = retain_min
        self.retain_max = retain_max
        self.older_than = older_than
        self.time_retained = time_retained
        self.limit = limit
        self.dry_run = dry_run

    def action_arguments(self) -> dict[str, Any]:
        return {
            "retain_min": self.retain_min,
            "retain_max": self.retain_max,
            "older_than": self.older_than,
            "time_retained": self.time_retained,
            "limit": self.limit,
            "dry_run": self.dry_run,
            "skip_missing": self.skip_missing,
        }


class CreateTagOperator(SnapTableBaseOperator):
    """
    Tag a snapshot so its state outlives the snapshot's expiry.

    :param tag_name: The tag's name, e.g. ``"{{ ds }}"``. (templated)
    :param snapshot_id: The snapshot to tag (default: the latest). (templated)
    :param as_of: Or: tag the latest snapshot committed at or before this time, e.g.
        ``"{{ data_interval_end }}"``, so a late or backfilled run tags the state at the
        period boundary. (templated)
    :param time_retained: The tag's time to live (``"30 d"``, a timedelta); default: the table
        option ``tag.default-time-retained``, else kept until deleted. (templated)
    :param if_exists: ``"fail"`` (default) when a tag of that name exists, or ``"skip"``: when it
        points at the requested snapshot, keep it and return it (``"skipped": True``), which makes
        retries and re-runs idempotent; when it points elsewhere, fail. Atomic: core's create
        is a create-if-absent, and only its "exists already" answer leads to the skip. Without
        ``snapshot_id`` and ``as_of`` the requested snapshot is the latest when the task runs.
    """

    action = core_actions.CreateTag
    template_fields: Sequence[str] = (*SnapTableBaseOperator.template_fields, "tag_name", "snapshot_id", "as_of", "time_retained")

    def __init__(
        self,
        *,
        tag_name: str,
        snapshot_id: int | str | None = None,
        as_of: Any = None,
        time_retained: Any = None,
        if_exists: str = "fail",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(tag_name, str) or not tag_name.strip():
            raise InvalidArgumentError(f"tag_name must be a non-empty string, got {tag_name!r}")
        check_int("snapshot_id", snapshot_id, minimum=1)
        check_one_of({"snapshot_id": snapshot_id, "as_of": as_of}, required=False)
        if if_exists not in core_actions.IF_EXISTS:
            raise InvalidArgumentError(f"if_exists must be 'fail' or 'skip', got {if_exists!r}")
        self.tag_name = tag_name
        self.snapshot_id = snapshot_id
        self.as_of = as_of
        self.time_retained = time_retained
        self.if_exists = if_exists

    def action_arguments(self) -> dict[str, Any]:
        return {
            "tag_name": self.tag_name,
            "snapshot_id": self.snapshot_id,
            "as_of": self.as_of,
            "time_retained": self.time_retained,
            "if_exists": self.if_exists,
        }


class DeleteTagOperator(SnapTableBaseOperator):
    """
    Delete a tag, and the data files only it still held.

    :param tag_name: The tag to delete. (templated)
    """

    action = core_actions.DeleteTag
    template_fields: Sequence[str] = (*SnapTableBaseOperator.template_fields, "tag_name")

    def __init__(self, *, tag_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(tag_name, str) or not tag_name.strip():
            raise InvalidArgumentError(f"tag_name must be a non-empty string, got {tag_name!r}")
        self.tag_name = tag_name

    def action_arguments(self) -> dict[str, Any]:
        return {"tag_name": self.tag_name}


class PeriodicTagOperator(SnapTableBaseOperator):
    """
    Tag the state at the end of each elapsed period (Paimon's automatic tag creation).

    Unset arguments come from the table options ``tag.creation-period``,
    ``tag.creation-delay``, ``tag.period-formatter`` and ``tag.num-retained-max``.

    :param period: ``"daily"``, ``"hourly"``, ``"two-hours"`` or a duration. (templated)
    :param delay: How long after a period ends its tag may be created (< one period). (templated)
    :param formatter: ``with_dashes``, ``without_dashes`` or ``without_dashes_and_spaces``.
    :param num_retained_max: Keep at most this many periodic tags (oldest deleted). (templated)
    :param catch_up: Create the tags of every missed period, not only the newest.
    :param time_retained: Time to live of the created tags. (templated)
    """

    action = core_actions.CreatePeriodicTags
    template_fields: Sequence[str] = (*SnapTableBaseOperator.template_fields, "period", "delay", "num_retained_max", "time_retained")

    def __init__(
        self,
        *,
        period: Any = None,
        delay: Any = None,
        formatter: str | None = None,
        num_retained_max: int | str | None = None,
        catch_up: bool = False,
        time_retained: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_int("num_retained_max", num_retained_max, minimum=1)
        check_bool("catch_up", catch_up)
        self.period = period
        self.delay = delay
        self.formatter = formatter
        self.num_retained_max = num_retained_max
        self.catch_up = catch_up
        self.time_retained = time_retained

    def action_arguments(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "delay": self.delay,
            "formatter": self.formatter,
            "num_retained_max": self.num_retained_max,
            "catch_up": self.catch_up,
            "time_retained": self.time_retained,
        }


class ExpireTagsOperator(SnapTableBaseOperator):
    """Delete the tags whose time to live has passed (and the files only they held)."""

    action = core_actions.ExpireTags


class ExpireConsumersOperator(SnapTableBaseOperator):
    """Delete consumers not updated for the table option ``consumer.expiration-time``."""

    action = core_actions.ExpireConsumers


class RollbackOperator(SnapTableBaseOperator):
    """
    Make the table's state that of a snapshot, a tag or a time.

    :param snapshot_id: Roll back to this snapshot. (templated)
    :param tag: Or: to this tag. (templated)
    :param as_of: Or: to the latest snapshot at or before this time. (templated)
    :param keep_history: Commit a new snapshot with the target's state instead of discarding
        the later snapshots and tags. (templated)
    :param force: Roll back even if consumers have read past the target (default mode only). (templated)
    """

    action = core_actions.Rollback
    template_fields: Sequence[str] = (*SnapTableBaseOperator.template_fields, "snapshot_id", "tag", "as_of", "keep_history", "force")

    def __init__(
        self,
        *,
        snapshot_id: int | str | None = None,
        tag: str | None = None,
        as_of: Any = None,
        keep_history: bool = False,
        force: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_one_of({"snapshot_id": snapshot_id, "tag": tag, "as_of": as_of}, required=True)
        check_int("snapshot_id", snapshot_id, minimum=1)
        check_bool("keep_history", keep_history)
        check_bool("force", force)
        self.snapshot_id = snapshot_id
        self.tag = tag
        self.as_of = as_of
        self.keep_history = keep_history
        self.force = force

    def action_arguments(self) -> dict[str, Any]:
        return {
            "snapshot_id": self.snapshot_id,
            "tag": self.tag,
            "as_of": self.as_of,
            "keep_history": self.keep_history,
            "force": self.force,
        }


class RemoveOrphanFilesOperator(SnapTableBaseOperator):
    """
    Delete files under the table that nothing references.

    :param older_than: Only files older than this: a time, or a duration back from now
        (``"3 d"``); default 1 day. (templated)
    :param dry_run: List only (the default, as in core): pass ``dry_run=False`` to delete.
    """

    action = core_actions.RemoveOrphanFiles
    template_fields: Sequence[str] = (*SnapTableBaseOperator.template_fields, "older_than")

    def __init__(self, *, older_than: Any = None, dry_run: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_bool("dry_run", dry_run)
        self.older_than = older_than
        self.dry_run = dry_run

    def action_arguments(self) -> dict[str, Any]:
        return {"older_than": self.older_than, "dry_run": self.dry_run}


class CompactOperator(SnapTableBaseOperator):
    """
    Rewrite the small files of each partition into fewer files (a COMPACT snapshot).

    :param partitions: Only these partitions, e.g. ``[{"day": "2026-01-01"}]`` (default: all). (templated)
    :param target_file_size: Files smaller than this are compacted (``"128 mb"``). (templated)
    :param min_file_num: A partition is compacted when it has at least this many small files. (templated)
    """

    action = core_actions.Compact
    template_fields: Sequence[str] = (*SnapTableBaseOperator.template_fields, "partitions", "target_file_size", "min_file_num")

    def __init__(
        self,
        *,
        partitions: list[dict[str, Any]] | str | None = None,
        target_file_size: int | str | None = None,
        min_file_num: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if partitions is not None and not _templated(partitions):
            if isinstance(partitions, dict):
                partitions = [partitions]
            if not isinstance(partitions, (list, tuple)) or not all(isinstance(p, dict) for p in partitions):
                raise InvalidArgumentError(f"partitions must be a list of dicts like [{{'day': '2026-01-01'}}], got {partitions!r}")
            partitions = list(partitions)
        check_int("min_file_num", min_file_num, minimum=2)
        self.partitions = partitions
        self.target_file_size = target_file_size
        self.min_file_num = min_file_num

    def action_arguments(self) -> dict[str, Any]:
        return {"partitions": self.partitions, "target_file_size": self.target_file_size, "min_file_num": self.min_file_num}


class AdvanceConsumerOperator(SnapTableBaseOperator):
    """
    Commit a consumer's position after downstream work succeeded.

    Every snapshot before ``next_snapshot`` counts as read; ``next_snapshot`` and later
    are protected from expiry while the consumer lives. With
    :class:`~airflow_snaptable.sensors.snaptable.NewSnapshotSensor`, pass
    ``"{{ ti.xcom_pull(task_ids='wait')['to_snapshot_id'] + 1 }}"``.

    :param consumer_id: The consumer. (templated)
    :param next_snapshot: The first snapshot not read yet: in ``[earliest, latest + 1]``. (templated)
    """

    action = core_actions.UpdateConsumer
    template_fields: Sequence[str] = (*SnapTableBaseOperator.template_fields, "consumer_id", "next_snapshot")

    def __init__(self, *, consumer_id: str, next_snapshot: int | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(consumer_id, str) or not consumer_id.strip():
            raise InvalidArgumentError(f"consumer_id must be a non-empty string, got {consumer_id!r}")
        if next_snapshot is None:
            raise InvalidArgumentError("next_snapshot is required (the first snapshot the consumer has not read)")
        check_int("next_snapshot", next_snapshot, minimum=1)
        self.consumer_id = consumer_id
        self.next_snapshot = next_snapshot

    def action_arguments(self) -> dict[str, Any]:
        return {"consumer_id": self.consumer_id, "next_snapshot": self.next_snapshot}
