"""Triggered maintenance: a job runs only once its table has changed enough (docs/maintenance.md, "Triggers").

As Flink's TableMaintenance and Apache Amoro schedule a maintenance task on commits, a policy job
may take ``trigger``::

    {"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 5, "trigger": {"snapshots": 20}},
                  "data-compaction": {"trigger": {"small-files": 50}}}}

- ``snapshots``: N new snapshots since the job last ran;
- ``small-files``: M data files added since the job last ran (each commit of a streaming writer
  adds small files: what a compaction takes up and what grows the metadata an expiry shrinks).

The job is due when any trigger is reached (Flink's triggers are alternatives too), when it never
ran with its mark recorded, and when its last run failed (a failure is retried, not left until the
table changes). A job that is not due is not run: its stored status keeps its last run and says
``skipped: "Not due: ..."`` and ``nextDue`` (what is still missing). The trigger is resolved as one
value: the most specific section's ``trigger`` replaces a less specific one whole, ``null`` unsets it.

Cost: due-ness never reads the table's whole history. Each run of a triggered job records the
table's latest snapshot (``lastSnapshot``: its id, and for Iceberg its commit time); the next run
compares with the table's latest id (ours and Paimon's ids are consecutive: a subtraction, one
hint read). Iceberg's snapshots come from the metadata the table was opened with (no extra read).
Added files are counted only for the snapshots since the mark, from what each commit records
(ours: the snapshot's summary; Paimon: its delta manifest list; Iceberg: ``added-data-files`` of its
summary), and only until the trigger is reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from airflow_snaptable.core.errors import InvalidPolicyError

TRIGGER = "trigger"
SNAPSHOTS = "snapshots"
SMALL_FILES = "small-files"
TRIGGER_KEYS = (SNAPSHOTS, SMALL_FILES)
NOT_DUE = "Not due"
#: Snapshots read per batch while counting added files (the count stops at the trigger).
_BATCH = 64
_ICEBERG = "iceberg"


def check_trigger(value: Any, where: str) -> None:
    """A policy's ``trigger``: an object of at least one of :data:`TRIGGER_KEYS`, each an integer >= 1."""
    if not isinstance(value, Mapping) or not value:
        raise InvalidPolicyError(
            f"policy: {where} must be an object with {' and/or '.join(TRIGGER_KEYS)}, got {value!r}"
        )
    for key, count in value.items():
        if key not in TRIGGER_KEYS:
            raise InvalidPolicyError(f"policy: {where}: unknown key {key!r}; known: {', '.join(TRIGGER_KEYS)}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidPolicyError(f"policy: {where}.{key} must be an integer >= 1, got {count!r}")


@dataclass(frozen=True)
class Due:
    """Whether a triggered job runs now, and what the status says about it."""

    due: bool
    #: Why it runs, or ``Not due: ...`` (what was counted against what is asked).
    reason: str
    #: What is still missing before it is due (None when due).
    next_due: str | None = None


class TableProgress:
    """What a table committed since a job's mark, counted cheaply (see the module); one per opened table."""

    def __init__(self, table: Any):
        self.table = table
        self._latest: dict[str, Any] | None = None

    def mark(self) -> dict[str, Any]:
        """The table's latest snapshot, as a job records it (``{"id": 0}``: no snapshot yet)."""
        if self._latest is None:
            if self.table.format == _ICEBERG:
                current = self.table.iceberg.metadata.current_snapshot()
                self._latest = {"id": 0} if current is None else {"id": current.snapshot_id, "timestampMillis": current.timestamp_ms}
            else:
                latest = self.table.snapshot_manager.latest_id()
                self._latest = {"id": latest or 0}
        return dict(self._latest)

    def committed(self, snapshot_id: int) -> None:
        """A job committed ``snapshot_id`` (compaction): it is the latest now."""
        if self.table.format != _ICEBERG:
            self._latest = {"id": snapshot_id}

    def due(self, trigger: Mapping[str, int], previous: Mapping[str, Any] | None) -> Due:
        """Is a job with ``trigger`` due, given its stored status record ``previous``?"""
        if (previous or {}).get("status") == "Failed":
            return Due(True, "the last run failed")
        seen = (previous or {}).get("lastSnapshot")
        if not isinstance(seen, dict) or not isinstance(seen.get("id"), int):
            return Due(True, "no run with a trigger recorded yet")
        wanted_snapshots, wanted_files = trigger.get(SNAPSHOTS), trigger.get(SMALL_FILES)
        snapshots, files, rolled_back = self._since(seen, wanted_files)
        if rolled_back:
            return Due(True, "the table was rolled back below the last run's snapshot")
        reached = []
        if wanted_snapshots is not None and snapshots >= wanted_snapshots:
            reached.append(f"{snapshots} new snapshot(s) >= {wanted_snapshots}")
        if wanted_files is not None and files is not None and files >= wanted_files:
            reached.append(f"{files} new data file(s) >= {wanted_files}")
        if reached:
            return Due(True, "; ".join(reached))
        counted, missing = [], []
        if wanted_snapshots is not None:
            counted.append(f"{snapshots} of {wanted_snapshots} new snapshot(s)")
            missing.append(f"{wanted_snapshots - snapshots} more snapshot(s)")
        if wanted_files is not None:
            counted.append(f"{files} of {wanted_files} new data file(s)")
            missing.append(f"{wanted_files - (files or 0)} more data file(s)")
        return Due(False, f"{NOT_DUE}: {', '.join(counted)} since the last run", "after " + " or ".join(missing))

    def _since(self, seen: Mapping[str, Any], wanted_files: int | None) -> tuple[int, int | None, bool]:
        """(new snapshots, data files they added (None: not asked), rolled back below the mark)."""
        if self.table.format == _ICEBERG:
            return self._iceberg_since(seen, wanted_files)
        latest, seen_id = self.mark()["id"], seen["id"]
        if latest < seen_id:
            return 0, None, True
        if wanted_files is None or latest == seen_id:
            return latest - seen_id, (0 if wanted_files is not None else None), False
        manager = self.table.snapshot_manager
        first = max(seen_id + 1, manager.earliest_id() or latest)
        files = 0
        for start in range(first, latest + 1, _BATCH):
            ids = range(start, min(start + _BATCH, latest + 1))
            files += sum(counts.added for counts in _file_counts(self.table, ids).values())
            if files >= wanted_files:
                break
        return latest - seen_id, files, False

    def _iceberg_since(self, seen: Mapping[str, Any], wanted_files: int | None) -> tuple[int, int | None, bool]:
        from airflow_snaptable.core.formats.iceberg.retention import ancestors
        from airflow_snaptable.core.formats.iceberg.snapshots import file_counts_of, snapshot_of

        metadata = self.table.iceberg.metadata
        seen_time = seen.get("timestampMillis")
        snapshots, files = 0, 0
        for snapshot in ancestors(metadata, metadata.current_snapshot_id):  # newest first, all in memory
            if snapshot.snapshot_id == seen["id"] or (isinstance(seen_time, int) and snapshot.timestamp_ms <= seen_time):
                break
            snapshots += 1
            if wanted_files is not None:
                files += file_counts_of(snapshot_of(snapshot)).added
        else:
            if seen["id"] != 0 and metadata.snapshot_by_id(seen["id"]) is not None:
                return 0, None, True  # the mark is in the metadata but no longer on the current branch
        return snapshots, files if wanted_files is not None else None, False


def _file_counts(table: Any, ids: range) -> dict:
    from airflow_snaptable.core.formats.describe import file_counts

    read = table.snapshot_manager.read_ids(ids)
    return file_counts(table, [read[i][0] for i in sorted(read)])
