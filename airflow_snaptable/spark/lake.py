"""A lake maintained in one Spark application: the start-up paid once for many tables.

The job (job.py ``--lake-file``) gets a lake document, which holds no credentials::

    {"lake": {"tables": [{"name", "format", "uri"}, ...], "policy": {...},
              "runId": "dag/run", "dryRun": false, "parallel": 4, "mode": "auto"}}

and runs core's :func:`~airflow_snaptable.core.lake.run.maintain_tables` on the tables, exactly as
``snaptable maintain`` runs each table in process (leases, statuses stored with each table, one
table's failure never stopping the others):

- ``mode="executors"``: the table list is spread over the executors
  (``sc.parallelize(tables, n).mapPartitions(...)``), each task maintaining its share on
  ``parallel`` threads. The work scales with the cluster; the executors need the package.
- ``mode="driver"``: the driver maintains every table on ``parallel`` threads (no Python worker
  starts; executors without the package do).
- ``mode="auto"`` (default): the driver for at most :data:`DEFAULT_DRIVER_MAX_TABLES` tables
  (Spark conf ``spark.snaptable.lake.driverMaxTables``), the executors above. Each Python worker
  imports the package before its first table (seconds), which a small lake never earns back:
  100 small tables took 1.0x the in-process time on the driver, 4.9x on two local executors
  (docs/benchmarks.md).

The result is every table's report (``TableReport.to_dict``), sorted by name, each with where its
work ran, ``"ranOn"`` (spark/maintenance.py :func:`~airflow_snaptable.spark.maintenance.ran_on`): on
the driver, in no Spark job; or on the executors, in one task of the lake's one Spark job.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Iterable

from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.lake import LakeTable, Policy, maintain_tables
from airflow_snaptable.core.lake.lease import DEFAULT_LEASE_SECONDS
from airflow_snaptable.core.lake.run import DEFAULT_PARALLEL
from airflow_snaptable.spark.maintenance import ran_on

LAKE_MODES = ("auto", "executors", "driver")
#: ``mode="auto"`` maintains a lake of at most this many tables on the driver.
DEFAULT_DRIVER_MAX_TABLES = 200
#: Tables per Spark task at most (Spark conf ``spark.snaptable.lake.tablesPerTask``), but at least one
#: task per core: a task costs ~0.1 s, a small table ~10 ms.
DEFAULT_TABLES_PER_TASK = 50


@dataclass(frozen=True)
class LakeJob:
    """The lake document, checked before Spark starts."""

    tables: tuple[LakeTable, ...]
    policy: Policy
    run_id: str | None = None
    dry_run: bool = False
    parallel: int = DEFAULT_PARALLEL
    mode: str = "auto"
    lease_seconds: float = DEFAULT_LEASE_SECONDS

    @classmethod
    def from_dict(cls, doc: Any) -> "LakeJob":
        if not isinstance(doc, dict) or not isinstance(doc.get("lake"), dict):
            raise InvalidArgumentError('a lake job is {"lake": {"tables": [...], "policy": {...}, ...}}')
        lake = doc["lake"]
        unknown = sorted(set(lake) - {"tables", "policy", "runId", "dryRun", "parallel", "mode", "leaseSeconds"})
        if unknown:
            raise InvalidArgumentError(f"lake job: unknown key(s) {unknown}")
        if not isinstance(lake.get("tables"), list):
            raise InvalidArgumentError("lake job: tables must be a list of tables")
        mode = lake.get("mode", "auto")
        if mode not in LAKE_MODES:
            raise InvalidArgumentError(f"lake job: mode must be one of {', '.join(LAKE_MODES)}, got {mode!r}")
        parallel = lake.get("parallel", DEFAULT_PARALLEL)
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise InvalidArgumentError(f"lake job: parallel must be an integer >= 1, got {parallel!r}")
        return cls(
            tables=tuple(LakeTable.from_dict(table) for table in lake["tables"]),
            policy=Policy.from_mapping(lake.get("policy")),
            run_id=lake.get("runId"),
            dry_run=lake.get("dryRun", False),
            parallel=parallel,
            mode=mode,
            lease_seconds=lake.get("leaseSeconds", DEFAULT_LEASE_SECONDS),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"lake": {
            "tables": [table.to_dict() for table in self.tables], "policy": self.policy.to_dict(), "runId": self.run_id,
            "dryRun": self.dry_run, "parallel": self.parallel, "mode": self.mode, "leaseSeconds": self.lease_seconds,
        }}


class MaintainShare:
    """The per-partition function: one executor task maintains its share of the tables."""

    def __init__(self, job: LakeJob, storage_options: dict | None, catalog: dict | None):
        self.policy = job.policy.to_dict()  # plain data: pickled to the executors
        self.settings = {"dry_run": job.dry_run, "parallel": job.parallel, "run_id": job.run_id,
                         "lease_seconds": job.lease_seconds}
        self.storage_options = storage_options
        self.catalog = catalog

    def __call__(self, rows: Iterable[dict]) -> Iterable[dict]:
        tables = [LakeTable.from_dict(row) for row in rows]
        if not tables:
            return iter(())
        reports = maintain_tables(tables, Policy.from_mapping(self.policy), storage_options=self.storage_options,
                                  catalog=self.catalog, **self.settings)
        # The whole table's maintenance ran in this task, on this executor.
        where = ran_on(True, True, True, spark_jobs=1, spark_tasks=1)
        return iter([{**report.to_dict(), "ranOn": where} for report in reports])


def run_lake(spark, job: LakeJob, storage_options: dict | None = None, catalog: dict | None = None) -> dict[str, Any]:
    """Maintain the job's tables in this Spark application: ``{"tables": [...], "mode", "sparkTasks", "seconds"}``
    (``seconds``: the maintenance itself, without the application's start-up).

    ``spark``: a SparkSession, or the job's :class:`~airflow_snaptable.spark.job_session.JobSpark`, whose session
    starts only when the tables go to the executors (on the driver they need none)."""
    from airflow_snaptable.spark.job_session import conf_value

    started = time.monotonic()
    mode = job.mode
    if mode == "auto":
        limit = int(conf_value(spark, "spark.snaptable.lake.driverMaxTables", str(DEFAULT_DRIVER_MAX_TABLES)))
        mode = "driver" if len(job.tables) <= limit else "executors"
    if not job.tables:
        return {"tables": [], "mode": mode, "sparkTasks": 0, "seconds": 0.0}
    if mode == "driver":
        reports = maintain_tables(job.tables, job.policy, storage_options=storage_options, catalog=catalog,
                                  dry_run=job.dry_run, parallel=job.parallel, run_id=job.run_id,
                                  lease_seconds=job.lease_seconds)
        where = ran_on()  # everything on the driver, in no Spark job
        return {"tables": [{**report.to_dict(), "ranOn": where} for report in reports], "mode": "driver", "sparkTasks": 0,
                "seconds": round(time.monotonic() - started, 3)}
    from airflow_snaptable.spark.executor_check import ensure_executors_checked

    sc = spark.sparkContext  # the job's JobSpark starts its session here: the tables go to the executors
    ensure_executors_checked(sc)
    per_task = max(1, int(sc.getConf().get("spark.snaptable.lake.tablesPerTask", str(DEFAULT_TABLES_PER_TASK))))
    tasks = max(1, min(len(job.tables), max(math.ceil(len(job.tables) / per_task), sc.defaultParallelism)))
    sc.setJobDescription(f"snaptable: maintain {len(job.tables)} tables in {tasks} tasks")
    try:
        rows = [table.to_dict() for table in job.tables]
        reports = sc.parallelize(rows, tasks).mapPartitions(MaintainShare(job, storage_options, catalog)).collect()
    finally:
        sc.setJobDescription(None)
    return {"tables": sorted(reports, key=lambda r: (r["table"], r["location"])), "mode": "executors", "sparkTasks": tasks,
            "seconds": round(time.monotonic() - started, 3)}
