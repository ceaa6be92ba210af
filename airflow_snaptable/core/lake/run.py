"""Maintaining a whole lake: every policy job on every table of a location (docs/maintenance.md).

:func:`maintain` discovers the tables (core/lake/discovery.py), resolves each one's jobs from the
policy (core/lake/policy.py) and runs them through the existing actions (core/lake/jobs.py):

- tables run on ``parallel`` threads, fed from the streamed discovery (a bounded number waits);
- one table's failure never stops the others: every exception of a job is that job's ``Failed``
  status with its message, and the table's later jobs still run (a table that cannot be opened
  fails each of its enabled jobs with the reason);
- a table is worked on under its lease (core/lake/lease.py): a table another run holds is skipped
  and reported as such (``skipped``), its stored status unchanged;
- resumable: every job is idempotent (an expiry finishes the plans an interrupted one left, orphan
  cleaning and tag jobs converge), so running again after a crash completes the work; a rerun given
  the crashed run's ``run_id`` also skips the jobs that run completed (the status file records each
  job as it completes);
- ``dry_run``: the jobs that can plan without changing anything (snapshot expiry, orphan removal,
  clean) report what they would do; the others are not run; no status, lease or table file is
  written.

:func:`lake_status` reads the stored status of every table: a table never maintained says
``Not_Yet_Run`` for every job; a triggered job is counted against its trigger as it is read.

A table whose jobs all wait for their trigger is left alone: no lease, nothing written (``_Run._waiting``).
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterable

from airflow_snaptable.core.actions.contract import to_jsonable
from airflow_snaptable.core.actions import run_action
from airflow_snaptable.core.errors import InvalidArgumentError, TableNotFoundError
from airflow_snaptable.core.formats.foreign import is_iceberg_uri
from airflow_snaptable.core.lake import lease as leases
from airflow_snaptable.core.lake.discovery import DEFAULT_MAX_DEPTH, UNKNOWN_FORMAT, LakeTable, discover
from airflow_snaptable.core.lake.due import jobs_due
from airflow_snaptable.core.lake.jobs import DRY_RUNNABLE, plan_job
from airflow_snaptable.core.lake.policy import JOBS, Policy, ResolvedJob
from airflow_snaptable.core.lake.report import LakeReport, TableReport
from airflow_snaptable.core.lake.triggers import TableProgress
from airflow_snaptable.core.lineage import table_identity
from airflow_snaptable.core.lake.status import (
    FAILED,
    SUCCESSFUL,
    RunEntry,
    StatusLocation,
    StatusLocator,
    disabled,
    iso_time,
    new_document,
    of_table,
    not_yet_run,
    summarize,
)
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.table import Table

DEFAULT_PARALLEL = 4


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def maintain(
    location: str,
    policy: Policy,
    *,
    storage_options: dict[str, Any] | None = None,
    catalog: dict[str, Any] | None = None,
    dry_run: bool = False,
    parallel: int = DEFAULT_PARALLEL,
    run_id: str | None = None,
    lease_seconds: float = leases.DEFAULT_LEASE_SECONDS,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> LakeReport:
    """Run the policy's jobs on every table ``location`` holds; the report of every table (see the module)."""
    _check_parallel(parallel)
    with _Run.checked(policy, storage_options, catalog, dry_run, run_id, lease_seconds) as run:
        if is_iceberg_uri(location):
            run.locator.shared_storage()  # a catalog without a status location fails here, before any table
        reports = _for_each_table(_tables(location, storage_options, catalog, max_depth), run.maintain_table, parallel)
    names = [report.table for report in reports]
    return LakeReport(reports, run.run_id, dry_run, policy.unmatched(names))


