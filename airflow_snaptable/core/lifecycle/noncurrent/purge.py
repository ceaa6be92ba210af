"""Purge: deleting the noncurrent files whose retention has passed.

Rules:

- Due is judged by the real clock: a run is due once ``its real start + days`` has passed at
  ``min(now, real clock)``, so a ``now`` in the future never shortens a retention.
- A run being undone (``undo-<run>.json``) is left alone; a purge marks the run
  (``purge-<run>.json``) and then checks for an undo mark, so undo and purge never both act on
  one run (core/lifecycle/noncurrent/journal.py). From the purge mark on, the run cannot be undone.
- Every file is checked against the *live* metadata before it is deleted, never only against the
  journal: the retained snapshots and tags (a rollback to a tag, an undo, a commit that named the
  same path again) and what the runs not purged yet would bring back (their snapshots, tags and
  files). The live view is read after the marks are up, and read again whenever the latest
  snapshot or the tags changed before a batch is deleted.
- The marks of crashed deleting runs (core/lifecycle/noncurrent/journal.py ``DeletingMark``) go once
  they are four times stale.
- A run's entries are deleted after their files, the mark last; a crash anywhere leaves the mark,
  and the next purge finishes the run (deleting what is gone is success).
- Memory: one entry (one plan's files, bounded like a plan) and 8 bytes per live or held file
  (core/io/path_set.py), whatever the number of noncurrent files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from airflow_snaptable.core.errors import SnapshotNotFoundError
from airflow_snaptable.core.io.path_set import PathHashSet, PathHashSetBuilder
from airflow_snaptable.core.lifecycle.noncurrent.journal import (
    PURGE_PREFIX,
    UNDO_PREFIX,
    JournalEntry,
    NoncurrentJournal,
    drop_crashed_deleting_marks,
    real_now_millis,
)
from airflow_snaptable.core.lifecycle.orphans import paths_in_use
from airflow_snaptable.core.lifecycle.progress import delete_with_progress
from airflow_snaptable.core.lifecycle.store import TableStore
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.native.tags import Tag


@dataclass
class PurgeResult:
    purged_run_ids: list[str] = field(default_factory=list)
    deleted_files: int = 0
    bytes_freed: int = 0
    #: Noncurrent files referenced again (a rollback to a tag, an undo, a new commit of the path): kept.
    kept_referenced_files: int = 0
    #: Runs whose retention has not passed yet, and runs being undone (left alone).
    waiting_run_ids: list[str] = field(default_factory=list)
    undoing_run_ids: list[str] = field(default_factory=list)
    #: The time due was judged at (epoch millis; never later than the real clock).
    judged_at_millis: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


class LiveView:
    """What must not be deleted: the live metadata's files and what the runs not being purged would bring back."""

    def __init__(self, store: TableStore, journal: NoncurrentJournal, purging: set[str]):
        self.store = store
        self.journal = journal
        self.purging = purging
        self.sets: list[PathHashSet] = []
        self.version: tuple | None = None
        self.refresh()

    def _version(self) -> tuple:
        snapshots = self.store.snapshots
        latest = snapshots.latest_id()
        identity = None
        if latest is not None:
            try:
                identity = snapshots.identity(snapshots.snapshot(latest))
            except SnapshotNotFoundError:
                identity = "gone"
        return latest, identity, snapshots.earliest_id(), tuple(self.store.tags.names())

    def refresh(self) -> None:
        self.version = self._version()
        held = PathHashSetBuilder()
        kept_snapshots: list[Snapshot] = []
        kept_tags: list[Tag] = []
        for entry in self.journal.entries():
            if entry.run.run_id in self.purging:
                continue
            held.add_paths(path for path, _size in entry.files)
            kept_snapshots += [Snapshot.from_json(t.encode(), "journal") for t in entry.snapshots]
            kept_tags += [Tag.from_json(t.encode(), "journal") for t in entry.tags]
        self.sets = [paths_in_use(self.store), held.build()]
        if kept_snapshots or kept_tags:
            kept_snapshots.sort(key=lambda s: s.id)
            self.sets.append(self.store.files.paths_in_use(kept_snapshots, kept_tags))

    def keep(self, paths: list[str]) -> list[bool]:
        """Whether each path is in use; first re-read when the table changed since the last read."""
        if self._version() != self.version:
            self.refresh()
        used = self.sets[0].contains(paths)
        for other in self.sets[1:]:
            used |= other.contains(paths)
        return used.tolist()


#: Files checked against the live metadata at once, right before they are deleted.
PURGE_RECHECK_FILES = 1_000


class NoncurrentPurge:
    def __init__(self, store: TableStore, executor):
        """:param executor: the table's PlanExecutor: interrupted plans finish (record) before the journal is read."""
        self.store = store
        self.executor = executor
        self.journal = NoncurrentJournal(store.lifecycle)

    def purge(self, now_millis: int | None = None) -> PurgeResult:
        real = real_now_millis()
        judged = real if now_millis is None else min(now_millis, real)
        result = PurgeResult(judged_at_millis=judged)
        journal = self.journal
        self.executor.finish_all()
        undoing = journal.marked_runs(UNDO_PREFIX)
        run_ids = journal.run_ids()
        for stale in journal.marked_runs(PURGE_PREFIX) - set(run_ids):
            journal.unmark(PURGE_PREFIX, stale)  # a purge that crashed after its last entry went
        drop_crashed_deleting_marks(journal)
        due = []
        for run_id in run_ids:
            first = next(iter(journal.entries(run_id)), None)
            if first is None:
                continue
            if run_id in undoing:
                result.undoing_run_ids.append(run_id)
            elif first.run.purge_after_millis <= judged:
                due.append(run_id)
            else:
                result.waiting_run_ids.append(run_id)
        purging = set()
        for run_id in due:
            journal.mark(PURGE_PREFIX, run_id)
            if journal.marked(UNDO_PREFIX, run_id):  # an undo marked it before seeing our mark: it goes on
                journal.unmark(PURGE_PREFIX, run_id)
                result.undoing_run_ids.append(run_id)
                continue
            purging.add(run_id)
        if not purging:
            return result
        # Read after every mark is up: an undo either marked first (skipped above) or refuses now.
        live = LiveView(self.store, journal, purging)
        for run_id in sorted(purging):
            for name in journal.entry_names(run_id):
                entry = journal.read(name)
                if entry is not None:
                    self._purge_entry(entry, live, result)
                journal.delete([name])
            journal.unmark(PURGE_PREFIX, run_id)
            result.purged_run_ids.append(run_id)
        return result

    def _purge_entry(self, entry: JournalEntry, live: LiveView, result: PurgeResult) -> None:
        files = entry.files
        if not files:
            return
        # Checked against the live metadata right before each slice is deleted (re-read when the table
        # changed): a commit naming a file again is missed only if it lands during one slice's check and
        # delete, not during the whole entry's.
        for first in range(0, len(files), PURGE_RECHECK_FILES):
            chunk = files[first:first + PURGE_RECHECK_FILES]
            kept = live.keep([path for path, _size in chunk])
            doomed = [(path, size) for (path, size), used in zip(chunk, kept) if not used]
            result.kept_referenced_files += len(chunk) - len(doomed)
            delete_with_progress("purging noncurrent files", [path for path, _size in doomed], self.store.files.delete)
            result.deleted_files += len(doomed)
            result.bytes_freed += sum(size for _path, size in doomed)
