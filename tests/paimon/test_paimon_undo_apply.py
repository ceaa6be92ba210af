"""Undo's apply and its refusals on Apache Paimon tables (issue 34), judged by pypaimon.

- A tag name taken between undo's checks and its apply is refused (``UndoNameTakenError``): the new
  tag is left as pypaimon reads it, the run stays recorded; with the name freed the undo finishes.
- An undo of a rollback interrupted after it republished a snapshot, then a pypaimon commit: the
  rerun refuses with a typed error and takes its mark down; pypaimon reads every snapshot and tag, and
  purge finishes the run.
"""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import UndoNameTakenError, UndoRefusedError
from airflow_snaptable.core.lifecycle.noncurrent.journal import UNDO_PREFIX, UNDONE_PREFIX
from tests.conftest import InjectedCrash
from tests.core.test_noncurrent_crash import PauseAt
from tests.paimon.conftest import FAR_FUTURE, run_client, table_files
from tests.paimon.test_paimon_lifecycle import check

EXPIRE = dict(retain_min=1, time_retained="0 s", now=FAR_FUTURE)


def _open(warehouse: str, name: str = "app") -> Table:
    return Table.open(os.path.join(warehouse, "db.db", name))


def test_a_tag_name_taken_while_the_undo_applies_is_refused_and_the_run_stays_undoable(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    _open(warehouse).expire_snapshots(**EXPIRE)  # t4 alone holds snapshot 4's files
    table = _open(warehouse)
    with table.retaining_noncurrent(10, "delete-tag") as run:
        table.delete_tag("t4")
    held = table_files(os.path.join(warehouse, "db.db", "app"))
    journal = table.noncurrent_journal()
    names = journal.entry_names(run.run_id)
    undoing = _open(warehouse)
    # The undo checked that t4 is free and announces it: another writer tags the latest snapshot t4 now.
    undoing.storage.on_operation = PauseAt("write", "intent/", lambda: _open(warehouse).create_tag("t4", 6))
    with pytest.raises(UndoNameTakenError, match="t4"):
        undoing.undo(run.run_id)
    read = paimon.read(warehouse, "app")["app"]
    assert read["tags"]["t4"]["rows"] == paimon.before["app"]["snapshots"]["6"]["rows"], "the new tag is left as it is"
    assert journal.entry_names(run.run_id) == names
    assert not journal.marked(UNDO_PREFIX, run.run_id) and not journal.marked(UNDONE_PREFIX, run.run_id)
    assert table_files(os.path.join(warehouse, "db.db", "app")) == held
    # The name freed, the undo finishes: pypaimon reads t4 as it did before the run.
    _open(warehouse).delete_tag("t4")
    assert _open(warehouse).undo(run.run_id).restored_tags == ["t4"]
    check(paimon, warehouse, "app", [6], ["t2", "t4"])


def test_an_undo_of_a_rollback_interrupted_then_a_pypaimon_commit_refuses_and_unmarks(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    table = _open(warehouse)
    with table.retaining_noncurrent(0, "rollback") as run:
        table.rollback_to(3)  # 4, 5, 6 discarded
    crashing = _open(warehouse)

    def crash_after_the_first_republish(kind: str, path: str) -> None:
        if (kind, path) == ("write", "snapshot/snapshot-5"):
            raise InjectedCrash(path)

    crashing.storage.on_operation = crash_after_the_first_republish
    with pytest.raises(InjectedCrash):
        crashing.undo(run.run_id)
    run_client(paimon.python, warehouse, [{"write": "db.app", "rows": [["a", 100, "n"]]}])  # snapshot 5: another commit
    with pytest.raises(UndoRefusedError, match="invariant 4"):
        _open(warehouse).undo(run.run_id)
    journal = _open(warehouse).noncurrent_journal()
    assert not journal.marked(UNDO_PREFIX, run.run_id), "the table is free again"
    read = paimon.read(warehouse, "app")["app"]
    assert sorted(map(int, read["snapshots"])) == [1, 2, 3, 4, 5]
    for key in ("1", "2", "3", "4"):
        assert read["snapshots"][key]["rows"] == paimon.before["app"]["snapshots"][key]["rows"]
    assert not any("error" in r for r in list(read["snapshots"].values()) + list(read["tags"].values()))
    # Deleting runs and purge go on: the run's files not referenced again are deleted, pypaimon reads the rest.
    _open(warehouse).expire_snapshots(retain_min=2, retain_max=2, time_retained="0 s", now=FAR_FUTURE)
    assert _open(warehouse).purge().purged_run_ids == [run.run_id]
    after = paimon.read(warehouse, "app")["app"]
    assert sorted(map(int, after["snapshots"])) == [4, 5]
    assert not any("error" in r for r in list(after["snapshots"].values()) + list(after["tags"].values()))
    assert after["snapshots"]["4"]["rows"] == paimon.before["app"]["snapshots"]["4"]["rows"]
    assert _open(warehouse).verify().ok