def maintain_table(
    table: LakeTable,
    policy: Policy,
    *,
    storage_options: dict[str, Any] | None = None,
    catalog: dict[str, Any] | None = None,
    dry_run: bool = False,
    run_id: str | None = None,
    lease_seconds: float = leases.DEFAULT_LEASE_SECONDS,
) -> TableReport:
    """One table's jobs, exactly as :func:`maintain` runs them on each table: the unit a DAG maps one
    task onto (``list_tables`` gives the tables)."""
    if not isinstance(table, LakeTable):
        raise InvalidArgumentError(f"table must be a LakeTable (list_tables, LakeTable.from_dict), got {type(table).__name__}")
    with _Run.checked(policy, storage_options, catalog, dry_run, run_id, lease_seconds) as run:
        return run.maintain_table(table)


def maintain_tables(
    tables: Iterable[LakeTable],
    policy: Policy,
    *,
    storage_options: dict[str, Any] | None = None,
    catalog: dict[str, Any] | None = None,
    dry_run: bool = False,
    parallel: int = DEFAULT_PARALLEL,
    run_id: str | None = None,
    lease_seconds: float = leases.DEFAULT_LEASE_SECONDS,
) -> list[TableReport]:
    """Given tables' jobs, exactly as :func:`maintain` runs them on each table, on ``parallel`` threads: the
    unit a Spark application (airflow_snaptable/spark/lake.py) runs on its driver or on each executor's share."""
    _check_parallel(parallel)
    tables = list(tables)
    if not all(isinstance(table, LakeTable) for table in tables):
        raise InvalidArgumentError("tables must be LakeTables (list_tables, LakeTable.from_dict)")
    with _Run.checked(policy, storage_options, catalog, dry_run, run_id, lease_seconds) as run:
        return _for_each_table(tables, run.maintain_table, parallel)


