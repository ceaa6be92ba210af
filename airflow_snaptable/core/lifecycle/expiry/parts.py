"""A sub-range whose candidates exceed the bound, expired as a plan in parts.

Sub-ranges (core/lifecycle/expiry/subranges.py) bound the deleted files one plan holds, except for a
single snapshot whose delta alone deletes more than :data:`expire_subranges.MAX_DELETED_FILES`
files (an "overwrite everything" of a table of millions). Its plan holds no candidate list:

- Planning reads only the snapshots and the metadata files the expired snapshots use; the plan
  records the snapshots whose deltas name the candidates (``DeletionPlan.parted``), so they can
  be streamed again once the snapshot files are unpublished.
- Executing (core/lifecycle/plan_executor.py) unpublishes the snapshots as any plan does, then streams the
  candidates from those deltas :data:`PART_SIZE` at a time. Each part is checked against the
  protection read before the plan went active (tags through compact path-hash sets, re-adds,
  core/lifecycle/protection.py), recorded (``plan/plan-<id>.part``: its number and the files it deletes)
  and deleted; only after the last part are the expired snapshots' metadata files (the deltas
  the parts were streamed from) and then the plan deleted.
- A crash anywhere leaves the plan active; a rerun streams the same parts in the same order
  (the deltas are immutable), skips those below the recorded one and finishes. Every retained
  snapshot and tag stays readable throughout: only files no retained snapshot uses are deleted,
  after the snapshots that used them are gone.

The fold is the one of ``expire_plan.plan_expiry`` (a file's last event in the range decides),
streamed twice: a first pass records the newest snapshot adding each path (as a hash,
:class:`~airflow_snaptable.core.lifecycle.path_hashes.LastAdded`), the second yields each deletion not
followed by an add-back. Memory: one part, the hashes of the range's added files (12 bytes
each), and the deltas' compressed bytes while one pass reads them; not the candidates.

The repair path (``skip_missing``) plans in one piece as before: it must check the kept
snapshot's whole state.
"""

from __future__ import annotations

import json
from typing import Iterable, Iterator

from airflow_snaptable.core.lifecycle.expiry import subranges as expire_subranges
from airflow_snaptable.core.lifecycle.expiry.plan import SnapshotCache, first_deleting
from airflow_snaptable.core.native.manifest import FileKind, ManifestEntry
from airflow_snaptable.core.lifecycle.path_hashes import LastAdded, path_hash
from airflow_snaptable.core.lifecycle.deletion_plans import EXPIRE, DataCandidate, DeletionPlan, PlanManager
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.lifecycle.store import TableStore

#: Candidates one part deletes at most (and records before deleting them).
PART_SIZE = 100_000


def recorded_deletes(read: SnapshotCache, earliest: int, end: int) -> int:
    """Deleted files the summaries of snapshots ``earliest+1 .. end`` record (unknown counts as 0)."""
    total = 0
    for snapshot_id in range(earliest + 1, end + 1):
        recorded = (read.get(snapshot_id).summary or {}).get("deleted_files")
        total += recorded if isinstance(recorded, int) else 0
    return total


def needs_parts(read: SnapshotCache, earliest: int, end: int, missing: list[str] | None) -> bool:
    """Does expiring ``earliest .. end-1`` delete more files than one plan may hold?"""
    return missing is None and recorded_deletes(read, earliest, end) > expire_subranges.MAX_DELETED_FILES


def plan_parted_expiry(store: TableStore, earliest: int, end: int, read: SnapshotCache) -> DeletionPlan:
    """The plan expiring snapshots ``earliest .. end-1`` in parts: its metadata files, and the snapshots
    whose deltas name its candidates (streamed by :func:`candidate_parts`)."""
    read.load(earliest, end)
    snaps = {i: read.get(i) for i in range(earliest, end + 1)}
    changes_from = first_deleting(snaps, earliest + 1, end)
    # No delta is read here (changes_from past the range): only which metadata the expired snapshots alone use.
    metadata_files = store.files.expiring(snaps, changes_from=end + 1).metadata_files
    return DeletionPlan(
        kind=EXPIRE,
        fence=end,
        snapshot_ids=list(range(earliest, end)),
        data_files=[],
        manifest_files=metadata_files,
        parted={"snapshots": [snaps[i].to_dict() for i in range(earliest, end + 1)], "changes_from": changes_from},
    )


