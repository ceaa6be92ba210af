"""A lake's health, table by table: what the UI's lake page shows (the CLI can print the same rows).

Per table: its snapshots, the data files and bytes its latest snapshot reads, the age of its
oldest snapshot, and each job's stored status (core/lake/status.py: status, last run, failure,
``nextDue`` / ``skipped`` of a triggered job). Tables with a failed job come first, then by name.

Cost per table: its status file (a table with a triggered job is opened to count it against its
trigger, core/lake/run.py's ``lake_status``), its snapshot range (ours and Paimon's ids are consecutive: the
earliest and latest snapshot, not the history between) and the latest snapshot's file list (ours
and Paimon's manifests; Iceberg's snapshot summary, ``total-data-files`` / ``total-files-size``).
A table that cannot be read is listed with the error, never dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from airflow_snaptable.core.lake.policy import JOBS
from airflow_snaptable.core.lake.report import TableReport
from airflow_snaptable.core.lake.run import DEFAULT_PARALLEL, lake_status
from airflow_snaptable.core.lake.discovery import DEFAULT_MAX_DEPTH
from airflow_snaptable.core.lake.status import DISABLED, FAILED

ICEBERG = "iceberg"


@dataclass
class TableHealth:
    table: str
    format: str
    uri: str
    snapshots: int | None = None
    data_files: int | None = None
    bytes: int | None = None
    oldest_snapshot_age_seconds: float | None = None
    #: job -> its stored status record (Disabled jobs left out).
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Why the table's figures are missing (it cannot be opened, its metadata is broken).
    error: str | None = None
    #: The run maintaining it now, if any.
    lock: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None or any(job.get("status") == FAILED for job in self.jobs.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table, "format": self.format, "uri": self.uri, "snapshots": self.snapshots,
            "dataFiles": self.data_files, "bytes": self.bytes, "oldestSnapshotAgeSeconds": self.oldest_snapshot_age_seconds,
            "jobs": self.jobs, "error": self.error, "lock": self.lock, "failed": self.failed,
        }


def lake_health(
    location: str, *, storage_options: dict[str, Any] | None = None, catalog: dict[str, Any] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH, parallel: int = DEFAULT_PARALLEL, now_millis: int | None = None,
) -> list[TableHealth]:
    """Every table of ``location`` with its health, failed ones first (see the module)."""
    now = int(time.time() * 1000) if now_millis is None else now_millis
    report = lake_status(location, storage_options=storage_options, catalog=catalog, max_depth=max_depth, parallel=parallel)
    found = [table_health(t, storage_options=storage_options, catalog=catalog, now_millis=now) for t in report.tables]
    return sorted(found, key=lambda h: (not h.failed, h.table, h.uri))


def table_health(report: TableReport, *, storage_options: dict[str, Any] | None = None,
                 catalog: dict[str, Any] | None = None, now_millis: int) -> TableHealth:
    """One table's figures, beside its stored job status ``report`` (from :func:`lake_status`)."""
    from airflow_snaptable.core.table import Table

    health = TableHealth(report.table, report.format, report.location, lock=report.lock)
    health.jobs = {job: record for job, record in report.jobs.items() if job in JOBS and record.get("status") != DISABLED}
    if report.status_error:
        health.error = f"status: {report.status_error}"
    if report.error is not None:  # discovery's refusal: what the table holds is not shown under a name it does not own
        health.error = report.error
        return health
    try:
        opened = Table.open(report.location, storage_options, catalog=catalog)
        _figures(health, opened, now_millis)
    except Exception as exc:  # noqa: BLE001 - a broken table is shown with its error, the others still are
        health.error = f"{type(exc).__name__}: {exc}"
    return health


def _figures(health: TableHealth, table, now_millis: int) -> None:
    if table.format == ICEBERG:
        from airflow_snaptable.core.formats.iceberg.retention import ancestors

        metadata = table.iceberg.metadata
        history = ancestors(metadata, metadata.current_snapshot_id)  # newest first, in memory
        health.snapshots = len(history)
        summary = history[0].summary if history else None
        extra = dict(summary.additional_properties) if summary is not None else {}
        health.data_files = int(extra.get("total-data-files") or 0)
        health.bytes = int(extra.get("total-files-size") or 0)
        oldest = history[-1].timestamp_ms if history else None
    else:
        latest, earliest = table.latest_snapshot(), table.earliest_snapshot()
        health.snapshots = latest.id - earliest.id + 1 if latest and earliest else 0
        files = list(table.store.files.state(latest).values()) if latest else []
        health.data_files = len(files)
        health.bytes = sum(f.file_size for f in files)
        oldest = earliest.time_millis if earliest else None
    health.oldest_snapshot_age_seconds = None if oldest is None else max(0.0, (now_millis - oldest) / 1000)