def list_tables(
    location: str, *, storage_options: dict[str, Any] | None = None, catalog: dict[str, Any] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> list[LakeTable]:
    """Every table ``location`` holds, sorted by name (a missing location is an error)."""
    return sorted(_tables(location, storage_options, catalog, max_depth), key=lambda t: (t.name, t.uri))


def lake_status(
    location: str, *, storage_options: dict[str, Any] | None = None, catalog: dict[str, Any] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH, parallel: int = DEFAULT_PARALLEL,
) -> LakeReport:
    """The stored maintenance status of every table ``location`` holds."""
    locator = StatusLocator(storage_options, catalog)
    if is_iceberg_uri(location):
        locator.shared_storage()

    def read(table: LakeTable) -> TableReport:
        report = TableReport(table.name, table.format, table.uri, error=table.problem)
        if table.format == UNKNOWN_FORMAT:
            return report  # discovery could not tell what it is: its problem is all there is to show
        try:
            where = locator.for_table(table)
            doc = where.read() or new_document(table)
            holder = leases.current_holder(where.storage, where.lease_directory)
        except Exception as exc:  # noqa: BLE001 - one table's unreadable status never hides the others'
            report.status_error = f"{type(exc).__name__}: {exc}"
            doc, holder = new_document(table), None
        opened = _OpenedOnce(lambda: Table.open(table.uri, storage_options, catalog=catalog))
        if doc.get("tableId") is not None and _another_table(doc, opened):
            doc = new_document(table)  # the status of a table dropped and re-created at this name is not this one's
        report.jobs = {job: _stored(doc, job, table.format) for job in JOBS}
        _count_against_triggers(report.jobs, opened)
        if holder is not None:
            report.lock = {"owner": holder.owner, "runId": holder.run_id, "expiresAt": iso_time(holder.expires_millis)}
        return report

    return LakeReport(_for_each_table(_tables(location, storage_options, catalog, max_depth), read, parallel))


def _another_table(doc: dict[str, Any], open_table: Callable[[], Table]) -> bool:
    """Is the table now another one than the one ``doc`` is the status of (core/lineage.py)? False when it
    cannot be told (the table cannot be opened: its health says why)."""
    try:
        identity = table_identity(open_table())
    except Exception:  # noqa: BLE001 - the stored status is still worth showing
        return False
    return identity is not None and identity != doc.get("tableId")


def _check_parallel(parallel: Any) -> None:
    if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
        raise InvalidArgumentError(f"parallel must be an integer >= 1, got {parallel!r}")


def _stored(doc: dict[str, Any], job: str, table_format: str) -> dict[str, Any]:
    if table_format not in JOBS[job].formats:
        return disabled(f"not supported on {table_format} tables", None)
    record = doc["jobs"].get(job)
    return dict(record) if isinstance(record, dict) else not_yet_run()


def _count_against_triggers(jobs: dict[str, dict[str, Any]], open_table: Callable[[], Table]) -> None:
    """Each triggered job's stored record, counted against its trigger now (the trigger and mark its last run
    recorded): a run that finds no job due writes nothing (``_Run._waiting``), and a DAG gives such a table
    no task, so how far a job is from due is told when the status is read. The table is opened only when a
    job has a trigger; one that cannot be opened keeps its stored records (its health says why)."""
    triggered = {job: record for job, record in jobs.items()
                 if isinstance(record.get("trigger"), dict) and record.get("status") in (SUCCESSFUL, FAILED)}
    if not triggered:
        return
    try:
        progress = TableProgress(open_table())
        counted = {job: progress.due(record["trigger"], record) for job, record in triggered.items()}
    except Exception:  # noqa: BLE001 - the stored status is still worth showing
        return
    for job, due in counted.items():
        if due.due:
            record = {key: value for key, value in triggered[job].items() if key != "skipped"}
            jobs[job] = {**record, "nextDue": f"now: {due.reason}"}
        else:
            jobs[job] = _not_due(triggered[job], triggered[job]["trigger"], due)


def _tables(location: str, storage_options, catalog, max_depth: int) -> Iterable[LakeTable]:
    if not is_iceberg_uri(location) and catalog is None:
        storage = Storage.from_uri(location, storage_options)
        if not storage.exists(""):
            raise TableNotFoundError(f"location {location!r} does not exist")
    return discover(location, storage_options, catalog, max_depth=max_depth)


def _for_each_table(tables: Iterable[LakeTable], work: Callable[[LakeTable], TableReport], parallel: int) -> list[TableReport]:
    """``work`` on each table on ``parallel`` threads, taking tables from the stream as threads free up."""
    waiting = threading.Semaphore(parallel * 2)
    futures: list[Future] = []
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="snaptable-lake") as pool:
        for table in tables:
            waiting.acquire()
            future = pool.submit(work, table)
            future.add_done_callback(lambda _f: waiting.release())
            futures.append(future)
    return sorted((future.result() for future in futures), key=lambda r: (r.table, r.location))


