"""What the noncurrent journal holds, per run (``snaptable trash``), read one entry at a time."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from airflow_snaptable.core.lifecycle.noncurrent.journal import PURGE_PREFIX, UNDO_PREFIX, NoncurrentJournal
from airflow_snaptable.core.lifecycle.store import TableStore

NONCURRENT = "noncurrent"
PURGING = "purging"
UNDOING = "undoing"


@dataclass
class RunSummary:
    run_id: str
    operation: str
    #: When the run started (real clock, epoch millis), its retention, and when purge may delete its files.
    at_millis: int
    days: int
    purge_after_millis: int
    #: What it removed.
    snapshot_ids: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    consumers: list[str] = field(default_factory=list)
    #: Files it holds noncurrent, and their bytes.
    files: int = 0
    bytes: int = 0
    #: noncurrent (undoable), purging (a purge started: no longer undoable) or undoing.
    state: str = NONCURRENT

    def to_dict(self) -> dict:
        return asdict(self)


def _snapshot_id(doc: dict) -> int:
    return doc["id"] if "id" in doc else doc["snapshot-id"]  # ours and Paimon's, or Apache Iceberg's


def trash(store: TableStore | None, journal: NoncurrentJournal | None = None) -> list[RunSummary]:
    """Every run the journal holds, oldest first (``journal``: another format's, else the store's)."""
    journal = journal or NoncurrentJournal(store.lifecycle)
    purging, undoing = journal.marked_runs(PURGE_PREFIX), journal.marked_runs(UNDO_PREFIX)
    runs: dict[str, RunSummary] = {}
    for entry in journal.entries():
        run = entry.run
        summary = runs.get(run.run_id)
        if summary is None:
            state = PURGING if run.run_id in purging else UNDOING if run.run_id in undoing else NONCURRENT
            summary = runs[run.run_id] = RunSummary(run.run_id, run.operation, run.at_millis, run.days, run.purge_after_millis, state=state)
        summary.snapshot_ids += [_snapshot_id(json.loads(text)) for text in entry.snapshots]
        summary.tags += sorted(entry.refs)
        summary.tags += [json.loads(text)["name"] for text in entry.tags]
        summary.consumers += [json.loads(text)["id"] for text in entry.consumers]
        summary.files += len(entry.files)
        summary.bytes += sum(size for _path, size in entry.files)
    for summary in runs.values():
        summary.snapshot_ids.sort()
    return sorted(runs.values(), key=lambda s: (s.at_millis, s.run_id))


def noncurrent_bytes(store: TableStore | None, journal: NoncurrentJournal | None = None) -> int:
    """The bytes every run holds noncurrent (the lake status counts them)."""
    return sum(summary.bytes for summary in trash(store, journal))
