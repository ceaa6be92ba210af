"""Deletion plans: how expiry and tag deletion delete files crash-safely.

Rules:
- A plan (``plan/plan-<id>.json``) is written before anything is deleted. It
  lists the snapshot files to unpublish, the candidate data files and
  manifests, and a *fence*: no new tag or consumer may point below it.
- Executing a plan: re-read tags (fail closed), unpublish (snapshot files in
  ascending order, or the tag file), then delete the candidates no tag holds,
  then the plan. Every step is idempotent, so a rerun after a crash at any
  point finishes the job; until then the plan's fence stays up.
- Tags and consumers are written first and checked against the plans after:
  either the plan's executor sees the new tag/consumer, or the writer sees the
  plan and backs out. That closes the "tag created while expiry ran" race
  (Paimon #9220) without locks.
- A candidate data file deleted from the table at snapshot ``s`` can only be
  held by the newest tag below ``s`` (files are never re-added), so one tag's
  file set decides; for a deleted tag at ``t``, its neighbours decide.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_snaptable.core.errors import CorruptMetadataError, MissingMetadataError, SnapshotNotFoundError, TagNotFoundError
from airflow_snaptable.core.intents import IntentManager
from airflow_snaptable.core.manifest import manifest_path
from airflow_snaptable.core.readds import ReaddRegistry
from airflow_snaptable.core.snapshot import SnapshotManager, snapshot_path
from airflow_snaptable.core.tags import tag_path

if TYPE_CHECKING:
    from airflow_snaptable.core.table import Table
    from airflow_snaptable.core.tags import Tag

PLAN_DIR = "plan"
EXPIRE = "expire"
DELETE_TAG = "delete-tag"
ROLLBACK = "rollback"


@dataclass(frozen=True)
class DataCandidate:
    path: str
    size: int
    #: Held if the newest tag with snapshot id < ``below`` holds it (``below``: the snapshot that deleted it last).
    below: int
    #: And (tag deletion) if the oldest tag with snapshot id >= ``from_id`` holds it.
    from_id: int | None = None
    #: The planner saw it deleted and added back: it has several live intervals, so any tag may hold it.
    readded: bool = False


@dataclass
class DeletionPlan:
    kind: str
    #: Snapshot ids below the fence are being expired (0: none).
    fence: int
    #: Snapshot files to remove, in this order (ascending for expiry, descending for rollback).
    snapshot_ids: list[int]
    data_files: list[DataCandidate]
    manifest_files: list[tuple[str, int]]
    #: Tags this plan deletes.
    tag_names: list[str] = field(default_factory=list)
    #: Rollback: snapshot ids above the ceiling are being discarded.
    ceiling: int | None = None
    #: Rollback to an expired snapshot: its JSON (from the tag), recreated first.
    restore_snapshot: str | None = None
    #: Create time of each tag in ``tag_names``: a later tag of the same name is not this plan's.
    tag_create_times: dict[str, int] = field(default_factory=dict)
    #: Rollback: ``[id, base manifest list]`` of the latest snapshot it was planned on. Its owner
    #: activates it only while that snapshot is still the latest, so once it is gone the plan is dead.
    planned_latest: list | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: Read from a pending file (set by read_plans; not stored).
    pending: bool = False

    @property
    def path(self) -> str:
        return f"{PLAN_DIR}/plan-{self.id}.json"

    def to_json(self, fence_only: bool = False) -> bytes:
        """The plan as JSON; ``fence_only`` leaves out the file lists (all a pending plan's readers need)."""
        doc = {
            "kind": self.kind,
            "fence": self.fence,
            "snapshot_ids": self.snapshot_ids,
            "data_files": [] if fence_only else [
                {"path": c.path, "size": c.size, "below": c.below, "from_id": c.from_id, "readded": c.readded}
                for c in self.data_files
            ],
            "manifest_files": [] if fence_only else [list(m) for m in self.manifest_files],
            "tag_names": self.tag_names,
            "ceiling": self.ceiling,
            "restore_snapshot": self.restore_snapshot,
            "tag_create_times": self.tag_create_times,
            "planned_latest": self.planned_latest,
            "id": self.id,
        }
        return json.dumps(doc).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "DeletionPlan":
        try:
            doc = json.loads(data)
            doc["data_files"] = [DataCandidate(**d) for d in doc["data_files"]]
            doc["manifest_files"] = [tuple(m) for m in doc["manifest_files"]]
            return cls(**doc)
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot parse deletion plan: {exc}") from exc


@dataclass
class PlanEffect:
    manifest_files: list[tuple[str, int]]
    data_files: list[DataCandidate]
    protected_data_files: int

    @property
    def bytes(self) -> int:
        return sum(size for _name, size in self.manifest_files) + sum(c.size for c in self.data_files)


@dataclass
class PlanOutcome:
    deleted_snapshot_files: int = 0
    deleted_data_files: list[str] = field(default_factory=list)
    deleted_manifest_files: list[str] = field(default_factory=list)
    bytes_freed: int = 0
    protected_data_files: int = 0


@dataclass
class Protection:
    """What a plan must not delete, computed (fail closed) before anything is unpublished."""

    held_manifests: set[str]
    protected_paths: set[str]
    #: Re-add entries of snapshots a rollback discards: retired once it has run.
    discarded_readds: list


STALE_PENDING_SECONDS = 600


def read_plans(storage, prefix: str = "") -> list[DeletionPlan]:
    """Unfinished plans whose file name starts with ``prefix`` ("plan-": active; "": active and pending).

    A pending plan older than STALE_PENDING_SECONDS lost its owner (a live owner takes
    milliseconds from pending to active): it fences nothing and is left out.
    """
    found = []
    now = time.time()  # compared with storage modification times, not the table's clock
    for rel, _size, mtime in storage.list_files(PLAN_DIR):
        name = rel.rsplit("/", 1)[-1]
        if not (name.startswith(prefix) and name.endswith(".json")):
            continue
        if name.startswith("pending-") and mtime is not None and now - mtime > STALE_PENDING_SECONDS:
            continue
        path = f"{PLAN_DIR}/{name}"
        try:
            data = storage.read_bytes(path)
        except FileNotFoundError:
            continue  # finished while we listed
        plan = DeletionPlan.from_json(data, where=storage.full_uri(path))
        plan.pending = name.startswith("pending-")
        found.append(plan)
    return found


def is_dead_rollback(storage, plan: DeletionPlan) -> bool:
    """A pending rollback whose planned latest snapshot is gone or replaced: its owner's check can
    never pass again (the table moved on, e.g. a rerun of the same rollback finished), so it fences nothing."""
    if plan.kind != ROLLBACK or plan.planned_latest is None:
        return False
    snapshot_id, base_list = plan.planned_latest
    try:
        return SnapshotManager(storage).snapshot(snapshot_id).base_manifest_list != base_list
    except SnapshotNotFoundError:
        return True


def rollback_ceiling(storage) -> int | None:
    """Snapshot ids above this are being discarded by an unfinished rollback (None: none)."""
    return min(
        (p.ceiling for p in read_plans(storage) if p.ceiling is not None and not (p.pending and is_dead_rollback(storage, p))),
        default=None,
    )


class PlanManager:
    """Publishes and executes deletion plans.

    A plan is first *pending* (``plan/pending-<id>.json``): a fence for new tags
    and consumers, but never executed by anyone else, so its owner can still
    drop it. Once its owner has re-checked consumers and computed what tags
    protect, it becomes *active* (``plan/plan-<id>.json``) and anyone may finish it.
    """

    def __init__(self, table: "Table"):
        self.table = table
        self.storage = table.storage
        self._files_by_tag: dict[str, set[str]] = {}

    def plans(self) -> list[DeletionPlan]:
        """Active, unfinished plans. An unreadable plan is an error: its fence must not silently disappear."""
        return read_plans(self.storage, "plan-")

    def fences(self) -> list[DeletionPlan]:
        """Every plan whose fence stands: active and pending."""
        return read_plans(self.storage)

    def fence(self) -> int:
        """Snapshot ids below this are being removed by an unfinished plan (0: none)."""
        return max((p.fence for p in self.fences() if p.kind == EXPIRE), default=0)

    def ceiling(self) -> int | None:
        """Snapshot ids above this are being discarded by an unfinished rollback (None: none)."""
        return rollback_ceiling(self.storage)

    def doomed_tags(self) -> set[str]:
        return {name for p in self.fences() for name in p.tag_names}

    def publish(self, plan: DeletionPlan) -> None:
        """Publish a plan as active at once (its owner has nothing to re-check)."""
        self.storage.write_bytes(plan.path, plan.to_json())

    def publish_pending(self, plan: DeletionPlan) -> None:
        # Only the owner executes a pending plan, and it holds the lists in memory.
        self.storage.write_bytes(self._pending_path(plan), plan.to_json(fence_only=True))

    def activate(self, plan: DeletionPlan) -> None:
        self.storage.write_bytes(plan.path, plan.to_json())
        self.storage.delete(self._pending_path(plan))

    def discard_pending(self, plan: DeletionPlan) -> None:
        self.storage.delete(self._pending_path(plan))

    @staticmethod
    def _pending_path(plan: DeletionPlan) -> str:
        return f"{PLAN_DIR}/pending-{plan.id}.json"

    def finish_all(self) -> PlanOutcome:
        """Complete every active plan (left by a crash); drop pending plans whose owner died."""
        total = PlanOutcome()
        for plan in self.plans():
            outcome = self.execute(plan)
            total.deleted_snapshot_files += outcome.deleted_snapshot_files
            total.deleted_data_files += outcome.deleted_data_files
            total.deleted_manifest_files += outcome.deleted_manifest_files
            total.bytes_freed += outcome.bytes_freed
        now = time.time()  # compared with storage modification times, not the table's clock
        for rel, _size, mtime in self.storage.list_files(PLAN_DIR):
            name = rel.rsplit("/", 1)[-1]
            # A pending plan deleted nothing; one this old lost its owner.
            if name.startswith("pending-") and mtime is not None and now - mtime > STALE_PENDING_SECONDS:
                self.storage.delete(rel)
        for plan in read_plans(self.storage, "pending-"):
            if is_dead_rollback(self.storage, plan):
                self.storage.delete(self._pending_path(plan))
        IntentManager(self.storage).drop_stale(self.table.snapshot_manager.earliest_id())
        return total

    def protection(self, plan: DeletionPlan) -> Protection:
        """Read tags, their manifests and file sets, and the re-add registry. Raises on anything unreadable."""
        self._files_by_tag = {}
        doomed = self._doomed_tag_names(plan)
        # Intents first: a writer withdraws its intent only after publishing the tag, so
        # one of the two listings sees every tag whose writer passed its check.
        announced = self._announced_tags()
        tags = [t for t in self.table.tag_manager.tags() if t.name not in doomed] + announced
        tags.sort(key=lambda t: (t.snapshot_id, t.name))
        readds = ReaddRegistry(self.storage).entries()
        multi_interval = ReaddRegistry.multi_interval(readds)  # discarded re-adds included: the intervals were real
        discarded = []
        if plan.kind == ROLLBACK and plan.ceiling is not None:
            # Liveness at discarded snapshots was accounted for when the rollback was planned.
            discarded = [e for e in readds if e.live and e.snapshot_id is not None and e.snapshot_id > plan.ceiling]
        # A re-add at an expired snapshot says nothing about files live now (its entry stays as a marker).
        earliest = self.table.snapshot_manager.earliest_id() or 0
        readds = [e for e in readds if e not in discarded and (e.pending or (e.live and e.snapshot_id >= earliest))]
        return Protection(
            held_manifests=self._manifests_held_by(tags),
            protected_paths={c.path for c in plan.data_files if self.is_protected(c, tags, readds, multi_interval)},
            discarded_readds=discarded,
        )

    def _announced_tags(self) -> list["Tag"]:
        """Tags being created right now (core/intents.py): they hold their files like tags.

        An intent with a missing manifest was abandoned (an intent that passed its
        check never loses a file), so it protects nothing and must not fail the plan.
        """
        announced = []
        for tag in IntentManager(self.storage).tags():
            try:
                self._tag_files(tag)
                self.table.manifest_io.names_of(tag.snapshot)
            except MissingMetadataError:
                continue
            announced.append(tag)
        return announced

    def _doomed_tag_names(self, plan: DeletionPlan) -> set[str]:
        """The plan's tags that are still the very tags it planned for (a new tag of the same name is not)."""
        doomed = set()
        for name in plan.tag_names:
            expected = plan.tag_create_times.get(name)
            try:
                current = self.table.tag_manager.tag(name)
            except TagNotFoundError:
                continue
            if expected is None or current.create_time_millis == expected:
                doomed.add(name)
        return doomed

    def execute(self, plan: DeletionPlan, protection: Protection | None = None) -> PlanOutcome:
        table = self.table
        outcome = PlanOutcome()
        doomed = self._doomed_tag_names(plan)
        if protection is None:
            protection = self.protection(plan)

        # Unpublish first, delete files after: a crash in between leaks, never loses.
        if plan.restore_snapshot is not None and plan.ceiling is not None:
            if not table.snapshot_manager.exists(plan.ceiling):
                # The hint goes down before the snapshot reappears: below an existing EARLIEST
                # there are only ids a stale commit re-created (see SnapshotManager.earliest_id).
                table.snapshot_manager.write_earliest_hint(plan.ceiling)
                self.storage.create_exclusive(snapshot_path(plan.ceiling), plan.restore_snapshot.encode())
        for name in doomed:
            self.storage.delete(tag_path(name))
        for snapshot_id in plan.snapshot_ids:
            self.storage.delete(snapshot_path(snapshot_id))
            outcome.deleted_snapshot_files += 1
        if plan.kind == ROLLBACK and plan.ceiling is not None:
            # Commits that landed after the rollback last read LATEST are discarded too,
            # newest first (ids stay contiguous); their writers see the fence and fail.
            for snapshot_id in sorted(table.snapshot_manager.list_ids(), reverse=True):
                if snapshot_id <= plan.ceiling:
                    break
                self.storage.delete(snapshot_path(snapshot_id))
                outcome.deleted_snapshot_files += 1
        if plan.kind == EXPIRE and plan.snapshot_ids:
            table.snapshot_manager.write_earliest_hint(plan.fence)
        if plan.kind == ROLLBACK and plan.ceiling is not None:
            table.snapshot_manager.write_latest_hint(plan.ceiling)
            if plan.restore_snapshot is not None:
                table.snapshot_manager.write_earliest_hint(plan.ceiling)

        effect = self.effect(plan, protection)
        self.storage.delete_files([manifest_path(name) for name, _size in effect.manifest_files])
        outcome.deleted_manifest_files = [name for name, _size in effect.manifest_files]
        self.storage.delete_files([c.path for c in effect.data_files])
        outcome.deleted_data_files = [c.path for c in effect.data_files]
        outcome.bytes_freed = effect.bytes
        outcome.protected_data_files = effect.protected_data_files

        registry = ReaddRegistry(self.storage)
        for entry in protection.discarded_readds:
            registry.retire(entry)
        registry.forget(set(outcome.deleted_data_files))
        self.storage.delete(plan.path)
        return outcome

    @staticmethod
    def effect(plan: DeletionPlan, protection: Protection) -> "PlanEffect":
        """The manifests and data files executing ``plan`` deletes: its candidates minus what ``protection`` holds.

        The one rule both a real run and a dry run apply.
        """
        data = [c for c in plan.data_files if c.path not in protection.protected_paths]
        return PlanEffect(
            manifest_files=[(name, size) for name, size in plan.manifest_files if name not in protection.held_manifests],
            data_files=data,
            protected_data_files=len(plan.data_files) - len(data),
        )

    def is_protected(self, candidate: DataCandidate, tags: list["Tag"], readds, multi_interval: frozenset[str]) -> bool:
        """Held by a tag, or live again at or after its deletion (a re-add).

        A file with one live interval [added, below) can only be in the newest tag below
        ``below``. A file added back has several intervals, and a tag in any of them
        holds it: for those every tag is asked.
        """
        if any(e.protects(candidate.path, candidate.below) for e in readds):
            return True
        if candidate.readded or candidate.path in multi_interval:
            return any(candidate.path in self._tag_files(tag) for tag in tags)
        return self._held(candidate, tags)

    def _held(self, candidate: DataCandidate, tags: list["Tag"]) -> bool:
        below = [t for t in tags if t.snapshot_id < candidate.below]
        if below and candidate.path in self._tag_files(below[-1]):
            return True
        if candidate.from_id is not None:
            above = [t for t in tags if t.snapshot_id >= candidate.from_id]
            if above and candidate.path in self._tag_files(above[0]):
                return True
        return False

    def _tag_files(self, tag: "Tag") -> set[str]:
        key = (tag.name, tag.create_time_millis, tag.snapshot_id)  # an announced tag may share a name with a tag
        files = self._files_by_tag.get(key)
        if files is None:
            files = self._files_by_tag[key] = set(self.table.manifest_io.read_state(tag.snapshot))
        return files

    def _manifests_held_by(self, tags: list["Tag"]) -> set[str]:
        held: set[str] = set()
        for tag in tags:
            held |= self.table.manifest_io.names_of(tag.snapshot)
        return held