class _Run:
    """One maintenance run's settings and its lease keeper: used as a context, which stops the keeper at its end."""

    @classmethod
    def checked(cls, policy: Policy, storage_options, catalog, dry_run: bool, run_id: str | None, lease_seconds: float) -> "_Run":
        """A run, its arguments checked before any table is touched."""
        if not isinstance(policy, Policy):
            raise InvalidArgumentError(f"policy must be a loaded Policy (Policy.load / Policy.from_mapping), got {type(policy).__name__}")
        if not isinstance(dry_run, bool):
            raise InvalidArgumentError(f"dry_run must be True or False, got {dry_run!r}")
        if run_id is not None and (not isinstance(run_id, str) or not run_id.strip() or len(run_id) > 200):
            raise InvalidArgumentError(f"run_id must be a non-empty string of at most 200 characters, got {run_id!r}")
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)) or not lease_seconds > 0:
            raise InvalidArgumentError(f"lease_seconds must be a number > 0, got {lease_seconds!r}")
        locator = StatusLocator(storage_options, catalog)
        return cls(policy, locator, storage_options, catalog, dry_run, run_id or new_run_id(), run_id is not None, lease_seconds)

    def __init__(self, policy: Policy, locator: StatusLocator, storage_options, catalog, dry_run: bool, run_id: str,
                 resuming: bool, lease_seconds: float):
        self.policy = policy
        self.locator = locator
        self.storage_options = storage_options
        self.catalog = catalog
        self.dry_run = dry_run
        self.run_id = run_id
        #: The caller named the run: jobs this run id completed already are not run again.
        self.resuming = resuming
        self.lease_seconds = lease_seconds
        self.keeper = leases.LeaseKeeper(lease_seconds)

    def __enter__(self) -> "_Run":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.keeper.close()

    def maintain_table(self, table: LakeTable) -> TableReport:
        report = TableReport(table.name, table.format, table.uri, run_id=self.run_id)
        resolved = self.policy.resolve(table.name)
        if table.problem is not None:
            # Discovery's refusal (a name two tables hold, a directory that cannot be read): nothing is
            # run or written; each job the policy would run fails with the reason.
            report.error = table.problem
            if table.format != UNKNOWN_FORMAT:
                report.jobs = {job: self._failed_or_not_run(resolved[job], table, table.problem) for job in JOBS}
            return report
        try:
            where = self.locator.for_table(table)
        except Exception as exc:  # noqa: BLE001 - one table's failure never stops the others
            report.jobs = {job: self._failed_or_not_run(resolved[job], table, exc) for job in JOBS}
            return report
        doc, report.status_error = _previous(where, table)
        opened = _OpenedOnce(lambda: Table.open(table.uri, self.storage_options, catalog=self.catalog))
        lease = None
        if not self.dry_run:
            waiting = self._waiting(table, resolved, doc, opened)
            if waiting is not None:
                report.jobs = waiting
                return report
            try:
                taken = leases.acquire(where.storage, where.lease_directory, self.run_id, self.lease_seconds)
            except Exception as exc:  # noqa: BLE001
                report.jobs = {job: self._failed_or_not_run(resolved[job], table, exc, "cannot take the table's lease: ")
                               for job in JOBS}
                return report
            if isinstance(taken, leases.Busy):
                report.jobs = {job: _stored(doc, job, table.format) for job in JOBS}
                report.skipped = {"reason": taken.describe(), **taken.to_dict()}
                return report
            lease = taken
            self.keeper.add(lease)
        try:
            if lease is not None:
                # Read again under the lease: a run that finished between the first read and the lease
                # wrote its jobs and its run entry, which this run continues rather than overwrites.
                doc, report.status_error = _previous(where, table)
            self._run_jobs(table, resolved, where, doc, lease, report, opened)
        finally:
            if lease is not None:
                self.keeper.discard(lease)
                lease.release()
        return report

    def _waiting(self, table: LakeTable, resolved: dict[str, ResolvedJob], doc: dict,
                 opened: "_OpenedOnce") -> dict[str, dict] | None:
        """Each job's record when no job is due (core/lake/due.py), else None.

        A table whose jobs all wait for their trigger is left alone: no lease, nothing written (the
        status keeps each job's last run; :func:`lake_status` counts against the trigger when read). It is
        decided without the lease: a run racing on the table only ever runs jobs (moving their marks
        forward) or fails them, which makes them due for the next run; a commit landing after the count
        is counted by the next run, as if it had landed a moment later.
        """
        found = jobs_due(table, resolved, read_status=lambda: doc, open_table=opened)
        if found.due:
            return None
        records = {}
        for name in JOBS:
            job, previous = resolved[name], _record(doc, name)
            records[name] = self._left_alone(table, job, previous) or _not_due(previous, job.trigger, found.counted[name])
        return records

    def _left_alone(self, table: LakeTable, job: ResolvedJob, previous: dict | None) -> dict | None:
        """The record of a job that does not run whatever its trigger says (unsupported, disabled, completed
        by this run before it was resumed), else None."""
        if table.format not in JOBS[job.job].formats:
            return disabled(f"not supported on {table.format} tables", previous)
        if not job.enabled:
            return disabled(job.disabled_reason or "disabled by the policy", previous)
        if (self.resuming and previous is not None and previous.get("runId") == self.run_id
                and previous.get("status") == SUCCESSFUL):
            return {**previous, "resumed": True}
        return None

    def _run_jobs(self, table: LakeTable, resolved: dict[str, ResolvedJob], where: StatusLocation, doc: dict,
                  lease: leases.Lease | None, report: TableReport, open_table: "_OpenedOnce") -> None:
        opened, open_error = None, None
        try:
            opened = open_table()
        except Exception as exc:  # noqa: BLE001 - reported on each enabled job
            open_error = exc
        progress = TableProgress(opened) if opened is not None else None
        if progress is not None:
            of_table(doc, table, progress.lineage.identity())  # a re-created table's status starts anew
        entry = RunEntry(self.run_id, int(time.time() * 1000))
        runs = [r for r in doc["runs"] if r.get("runId") != self.run_id]
        for job in JOBS:
            previous = _record(doc, job)
            record, ran = self._job(table, resolved[job], opened, open_error, lease, previous, progress)
            if ran and progress is not None and isinstance(record.get("snapshotCommitted"), int):
                progress.committed(record["snapshotCommitted"])  # the later jobs' triggers count from it
            report.jobs[job] = record
            entry.jobs[job] = record["status"]
            if self.dry_run:
                continue
            doc["jobs"][job] = record
            if ran and _changed_something(record) and _still_held(lease):
                # Recorded as it completes: a crash loses at most the job in flight, and jobs that changed
                # nothing (cheap to run again) wait for the one write at the end.
                doc["runs"] = runs + [entry.to_dict()]
                _write(where, doc, report)
        if not self.dry_run and _still_held(lease):
            entry.finished_millis = int(time.time() * 1000)
            doc["runs"] = runs + [entry.to_dict()]
            _write(where, doc, report)

    def _job(self, table: LakeTable, job: ResolvedJob, opened, open_error, lease, previous,
             progress: TableProgress | None = None) -> tuple[dict, bool]:
        """The job's status record, and whether it ran."""
        left = self._left_alone(table, job, previous)
        if left is not None:
            return left, False
        started = time.monotonic()
        record: dict[str, Any] = {"runId": self.run_id}
        mark = None
        try:
            if lease is not None:
                lease.check()
            if open_error is not None:
                raise open_error
            if job.trigger is not None and progress is not None:
                due = progress.due(job.trigger, previous)
                if not due.due:
                    return _not_due(previous, job.trigger, due), False
                mark = progress.mark()  # before the job: what it saw (a compaction's own snapshot is taken below)
                record.update(trigger=dict(job.trigger), dueBecause=due.reason)
            plan = plan_job(job, opened, dry_run=self.dry_run)
            record["arguments"] = plan.arguments
            if plan.notes:
                record["notes"] = plan.notes
            if self.dry_run and job.job not in DRY_RUNNABLE:
                return {**not_yet_run(), **record, "dryRun": True,
                        "reason": f"{job.job} has no dry run: a real run would run it"}, False
            result = run_action(plan.action, table=opened)["result"]
            told = plan.result_notes(result) if plan.result_notes is not None else []
            if told:
                record["notes"] = [*plan.notes, *told]
        except Exception as exc:  # noqa: BLE001 - one job's failure never stops the others
            return {"status": FAILED, "lastRunTimestamp": iso_time(int(time.time() * 1000)),
                    "failureMessage": _message(exc), **record, "durationMs": _elapsed(started)}, True
        done = {"status": SUCCESSFUL, "lastRunTimestamp": iso_time(int(time.time() * 1000)), "failureMessage": None,
                **record, "durationMs": _elapsed(started), **summarize(job.job, to_jsonable(result))}
        if mark is not None:
            if isinstance(done.get("snapshotCommitted"), int):
                mark = progress.mark_of(done["snapshotCommitted"])  # its own commit does not count toward its next run
            done.update(lastSnapshot=mark, nextDue=_next_due(job.trigger))
        if self.dry_run:
            done["dryRun"] = True
        return done, True

    def _failed_or_not_run(self, job: ResolvedJob, table: LakeTable, exc: BaseException | str, prefix: str = "") -> dict:
        if table.format not in JOBS[job.job].formats:
            return disabled(f"not supported on {table.format} tables", None)
        if not job.enabled:
            return disabled(job.disabled_reason or "disabled by the policy", None)
        return {"status": FAILED, "lastRunTimestamp": iso_time(int(time.time() * 1000)),
                "failureMessage": prefix + (exc if isinstance(exc, str) else _message(exc)), "runId": self.run_id}


