"""Undo: bringing back what a run with a retention removed, exactly as it was.

Rules:

- Everything is checked before anything is written; a refusal is a typed error
  (core/errors.py ``UndoRefusedError``) and changes nothing on storage but the undo mark:
  - ``RunPurgedError``: a purge of the run started, or a file the restored snapshots or tags
    reference is gone (they would not be readable: invariant 1);
  - ``DependentRunError``: a later run expired the snapshots right after this run's (or
    discarded those right before a rollback's): undo it first;
  - ``UndoInvariantError``: the snapshot id is used by another commit now (invariant 4: one
    commit per id), the history would have a gap; ``UndoNameTakenError`` (one of them): a tag of the
    same name is another tag.
- The apply re-judges what it writes: a tag name or a snapshot id taken between the checks and
  the write is refused (``UndoNameTakenError``, ``UndoInvariantError``), never counted as "back
  already". "Back already" is only the very snapshot (same commit) or tag (same snapshot, same
  content) the run removed.
- A refusal leaves no undo mark, whoever put it up (this call, or an interrupted undo it reruns):
  the table is free for deleting runs and purge again, the run stays recorded (its entries and
  noncurrent files), and what an interrupted undo brought back reads as it does. A rerun of an
  interrupted undo therefore finishes or refuses and unmarks: it never leaves the table marked.
  Before it refuses, a rerun whose interrupted undo of a rollback to an expired snapshot already
  put discarded snapshots back above that snapshot's copy takes the copy out (a tag holds it), so
  the history is contiguous (invariant 1).
- :func:`abandon_undo` takes an interrupted undo's mark down and leaves the table as it is (the
  same contiguity step): the run stays recorded, purged when its retention passed (purge keeps every
  file the live metadata references) or undone by a later undo.
- Undo marks the run (``undo-<run>.json``) before it checks for a purge of it; purge marks before it
  checks for an undo (core/lifecycle/noncurrent/journal.py): never both on one run. Likewise undo
  reads the deleting marks after its own (``DeletionInProgressError`` while a consumer expiry, an
  orphan removal or a tag deletion outside a plan is under way).
- Each step is idempotent: a snapshot or tag that is back already (same commit, same tag) is
  skipped, so a rerun after a crash finishes the undo. The journal entries go last, then the
  mark; ``undone-<run>.json`` makes undoing again a no-op that says so.
- Expired snapshots go back below the earliest, newest first (the history stays contiguous at each
  step); a rollback's discarded snapshots go back above the latest, oldest first.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

from airflow_snaptable.core.errors import (
    DeletionInProgressError,
    DependentRunError,
    InvalidArgumentError,
    MissingMetadataError,
    RunNotFoundError,
    RunPurgedError,
    SnapshotNotFoundError,
    TagNotFoundError,
    UndoInvariantError,
    UndoNameTakenError,
    UndoRefusedError,
    UnsupportedOperationError,
)
from airflow_snaptable.core.lifecycle.deletion_plans import PlanManager, is_dead_rollback
from airflow_snaptable.core.lifecycle.intents import TAG as TAG_INTENT, Intent, IntentManager
from airflow_snaptable.core.lifecycle.noncurrent.journal import (
    PURGE_PREFIX,
    UNDO_PREFIX,
    UNDONE_PREFIX,
    JournalEntry,
    NoncurrentJournal,
    fresh_deleting_marks,
)
from airflow_snaptable.core.lifecycle.store import TableStore
from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.native.tags import Tag


@dataclass
class UndoResult:
    run_id: str
    operation: str | None = None
    restored_snapshot_ids: list[int] = field(default_factory=list)
    restored_tags: list[str] = field(default_factory=list)
    restored_consumers: list[str] = field(default_factory=list)
    #: Noncurrent files of the run that are current again (or, for orphans, plain files again).
    released_files: int = 0
    #: The run was undone before: nothing was done this time.
    already_undone: bool = False
    #: ``abandon``: the mark of an interrupted undo of the run was taken down (False: none was up).
    abandoned: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def check_run_id(run_id: object) -> str:
    if not isinstance(run_id, str) or not run_id.isalnum() or not run_id.isascii() or len(run_id) > 64:
        raise InvalidArgumentError(f"run_id must be the id a run printed (letters and digits), got {run_id!r}")
    return run_id


#: Checks a run's entries under the undo mark (raising ``UndoRefusedError`` to refuse) and returns the
#: step that brings them back.
UndoPreparer = Callable[[list[JournalEntry], UndoResult], Callable[[], None]]


#: Leaves what an interrupted undo left a valid table before its mark goes (see the module doc).
UndoSettler = Callable[[list[JournalEntry]], None]


def undo_run(
    journal: NoncurrentJournal, run_id: str, where: str, prepare: UndoPreparer, settle: UndoSettler | None = None,
) -> UndoResult:
    """The undo protocol every format shares (see the module doc): the run's entries are looked up
    (an undone run says so, a purged or unknown one is refused), the undo mark goes up before the
    purge mark is read, ``prepare`` checks under it and its step applies, then ``undone-`` is marked,
    the entries go and the mark last. A refusal anywhere runs ``settle`` and takes the mark down,
    this call's or an interrupted undo's."""
    check_run_id(run_id)
    names = journal.entry_names(run_id)
    if not names:
        if journal.marked(UNDONE_PREFIX, run_id):
            journal.unmark(UNDO_PREFIX, run_id)  # a crash after the entries went
            return UndoResult(run_id, already_undone=True)
        if journal.marked(PURGE_PREFIX, run_id):
            raise RunPurgedError(f"run {run_id} was purged: its files are deleted")
        raise RunNotFoundError(f"no noncurrent run {run_id} on {where} (never run with noncurrent_days, or purged)")
    entries = [e for e in (journal.read(n) for n in names) if e is not None]
    result = UndoResult(run_id, entries[0].run.operation if entries else None)
    journal.mark(UNDO_PREFIX, run_id)
    try:
        if journal.marked(PURGE_PREFIX, run_id):
            raise RunPurgedError(f"run {run_id} is being purged (or was): its files may be gone")
        deleting = fresh_deleting_marks(journal)
        if deleting:
            token, operation = deleting[0]
            raise DeletionInProgressError(f"a {operation} run ({token}) is under way on {where}: nothing was undone; rerun the undo after it")
        apply = prepare(entries, result)
        apply()
    except UndoRefusedError:
        # No refusal leaves a mark, this call's or an interrupted undo's it reran: a mark no rerun can take
        # down would hold every deleting run and purge back for good. What is back stays; the run stays recorded.
        if settle is not None and entries:
            settle(entries)
        journal.unmark(UNDO_PREFIX, run_id)
        raise
    journal.mark(UNDONE_PREFIX, run_id)
    journal.delete(names)
    journal.unmark(UNDO_PREFIX, run_id)
    return result


def abandon_undo(journal: NoncurrentJournal, run_id: str, where: str, settle: UndoSettler | None = None) -> UndoResult:
    """Abandon an interrupted undo of the run: ``settle`` (the format's, see the module doc) runs on its entries,
    then its mark goes. The table is left as the undo left it, the run stays recorded (``trash``): purge deletes
    its files once due (never one the live metadata references), or a later undo brings the rest back.
    ``abandoned`` False: no undo of the run was marked (an unknown run is refused as undo refuses it)."""
    check_run_id(run_id)
    names = journal.entry_names(run_id)
    entries = [e for e in (journal.read(n) for n in names) if e is not None]
    result = UndoResult(run_id, entries[0].run.operation if entries else None)
    if not journal.marked(UNDO_PREFIX, run_id):
        if not names and not journal.marked(UNDONE_PREFIX, run_id):
            raise RunNotFoundError(f"no noncurrent run {run_id} on {where} (never run with noncurrent_days, or purged)")
        return result
    if settle is not None and entries:
        settle(entries)
    journal.unmark(UNDO_PREFIX, run_id)
    result.abandoned = True
    return result


@dataclass
class _UndoPlan:
    """What the checks found to do."""

    below: list[Snapshot] = field(default_factory=list)  # descending ids
    above: list[Snapshot] = field(default_factory=list)  # ascending ids
    tags: list[Tag] = field(default_factory=list)
    consumers: list[Consumer] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)  # snapshot copies unpublishing moved aside
    #: The snapshot a rollback to an expired one published again: unpublished once the discarded ones are back.
    restored: Snapshot | None = None
    #: Its id (the copy may be unpublished already), and the first snapshot that rollback discarded (where the
    #: history starts once the copy is unpublished).
    restored_id: int | None = None
    first_above: int | None = None
    files: int = 0


class NoncurrentUndo:
    def __init__(self, store: TableStore, executor):
        """:param executor: the table's PlanExecutor (core/lifecycle/plan_executor.py): interrupted plans finish first."""
        self.store = store
        self.executor = executor
        self.journal = NoncurrentJournal(store.lifecycle)

    def undo(self, run_id: str) -> UndoResult:
        check_run_id(run_id)
        # An interrupted plan of this run (or of any) finishes first: it records, it never deletes.
        self.executor.finish_all()

        def prepare(entries: list[JournalEntry], result: UndoResult) -> Callable[[], None]:
            plan = self._checked(run_id, entries)

            def apply() -> None:
                self._apply(plan, result)
                result.released_files = plan.files

            return apply

        return undo_run(self.journal, run_id, self.store.uri, prepare, settle=self._settle)

    def abandon(self, run_id: str) -> UndoResult:
        """Abandon an interrupted undo of the run (:func:`abandon_undo`)."""
        return abandon_undo(self.journal, run_id, self.store.uri, self._settle)

    def _settle(self, entries: list[JournalEntry]) -> None:
        """An interrupted undo of a rollback to an expired snapshot that republished discarded snapshots above
        that snapshot's copy left a gap between them: the copy goes (the history is contiguous again), but only
        while a tag holds the same commit, so no state is lost. Anything else an undo leaves is contiguous."""
        snapshots = self.store.snapshots
        for entry in entries:
            if entry.restored is None or not entry.snapshots or not snapshots.exists(entry.restored):
                continue
            discarded = [Snapshot.from_json(t.encode(), "journal") for t in entry.snapshots]
            back = [s for s in discarded if self._same(s) is True]
            if not back:
                continue  # nothing was republished: the rollback's state, contiguous
            copy = snapshots.snapshot(entry.restored)
            if not any(snapshots.identity(t.snapshot) == snapshots.identity(copy) for t in self.store.tags.tags()):
                continue
            snapshots.write_earliest_hint(min(s.id for s in back))
            self.store.files.delete(list(snapshots.unpublish([entry.restored]) or []))

    # -- checks: nothing is written until every one passed ---------------------------------------

    def _checked(self, run_id: str, entries: list[JournalEntry]) -> _UndoPlan:
        snapshots = self.store.snapshots
        plan = _UndoPlan()
        below: dict[int, Snapshot] = {}
        above: dict[int, Snapshot] = {}
        for entry in entries:
            where = f"noncurrent run {run_id}"
            for text in entry.snapshots:
                snapshot = Snapshot.from_json(text.encode(), where=where)
                (above if entry.above else below)[snapshot.id] = snapshot
            if entry.restored is not None:
                plan.restored_id = entry.restored
                plan.restored = self.store.snapshots.snapshot(entry.restored) if self.store.snapshots.exists(entry.restored) else None
                if entry.snapshots:
                    plan.first_above = min(Snapshot.from_json(t.encode(), where=where).id for t in entry.snapshots)
            plan.tags += [Tag.from_json(text.encode(), where) for text in entry.tags]
            plan.consumers += [Consumer.from_json(text.encode(), where) for text in entry.consumers]
            if entry.key.endswith("u"):
                plan.leftovers += [path for path, _size in entry.metadata_files]
            else:
                plan.files += len(entry.files)
        # The undo mark is written: a deleting run that publishes its plan from now on backs out. One
        # published before (pending or active: finish_all ran, so it started meanwhile) makes undo refuse.
        snapshots_store = self.store.snapshots
        in_flight = [p for p in PlanManager(self.store).fences() if not (p.pending and is_dead_rollback(snapshots_store, p))]
        if in_flight:
            raise UndoInvariantError("a deletion plan is in flight on the table (another expiry or rollback): undo when it finished")
        plan.below = self._missing_below(run_id, below)
        plan.above = self._missing_above(run_id, above, plan.restored)
        self._check_tags(plan.tags)
        self._check_files(run_id, plan)
        return plan

    def _same(self, snapshot: Snapshot) -> bool | None:
        """True: that commit is there; False: another commit holds its id; None: the id is free."""
        snapshots = self.store.snapshots
        try:
            return snapshots.identity(snapshots.snapshot(snapshot.id)) == snapshots.identity(snapshot)
        except SnapshotNotFoundError:
            return None

    def _missing_below(self, run_id: str, recorded: dict[int, Snapshot]) -> list[Snapshot]:
        missing = []
        for snapshot_id in sorted(recorded):
            same = self._same(recorded[snapshot_id])
            if same is False:
                raise UndoInvariantError(
                    f"invariant 4 (one commit per snapshot id): snapshot {snapshot_id} is another commit now"
                )
            if same is None:
                missing.append(recorded[snapshot_id])
        if not missing:
            return []
        ids = [s.id for s in missing]
        if ids != list(range(ids[0], ids[-1] + 1)):
            raise UndoInvariantError(f"invariant 1 (a contiguous history): snapshots {ids} of the run are not contiguous")
        earliest = self.store.snapshots.earliest_id()
        if earliest is not None and ids[-1] + 1 != earliest:
            if ids[-1] + 1 < earliest:
                later = self._run_holding(ids[-1] + 1, run_id)
                raise DependentRunError(
                    f"snapshots {ids[-1] + 1}..{earliest - 1} were removed after run {run_id}"
                    + (f" by run {later}: undo it first" if later else " for good (no noncurrent run holds them)")
                )
            raise UndoInvariantError(f"invariant 1 (a contiguous history): the earliest snapshot is {earliest}, below the run's")
        return list(reversed(missing))

    def _missing_above(self, run_id: str, recorded: dict[int, Snapshot], restored: Snapshot | None) -> list[Snapshot]:
        missing = []
        for snapshot_id in sorted(recorded):
            same = self._same(recorded[snapshot_id])
            if same is False:
                raise UndoInvariantError(
                    f"invariant 4 (one commit per snapshot id): snapshot {snapshot_id}, which the rollback discarded, "
                    "is another commit now (a commit landed after the rollback)"
                )
            if same is None:
                missing.append(recorded[snapshot_id])
        if not missing:
            return []
        if not hasattr(self.store.snapshots, "republish"):
            raise UnsupportedOperationError(f"undoing a rollback is not supported on this table's format ({self.store.uri})")
        latest = self.store.snapshots.latest_id() or 0
        if restored is not None and len(missing) == len(recorded):
            # The rollback left only the snapshot it restored: the discarded ones replace it.
            if latest != restored.id or self.store.snapshots.earliest_id() != restored.id:
                raise UndoInvariantError(
                    f"invariant 4 (no successful commit is lost): commits landed after the rollback to snapshot {restored.id}"
                )
            return missing
        # (An interrupted undo put the first ones back, above the restored copy: the rest follow them.)
        if missing[0].id != latest + 1:
            raise UndoInvariantError(
                f"invariant 1 (a contiguous history): the latest snapshot is {latest}, the rollback discarded from {missing[0].id}"
            )
        return missing

    def _run_holding(self, snapshot_id: int, not_run: str) -> str | None:
        for entry in self.journal.entries():
            if entry.run.run_id != not_run and any(
                Snapshot.from_json(t.encode(), "journal").id == snapshot_id for t in entry.snapshots
            ):
                return entry.run.run_id
        return None

    def _check_tags(self, tags: list[Tag]) -> None:
        for tag in tags:
            self._check_tag_back(tag)

    def _check_tag_back(self, tag: Tag) -> bool:
        """Whether the very tag the run removed is there (False: no tag of that name); ``UndoNameTakenError``
        when another tag has the name."""
        try:
            current = self.store.tags.tag(tag.name)
        except TagNotFoundError:
            return False
        identity = self.store.snapshots.identity
        same = (
            identity(current.snapshot) == identity(tag.snapshot)
            and (current.create_time_millis, current.time_retained_millis, current.source)
            == (tag.create_time_millis, tag.time_retained_millis, tag.source)
        )
        if not same:
            raise UndoNameTakenError(
                f"a tag name names one state: tag {tag.name!r} exists again, on snapshot {current.snapshot_id}, and is "
                f"not the tag the run removed (on snapshot {tag.snapshot_id}); delete or rename it and rerun the undo"
            )
        return True

    def _check_files(self, run_id: str, plan: _UndoPlan) -> None:
        """Every file the snapshots and tags coming back reference is there (invariant 1)."""
        restored = sorted(plan.below + plan.above, key=lambda s: s.id)
        if not restored and not plan.tags:
            return
        files = self.store.files
        try:
            used = files.referenced_by(restored, plan.tags)
        except MissingMetadataError as exc:
            raise RunPurgedError(f"run {run_id}: metadata of what it removed is gone ({exc}); invariant 1 would break") from exc
        for path in sorted(used.data_files):
            if not files.exists(path):
                raise RunPurgedError(
                    f"run {run_id}: {path} is gone (purged by another run, or deleted): the snapshots and tags it "
                    "removed would not be readable (invariant 1)"
                )

    # -- applying: each step idempotent ---------------------------------------------------------

    def _apply(self, plan: _UndoPlan, result: UndoResult) -> None:
        snapshots = self.store.snapshots
        for snapshot in plan.below:
            snapshots.restore(snapshot)  # writes nothing when the id is there: back already, or another commit
            if self._same(snapshot) is not True:
                raise UndoInvariantError(f"invariant 4 (one commit per snapshot id): snapshot {snapshot.id} is another commit now")
            result.restored_snapshot_ids.append(snapshot.id)
        gap = range(plan.restored.id + 1, plan.above[0].id) if plan.restored is not None and plan.above else range(0)
        if gap:
            # Republishing above a rollback's restored copy opens a gap below the first one. A writer probing from a
            # LATEST hint at the copy would commit into it, beside the history: the hint goes just below the first
            # one before it appears, so every writer finds it from then on (a crash in between leaves no such hint).
            snapshots.write_latest_hint(gap[-1])
        for snapshot in plan.above:
            if not snapshots.republish(snapshot) and self._same(snapshot) is not True:
                raise UndoInvariantError(f"invariant 4 (one commit per snapshot id): a commit took snapshot id {snapshot.id}")
            result.restored_snapshot_ids.append(snapshot.id)
            if gap and any(snapshots.exists(i) for i in gap):
                # A commit on the rollback's state landed before the first one was back: it stays the latest.
                self.store.files.delete(list(snapshots.unpublish([snapshot.id]) or []))
                raise UndoInvariantError(
                    f"invariant 4 (no successful commit is lost): a commit landed after the rollback to snapshot {plan.restored.id}"
                )
            gap = range(0)
        if plan.below:
            snapshots.write_earliest_hint(min(s.id for s in plan.below))
        if plan.restored_id is not None and plan.first_above is not None:
            # The discarded history is back above it (this call's, or an interrupted undo's): the copy the
            # rollback restored goes (its tag keeps it). Unpublishing again what is gone returns what an
            # interrupted one set aside, to delete.
            if plan.restored is not None or not snapshots.exists(plan.restored_id):
                snapshots.write_earliest_hint(plan.first_above)
                self.store.files.delete(list(snapshots.unpublish([plan.restored_id]) or []))
        intents = IntentManager(self.store.lifecycle)
        for tag in plan.tags:
            # Announced like any new tag: a plan that starts now sees the intent and keeps its files.
            intent = intents.announce(Intent(TAG_INTENT, tag=tag))
            try:
                # False: the very tag is there (an interrupted undo's), or a name taken since the checks (refused);
                # gone again meanwhile: created now.
                while not self.store.tags.create(tag) and not self._check_tag_back(tag):
                    pass
            finally:
                intents.withdraw(intent)
            result.restored_tags.append(tag.name)
        for consumer in plan.consumers:
            current = self.store.consumers.get(consumer.id)
            if current is None or current.next_snapshot < consumer.next_snapshot:
                self.store.consumers.write(consumer)  # never moves a consumer back
                result.restored_consumers.append(consumer.id)
        # The snapshot files unpublishing moved aside are copies of what is back now.
        self.store.files.delete(plan.leftovers)
