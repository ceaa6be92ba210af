"""What a lake run reports: every table's jobs (core/lake/run.py), as JSON and as rows for people."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_snaptable.core.lake.status import DISABLED, FAILED

def failed_in_run(table: dict[str, Any], run_id: str | None = None) -> dict[str, dict[str, Any]]:
    """The jobs of ``table`` (a :class:`TableReport` as JSON) that failed in the run ``run_id``: exit code 1 and a
    failed Airflow task mean a job failed in *this* run. A table the run skipped (another run held its lease) shows
    its stored records, which may hold an older run's failure: none of them is this run's. ``run_id`` None: every
    failed job (the stored status)."""
    if table.get("skipped") is not None:
        return {}
    failed = {name: job for name, job in table["jobs"].items()
              if job.get("status") == FAILED and (run_id is None or job.get("runId") == run_id)}
    if table.get("error") is not None and not failed:
        # Discovery refused the table in this very run (a name two tables hold, an unreadable directory).
        failed["*"] = {"status": FAILED, "failureMessage": table["error"]}
    return failed


@dataclass
class TableReport:
    """One table's jobs after a run (or as stored, for :func:`lake_status`)."""

    table: str
    format: str
    location: str
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Why the run left the table alone (its lease is held by another run), with the holder.
    skipped: dict[str, Any] | None = None
    #: A problem with the table's status file itself (unreadable: the run started a new one).
    status_error: str | None = None
    #: The run holding the table's lease now (:func:`lake_status`: it is being maintained).
    lock: dict[str, Any] | None = None
    #: Why the table is not maintained at all (discovery's ``LakeTable.problem``: its name is another
    #: table's too, its directory cannot be read): a failure of every run that finds it.
    error: str | None = None
    #: The run that made this report (None: the stored status, :func:`lake_status`).
    run_id: str | None = None

    @property
    def failed_jobs(self) -> dict[str, dict[str, Any]]:
        """The jobs that failed (:func:`failed_in_run`)."""
        return failed_in_run(self.to_dict(), self.run_id)

    @property
    def failed(self) -> bool:
        """Did a job fail (in this run, for a run's report): what exit code 1 and a failed Airflow task mean."""
        return bool(self.failed_jobs)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"table": self.table, "format": self.format, "location": self.location, "jobs": self.jobs}
        if self.skipped is not None:
            doc["skipped"] = self.skipped
        if self.status_error is not None:
            doc["statusError"] = self.status_error
        if self.lock is not None:
            doc["lock"] = self.lock
        if self.error is not None:
            doc["error"] = self.error
        return doc


@dataclass
class LakeReport:
    """Every table of a location, sorted by name."""

    #: The columns of :meth:`rows`.
    COLUMNS: ClassVar[tuple[str, ...]] = ("table", "format", "job", "status", "last run (UTC)", "detail")

    tables: list[TableReport]
    run_id: str | None = None
    dry_run: bool = False
    #: The policy's ``tables`` and ``namespaces`` sections the location does not hold.
    unmatched: dict[str, list[str]] | None = None

    @property
    def failed(self) -> bool:
        return any(table.failed for table in self.tables)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"tables": [table.to_dict() for table in self.tables]}
        if self.run_id is not None:
            doc["runId"] = self.run_id
            doc["dryRun"] = self.dry_run
        if self.unmatched is not None:
            doc["unmatchedPolicySections"] = self.unmatched
        return doc

    def rows(self) -> list[tuple]:
        """One row per table and job that is not Disabled (a table with none: one row saying so), failures first."""
        rows = []
        for table in self.tables:
            shown = [(job, record) for job, record in table.jobs.items() if record.get("status") != DISABLED]
            if table.error is not None and not any(record.get("status") == FAILED for _job, record in shown):
                rows.append((table.table, table.format, "-", FAILED, None, table.error))
            if table.skipped is not None:
                rows.append((table.table, table.format, "-", "skipped", None, table.skipped.get("reason")))
            elif not shown and table.error is None:
                rows.append((table.table, table.format, "-", DISABLED, None, "no job enabled"))
            for job, record in shown:
                detail = record.get("failureMessage") or "; ".join(record.get("notes") or []) or describe(record)
                rows.append((table.table, table.format, job, record.get("status"), record.get("lastRunTimestamp"), detail))
        return sorted(rows, key=lambda row: (row[3] != FAILED, row[0], row[2]))

    def footer(self) -> list[str]:
        """The lines after the rows: unmatched policy sections, the run."""
        lines = []
        for kind in ("tables", "namespaces"):
            if (self.unmatched or {}).get(kind):
                lines.append(f"policy {kind} not in this location: {', '.join(self.unmatched[kind])}")
        if self.run_id is not None:
            lines.append(f"run {self.run_id}{' (dry run: nothing changed)' if self.dry_run else ''}")
        return lines


def describe(record: dict[str, Any]) -> str | None:
    """What a job did, in words."""
    parts = []
    if record.get("snapshotsExpired") is not None:
        parts.append(f"{record['snapshotsExpired']} snapshot(s) expired")
    parts += [f"{count} {kind} file(s)" for kind, count in (record.get("filesDeleted") or {}).items() if count]
    if record.get("bytesDeleted"):
        parts.append(f"{record['bytesDeleted']} bytes")
    for key, what in (("tagsCreated", "tag(s) created"), ("tagsDeleted", "tag(s) deleted"), ("consumersExpired", "consumer(s) expired")):
        if record.get(key):
            parts.append(f"{len(record[key])} {what}")
    if record.get("reason"):
        parts.append(record["reason"])
    if record.get("skipped"):  # a triggered job that was not due (core/lake/triggers.py)
        parts = [f"{record['skipped']} (due {record.get('nextDue')})"]
    elif record.get("nextDue"):
        parts.append(f"next due {record['nextDue']}")
    return ", ".join(parts) or None