class _OpenedOnce:
    """A table of the run, opened on first use and then handed out as it is: the trigger count before the
    lease (``_Run._waiting``) and the jobs after it share one open, and a table that could not be opened
    fails the same way for both (its error is not retried within the run).

    The jobs may thus work on a table opened just before the lease. Each action reads the table's state
    itself (an Iceberg action refreshes its metadata before it commits); a trigger counts what the table
    held when it was opened, so a commit landing after that is counted by the next run, as any commit
    landing after the count is.
    """

    def __init__(self, open_table: Callable[[], Table]):
        self._open_table = open_table
        self._table: Table | None = None
        self._error: Exception | None = None

    def __call__(self) -> Table:
        if self._error is not None:
            raise self._error
        if self._table is None:
            try:
                self._table = self._open_table()
            except Exception as exc:
                self._error = exc
                raise
        return self._table


def _previous(where: StatusLocation, table: LakeTable) -> tuple[dict, str | None]:
    """The stored status document to continue, or a new one (an unreadable one is replaced, and said so)."""
    try:
        return where.read() or new_document(table), None
    except Exception as exc:  # noqa: BLE001 - the status is ours, not the table's: it never blocks maintenance
        return new_document(table), f"{type(exc).__name__}: {exc}"


def _record(doc: dict, job: str) -> dict | None:
    record = doc["jobs"].get(job)
    return record if isinstance(record, dict) else None


