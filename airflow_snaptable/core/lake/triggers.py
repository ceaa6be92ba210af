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

New snapshots are counted along the table's lineage (core/lineage.py), never by id arithmetic
across a rollback or by comparing writers' clocks: each run of a triggered job records the table's
latest snapshot (``lastSnapshot``: its id, its commit identity for ours and Paimon, its sequence
number for Iceberg, and the table's identity). A mark of another table (dropped and re-created at
the name) makes the job due, as a never-run job is; a mark a rollback discarded makes it due.

Cost: due-ness never reads the table's whole history: ours and Paimon, the latest id hint and the
mark's snapshot (the ids after a mark still in the lineage are consecutive); Iceberg, a walk of
parents down to the mark in the metadata the table was opened with (no extra read).
Added files are counted only for the snapshots since the mark, from what each commit records
(ours: the snapshot's summary; Paimon: its delta manifest list; Iceberg: ``added-data-files`` of its
summary), and only until the trigger is reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from airflow_snaptable.core.errors import InvalidPolicyError
from airflow_snaptable.core.lineage import Lineage, Mark, Since

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
    """What a table committed since a job's mark, counted along its lineage (core/lineage.py); one per opened table."""

    def __init__(self, table: Any):
        self.table = table
        self.lineage = Lineage(table)
        self._latest: Mark | None = None
        self._latest_id: int | None = None

    def mark(self) -> dict[str, Any]:
        """The table's latest snapshot, as a job records it (``{"id": 0, ...}``: no snapshot yet)."""
        if self._latest is None:
            self._latest = self.lineage.mark(None if self.table.format == _ICEBERG else self.latest_id())
        return self._latest.to_dict()

    def mark_of(self, snapshot_id: int) -> dict[str, Any]:
        """The mark of ``snapshot_id``, a snapshot a job committed (its own commit does not count)."""
        return self.lineage.mark(snapshot_id).to_dict()

    def committed(self, snapshot_id: int) -> None:
        """A job committed ``snapshot_id`` (compaction): it is the latest now."""
        if self.table.format != _ICEBERG:
            self._latest = self.lineage.mark(snapshot_id)
            self._latest_id = snapshot_id

    def latest_id(self) -> int:
        """Ours and Paimon's latest id, as counted (a job's own commit included, see committed): the hint only."""
        if self._latest_id is None:
            self._latest_id = self.table.snapshot_manager.latest_id() or 0
        return self._latest_id

    def due(self, trigger: Mapping[str, int], previous: Mapping[str, Any] | None) -> Due:
        """Is a job with ``trigger`` due, given its stored status record ``previous``?"""
        if (previous or {}).get("status") == "Failed":
            return Due(True, "the last run failed")
        seen = Mark.from_dict((previous or {}).get("lastSnapshot"))
        if seen is None:
            return Due(True, "no run with a trigger recorded yet")
        wanted_snapshots, wanted_files = trigger.get(SNAPSHOTS), trigger.get(SMALL_FILES)
        since = self._since(seen)
        if since.new_table:
            return Due(True, "a new table at this name (dropped and re-created since the last run): it starts fresh")
        if since.rolled_back:
            return Due(True, "the table was rolled back past the last run's snapshot")
        snapshots = since.count
        files = None if wanted_files is None else self._added_files(since, wanted_files)
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

    def _since(self, seen: Mark) -> Since:
        if self.table.format == _ICEBERG:
            return self.lineage.since(seen)
        return self.lineage.since(seen, self.latest_id())

    def _added_files(self, since: Since, wanted_files: int) -> int:
        """Data files the new snapshots added, counted until ``wanted_files`` is reached."""
        if since.snapshots is not None:
            from airflow_snaptable.core.formats.iceberg.snapshots import file_counts_of, snapshot_of

            files = 0
            for snapshot in since.snapshots:
                files += file_counts_of(snapshot_of(snapshot)).added
                if files >= wanted_files:
                    break
            return files
        ids = since.ids or range(0)
        if not ids:
            return 0
        first = max(ids.start, self.table.snapshot_manager.earliest_id() or ids.stop)
        files = 0
        for start in range(first, ids.stop, _BATCH):
            files += sum(counts.added for counts in _file_counts(self.table, range(start, min(start + _BATCH, ids.stop))).values())
            if files >= wanted_files:
                break
        return files


def _file_counts(table: Any, ids: range) -> dict:
    from airflow_snaptable.core.formats.describe import file_counts

    read = table.snapshot_manager.read_ids(ids)
    return file_counts(table, [read[i][0] for i in sorted(read)])
