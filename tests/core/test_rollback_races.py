"""A commit racing a rollback (DESIGN invariant: no acknowledged commit lost, ids contiguous).

Rollback discards every snapshot after its target on purpose, so a commit that
races it may fail, but it must never be acknowledged and then lost, and it must
never leave a snapshot that does not extend the table. Each test pauses one
side at a chosen storage operation and runs the other side to completion there.
"""

from __future__ import annotations

import pytest

from airflow_snaptable.core import CommitFailedError, Table
from tests.conftest import make_rows, sorted_ids
from tests.core.test_lifecycle import make_table


class ProcessDied(BaseException):
    """The writer's process dies: unlike an error, nothing in it runs any more (no except/finally logic)."""


def _history(uri: str):
    history = make_table(uri)
    for _ in range(5):
        history.append(3)
    return history


def _pause_at(table: Table, kind: str, path_prefix: str, action, after: bool = False):
    """Run ``action`` once, when ``table`` is about to do (``after``: has just done) ``kind`` on ``path_prefix...``."""
    state = {"armed": False, "done": False}

    def hook(op_kind, path):
        if state["done"]:
            return
        if state["armed"]:
            state["done"] = True
            action()
            return
        if op_kind == kind and path.startswith(path_prefix):
            if after:
                state["armed"] = True
            else:
                state["done"] = True
                action()

    table.storage.on_operation = hook


def _check(uri: str, model: dict[int, list[int]], latest: int) -> Table:
    fresh = Table.open(uri)
    ids = fresh.snapshot_manager.list_ids()
    assert ids == list(range(1, latest + 1)), f"ids not contiguous up to {latest}: {ids}"
    assert fresh.latest_snapshot().id == latest
    for snapshot_id in ids:
        assert sorted_ids(fresh.scan(snapshot_id=snapshot_id).to_arrow()) == model[snapshot_id]
    return fresh


def test_commit_published_just_before_a_rollback_is_discarded_and_reported_failed(tmp_path):
    """The rollback plans with the new snapshot in it and finishes before the committer's own check."""
    history = _history(str(tmp_path / "t"))
    uri = history.table.uri
    committer = Table.open(uri)
    _pause_at(committer, "write", "snapshot/snapshot-6", lambda: Table.open(uri).rollback_to(snapshot_id=3, force=True), after=True)
    with pytest.raises(CommitFailedError, match="rollback"):
        committer.append(make_rows([1000, 1001]))
    fresh = _check(uri, history.model, 3)
    assert fresh.verify().ok, fresh.verify()  # the commit's files went with the rollback


def test_commit_landing_while_a_rollback_executes_fails_and_leaves_nothing(tmp_path):
    """The commit lands after the rollback checked LATEST: it sees the rollback's fence and undoes itself."""
    history = _history(str(tmp_path / "t"))
    uri = history.table.uri
    rollback = Table.open(uri)
    errors = []

    def commit():
        try:
            Table.open(uri).append(make_rows([1000, 1001]))
        except CommitFailedError as exc:
            errors.append(exc)

    _pause_at(rollback, "write", "plan/plan-", commit)  # after its LATEST check, before it deletes anything
    rollback.rollback_to(snapshot_id=3)
    assert len(errors) == 1 and "rollback" in str(errors[0])
    fresh = _check(uri, history.model, 3)
    assert fresh.verify().ok, fresh.verify()  # the failed commit deleted its own files


def test_commit_that_crashed_after_landing_during_a_rollback_is_swept(tmp_path):
    """Its writer died before its check: the rollback's executor removes the stray snapshot."""
    history = _history(str(tmp_path / "t"))
    uri = history.table.uri
    rollback = Table.open(uri)

    def crashing_commit():
        writer = Table.open(uri)
        _pause_at(writer, "write", "snapshot/snapshot-6", lambda: (_ for _ in ()).throw(ProcessDied()), after=True)
        with pytest.raises(ProcessDied):
            writer.append(make_rows([1000, 1001]))
        assert Table.open(uri).snapshot_manager.list_ids()[-1] == 6  # it did land

    _pause_at(rollback, "write", "plan/plan-", crashing_commit)
    rollback.rollback_to(snapshot_id=3)
    fresh = _check(uri, history.model, 3)
    leaked = fresh.verify().unreferenced_files  # the dead writer's files: orphan cleaning's job
    assert leaked and all(p.startswith(("data/", "manifest/")) for p in leaked)
    fresh.remove_orphan_files(older_than="0 s", dry_run=False)
    assert Table.open(uri).verify().ok