def _not_due(previous: dict | None, trigger: dict, due) -> dict[str, Any]:
    """A triggered job left alone: its last run stays, and the status says why and when it is due."""
    record = {key: value for key, value in (previous or {}).items() if key not in ("resumed", "dryRun")}
    return {**record, "trigger": dict(trigger), "skipped": due.reason, "nextDue": due.next_due}


def _next_due(trigger: dict) -> str:
    parts = [f"{count} new {'snapshot(s)' if key == 'snapshots' else 'data file(s)'}" for key, count in trigger.items()]
    return "after " + " or ".join(parts)


def _changed_something(record: dict[str, Any]) -> bool:
    """Did the job change the table (or fail, which the status must say even if the run dies next)?"""
    if record.get("status") == FAILED:
        return True
    deleted = sum((record.get("filesDeleted") or {}).values())
    listed = [record.get(key) for key in ("tagsCreated", "tagsDeleted", "consumersExpired")]
    return bool(record.get("snapshotsExpired") or deleted or any(listed) or record.get("snapshotCommitted"))


def _still_held(lease: leases.Lease | None) -> bool:
    """A run that lost its lease no longer writes the table's status: the new holder owns it."""
    return lease is not None and lease.lost is None


def _write(where: StatusLocation, doc: dict, report: TableReport) -> None:
    try:
        where.write(doc)
    except Exception as exc:  # noqa: BLE001 - the jobs ran; the report still says what they did
        report.status_error = f"cannot write the status: {type(exc).__name__}: {exc}"


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _elapsed(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
