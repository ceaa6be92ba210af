"""Creating, replacing, deleting and expiring tags, checked against the deletion plans.

Rules:
- A new tag is *announced* first (core/lifecycle/intents.py), then checked against the plans'
  fences, and only then published; the intent is withdrawn last. Either a plan's
  executor sees the intent and protects its files, or the writer sees the plan's fence
  and backs out; a writer that crashes leaves no broken tag.
- An expired snapshot can be tagged while another tag holds it (the tag copies the
  snapshot, so its state outlives the snapshot).
- Deleting a tag whose snapshot is retained only removes its file (expiry frees what it
  held later). Otherwise a deletion plan frees the files and metadata only it held,
  checked against the neighbouring tags and the earliest snapshot (core/lifecycle/protection.py).
- Every call that reads what is still used first finishes unfinished plans.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Callable

from airflow_snaptable.core.arguments.checks import check_exclusive, check_int
from airflow_snaptable.core.errors import (
    CommitConflictError,
    CorruptMetadataError,
    InvalidArgumentError,
    SnapshotNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
)
from airflow_snaptable.core.lifecycle.intents import TAG as TAG_INTENT, Intent, IntentManager
from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.lifecycle.noncurrent.journal import DeletingMark, NoncurrentJournal, entry_key
from airflow_snaptable.core.lifecycle.noncurrent.record import record_removed
from airflow_snaptable.core.lifecycle.plan_executor import MAX_PLANNING_ATTEMPTS, PlanExecutor
from airflow_snaptable.core.lifecycle.deletion_plans import DELETE_TAG, DataCandidate, DeletionPlan
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.lifecycle.store import TableStore
from airflow_snaptable.core.native.tags import IF_EXISTS, MANUAL, Tag, retained_millis
from airflow_snaptable.core.arguments.times import to_millis


def snapshot_or_tagged(store: TableStore, snapshot_id: int) -> Snapshot:
    """The retained snapshot ``snapshot_id``, or a tag's copy of it once it expired.

    A snapshot file below the EARLIEST floor is an expired id that a stale commit re-created and
    is about to undo: never the answer, though a tag may hold the real snapshot of that id.
    """
    snapshots = store.snapshots
    if snapshot_id >= snapshots.earliest_floor():
        try:
            return snapshots.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            pass
    for tag in store.tags.tags():
        if tag.snapshot_id == snapshot_id:
            return tag.snapshot
    raise SnapshotNotFoundError(f"snapshot {snapshot_id} is not retained and no tag holds it")


class TagLifecycle:
    """The tags of one table: created and deleted safely while expiry and rollbacks run."""

    def __init__(
        self, store: TableStore, executor: PlanExecutor, clock: Callable[[], int], default_time_retained: timedelta | None
    ):
        self.store = store
        self.executor = executor
        self.plans = executor.plans
        self.clock = clock
        #: Option ``tag.default-time-retained``: the time to live of a tag created without one.
        self.default_time_retained = default_time_retained

    def create(
        self, name: str, snapshot_id: int | None = None, time_retained=None, source: str = MANUAL, now_millis: int | None = None
    ) -> Tag:
        """Tag a snapshot (default: the latest). A snapshot that expired can be tagged while another tag holds it."""
        validate_name(name, "tag")
        if time_retained is None and self.default_time_retained is not None:
            time_retained = self.default_time_retained
        retained = retained_millis(time_retained)
        if snapshot_id is None:
            snapshot = self.store.snapshots.latest_snapshot()
            if snapshot is None:
                raise SnapshotNotFoundError("the table has no snapshot to tag")
        else:
            snapshot = snapshot_or_tagged(self.store, check_int(snapshot_id, "snapshot_id", minimum=1))
        tag = Tag(name, snapshot, self.clock() if now_millis is None else now_millis, retained, source)
        if self.store.tags.exists(name):
            raise TagAlreadyExistsError(f"tag {name!r} exists already")
        # Announce, check, publish (core/lifecycle/intents.py): a crash at any point leaves no broken tag.
        intents = IntentManager(self.store.lifecycle)
        intent = intents.announce(Intent(TAG_INTENT, tag=tag))
        try:
            if not self._still_held(tag):
                raise SnapshotNotFoundError(f"snapshot {snapshot.id} was expired while the tag was being created")
            if not self.store.tags.create(tag):
                raise TagAlreadyExistsError(f"tag {name!r} exists already")
        finally:
            intents.withdraw(intent)
        return tag

    def create_or_keep(
        self, name: str, snapshot_id: int | None = None, *, as_of=None, time_retained=None, if_exists: str = "fail"
    ) -> tuple[Tag, bool]:
        """Tag ``snapshot_id``, or the latest snapshot at ``as_of``, or the latest; returns (the tag, kept).

        ``as_of`` picks the snapshot by time, so a late or backfilled run tags the state at a period's
        boundary. ``if_exists="skip"`` makes re-runs idempotent: when the tag exists and points at the
        requested snapshot, that tag is the result (kept: True); when it points elsewhere,
        TagAlreadyExistsError. It never checks before creating: the create is an atomic
        create-if-absent, and only its "exists already" answer leads to the skip.
        """
        check_exclusive({"snapshot_id": snapshot_id, "as_of": as_of})
        if if_exists not in IF_EXISTS:
            raise InvalidArgumentError(f"if_exists must be one of {', '.join(IF_EXISTS)}, got {if_exists!r}")
        if as_of is not None:
            snapshot = self.store.snapshots.snapshot_at(to_millis(as_of))
            if snapshot is None:
                raise InvalidArgumentError(f"no retained snapshot at or before {as_of}")
            snapshot_id = snapshot.id
        try:
            return self.create(name, snapshot_id, time_retained), False
        except TagAlreadyExistsError:
            if if_exists != "skip":
                raise
            existing = self.store.tags.tag(name)  # the create lost to this tag: it exists (or was deleted since: an error)
            requested = self.store.snapshots.latest_id() if snapshot_id is None else snapshot_id
            if existing.snapshot_id != requested:
                raise TagAlreadyExistsError(
                    f"tag {existing.name!r} exists already and points at snapshot {existing.snapshot_id}, "
                    f"not at the requested snapshot {requested}: not skipped (delete or rename the tag)"
                ) from None
            return existing, True

    def _still_held(self, tag: Tag) -> bool:
        """After writing ``tag``'s intent: is its snapshot still kept by the table or by another tag nobody is deleting?

        Either an expiry plan's executor reads intents after this one was written (and so
        protects its files), or this check sees that plan's fence and backs out.
        """
        snapshots = self.store.snapshots
        ceiling = self.plans.ceiling()
        if ceiling is not None and tag.snapshot_id > ceiling:
            return False  # a rollback is discarding that snapshot
        latest = snapshots.latest_id()
        if latest is None or tag.snapshot_id > latest:
            return False  # a commit a rollback discarded, about to undo itself
        if tag.snapshot_id >= max(self.plans.fence(), snapshots.earliest_floor()) and snapshots.exists(tag.snapshot_id):
            return True
        doomed = self.plans.doomed_tags()
        identity = snapshots.identity(tag.snapshot)
        return any(
            snapshots.identity(other.snapshot) == identity and other.name != tag.name and other.name not in doomed
            for other in self.store.tags.tags()
        )

    def delete(self, name: str) -> list[str]:
        """Delete a tag; if its snapshot expired, also the files only this tag still held. Returns deleted paths."""
        validate_name(name, "tag")
        # An unfinished plan (maybe this very deletion, interrupted) decides what is still used: finish it first.
        interrupted = name in {n for p in self.plans.plans() for n in p.tag_names}
        finished = self.executor.finish_all()
        if interrupted and not self.store.tags.exists(name):
            return finished.deleted_data_files  # a crashed run of this same call, now complete
        for _attempt in range(MAX_PLANNING_ATTEMPTS):
            planned_on = self.executor.view()
            tag = self.store.tags.tag(name)
            plan = self._release_plan(tag, delete_tag_file=True)
            if plan is None:
                # No plan fences this one against an undo (plan_executor.py): a deleting mark does (noncurrent/journal.py).
                with DeletingMark(NoncurrentJournal(self.store.lifecycle), DELETE_TAG) as mark:
                    mark.check(self.store.uri, "the tag was not deleted")
                    record_removed(self.store, self.executor.noncurrent, entry_key("tag", name, str(tag.create_time_millis)), tags=[tag])
                    self.store.tags.delete(name)  # the snapshot still holds everything; expiry frees it later
                return []
            outcome = self.executor.run(plan, planned_on=planned_on)
            if outcome is not None:
                return outcome.deleted_data_files
            # An undo brought snapshots back (or an expiry moved the earliest) while this planned: what only
            # the tag held is planned again against the history as it is now.
        raise CommitConflictError(f"{self.store.uri}: the history kept changing while the deletion of tag {name!r} was planned; nothing was deleted")

    def replace(self, name: str, snapshot_id: int, time_retained=None) -> Tag:
        """Point an existing tag at another snapshot in one write, then free what only the old target held."""
        validate_name(name, "tag")
        self.executor.finish_all()
        for _attempt in range(MAX_PLANNING_ATTEMPTS):
            planned_on = self.executor.view()
            old = self.store.tags.tag(name)
            target = self.store.snapshots.snapshot(check_int(snapshot_id, "snapshot id", minimum=1))  # live, checked first
            retained = retained_millis(time_retained) if time_retained is not None else old.time_retained_millis
            new = Tag(name, target, self.clock(), retained, old.source)
            plan = self._release_plan(old, delete_tag_file=False)
            if plan is None:
                break
            if self.executor.noncurrent is not None:
                plan.noncurrent = self.executor.noncurrent.to_dict()  # a run with a retention deletes nothing here either
            # Active once proven (plan_executor.py): whoever finishes it (this call, or the next maintenance run
            # after a crash) frees only what no tag holds then, the old or the new version of this one.
            if self.executor.publish_proven(plan, planned_on):
                break
        else:
            raise CommitConflictError(f"{self.store.uri}: the history kept changing while tag {name!r} was being replaced; nothing changed")
        intents = IntentManager(self.store.lifecycle)
        intent = intents.announce(Intent(TAG_INTENT, tag=new))
        try:
            if not self._still_held(new):
                raise SnapshotNotFoundError(f"snapshot {target.id} was expired while the tag was being replaced")
            self.store.tags.replace(new)
        finally:
            intents.withdraw(intent)
        if plan is not None:
            self.executor.execute(plan)
        return new

    def rename(self, name: str, new_name: str) -> Tag:
        """Give a tag another name (Paimon's renameTag): same snapshot, create time, time to live and source.

        The new tag is published (announced and checked like a new one) before the old file
        goes, so the snapshot is held throughout; a rerun after a crash in between finds both
        on the same snapshot and removes the old one.
        """
        validate_name(name, "tag")
        validate_name(new_name, "tag")
        if name == new_name:
            raise InvalidArgumentError(f"tag {name!r} already has that name")
        old = self.store.tags.tag(name)
        renamed = Tag(new_name, old.snapshot, old.create_time_millis, old.time_retained_millis, old.source)
        snapshots = self.store.snapshots
        if self.store.tags.exists(new_name):
            existing = self.store.tags.tag(new_name)
            if snapshots.identity(existing.snapshot) != snapshots.identity(old.snapshot):
                raise TagAlreadyExistsError(f"tag {new_name!r} exists already")
            self.store.tags.delete(name)  # a crashed rename of this same tag: finish it
            return existing
        intents = IntentManager(self.store.lifecycle)
        intent = intents.announce(Intent(TAG_INTENT, tag=renamed))
        try:
            if not self._still_held(renamed):
                raise TagNotFoundError(f"tag {name!r} was deleted while it was being renamed")
            if not self.store.tags.create(renamed):
                raise TagAlreadyExistsError(f"tag {new_name!r} exists already")
        finally:
            intents.withdraw(intent)
        self.store.tags.delete(name)
        return renamed

    def expire(self, now_millis: int) -> list[str]:
        """Delete the tags whose time to live has passed at ``now_millis``; returns their names."""
        self.executor.finish_all()  # an interrupted run's deletions first
        expired = [t.name for t in self.store.tags.tags() if t.is_expired(now_millis)]
        for name in expired:
            try:
                self.delete(name)
            except TagNotFoundError:
                pass  # deleted concurrently: the outcome wanted
        return expired

    def _published(self, tag: Tag) -> bool:
        """Is the tag's own snapshot still published (not an expired id a stale commit re-created)?"""
        snapshots = self.store.snapshots
        try:
            return snapshots.identity(snapshots.snapshot(tag.snapshot_id)) == snapshots.identity(tag.snapshot)
        except SnapshotNotFoundError:
            return False

    def _release_plan(self, tag: Tag, delete_tag_file: bool) -> DeletionPlan | None:
        """The plan freeing the files only ``tag`` holds, or None while its snapshot is still published.

        A published snapshot holds what the tag holds, and so do the snapshots after it, even when
        an expiry in flight is about to remove it: until it has, that expiry (or a later one) frees
        the files. Once it is gone, the snapshots after it start at the earliest snapshot, which is
        then the tag's right neighbour (Paimon's TagManager: the earliest snapshot or the next tag).
        """
        snapshots, files = self.store.snapshots, self.store.files
        if self._published(tag):
            return None
        for attempt in range(3):
            try:
                earliest = snapshots.earliest_snapshot()
                kept_files = set() if earliest is None else set(files.state(earliest))
                kept_metadata = set() if earliest is None else set(files.metadata_files(earliest))
                break
            except (SnapshotNotFoundError, CorruptMetadataError):
                if attempt == 2:
                    raise  # not a moving EARLIEST: real damage
        if earliest is not None and earliest.id <= tag.snapshot_id:
            # Not the right neighbour: the files the snapshots after the tag's hold were not all read.
            # Only a tagged id re-created and undone meanwhile gets here; keep everything (orphan cleaning frees it).
            return None
        data = [
            DataCandidate(f.path, f.file_size, below=tag.snapshot_id + 1, from_id=tag.snapshot_id)
            for f in files.state(tag.snapshot).values()
            if f.path not in kept_files
        ]
        metadata = sorted((n, s) for n, s in files.metadata_files(tag.snapshot).items() if n not in kept_metadata)
        return DeletionPlan(
            kind=DELETE_TAG,
            fence=0,
            snapshot_ids=[],
            data_files=data,
            manifest_files=metadata,
            tag_names=[tag.name] if delete_tag_file else [],
            tag_create_times={tag.name: tag.create_time_millis} if delete_tag_file else {},
        )