def test_commit_whose_parent_was_rolled_back_and_its_id_reused_is_undone(tmp_path):
    """Planned on snapshot 5; meanwhile a rollback to 3 and two new commits re-create ids 4 and 5."""
    history = _history(str(tmp_path / "t"))
    uri = history.table.uri
    committer = Table.open(uri)
    new_rows = {}

    def rollback_and_recommit():
        other = Table.open(uri)
        other.rollback_to(snapshot_id=3)
        other.append(make_rows([2000]))
        other.append(make_rows([2001]))
        new_rows[4] = sorted(history.model[3] + [2000])
        new_rows[5] = sorted(history.model[3] + [2000, 2001])

    _pause_at(committer, "write", "snapshot/snapshot-6", rollback_and_recommit)  # planned, not yet published
    with pytest.raises(CommitFailedError, match="rollback"):
        committer.append(make_rows([1000]))
    model = {**{i: history.model[i] for i in (1, 2, 3)}, **new_rows}
    fresh = _check(uri, model, 5)
    assert fresh.verify().ok, fresh.verify()


def test_commit_after_a_finished_rollback_extends_the_rolled_back_table(tmp_path):
    """Control: a commit planned after the rollback is an ordinary commit."""
    history = _history(str(tmp_path / "t"))
    uri = history.table.uri
    history.table.rollback_to(snapshot_id=3)
    snapshot = Table.open(uri).append(make_rows([1000]))
    assert snapshot.id == 4
    model = {**{i: history.model[i] for i in (1, 2, 3)}, 4: sorted(history.model[3] + [1000])}
    assert _check(uri, model, 4).verify().ok


def test_commit_whose_base_a_rollback_discarded_before_it_read_the_base_fails_cleanly(tmp_path):
    """Issue 9 item 7: the base's manifest lists vanish under the committer. It used to raise
    MissingMetadataError (reads as corruption) and leave its data files, delta manifest and list."""
    history = _history(str(tmp_path / "t"))
    uri = history.table.uri
    committer = Table.open(uri)
    _pause_at(committer, "read", "manifest/", lambda: Table.open(uri).rollback_to(snapshot_id=3))
    with pytest.raises(CommitFailedError, match="rollback"):
        committer.append(make_rows([1000, 1001]))
    fresh = _check(uri, history.model, 3)
    assert fresh.verify().ok, fresh.verify()


def _rollback_killed_after_its_pending_plan(uri: str) -> None:
    """A rollback process dies right after writing its pending plan (its fence for commits)."""
    dying = Table.open(uri)
    state = {"armed": False}

    def hook(kind, path):
        if state["armed"]:
            raise ProcessDied()
        if kind == "write" and path.startswith("plan/pending-"):
            state["armed"] = True

    dying.storage.on_operation = hook
    with pytest.raises(ProcessDied):
        dying.rollback_to(snapshot_id=3)


def test_a_rerun_of_a_killed_rollback_unblocks_commits_at_once(tmp_path):
    """Issue 9 item 6: the dead attempt's ceiling kept failing every append after the rerun succeeded."""
    history = _history(str(tmp_path / "t"))
    uri = history.table.uri
    _rollback_killed_after_its_pending_plan(uri)
    Table.open(uri).rollback_to(snapshot_id=3)
    assert Table.open(uri).append(make_rows([1000])).id == 4
    model = {**{i: history.model[i] for i in (1, 2, 3)}, 4: sorted(history.model[3] + [1000])}
    assert _check(uri, model, 4).verify().ok


def test_a_killed_rollback_blocks_commits_only_until_its_pending_plan_is_stale(tmp_path):
    """Without a rerun or any maintenance run (an append-only table), appends resume once the plan is stale."""
    import os
    import time

    from airflow_snaptable.core.lifecycle.deletion_plans import STALE_PENDING_SECONDS

    history = _history(str(tmp_path / "t"))
    uri = history.table.uri
    _rollback_killed_after_its_pending_plan(uri)
    with pytest.raises(CommitFailedError, match="rollback"):
        Table.open(uri).append(make_rows([1000]))  # its owner might be alive: the fence holds
    old = time.time() - STALE_PENDING_SECONDS - 5
    for name in os.listdir(os.path.join(uri, "plan")):
        os.utime(os.path.join(uri, "plan", name), (old, old))
    assert Table.open(uri).append(make_rows([1001])).id == 6
    assert _check(uri, {**history.model, 6: sorted(history.model[5] + [1001])}, 6).verify().ok
