"""Recording a deletion plan's removals in the noncurrent journal, instead of deleting its files.

A plan made by a run with a retention carries the run (``DeletionPlan.noncurrent``), so whoever
finishes it (the run itself, or any later run after a crash) records instead of deleting. The plan
executor (core/lifecycle/plan_executor.py) calls :func:`record_plan` once protection is read and
before anything is unpublished (consumers a rollback moves back too), and :func:`record_leftovers`
with what unpublishing left outside the history; a plan in parts records each part with
:func:`record_part`.
"""

from __future__ import annotations

from typing import Sequence

from airflow_snaptable.core.errors import SnapshotNotFoundError, TagNotFoundError
from airflow_snaptable.core.lifecycle.deletion_plans import ROLLBACK, DataCandidate, DeletionPlan, PlanEffect
from airflow_snaptable.core.lifecycle.noncurrent.journal import JournalEntry, NoncurrentJournal, NoncurrentRun
from airflow_snaptable.core.lifecycle.store import TableStore


def plan_run(plan: DeletionPlan) -> NoncurrentRun | None:
    return None if plan.noncurrent is None else NoncurrentRun.from_dict(plan.noncurrent)


def record_plan(store: TableStore, plan: DeletionPlan, effect: PlanEffect, doomed_tags: Sequence[str]) -> None:
    """Write the plan's entry (once: a rerun finds it and leaves it, the snapshots it names may be gone)."""
    run = plan_run(plan)
    journal = NoncurrentJournal(store.lifecycle)
    if run is None or journal.has(run.run_id, plan.id):
        return
    snapshots = store.snapshots
    ids = list(plan.snapshot_ids)
    above = plan.kind == ROLLBACK and plan.ceiling is not None
    if above:
        ids = sorted(set(ids) | {i for i in snapshots.list_ids() if i > plan.ceiling})
    try:
        read = {i: snapshot for i, (snapshot, _size) in snapshots.read_ids(sorted(ids)).items()}  # one bulk read
    except SnapshotNotFoundError:
        read = {}
        for snapshot_id in sorted(ids):
            try:
                read[snapshot_id] = snapshots.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                continue  # a rollback's id above the ceiling that is not there
    recorded = [read[i].to_json().decode() for i in sorted(read)]
    tags = []
    for name in doomed_tags:
        try:
            tags.append(store.tags.tag(name).to_json().decode())
        except TagNotFoundError:
            continue
    consumers = []
    if above:
        # The rollback moves back the consumers past its target before it activates: as they were.
        consumers = [c.to_json().decode() for c in store.consumers.consumers() if c.next_snapshot > plan.ceiling + 1]
    files = store.files
    journal.write(
        JournalEntry(
            run, plan.id, snapshots=recorded, above=above, tags=tags,
            restored=plan.ceiling if above and plan.restore_snapshot is not None else None,
            consumers=consumers,
            data_files=[(c.path, c.size) for c in effect.data_files],
            metadata_files=[(files.metadata_path(name), size) for name, size in effect.manifest_files],
        )
    )


def record_leftovers(store: TableStore, plan: DeletionPlan, paths: Sequence[str]) -> None:
    """The files unpublishing left outside the history (a snapshot file moved aside): noncurrent too."""
    run = plan_run(plan)
    if run is None or not paths:
        return
    NoncurrentJournal(store.lifecycle).write(JournalEntry(run, f"{plan.id}u", metadata_files=[(p, 0) for p in sorted(set(paths))]))


def record_part(store: TableStore, plan: DeletionPlan, number: int, doomed: Sequence[DataCandidate]) -> None:
    """Part ``number`` of a plan in parts (the same parts in the same order on a rerun)."""
    run = plan_run(plan)
    key = f"{plan.id}p{number}"
    journal = NoncurrentJournal(store.lifecycle)
    if run is None or journal.has(run.run_id, key):
        return
    journal.write(JournalEntry(run, key, data_files=[(c.path, c.size) for c in doomed]))


def record_removed(store: TableStore, run: NoncurrentRun | None, key: str, *, tags=(), consumers=(), files=()) -> None:
    """A removal outside a plan (a tag whose snapshot still holds its files, expired consumers, an orphan
    batch), recorded before it happens; ``files``: (path, bytes)."""
    if run is None:
        return
    NoncurrentJournal(store.lifecycle).write(
        JournalEntry(
            run, key, tags=[t.to_json().decode() for t in tags], consumers=[c.to_json().decode() for c in consumers],
            data_files=list(files),
        )
    )
