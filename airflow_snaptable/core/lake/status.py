"""Each table's maintenance status: per job, S3 Tables' fields plus what the job did (docs/maintenance.md).

Per job: ``status`` (``Successful`` | ``Failed`` | ``Disabled`` | ``Not_Yet_Run``),
``lastRunTimestamp`` (ISO-8601, UTC), ``failureMessage``, and for a job that ran its ``runId``,
``durationMs``, the action ``arguments`` it ran with, ``notes`` (where the table's own setting won
over the policy) and what it did: ``snapshotsExpired``, ``filesDeleted`` per kind, ``bytesDeleted``,
``tagsCreated`` / ``tagsDeleted``, ``consumersExpired``, ``snapshotCommitted``, and for data
expiry ``rowsDeleted`` and ``partitionsDropped``.

Where it is kept, so that any process reads it:

- this package's tables: ``<table>/maintenance/status.json`` (beside ``plan/`` and ``intent/``:
  orphan cleaning lists only ``data/`` and ``manifest/``, verify reads only what it knows);
- Paimon tables: ``<table>/snaptable/maintenance/status.json``, in the directory this package keeps
  its own files in and Paimon never reads;
- Iceberg tables: ``<maintenance location>/<namespace>.<table>/status.json``, one location the
  catalog's tables share: the catalog property ``snaptable.maintenance-location``, else
  ``<warehouse>/snaptable-maintenance`` (never under a table's location, where Iceberg's own
  orphan cleaning would see it).

The file is written whole and atomically (a replace locally, one PUT on object stores) by the run
holding the table's lease (core/lake/lease.py, the ``lease/`` directory beside it), after each
job, and keeps the last :data:`MAX_RUNS` runs.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from airflow_snaptable.core.errors import CorruptMetadataError, InvalidArgumentError
from airflow_snaptable.core.lake.discovery import ICEBERG_FORMAT, PAIMON_FORMAT, LakeTable
from airflow_snaptable.core.lake.lease import LEASE_DIR
from airflow_snaptable.core.io.storage import Storage

SUCCESSFUL = "Successful"
FAILED = "Failed"
DISABLED = "Disabled"
NOT_YET_RUN = "Not_Yet_Run"
STATUS_FILE = "status.json"
#: Runs a status file keeps (the newest).
MAX_RUNS = 20
NATIVE_STATUS_DIR = "maintenance"
PAIMON_STATUS_DIR = "snaptable/maintenance"
#: The catalog property naming where an Iceberg catalog's tables keep their maintenance status.
MAINTENANCE_LOCATION_PROPERTY = "snaptable.maintenance-location"
DEFAULT_ICEBERG_STATUS_DIR = "snaptable-maintenance"
STATUS_VERSION = 1


def iso_time(millis: int) -> str:
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def not_yet_run() -> dict[str, Any]:
    return {"status": NOT_YET_RUN, "lastRunTimestamp": None, "failureMessage": None}


def disabled(reason: str, previous: dict[str, Any] | None) -> dict[str, Any]:
    """A job that does not run: when it last ran stays visible."""
    last = (previous or {}).get("lastRunTimestamp")
    return {"status": DISABLED, "lastRunTimestamp": last, "failureMessage": None, "reason": reason}


@dataclass
class StatusLocation:
    """Where one table's status and lease live: a directory under ``storage``."""

    storage: Storage
    directory: str

    @property
    def status_path(self) -> str:
        return f"{self.directory}/{STATUS_FILE}"

    @property
    def lease_directory(self) -> str:
        return f"{self.directory}/{LEASE_DIR}"

    def read(self) -> dict[str, Any] | None:
        """The stored status document (None: never written). CorruptMetadataError if it cannot be parsed."""
        try:
            data = self.storage.read_bytes(self.status_path)
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise CorruptMetadataError(f"{self.storage.full_uri(self.status_path)}: not JSON: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), dict) or not isinstance(doc.get("runs"), list):
            raise CorruptMetadataError(f"{self.storage.full_uri(self.status_path)}: not a maintenance status document")
        return doc

    def write(self, doc: dict[str, Any]) -> None:
        doc["runs"] = doc["runs"][-MAX_RUNS:]
        self.storage.write_bytes(self.status_path, json.dumps(doc, indent=1).encode())


class StatusLocator:
    """Finds each table's :class:`StatusLocation` for one lake location."""

    def __init__(self, storage_options: dict[str, Any] | None = None, catalog: dict[str, Any] | None = None):
        self.storage_options = storage_options
        self.catalog = catalog
        self._shared: Storage | None = None

    def for_table(self, table: LakeTable) -> StatusLocation:
        if table.format == ICEBERG_FORMAT:
            return StatusLocation(self.shared_storage(), table.name)
        storage = Storage.from_uri(table.uri, self.storage_options)
        return StatusLocation(storage, PAIMON_STATUS_DIR if table.format == PAIMON_FORMAT else NATIVE_STATUS_DIR)

    def shared_storage(self) -> Storage:
        """The location an Iceberg catalog's tables keep their status in (the module's rule)."""
        if self._shared is None:
            self._shared = iceberg_status_storage(self.catalog)
        return self._shared


def iceberg_status_location(catalog: dict[str, Any] | None) -> str:
    properties = dict(catalog or {})
    location = properties.get(MAINTENANCE_LOCATION_PROPERTY)
    if location is None:
        warehouse = str(properties.get("warehouse") or "")
        if "://" not in warehouse and not warehouse.startswith("/"):
            raise InvalidArgumentError(
                f"the catalog's warehouse ({warehouse or 'not set'}) is not a location: set the catalog property "
                f"{MAINTENANCE_LOCATION_PROPERTY} to where its tables' maintenance status is kept"
            )
        location = warehouse.rstrip("/") + "/" + DEFAULT_ICEBERG_STATUS_DIR
    if not isinstance(location, str) or not location.strip():
        raise InvalidArgumentError(f"catalog property {MAINTENANCE_LOCATION_PROPERTY} must be a location, got {location!r}")
    return location


def iceberg_status_storage(catalog: dict[str, Any] | None) -> Storage:
    """A Storage at the shared status location, on the filesystem the catalog's FileIO would use."""
    from airflow_snaptable.core.formats.iceberg.files import LocationStorage

    properties = {k: str(v) for k, v in (catalog or {}).items()}
    return LocationStorage(iceberg_status_location(catalog), properties)()


def new_document(table: LakeTable) -> dict[str, Any]:
    return {"version": STATUS_VERSION, "table": table.name, "format": table.format, "location": table.uri, "jobs": {}, "runs": []}


def of_table(doc: dict[str, Any], table: LakeTable, identity: str | None) -> bool:
    """Make ``doc`` the status of the table whose identity (core/lineage.py) is ``identity``, in place: the
    status of another table dropped and re-created at this name or location is not this one's (its jobs,
    runs and trigger marks start anew; ``replacedTable`` keeps the old identity). True if it started anew."""
    stored = doc.get("tableId")
    if identity is None or stored == identity:
        return False
    doc["tableId"] = identity
    if stored is None:
        return False  # a status written before tables were told apart: the marks still compare themselves
    doc.clear()
    doc.update(new_document(table), tableId=identity, replacedTable=stored)
    return True


# -- what a job did, from its action's result document --------------------------------------------


def summarize(job: str, result: Any) -> dict[str, Any]:
    """The status fields a job's result (the action's ``result``, as JSON) fills. A job run with
    ``noncurrent-days`` deleted nothing: its ``noncurrentRunId`` (what ``snaptable undo`` takes) and the
    files and bytes it made noncurrent (core/lifecycle/noncurrent/) are reported instead."""
    summary = _summarize(job, result)
    if isinstance(result, dict) and result.get("run_id"):
        summary["noncurrentRunId"] = result["run_id"]
        if job == "orphan-file-removal":
            summary.pop("filesDeleted", None)
            summary["filesNoncurrent"] = result.get("orphan_count", 0)
            summary["bytesNoncurrent"] = summary.pop("bytesDeleted", 0)
        else:
            summary["filesNoncurrent"] = result.get("noncurrent_data_files", 0) + result.get("noncurrent_manifest_files", 0)
            summary["bytesNoncurrent"] = result.get("noncurrent_bytes", 0)
    if job == "purge" and isinstance(result, dict):
        summary = {"filesDeleted": {"noncurrent": result.get("deleted_files", 0)}, "bytesDeleted": result.get("bytes_freed", 0),
                   "runsPurged": list(result.get("purged_run_ids") or [])}
    return summary


def _summarize(job: str, result: Any) -> dict[str, Any]:
    if job in ("snapshot-expiry", "clean"):
        summary = {
            "snapshotsExpired": len(result.get("expired_snapshot_ids") or []),
            "filesDeleted": {
                "data": result.get("deleted_data_files", 0) + result.get("recovered_data_files", 0),
                "manifest": result.get("deleted_manifest_files", 0),
                "snapshot": result.get("deleted_snapshot_files", 0),
            },
            "bytesDeleted": result.get("bytes_freed", 0),
        }
        if job == "clean":
            summary["earliestCommitRetained"] = result.get("earliest_commit_retained")
        return summary
    if job == "orphan-file-removal":
        return {"filesDeleted": {"orphan": result.get("orphan_count", 0)}, "bytesDeleted": result.get("bytes", 0)}
    if job == "periodic-tags":
        return {"tagsCreated": list(result.get("created") or []), "tagsDeleted": list(result.get("deleted") or [])}
    if job == "tag-expiry":
        return {"tagsDeleted": list(result or [])}
    if job == "consumer-expiry":
        return {"consumersExpired": list(result or [])}
    if job == "data-compaction":
        return {"snapshotCommitted": _committed(result)}
    if job == "manifest-rewrite":
        return {"snapshotCommitted": _committed(result), "manifests": result.get("manifests_after") if isinstance(result, dict) else None}
    if job == "data-expiry":
        return data_expiry_summary(result)
    return {}


def data_expiry_summary(result: Any) -> dict[str, Any]:
    """A data expiry's rows deleted, the data files it took out, and its commit."""
    if not isinstance(result, dict):
        return {}
    return {
        "rowsDeleted": result.get("rows_deleted", 0),
        "filesDeleted": {"data": len(result.get("data_files_removed") or [])},
        "partitionsDropped": list(result.get("partitions_dropped") or []),
        "snapshotCommitted": result.get("snapshot_id"),
    }


def _committed(result) -> Any:
    """The snapshot a rewrite committed: a snapshot's ``id`` (this package's tables), ``snapshot_id`` (Iceberg's result)."""
    if not isinstance(result, dict):
        return None
    return result.get("id", result.get("snapshot_id"))


@dataclass
class RunEntry:
    """One run in a status file's bounded history."""

    run_id: str
    started_millis: int
    jobs: dict[str, str] = field(default_factory=dict)
    finished_millis: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "runId": self.run_id, "startedAt": iso_time(self.started_millis),
            "finishedAt": None if self.finished_millis is None else iso_time(self.finished_millis),
            "jobs": dict(self.jobs),
        }
