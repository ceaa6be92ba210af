"""Deletion plans: the files that let expiry, tag deletion and rollback delete crash-safely.

Rules:
- A plan (``plan/plan-<id>.json``) is written before anything is deleted. It
  lists the snapshots to unpublish, the candidate data files and metadata
  files, and a *fence*: no new tag or consumer may point below it (a rollback's
  *ceiling*: none above it).
- A plan is first *pending* (``plan/pending-<id>.json``, its fence only): its
  owner re-checks what came in before the fence and reads what protects, then
  makes it *active*, and from then on anyone may finish it. The sequence is
  written once, in core/lifecycle/plan_executor.py; what protects, in core/lifecycle/protection.py.
- Tags and consumers are written first and checked against the plans after:
  either the plan's executor sees the new tag/consumer, or the writer sees the
  plan and backs out. That closes the "tag created while expiry ran" race
  (Paimon #9220) without locks.
- A pending plan older than STALE_PENDING_SECONDS lost its owner, and a pending
  rollback whose planned latest snapshot is gone or replaced can never pass its
  owner's check: both fence nothing.

The plan files live in the store's lifecycle storage (core/lifecycle/store.py); the snapshot
ids and identities in them are the store's.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from airflow_snaptable.core.errors import CorruptMetadataError, SnapshotNotFoundError
from airflow_snaptable.core.io.local_files import is_abandoned_temp
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.store import SnapshotStore, TableStore
from airflow_snaptable.core.io.table_paths import checked_file_name, checked_relative_path

PLAN_DIR = "plan"
EXPIRE = "expire"
DELETE_TAG = "delete-tag"
ROLLBACK = "rollback"
#: A live owner takes milliseconds from pending to active; a pending plan this old lost its owner.
STALE_PENDING_SECONDS = 600


@dataclass(frozen=True, slots=True)  # slots: a plan may hold millions
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
    #: Metadata files (name as the FileStore names them, bytes) to delete with them.
    manifest_files: list[tuple[str, int]]
    #: Tags this plan deletes.
    tag_names: list[str] = field(default_factory=list)
    #: Rollback: snapshot ids above the ceiling are being discarded.
    ceiling: int | None = None
    #: Rollback to an expired snapshot: its JSON (from the tag), recreated first.
    restore_snapshot: str | None = None
    #: Create time of each tag in ``tag_names``: a later tag of the same name is not this plan's.
    tag_create_times: dict[str, int] = field(default_factory=dict)
    #: Rollback: ``[id, identity]`` (SnapshotStore.identity; native: its base manifest list) of the latest
    #: snapshot it was planned on. Its owner activates it only while that snapshot is still the latest, so
    #: once it is gone the plan is dead.
    planned_latest: list | None = None
    #: A plan in parts (core/lifecycle/expiry/parts.py): ``data_files`` is empty and the candidates are streamed
    #: from the deltas of the snapshots recorded here (``{"snapshots": [snapshot dicts], "changes_from": id}``),
    #: a part at a time, each part recorded (:meth:`PlanManager.record_part`) before its deletes.
    parted: dict | None = None
    #: A run with a retention (core/lifecycle/noncurrent/journal.py ``NoncurrentRun.to_dict``): whoever finishes
    #: the plan records what it removes in the noncurrent journal and deletes no file.
    noncurrent: dict | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: Read from a pending file (set by read_plans; not stored).
    pending: bool = False

    @property
    def path(self) -> str:
        return f"{PLAN_DIR}/plan-{self.id}.json"

    @property
    def part_path(self) -> str:
        """Where a plan in parts records the part it is deleting (not ``.json``: never read as a plan)."""
        return f"{PLAN_DIR}/plan-{self.id}.part"

    def to_json(self, fence_only: bool = False) -> bytes:
        """The plan as JSON; ``fence_only`` leaves out the file lists (all a pending plan's readers need).

        The candidates are encoded in chunks straight to bytes, each as an object without the
        fields at their defaults (``from_id`` null, ``readded`` false; :meth:`from_json` fills
        those in, as did every earlier reader): a plan of a million files never exists as a
        million dicts, nor as text and bytes at once.
        """
        doc = {
            "kind": self.kind,
            "fence": self.fence,
            "snapshot_ids": self.snapshot_ids,
            "manifest_files": [] if fence_only else [list(m) for m in self.manifest_files],
            "tag_names": self.tag_names,
            "ceiling": self.ceiling,
            "restore_snapshot": self.restore_snapshot,
            "tag_create_times": self.tag_create_times,
            "planned_latest": self.planned_latest,
            "id": self.id,
        }
        if self.parted is not None:
            doc["parted"] = self.parted  # absent otherwise: plans without parts read as before
        if self.noncurrent is not None:
            doc["noncurrent"] = self.noncurrent  # absent otherwise: plans of plain runs read as before
        candidates = [] if fence_only else self.data_files
        # One growing buffer whose getvalue() hands over its bytes without a copy (joining parts
        # would hold the text twice).
        out = io.BytesIO()
        out.write(json.dumps(doc).encode()[:-1])  # without its closing brace
        out.write(b', "data_files": [')
        for i, chunk in enumerate(encoded_candidates(candidates)):
            out.write(b"," + chunk if i else chunk)
        out.write(b"]}")
        return out.getvalue()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "DeletionPlan":
        try:
            doc = json.loads(data)
            raw = doc["data_files"]
            candidates = []
            for i, fields in enumerate(raw):
                candidates.append(DataCandidate(**fields))
                raw[i] = None  # each dict goes as soon as its candidate exists
            doc["data_files"] = candidates
            doc["manifest_files"] = [tuple(m) for m in doc["manifest_files"]]
            plan = cls(**doc)
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot parse deletion plan: {exc}") from exc
        plan.check_paths(where)
        return plan

    def check_paths(self, where: str) -> None:
        """What the plan deletes is inside the table (core/io/table_paths.py): its data files normal paths
        under the root, its metadata files plain names or (a format's metadata kept beside its data, e.g.
        Paimon's changelog files) normal paths under the root. Checked when a plan is read back (anyone
        finishes a plan they find); a plan being made is made of checked metadata (the stores check the
        paths they read)."""
        for candidate in self.data_files:
            checked_relative_path(candidate.path, "data file", where)
        for name, _size in self.manifest_files:
            if isinstance(name, str) and "/" in name:
                checked_relative_path(name, "metadata file", where)
            else:
                checked_file_name(name, "metadata file", where)


#: Candidates encoded per chunk by DeletionPlan.to_json.
_JSON_CHUNK = 10_000


def encoded_candidates(candidates: list[DataCandidate]) -> Iterator[bytes]:
    """The candidates as JSON objects, comma-separated, a chunk at a time (one encoder call per chunk with
    its list brackets cut off: per-candidate calls cost 5x more); the chunks are to be joined by commas."""
    for first in range(0, len(candidates), _JSON_CHUNK):
        chunk = [_candidate_fields(c) for c in candidates[first:first + _JSON_CHUNK]]
        yield json.dumps(chunk, separators=(",", ":"))[1:-1].encode()


def _candidate_fields(candidate: DataCandidate) -> dict:
    fields = {"path": candidate.path, "size": candidate.size, "below": candidate.below}
    if candidate.from_id is not None:
        fields["from_id"] = candidate.from_id
    if candidate.readded:
        fields["readded"] = True
    return fields


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
    #: Data files a plan in parts deleted: counted, not listed (it holds one part at a time).
    streamed_data_files: int = 0
    #: A plan of a run with a retention deletes nothing: what it made noncurrent instead (core/lifecycle/noncurrent/).
    noncurrent_data_files: int = 0
    noncurrent_manifest_files: int = 0
    noncurrent_bytes: int = 0

    @property
    def data_file_count(self) -> int:
        """Data files deleted, listed or counted."""
        return len(self.deleted_data_files) + self.streamed_data_files


def read_plans(storage: Storage, prefix: str = "") -> list[DeletionPlan]:
    """Unfinished plans whose file name starts with ``prefix`` ("plan-": active; "": active and pending).

    A pending plan older than STALE_PENDING_SECONDS lost its owner (a live owner takes
    milliseconds from pending to active): it fences nothing and is left out. A pending plan the
    listing showed and that is gone when read was activated, finished or dropped meanwhile: its
    active file is read in its place, so a fence never disappears between a listing and its reads
    (on an object store each is a round trip of milliseconds).
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
        pending = name.startswith("pending-")
        try:
            data = storage.read_bytes(path)
        except FileNotFoundError:
            if not pending or prefix != "":
                continue  # finished (or dropped) while we listed
            # Activated while we listed: the owner wrote plan-<id> before it deleted pending-<id>, so the plan
            # is there, or it finished and unpublished first (what a reader checks after this sees it), or
            # its owner dropped it. Skipping it would take its fence down while it deletes (a tag or a
            # consumer that checks now would go through, an undo would not see the plan).
            path, pending = f"{PLAN_DIR}/plan-{name[len('pending-'):]}", False
            try:
                data = storage.read_bytes(path)
            except FileNotFoundError:
                continue
        plan = DeletionPlan.from_json(data, where=storage.full_uri(path))
        plan.pending = pending
        found.append(plan)
    unique = {plan.id: plan for plan in found}  # a plan listed both pending and active, read twice
    return list(unique.values()) if len(unique) < len(found) else found


def is_dead_rollback(snapshots: SnapshotStore, plan: DeletionPlan) -> bool:
    """A pending rollback whose planned latest snapshot is gone or replaced: its owner's check can
    never pass again (the table moved on, e.g. a rerun of the same rollback finished), so it fences nothing."""
    if plan.kind != ROLLBACK or plan.planned_latest is None:
        return False
    snapshot_id, identity = plan.planned_latest
    try:
        return snapshots.identity(snapshots.snapshot(snapshot_id)) != identity
    except SnapshotNotFoundError:
        return True


class PlanManager:
    """Reads and writes the plan files of one table, and answers what their fences forbid.

    Reading is fail-closed: an unreadable plan is an error, as its fence must not silently disappear.
    """

    def __init__(self, store: TableStore):
        self.snapshots = store.snapshots
        self.storage = store.lifecycle

    def plans(self) -> list[DeletionPlan]:
        """Active, unfinished plans."""
        return read_plans(self.storage, "plan-")

    def fences(self) -> list[DeletionPlan]:
        """Every plan whose fence stands: active and pending."""
        return read_plans(self.storage)

    def fence(self) -> int:
        """Snapshot ids below this are being removed by an unfinished plan (0: none)."""
        return max((p.fence for p in self.fences() if p.kind == EXPIRE), default=0)

    def ceiling(self) -> int | None:
        """Snapshot ids above this are being discarded by an unfinished rollback (None: none)."""
        return min(
            (p.ceiling for p in self.fences() if p.ceiling is not None and not (p.pending and is_dead_rollback(self.snapshots, p))),
            default=None,
        )

    def doomed_tags(self) -> set[str]:
        return {name for p in self.fences() for name in p.tag_names}

    def publish_pending(self, plan: DeletionPlan) -> None:
        # Only the owner executes a pending plan, and it holds the lists in memory.
        self.storage.write_bytes(self._pending_path(plan), plan.to_json(fence_only=True))

    def activate(self, plan: DeletionPlan) -> None:
        self.storage.write_bytes(plan.path, plan.to_json())
        self.storage.delete(self._pending_path(plan))

    def discard_pending(self, plan: DeletionPlan) -> None:
        self.storage.delete(self._pending_path(plan))

    def finished(self, plan: DeletionPlan) -> None:
        """The plan has run to its end: its fence goes, then a plan in parts' part record (which a rerun
        must find while the plan stands; one left behind is dropped by :meth:`drop_abandoned`)."""
        self.storage.delete(plan.path)
        if plan.parted is not None:
            self.storage.delete(plan.part_path)

    def record_part(self, plan: DeletionPlan, number: int, candidates: list[DataCandidate], done: bool = False) -> None:
        """Record part ``number`` of a plan in parts (its candidates) before any of them is deleted; parts
        below it are done. ``done``: every part is (what is left is metadata the parts were streamed from)."""
        head = json.dumps({"plan": plan.id, "part": number, "done": done}, separators=(",", ":"))[:-1]
        body = b",".join(encoded_candidates(candidates))
        self.storage.write_bytes(plan.part_path, head.encode() + b',"data_files":[' + body + b"]}")

    def recorded_part(self, plan: DeletionPlan) -> tuple[int, bool]:
        """(the part a plan in parts was deleting when it stopped, whether all were done); (0, False) if
        none was recorded. Fails closed on an unreadable record."""
        try:
            data = self.storage.read_bytes(plan.part_path)
        except FileNotFoundError:
            return 0, False
        try:
            doc = json.loads(data)
            number, done = doc["part"], doc.get("done", False)
            if doc.get("plan") != plan.id or not isinstance(number, int) or number < 0 or not isinstance(done, bool):
                raise ValueError(f"not a part record of plan {plan.id}")
            return number, done
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{self.storage.full_uri(plan.part_path)}: cannot parse part record: {exc}") from exc

    def drop_abandoned(self) -> None:
        """Delete pending plans whose owner died (older than STALE_PENDING_SECONDS), dead pending rollbacks,
        part records of finished plans and the temp files of plan writes whose writer is gone (a kill
        -9 mid-write: core/io/local_files.py).

        A pending plan deleted nothing, so dropping it loses nothing.
        """
        now = time.time()  # compared with storage modification times, not the table's clock
        listed = self.storage.list_files(PLAN_DIR)
        names = {rel.rsplit("/", 1)[-1] for rel, _size, _mtime in listed}
        for rel, _size, mtime in listed:
            name = rel.rsplit("/", 1)[-1]
            if name.startswith("pending-") and mtime is not None and now - mtime > STALE_PENDING_SECONDS:
                self.storage.delete(rel)
            elif is_abandoned_temp(name, mtime, now):
                self.storage.delete(rel)
            elif name.startswith("plan-") and name.endswith(".part") and name[:-len(".part")] + ".json" not in names:
                # A part record is written only while its plan stands: without the plan, the plan finished.
                self.storage.delete(rel)
        for plan in read_plans(self.storage, "pending-"):
            if is_dead_rollback(self.snapshots, plan):
                self.storage.delete(self._pending_path(plan))

    @staticmethod
    def _pending_path(plan: DeletionPlan) -> str:
        return f"{PLAN_DIR}/pending-{plan.id}.json"
