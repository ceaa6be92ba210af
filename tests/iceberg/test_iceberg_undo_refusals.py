"""Undo's refusals on Apache Iceberg tables (issue 34), judged by pyiceberg.

- A ref name taken between undo's checks and its catalog commit fails the commit on any catalog (a
  REST-style one too, which checks only standard requirements) and is refused with
  ``UndoNameTakenError``: the new ref is left as it is, the run stays recorded, and the undo finishes
  once the name is free. A ref of that name that is not the very ref the run removed is never "back".
- An undo of a rollback interrupted after its mark, then a commit: the rerun refuses with a typed error
  and takes its mark down, so deleting runs and purge go on.
"""

from __future__ import annotations

import pytest

from airflow_snaptable.core.errors import UndoInvariantError, UndoNameTakenError
from airflow_snaptable.core.formats.iceberg import requirements
from airflow_snaptable.core.lifecycle.noncurrent.journal import PURGE_PREFIX, UNDO_PREFIX, UNDONE_PREFIX
from tests.conftest import InjectedCrash
from tests.iceberg.conftest import read_everything, rows
from tests.iceberg.undo_support import history as _history
from tests.iceberg.undo_support import open_orders as _open


@pytest.mark.parametrize("catalog", ["in-process", "rest-style"])
def test_a_ref_name_taken_while_the_undo_commits_is_refused_and_the_run_stays_undoable(iceberg_env, monkeypatch, catalog):
    from pyiceberg.catalog.sql import SqlCatalog

    table, ids = _history(iceberg_env)
    before = read_everything(table)
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(10, "delete-tag") as run:
        ours.delete_tag("t1")
    journal = _open(iceberg_env).noncurrent_journal()
    names = journal.entry_names(run.run_id)
    if catalog == "rest-style":
        monkeypatch.setattr(requirements, "checks_requirements_here", lambda catalog: False)
    commit = SqlCatalog.commit_table
    racing = []

    def tag_first(self, committed, table_requirements, updates):
        if not racing:  # the undo's commit, checked: another writer tags the latest snapshot t1 first
            racing.append(True)
            iceberg_env.table().manage_snapshots().create_tag(ids[3], "t1").commit()
        return commit(self, committed, table_requirements, updates)

    monkeypatch.setattr(SqlCatalog, "commit_table", tag_first)
    with pytest.raises(UndoNameTakenError, match="t1"):
        _open(iceberg_env).undo(run.run_id)
    monkeypatch.undo()
    assert table.refresh().metadata.refs["t1"].snapshot_id == ids[3], "the new tag is left as it is"
    assert journal.entry_names(run.run_id) == names
    assert not journal.marked(UNDO_PREFIX, run.run_id) and not journal.marked(UNDONE_PREFIX, run.run_id)
    # A ref of that name that is not the very ref the run removed is refused before any commit too.
    with pytest.raises(UndoNameTakenError, match="t1"):
        _open(iceberg_env).undo(run.run_id)
    table.refresh().manage_snapshots().remove_tag("t1").commit()
    assert _open(iceberg_env).undo(run.run_id).restored_tags == ["t1"]
    assert read_everything(table) == before


def test_a_ref_recreated_on_the_same_snapshot_as_a_branch_is_not_the_ref_the_run_removed(iceberg_env):
    table, ids = _history(iceberg_env)
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(10, "delete-tag") as run:
        ours.delete_tag("t1")
    table.refresh().manage_snapshots().create_branch(ids[1], "t1").commit()
    with pytest.raises(UndoNameTakenError, match="t1"):
        _open(iceberg_env).undo(run.run_id)
    assert table.refresh().metadata.refs["t1"].snapshot_ref_type == "branch"
    assert _open(iceberg_env).trash()[0].run_id == run.run_id


def test_an_undo_of_a_rollback_interrupted_then_a_commit_refuses_and_unmarks(iceberg_env):
    table, ids = _history(iceberg_env)
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(0, "rollback") as run:
        ours.rollback_to(ids[2])
    crashing = _open(iceberg_env)

    def crash_after_the_mark(kind: str, path: str) -> None:
        if kind == "exists" and PURGE_PREFIX in path:
            raise InjectedCrash(path)

    crashing.storage.on_operation = crash_after_the_mark
    with pytest.raises(InjectedCrash):
        crashing.undo(run.run_id)
    journal = _open(iceberg_env).noncurrent_journal()
    assert journal.marked(UNDO_PREFIX, run.run_id)
    table.refresh().append(rows(77))  # main moves on from where the rollback left it
    after_commit = read_everything(table)
    with pytest.raises(UndoInvariantError, match="main"):
        _open(iceberg_env).undo(run.run_id)
    assert not journal.marked(UNDO_PREFIX, run.run_id), "the table is free again"
    assert read_everything(table) == after_commit
    # Deleting runs and purge go on; pyiceberg reads every snapshot and ref left.
    _open(iceberg_env).expire_snapshots(retain_min=1, older_than="2100-01-01T00:00:00")
    assert _open(iceberg_env).purge().purged_run_ids == [run.run_id]
    assert read_everything(table)["refs"]["main"] == after_commit["refs"]["main"]
    assert _open(iceberg_env).verify().ok
