"""Undo's apply and its refusals on this package's tables (core/lifecycle/noncurrent/undo.py, issue 34).

- A tag name taken between undo's checks and its apply is refused (``UndoNameTakenError``), never
  reported restored: the run's journal stays (its files stay noncurrent), the undo mark goes, and
  the undo finishes once the name is free again.
- An interrupted undo never wedges the table: crashed at every storage operation of an undo of a
  rollback, then a commit, the rerun finishes or refuses with a typed error and takes its mark down;
  every snapshot and tag reads its rows, deleting runs and purge work again. ``abandon`` takes the
  mark of an interrupted undo down and leaves the table as it is.
"""

from __future__ import annotations

import os
import shutil

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import UndoNameTakenError, UndoRefusedError
from airflow_snaptable.core.lifecycle.noncurrent.journal import UNDO_PREFIX, UNDONE_PREFIX, NoncurrentJournal
from tests.conftest import FailAt, InjectedCrash, make_rows, sorted_ids
from tests.core.test_lifecycle import FAR_FUTURE, Clock, build_rich_history, check_clean, check_readable, make_table
from tests.core.test_noncurrent_crash import PauseAt
from tests.noncurrent_support import data_and_manifest_files

EXPIRE = dict(retain_min=1, time_retained="0 s", now=FAR_FUTURE)


def _open(uri: str) -> Table:
    table = Table.open(uri)
    table.clock = Clock(FAR_FUTURE)
    return table


def _retained(table: Table, days: int, call) -> str:
    with table.retaining_noncurrent(days, "test") as run:
        call()
    return run.run_id


def _copy(source: str, dest) -> str:
    dest = str(dest)
    if os.path.exists(dest):
        shutil.rmtree(dest)
    shutil.copytree(source, dest)
    return dest


@pytest.fixture
def rich(tmp_path):
    history = make_table(str(tmp_path / "t"), **{"manifest.merge-min-count": "2"})
    build_rich_history(history)
    return history


def test_a_tag_name_taken_while_the_undo_applies_is_refused_and_the_run_stays_undoable(rich):
    table = rich.table
    table.expire_snapshots(**EXPIRE)  # t5 now holds snapshot 5's files alone
    run_id = _retained(table, 10, lambda: table.delete_tag("t5"))
    held = data_and_manifest_files(table.uri)
    journal = NoncurrentJournal(table.storage)
    names = journal.entry_names(run_id)
    undoing = _open(table.uri)
    # The undo checked that t5 is free and announces it: another writer tags the latest snapshot t5 now.
    undoing.storage.on_operation = PauseAt("write", "intent/", lambda: _open(table.uri).create_tag("t5", 12))
    with pytest.raises(UndoNameTakenError, match="t5"):
        undoing.undo(run_id)
    assert isinstance(UndoNameTakenError("x"), UndoRefusedError)
    assert Table.open(table.uri).tag("t5").snapshot_id == 12, "the new tag is left as it is"
    # Nothing dropped: the run is still recorded (its files noncurrent, none deleted), not undone, not marked.
    assert journal.entry_names(run_id) == names
    assert not journal.marked(UNDONE_PREFIX, run_id) and not journal.marked(UNDO_PREFIX, run_id)
    assert data_and_manifest_files(table.uri) == held
    assert Table.open(table.uri).remove_orphan_files(older_than="0 s", dry_run=True).orphan_count == 0
    [summary] = Table.open(table.uri).trash()
    assert summary.run_id == run_id and summary.tags == ["t5"]
    # Resolved (the new tag renamed): the undo finishes and t5 reads snapshot 5's rows again.
    table.create_tag("t5-new", 12)
    table.delete_tag("t5")
    undone = _open(table.uri).undo(run_id)
    assert undone.restored_tags == ["t5"]
    assert sorted_ids(Table.open(table.uri).scan(tag="t5").to_arrow()) == rich.model[5]
    check_clean(table.uri, rich.model)


# -- an interrupted undo never wedges the table (issue 34 item 6) ---------------------------------------------


@pytest.fixture(scope="module")
def rolled_back(tmp_path_factory):
    """Small histories each with one rollback recorded with a retention of 0 days: (uri, run id, model)."""
    out = {}
    for case in ("rollback", "rollback-to-an-expired-tag"):
        uri = str(tmp_path_factory.mktemp("undo") / case)
        history = make_table(uri)
        history.append(2, partitions=(0, 1))  # 1
        history.append(1, partitions=(0,))  # 2
        history.table.create_tag("t2", 2)
        history.overwrite(1, partition=0)  # 3
        history.append(1, partitions=(1,))  # 4
        table = _open(uri)
        if case == "rollback":
            run_id = _retained(table, 0, lambda: table.rollback_to(2))  # discards 3, 4
        else:
            history.append(1, partitions=(2,))  # 5
            table.expire_snapshots(retain_min=2, time_retained="0 s", now=FAR_FUTURE)  # 4, 5 left
            # 2 again alone; 4, 5 discarded: an undo that put 4 back and no more leaves a gap below it
            run_id = _retained(table, 0, lambda: table.rollback_to(tag="t2"))
        out[case] = (uri, run_id, history.model)
    return out


