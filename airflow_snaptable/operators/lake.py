"""A whole lake maintained by policy in one DAG (docs/maintenance.md, "In Airflow").

:func:`lake_maintenance_group` is a TaskGroup of two tasks: ``list_tables`` finds the tables of a
location when the DAG runs (core/lake/discovery.py), and ``maintain_table`` is mapped over them
(dynamic task mapping): one task per table, running the policy's jobs on it in the task's process
through core's ``maintain_table``, exactly as ``snaptable maintain`` does for each table.

- The mapped tasks honour a ``pool`` (and ``max_active_tis_per_dagrun``): how many tables are
  maintained at once is Airflow's to schedule.
- Each task's run id is ``<dag id>/<run id>``: a retry of the task, or of the DAG run, skips the
  jobs the first try completed on its table (core/lake/run.py).
- A task fails when a job on its table failed (``fail_on_job_failure``), after its status was stored;
  a table another run holds is skipped, and the task succeeds saying so.
- Each table maintained gets an asset event, through the asset alias :data:`LAKE_ASSET_ALIAS`
  (the table's asset is ``snaptable://...``, assets/snaptable.py), with each job's status as extra;
  OpenLineage sees the table as input and output, altered when a job deleted or rewrote files.

With ``runner="spark"`` the group pays Spark's start-up once per lake, not once per table:
``list_tables`` gives the tables in chunks (one chunk by default, ``tables_per_submit`` each
otherwise) and ``maintain_tables`` (:class:`SnapTableMaintainLakeOnSparkOperator`) is mapped over
the chunks, each one spark-submit of the maintenance job running core's ``maintain_tables`` in one
Spark application (airflow_snaptable/spark/lake.py). Its results, asset events and lineage are
per table, as above.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import Asset, AssetAlias, BaseOperator, TaskGroup
from airflow.sdk.exceptions import AirflowException

from airflow_snaptable.assets.snaptable import table_asset_uri
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.formats.foreign import is_iceberg_uri
from airflow_snaptable.core.lake import LakeTable, Policy, list_tables, maintain_table
from airflow_snaptable.core.lake.discovery import DEFAULT_MAX_DEPTH
from airflow_snaptable.core.lake.run import DEFAULT_PARALLEL
from airflow_snaptable.core.lake.report import describe, failed_in_run
from airflow_snaptable.hooks.snaptable import DEFAULT_CONN_ID, SnapTableHook
from airflow_snaptable.operators.links import LakeHealthLink, TableTimelineLink
from airflow_snaptable.operators.task_errors import errors_naming_task
from airflow_snaptable.hooks.spark_submit import RunnerSettings

if TYPE_CHECKING:
    from airflow.sdk import Context

#: The asset alias every table maintained by a lake DAG gets its asset event through.
LAKE_ASSET_ALIAS = "snaptable-lake-maintenance"


class _LakeLocation:
    """A location (a full URI, a path under the connection's root, or ``iceberg://...``) with the
    connection's storage options and catalog properties."""

    def __init__(self, hook: SnapTableHook, location: str):
        if not isinstance(location, str) or not location.strip():
            raise InvalidArgumentError(f"location must be a non-empty string, got {location!r}")
        location = location.strip()
        self.hook = hook
        if is_iceberg_uri(location):
            self.uri, self.storage_options = location, None
            self.catalog = hook.settings.catalog_for(location, hook.snaptable_conn_id)
        else:
            self.uri = hook.table_uri(location)
            self.storage_options, self.catalog = hook.storage_options(self.uri), None

    def for_table(self, table: LakeTable) -> tuple[dict | None, dict | None]:
        """(storage options, catalog properties) of one of its tables."""
        if is_iceberg_uri(table.uri):
            return None, self.hook.settings.catalog_for(table.uri, self.hook.snaptable_conn_id)
        return self.hook.storage_options(table.uri), None


class SnapTableListLakeTablesOperator(BaseOperator):
    """
    The tables of a lake location, as a list for ``maintain_table`` to be mapped over (XCom).

    :param location: A directory or fsspec URL holding tables anywhere below it (this package's
        tables, Paimon warehouses), a path under the connection's root, or ``iceberg://`` /
        ``iceberg://<namespace>`` with the connection's extra ``catalog``. (templated)
    :param snaptable_conn_id: The snaptable connection. (templated)
    :param max_depth: Levels below a directory location tables may sit at.
    :param policy: The lake policy (a mapping or a policy file's path). Given, only the tables with a job
        due are listed: a table whose jobs all have a ``trigger`` that is not reached gets no task
        (core/lake/due.py). (templated)
    :param chunk_size: None: the list of tables; 0: one list holding every table; N: lists of at most N
        tables (what a Spark application maintains at once).
    """

    template_fields: Sequence[str] = ("location", "snaptable_conn_id", "policy")
    ui_color = "#c9e4f6"
    operator_extra_links = (LakeHealthLink(),)

    def __init__(self, *, location: str, snaptable_conn_id: str | None = DEFAULT_CONN_ID, max_depth: int = DEFAULT_MAX_DEPTH,
                 policy: Any = None, chunk_size: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_lake_arguments(self.task_id, location, policy, policy_required=False)
        if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 0):
            raise InvalidArgumentError(f"{self.task_id}: chunk_size must be None or an integer >= 0, got {chunk_size!r}")
        self.location = location
        self.snaptable_conn_id = snaptable_conn_id
        self.max_depth = max_depth
        self.policy = policy
        self.chunk_size = chunk_size

    def execute(self, context: Context) -> list[dict[str, str]] | list[list[dict[str, str]]]:
        with errors_naming_task(self.task_id):
            return self._execute(context)

    def _execute(self, context: Context) -> list[dict[str, str]] | list[list[dict[str, str]]]:
        from airflow_snaptable.core.lake.due import table_due

        where = _LakeLocation(SnapTableHook(snaptable_conn_id=self.snaptable_conn_id), self.location)
        tables = list_tables(where.uri, storage_options=where.storage_options, catalog=where.catalog, max_depth=self.max_depth)
        self.log.info("%d table(s) in %s", len(tables), where.uri)
        if self.policy is not None:
            policy = _load_policy(self.policy)
            due = []
            for table in tables:
                storage_options, catalog = where.for_table(table)
                found = table_due(table, policy, storage_options=storage_options, catalog=catalog)
                if found.due:
                    due.append(table)
                else:
                    self.log.info("%s not due: %s", table.name, "; ".join(f"{j}: {r}" for j, r in found.reasons.items()))
            self.log.info("%d of %d table(s) due", len(due), len(tables))
            tables = due
        listed = [table.to_dict() for table in tables]
        if self.chunk_size is None:
            return listed
        size = self.chunk_size or max(1, len(listed))
        return [listed[start:start + size] for start in range(0, len(listed), size)]


class SnapTableMaintainTableOperator(BaseOperator):
    """
    Run a lake policy's jobs on one table (core/lake/): map it over ``SnapTableListLakeTablesOperator``.

    :param table: The table, as ``list_tables`` gives it (``{"name", "format", "uri"}``, and ``"problem"`` when discovery refused it: the task then fails with it). (templated)
    :param policy: The policy: a mapping (checked when the DAG is parsed) or the path of a JSON or YAML
        policy file (read when the task runs). (templated)
    :param location: The lake location the table was listed from, for its connection settings. (templated)
    :param snaptable_conn_id: The snaptable connection. (templated)
    :param dry_run: Report what the jobs would do; change nothing.
    :param fail_on_job_failure: Fail the task when a job on the table failed (its status is stored first).
    :param lake_run_id: The maintenance run's id (default ``<dag id>/<run id>``: a retry skips the jobs
        the first try completed). (templated)
    """

    template_fields: Sequence[str] = ("table", "policy", "location", "snaptable_conn_id", "lake_run_id")
    ui_color = "#c9e4f6"
    operator_extra_links = (TableTimelineLink(), LakeHealthLink())

    def __init__(
        self,
        *,
        table: Any,
        policy: Any,
        location: str,
        snaptable_conn_id: str | None = DEFAULT_CONN_ID,
        dry_run: bool = False,
        fail_on_job_failure: bool = True,
        lake_run_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("outlets", [AssetAlias(LAKE_ASSET_ALIAS)])
        super().__init__(**kwargs)
        _check_lake_arguments(self.task_id, location, policy, dry_run=dry_run, fail_on_job_failure=fail_on_job_failure)
        self.table = table
        self.policy = policy
        self.location = location
        self.snaptable_conn_id = snaptable_conn_id
        self.dry_run = dry_run
        self.fail_on_job_failure = fail_on_job_failure
        self.lake_run_id = lake_run_id
        self._lineage: tuple[str, bool] | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        with errors_naming_task(self.task_id):
            return self._execute(context)

    def _execute(self, context: Context) -> dict[str, Any]:
        table = LakeTable.from_dict(self.table)
        where = _LakeLocation(SnapTableHook(snaptable_conn_id=self.snaptable_conn_id), self.location)
        storage_options, catalog = where.for_table(table)
        run_id = self.lake_run_id or f"{self.dag_id}/{context['run_id']}"
        report = maintain_table(table, _load_policy(self.policy), storage_options=storage_options, catalog=catalog,
                                dry_run=self.dry_run, run_id=run_id)
        for job, record in report.jobs.items():
            if record["status"] != "Disabled":
                self.log.info("%s %s: %s %s", table.name, job, record["status"], record.get("failureMessage") or describe(record) or "")
        if report.error is not None:  # discovery's refusal (core/lake/discovery.py): nothing ran, no event
            self.log.error("%s (%s) is not maintained: %s", table.name, table.uri, report.error)
            if self.fail_on_job_failure:
                raise AirflowException(f"{table.name} ({table.uri}) is not maintained: {report.error}")
        if report.skipped is not None:
            self.log.warning("%s skipped: %s", table.name, report.skipped.get("reason"))
        elif not self.dry_run and report.error is None:
            _asset_event(self, context, table, report.jobs)
        self._lineage = (table.uri, any(_changed(record) for record in report.jobs.values()))
        if report.failed and self.fail_on_job_failure:
            failed = {job: record["failureMessage"] for job, record in report.failed_jobs.items()}
            raise AirflowException(f"{len(failed)} job(s) failed on {table.name}: {failed}")
        return report.to_dict()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The table as input and output dataset; ALTERed when a job deleted or rewrote files."""
        from airflow_snaptable.operators.lineage import operator_lineage

        if self._lineage is None:
            return None
        uri, changed = self._lineage
        return operator_lineage("maintain-table", uri, None, change="ALTER" if changed else None)


class SnapTableMaintainLakeOnSparkOperator(BaseOperator):
    """
    Run a lake policy's jobs on many tables in ONE Spark application (spark-submit of the maintenance job,
    airflow_snaptable/spark/lake.py): map it over ``SnapTableListLakeTablesOperator(chunk_size=...)``.

    Each table is maintained exactly as :class:`SnapTableMaintainTableOperator` does it (its status stored
    with it, a failed job failing only that table), and gets its asset event and lineage.

    :param tables: The tables, as ``list_tables`` gives them. (templated)
    :param policy: The policy: a mapping (checked when the DAG is parsed) or a policy file's path. (templated)
    :param location: The lake location the tables were listed from, for its connection settings. (templated)
    :param snaptable_conn_id: The snaptable connection. (templated)
    :param dry_run: Report what the jobs would do; change nothing.
    :param fail_on_job_failure: Fail the task when a job failed on any table (after every table ran).
    :param lake_run_id: The maintenance run's id (default ``<dag id>/<run id>``). (templated)
    :param parallel: Tables maintained at once per Spark task (``spark_lake_mode="executors"``) or on the driver.
    :param spark_lake_mode: ``"executors"``: the tables spread over the executors (they need the package);
        ``"driver"``: maintained on the driver's threads; ``"auto"``: the driver for a lake of at most 200
        tables (``spark.snaptable.lake.driverMaxTables``), the executors above.
    :param spark_conn_id: The Spark connection (host = master).
    :param spark_conf: Spark conf; keys that look secret are masked and handed over privately. (templated)
    :param spark_submit_kwargs: More ``SparkSubmitHook`` arguments, checked when the DAG is parsed.
    """

    template_fields: Sequence[str] = ("tables", "policy", "location", "snaptable_conn_id", "lake_run_id", "spark_conf")
    template_fields_renderers = {"spark_conf": "json"}
    ui_color = "#c9e4f6"

    def __init__(
        self,
        *,
        tables: Any,
        policy: Any,
        location: str,
        snaptable_conn_id: str | None = DEFAULT_CONN_ID,
        dry_run: bool = False,
        fail_on_job_failure: bool = True,
        lake_run_id: str | None = None,
        parallel: int = DEFAULT_PARALLEL,
        spark_lake_mode: str = "auto",
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        spark_submit_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("outlets", [AssetAlias(LAKE_ASSET_ALIAS)])
        super().__init__(**kwargs)
        _check_lake_arguments(self.task_id, location, policy, dry_run=dry_run, fail_on_job_failure=fail_on_job_failure,
                              spark=(spark_lake_mode, parallel))
        RunnerSettings("spark", spark_conn_id, spark_conf, spark_submit_kwargs)  # checked when the DAG is parsed
        self.tables = tables
        self.policy = policy
        self.location = location
        self.snaptable_conn_id = snaptable_conn_id
        self.dry_run = dry_run
        self.fail_on_job_failure = fail_on_job_failure
        self.lake_run_id = lake_run_id
        self.parallel = parallel
        self.spark_lake_mode = spark_lake_mode
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf
        self.spark_submit_kwargs = spark_submit_kwargs
        self._runner = None
        self._lineage: list[tuple[str, bool]] = []

    def _do_render_template_fields(self, *args: Any, **kwargs: Any) -> None:
        from airflow_snaptable.hooks.spark_secrets import mask_secret_conf

        # Airflow renders a task, mapped or not, through this method; the rendered fields are stored after
        # it: secret-looking spark_conf values are registered with the secrets masker first, so they show as ***.
        super()._do_render_template_fields(*args, **kwargs)
        mask_secret_conf(self.spark_conf, warn=False)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_snaptable.hooks.spark_submit import SparkSubmitRunner
        from airflow_snaptable.spark.lake import LakeJob

        if not isinstance(self.tables, list):
            raise InvalidArgumentError(f"{self.task_id}: tables must be a list of tables (list_tables), got {type(self.tables).__name__}")
        tables = tuple(LakeTable.from_dict(table) for table in self.tables)
        policy = _load_policy(self.policy)
        where = _LakeLocation(SnapTableHook(snaptable_conn_id=self.snaptable_conn_id), self.location)
        job = LakeJob(tables, policy, self.lake_run_id or f"{self.dag_id}/{context['run_id']}", self.dry_run,
                      self.parallel, self.spark_lake_mode)
        self.log.info("Maintaining %d table(s) of %s in one Spark application (%s)", len(tables), where.uri, self.spark_lake_mode)
        self._runner = SparkSubmitRunner(RunnerSettings("spark", self.spark_conn_id, self.spark_conf, self.spark_submit_kwargs))
        try:
            done = self._runner.run_lake(job.to_dict(), where.storage_options, where.catalog)
        finally:
            self._runner = None
        failed: dict[str, dict[str, str]] = {}
        for doc in done["tables"]:
            for job_name, record in doc["jobs"].items():
                if record["status"] != "Disabled":
                    self.log.info("%s %s: %s %s", doc["table"], job_name, record["status"],
                                  record.get("failureMessage") or describe(record) or "")
            for job_name, record in failed_in_run(doc, job.run_id).items():  # this run's failures, not a skipped table's
                failed.setdefault(doc["table"], {})[job_name] = record.get("failureMessage")
            if doc.get("skipped") is not None:
                self.log.warning("%s skipped: %s", doc["table"], doc["skipped"].get("reason"))
            elif not self.dry_run and doc.get("error") is None:
                _asset_event(self, context, LakeTable(doc["table"], doc["format"], doc["location"]), doc["jobs"])
            self._lineage.append((doc["location"], any(_changed(record) for record in doc["jobs"].values())))
        if failed and self.fail_on_job_failure:
            raise AirflowException(f"jobs failed on {len(failed)} of {len(done['tables'])} table(s): {failed}")
        return done

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Every table as input and output dataset; ALTERed when a job deleted or rewrote files."""
        from airflow.providers.openlineage.extractors import OperatorLineage

        from airflow_snaptable.operators.lineage import operator_lineage

        if not self._lineage:
            return None
        each = [operator_lineage("maintain-table", uri, None, change="ALTER" if changed else None) for uri, changed in self._lineage]
        return OperatorLineage(inputs=[d for one in each for d in one.inputs], outputs=[d for one in each for d in one.outputs])

    def on_kill(self) -> None:
        if self._runner is not None:
            self._runner.kill()


def _load_policy(policy: Any) -> Policy:
    """The task's policy: a mapping given in the DAG, or a policy file's path read when the task runs."""
    return Policy.from_mapping(policy) if isinstance(policy, dict) else Policy.load(policy)


def _check_lake_arguments(task_id: str | None, location: Any, policy: Any, *, policy_required: bool = True,
                          dry_run: Any = False, fail_on_job_failure: Any = True,
                          spark: tuple[Any, Any] | None = None) -> None:
    """The arguments the lake tasks and :func:`lake_maintenance_group` share, checked when the DAG is parsed
    (a mapped task's constructor runs only when the DAG runs): ``spark`` is ``(spark_lake_mode, parallel)``."""
    named = f"{task_id}: " if task_id else ""
    if not isinstance(location, str) or not location.strip():
        raise InvalidArgumentError(f"{named}location must be a non-empty string, got {location!r}")
    if isinstance(policy, dict):
        with errors_naming_task(task_id) if task_id else contextlib.nullcontext():
            Policy.from_mapping(policy)  # a bad policy fails the DAG's parsing, not a run
    elif (policy is not None or policy_required) and (not isinstance(policy, str) or not policy.strip()):
        raise InvalidArgumentError(f"{named}policy must be a mapping or the path of a policy file, got {policy!r}")
    if not isinstance(dry_run, bool) or not isinstance(fail_on_job_failure, bool):
        raise InvalidArgumentError(f"{named}dry_run and fail_on_job_failure must be True or False")
    if spark is not None:
        from airflow_snaptable.spark.lake import LAKE_MODES

        spark_lake_mode, parallel = spark
        if spark_lake_mode not in LAKE_MODES:
            raise InvalidArgumentError(f"{named}spark_lake_mode must be one of {', '.join(LAKE_MODES)}, got {spark_lake_mode!r}")
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise InvalidArgumentError(f"{named}parallel must be an integer >= 1, got {parallel!r}")


def _asset_event(task: BaseOperator, context: Context, table: LakeTable, jobs: dict[str, dict]) -> None:
    """The table's asset event through the lake alias, with each job's status."""
    events = context.get("outlet_events") if hasattr(context, "get") else None
    if events is None:
        return
    extra = {"table": table.name, "format": table.format, "jobs": {job: record["status"] for job, record in jobs.items()}}
    for outlet in task.outlets or []:
        if isinstance(outlet, AssetAlias):
            events[outlet].add(Asset(uri=table_asset_uri(table.uri), name=table_asset_uri(table.uri)), extra=extra)


def _changed(record: dict[str, Any]) -> bool:
    deleted = sum((record.get("filesDeleted") or {}).values())
    return bool(record.get("snapshotsExpired") or deleted or record.get("snapshotCommitted"))


def lake_maintenance_group(
    *,
    location: str,
    policy: Any,
    group_id: str = "lake_maintenance",
    snaptable_conn_id: str | None = DEFAULT_CONN_ID,
    pool: str | None = None,
    max_active_tis_per_dagrun: int | None = None,
    dry_run: bool = False,
    fail_on_job_failure: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    runner: str = "local",
    tables_per_submit: int | None = None,
    spark_lake_mode: str = "auto",
    parallel: int = DEFAULT_PARALLEL,
    spark_conn_id: str = "spark_default",
    spark_conf: dict[str, Any] | None = None,
    spark_submit_kwargs: dict[str, Any] | None = None,
    **task_kwargs: Any,
) -> TaskGroup:
    """A TaskGroup maintaining every table of ``location`` by ``policy``: ``list_tables``, then one
    mapped ``maintain_table`` task per table (see the module). Use it inside a ``with DAG(...)`` block.

    ``runner="spark"``: one mapped ``maintain_tables`` task per chunk of ``tables_per_submit`` tables
    (default: one for the whole lake), each one spark-submit (:class:`SnapTableMaintainLakeOnSparkOperator`,
    which takes ``spark_lake_mode``, ``parallel``, ``spark_conn_id``, ``spark_conf``, ``spark_submit_kwargs``).

    ``task_kwargs`` go to both tasks (``retries``, ``execution_timeout``, ...); ``pool`` and
    ``max_active_tis_per_dagrun`` to the mapped tasks.
    """
    RunnerSettings(runner, spark_conn_id, spark_conf, spark_submit_kwargs)
    if tables_per_submit is not None and (isinstance(tables_per_submit, bool) or not isinstance(tables_per_submit, int)
                                          or tables_per_submit < 1):
        raise InvalidArgumentError(f"tables_per_submit must be None or an integer >= 1, got {tables_per_submit!r}")
    # Mapped tasks are made when the DAG runs: their arguments are checked when it is parsed.
    _check_lake_arguments(None, location, policy, dry_run=dry_run, fail_on_job_failure=fail_on_job_failure,
                          spark=(spark_lake_mode, parallel) if runner == "spark" else None)
    # The alias is declared here, not only in __init__ (which mapped tasks run when the DAG runs): the
    # DAG's serialized form must name it, or the tables' asset events never land.
    mapped: dict[str, Any] = {"outlets": [*task_kwargs.pop("outlets", []), AssetAlias(LAKE_ASSET_ALIAS)]}
    if pool is not None:
        mapped["pool"] = pool
    if max_active_tis_per_dagrun is not None:
        mapped["max_active_tis_per_dagrun"] = max_active_tis_per_dagrun
    with TaskGroup(group_id) as group:
        listed = SnapTableListLakeTablesOperator(
            task_id="list_tables", location=location, snaptable_conn_id=snaptable_conn_id, max_depth=max_depth,
            policy=policy, chunk_size=(tables_per_submit or 0) if runner == "spark" else None, **task_kwargs
        )
        if runner == "spark":
            SnapTableMaintainLakeOnSparkOperator.partial(
                task_id="maintain_tables", policy=policy, location=location, snaptable_conn_id=snaptable_conn_id,
                dry_run=dry_run, fail_on_job_failure=fail_on_job_failure, parallel=parallel, spark_lake_mode=spark_lake_mode,
                spark_conn_id=spark_conn_id, spark_conf=spark_conf, spark_submit_kwargs=spark_submit_kwargs,
                map_index_template="{{ task.tables | length }} tables from {{ task.tables[0]['name'] }}",
                **mapped, **task_kwargs,
            ).expand(tables=listed.output)
            return group
        SnapTableMaintainTableOperator.partial(
            task_id="maintain_table", policy=policy, location=location, snaptable_conn_id=snaptable_conn_id,
            dry_run=dry_run, fail_on_job_failure=fail_on_job_failure, map_index_template="{{ task.table['name'] }}",
            **mapped, **task_kwargs,
        ).expand(table=listed.output)
    return group