def recorded_snapshots(plan: DeletionPlan) -> dict[int, Snapshot]:
    """The snapshots a plan in parts recorded, by id."""
    snaps = {}
    for doc in plan.parted["snapshots"]:
        snapshot = Snapshot.from_json(json.dumps(doc).encode(), where=f"plan {plan.id}")
        snaps[snapshot.id] = snapshot
    return snaps


def candidate_parts(store: TableStore, plan: DeletionPlan) -> Iterator[list[DataCandidate]]:
    """The plan's candidates, :data:`PART_SIZE` at a time, always in the same parts and order.

    Raises MissingMetadataError if a delta is gone (fail closed: the plan's metadata is deleted
    only after its last part).
    """
    snaps = recorded_snapshots(plan)
    first, end = plan.parted["changes_from"], max(snaps)
    if first > end:
        return
    last_added = LastAdded()
    recorded = {i: (snaps[i].summary or {}).get("added_files") for i in range(first, end + 1)}
    if any(count != 0 for count in recorded.values()):
        # The first pass, over the deltas that may add. A delta lists its ADD entries first
        # (core/native/commit.py) and its snapshot records how many (``added_files``, written from the
        # same request, as ``deleted_files`` is, which expiry already trusts to skip an append's
        # delta): once that many are seen, the rest of it (the deletions) is not decoded here.
        changes = store.files.expiring(snaps, changes_from=first).changes
        for snapshot_id in range(first, end + 1):
            _record_adds(changes.pop(snapshot_id), snapshot_id, recorded[snapshot_id], last_added)
        del changes
    last_added.seal()

    # Hashes of paths deleted, then added back at or after that deletion: deleted again later,
    # they have several live intervals (expire_plan's ``readded``). A collision marks more
    # candidates so, which asks every tag instead of the neighbours: more protective only.
    deleted_then_added: set[int] = set()
    part: list[DataCandidate] = []
    size = max(1, PART_SIZE)
    changes = store.files.expiring(snaps, changes_from=first).changes
    for snapshot_id in range(first, end + 1):
        for entry in changes.pop(snapshot_id):
            if entry.kind is FileKind.ADD:
                continue
            path = entry.file.path
            added = last_added.get(path)
            if added is not None and added >= snapshot_id:
                deleted_then_added.add(path_hash(path))  # live again after this deletion: not a candidate here
                continue
            readded = added is not None and path_hash(path) in deleted_then_added
            part.append(DataCandidate(path, entry.file.file_size, below=snapshot_id, readded=readded))
            if len(part) >= size:
                yield part
                part = []
    if part:
        yield part


def _record_adds(entries: Iterable[ManifestEntry], snapshot_id: int, expected, last_added: LastAdded) -> None:
    """Record the ADD entries of one delta, stopping after the ``expected`` many it records (an int).

    A function of its own so that a delta left half-decoded (its batch of decoded entries) is let go
    on return, not held while the next pass decodes.
    """
    if expected == 0:
        return
    seen = 0
    for entry in entries:
        if entry.kind is FileKind.ADD:
            last_added.add(entry.file.path, snapshot_id)
            seen += 1
            if isinstance(expected, int) and seen >= expected:
                break
    close = getattr(entries, "close", None)
    if close is not None:
        close()  # a generator: its decoded batch goes now


def candidates_among(store: TableStore, plan: DeletionPlan, paths: set[str]) -> set[str]:
    """The ``paths`` that ``plan`` may delete (its candidates, protected or not).

    A plan in parts: the paths a DELETE entry of its recorded deltas names, in one pass without
    the fold: a superset of its candidates, which only ever refuses or backs out more.
    """
    if plan.parted is None:
        return {c.path for c in plan.data_files if c.path in paths}
    snaps = recorded_snapshots(plan)
    first, end = plan.parted["changes_from"], max(snaps)
    if not paths or first > end or PlanManager(store).recorded_part(plan)[1]:
        return set()  # all parts done: it deletes no data file any more (its metadata may be partly gone)
    changes = store.files.expiring(snaps, changes_from=first).changes
    return {
        entry.file.path
        for snapshot_id in range(first, end + 1)
        for entry in changes.pop(snapshot_id)
        if entry.kind is FileKind.DELETE and entry.file.path in paths
    }