def _state_points(uri: str, call) -> list[int]:
    """The crash points that leave every state ``call`` passes through: the first operation, and each one
    right after a write or a delete (a crash at a read leaves the state of the last write before it)."""
    table = _open(uri)
    kinds: list[str] = []
    table.storage.on_operation = lambda kind, path: kinds.append(kind)
    call(table)
    return [1] + [n + 1 for n, kind in enumerate(kinds, 1) if kind in ("write", "delete") and n < len(kinds)]


def _commit(uri: str, model: dict[int, list[int]], row: int) -> dict[int, list[int]]:
    """A commit (one row) on whatever the undo left: the model with the new snapshot's rows."""
    table = _open(uri)
    before = sorted_ids(table.scan().to_arrow())
    snapshot = table.append(make_rows([row]))
    return {**model, snapshot.id: sorted(before + [row])}


def _free_and_purgeable(uri: str, run_id: str, model: dict[int, list[int]], expire: bool = False) -> None:
    """No undo mark is left (deleting runs go through: ``expire``), every state reads its rows, and purge
    finishes the run, leaving no orphan and nothing unreferenced."""
    journal = NoncurrentJournal(Table.open(uri).storage)
    assert not journal.marked(UNDO_PREFIX, run_id)
    check_readable(uri, model)
    if expire:
        _open(uri).expire_snapshots(retain_max=2, retain_min=1, time_retained="0 s", now=FAR_FUTURE)
    purged = _open(uri).purge()
    assert journal.names() == [] and not journal.marked_runs(UNDO_PREFIX)
    assert purged.undoing_run_ids == []
    check_clean(uri, model)


@pytest.mark.parametrize("case", ["rollback", "rollback-to-an-expired-tag"])
def test_an_undo_interrupted_at_every_storage_operation_then_a_commit_finishes_or_refuses_and_unmarks(rolled_back, tmp_path, case):
    base, run_id, model = rolled_back[case]
    points = _state_points(_copy(base, tmp_path / "count"), lambda t: t.undo(run_id))
    assert len(points) > 10
    outcomes = set()
    for n in points:
        work = _copy(base, tmp_path / "work")
        crashing = _open(work)
        crashing.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            crashing.undo(run_id)
        now = _commit(work, model, 1000 + n)
        try:
            _open(work).undo(run_id)
            outcomes.add("finished")
        except UndoRefusedError:
            outcomes.add("refused")
        _free_and_purgeable(work, run_id, now)
    assert outcomes == {"finished", "refused"}, "the sweep reaches both a rerun that finishes and one that cannot"


def test_abandoning_an_interrupted_undo_frees_the_table_and_leaves_what_it_brought_back(rolled_back, tmp_path):
    base, run_id, model = rolled_back["rollback-to-an-expired-tag"]
    work = _copy(base, tmp_path / "work")
    crashing = _open(work)

    def crash_after_the_first_republish(kind: str, path: str) -> None:
        if (kind, path) == ("write", "snapshot/snapshot-5"):
            raise InjectedCrash(path)  # snapshot 4 is back above snapshot 2's copy: a gap between them

    crashing.storage.on_operation = crash_after_the_first_republish
    with pytest.raises(InjectedCrash):
        crashing.undo(run_id)
    assert _open(work).purge().undoing_run_ids == [run_id], "the interrupted undo holds the run"
    abandoned = _open(work).abandon_undo(run_id)
    assert abandoned.abandoned and abandoned.run_id == run_id
    assert not _open(work).abandon_undo(run_id).abandoned, "nothing left to abandon"
    # The run is recorded still (what the undo did not bring back is noncurrent), the table free and whole.
    [summary] = _open(work).trash()
    assert summary.run_id == run_id and summary.state == "noncurrent"
    _free_and_purgeable(work, run_id, model, expire=True)


def test_the_cli_abandons_an_interrupted_undo_and_refuses_an_unknown_run(rolled_back, tmp_path, capsys):
    import json

    from airflow_snaptable.cli import main

    base, run_id, _model = rolled_back["rollback"]
    work = _copy(base, tmp_path / "work")
    crashing = _open(work)
    crashing.storage.on_operation = FailAt(_state_points(_copy(base, tmp_path / "count"), lambda t: t.undo(run_id))[3])
    with pytest.raises(InjectedCrash):
        crashing.undo(run_id)
    assert main(["trash", work, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"][0]["state"] == "undoing"
    assert main(["undo", work, run_id, "--abandon", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["abandoned"] is True
    assert main(["trash", work, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"][0]["state"] == "noncurrent"
    assert main(["undo", work, "0" * 32, "--abandon"]) == 2  # a typed error, one line
    assert "RunNotFoundError" in capsys.readouterr().err
    # Abandoned, not lost: the undo can still be run to the end.
    assert main(["undo", work, run_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["restored_snapshot_ids"]
    assert [s.id for s in Table.open(work).snapshots()] == [1, 2, 3, 4] and Table.open(work).trash() == []
