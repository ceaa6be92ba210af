"""Consumer expiry and orphan removal racing an undo (core/lifecycle/noncurrent/journal.py, issue 26).

The interleavings are injected deterministically at the step where the race bites, on our tables
and on Apache Paimon tables (judged by pypaimon):

- a deleting run with a retention and its undo between orphan removal's reads (the run before the
  first read or right after it, the undo between the read of the files in use and the last read of
  the noncurrent files): the files the undo would bring back are in none of the reads, unless the
  orphan removal's deleting mark keeps the undo out until it is done (``DeletionInProgressError``);
- an orphan removal, a consumer expiry or a tag deletion outside a plan starting while an undo is marked backs out
  (``UndoInProgressError``) and deletes nothing;
- an undo that brings a consumer back after a consumer expiry listed it: the expiry leaves the
  consumer the undo wrote.

Each runs with and without a retention on the racing run (``noncurrent_days``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import DeletionInProgressError, UndoInProgressError
from airflow_snaptable.core.lifecycle import consumers as consumers_module
from airflow_snaptable.core.lifecycle import orphans as orphans_module
from airflow_snaptable.core.lifecycle.noncurrent import undo as undo_module
from airflow_snaptable.core.lifecycle.noncurrent.journal import NoncurrentJournal
from tests.core.test_lifecycle import FAR_FUTURE, make_table
from tests.core.test_noncurrent import EXPIRE, _noncurrent, _rows, rich  # noqa: F401 - fixture
from tests.noncurrent_support import maybe_retained as _maybe_retained, refusals_inside_undo

RETENTIONS = [None, 10]
SNAPTABLE = str(Path(sys.executable).with_name("snaptable"))


def _expired_with_a_retention(uri: str, expire: dict) -> str:
    table = Table.open(uri)
    return _noncurrent(table, 10, lambda: table.expire_snapshots(**expire))


#: When the deleting run the undo takes back runs: before the orphan removal, or right after its first read.
RUN_AT = ["before", "inside"]


def run_and_undo_inside_orphan_removal(monkeypatch, run_at: str, run, undo) -> tuple[list[str], list[BaseException]]:
    """Calls ``run`` (a deleting run with a retention; returns its run id) now, or right after orphan removal's
    first read of the noncurrent files (``run_at``), and ``undo(run_id)`` right after its read of the files in
    use. Returns the run ids (filled in once ``run`` ran) and the undo's refusals."""
    run_ids: list[str] = []
    refused: list[BaseException] = []
    paths_in_use = orphans_module.paths_in_use
    held_paths = NoncurrentJournal.held_paths

    def reading_held(self):
        found = held_paths(self)
        if not run_ids:
            run_ids.append(run())  # after the first read: in none of the orphan removal's reads of the journal
        return found

    def reading_in_use(store):
        found = paths_in_use(store)
        monkeypatch.setattr(NoncurrentJournal, "held_paths", held_paths)
        try:
            undo(run_ids[0])
        except DeletionInProgressError as exc:
            refused.append(exc)
        return found

    if run_at == "before":
        run_ids.append(run())
    else:
        monkeypatch.setattr(NoncurrentJournal, "held_paths", reading_held)
    monkeypatch.setattr(orphans_module, "paths_in_use", reading_in_use)
    return run_ids, refused


@pytest.mark.parametrize("run_at", RUN_AT)
@pytest.mark.parametrize("days", RETENTIONS)
def test_orphan_removal_deletes_no_file_a_run_and_its_undo_move_between_its_reads(rich, monkeypatch, days, run_at):
    table = rich.table
    before = _rows(table)
    run_ids, refused = run_and_undo_inside_orphan_removal(
        monkeypatch, run_at,
        run=lambda: _expired_with_a_retention(table.uri, EXPIRE),
        undo=lambda run_id: Table.open(table.uri).undo(run_id),
    )
    cleaner = Table.open(table.uri)
    result = _maybe_retained(cleaner, days, lambda: cleaner.remove_orphan_files(older_than="0 s", dry_run=False))
    monkeypatch.undo()
    assert result.orphan_count == 0, f"files the run held were taken for orphans: {result.orphan_files[:5]}"
    assert run_ids and refused, "the undo went through while the orphan removal was under way"
    Table.open(table.uri).undo(run_ids[0])  # the orphan removal is over: the undo goes through
    assert _rows(table) == before
    assert Table.open(table.uri).verify().ok


@pytest.mark.parametrize("days", RETENTIONS)
def test_orphan_removal_during_an_undo_backs_out(rich, monkeypatch, days):
    table = rich.table
    before = _rows(table)
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**EXPIRE))
    def clean_orphans():
        cleaner = Table.open(table.uri)
        _maybe_retained(cleaner, days, lambda: cleaner.remove_orphan_files(older_than="0 s", dry_run=False))

    # Inside the undo: the snapshots are back, the entries not yet dropped.
    raced = refusals_inside_undo(monkeypatch, undo_module.NoncurrentUndo, "_apply", clean_orphans)
    Table.open(table.uri).undo(run_id)
    monkeypatch.undo()
    assert raced, "orphan removal ran while an undo was marked"
    assert _rows(table) == before and Table.open(table.uri).trash() == []


def _consumer_expired(tmp_path, position: int) -> tuple[Table, str]:
    """A table of 4 appends (consumers expire after 1 h) whose consumer ``reader`` at ``position`` was
    expired under a retention of 10 days; the table and that run's id."""
    history = make_table(str(tmp_path / "t"), **{"consumer.expiration-time": "1 h"})
    history.appends(4)
    table = history.table
    table.update_consumer("reader", position)
    return table, _noncurrent(table, 10, lambda: table.expire_consumers(now=FAR_FUTURE))


@pytest.mark.parametrize("days", RETENTIONS)
def test_a_consumer_expiry_during_an_undo_backs_out(tmp_path, monkeypatch, days):
    table, run_id = _consumer_expired(tmp_path, 3)
    def expire_consumers():
        other = Table.open(table.uri)
        _maybe_retained(other, days, lambda: other.expire_consumers(now=FAR_FUTURE))

    # Inside the undo: the consumer is back, the undo not finished.
    raced = refusals_inside_undo(monkeypatch, undo_module.NoncurrentUndo, "_apply", expire_consumers)
    Table.open(table.uri).undo(run_id)
    monkeypatch.undo()
    assert raced, "the consumer expiry ran while an undo was marked"
    assert Table.open(table.uri).consumer("reader").next_snapshot == 3
    assert Table.open(table.uri).trash() == []


@pytest.mark.parametrize("days", RETENTIONS)
def test_a_consumer_expiry_leaves_a_consumer_an_undo_brought_back_after_its_listing(tmp_path, monkeypatch, days):
    table, run_id = _consumer_expired(tmp_path, 4)
    table.update_consumer("reader", 2)  # a new reader of the name, behind the one the run removed
    undone: list[bool] = []
    record_removed = consumers_module.record_removed

    def undo_after_the_listing(*args, **kwargs):
        if not undone:
            undone.append(True)
            with pytest.raises(DeletionInProgressError):  # the expiry is marked: the undo backs out
                Table.open(table.uri).undo(run_id)
        return record_removed(*args, **kwargs)

    monkeypatch.setattr(consumers_module, "record_removed", undo_after_the_listing)
    other = Table.open(table.uri)
    expired = _maybe_retained(other, days, lambda: other.expire_consumers(now=FAR_FUTURE))
    monkeypatch.undo()
    assert undone
    assert expired == ["reader"]
    Table.open(table.uri).undo(run_id)  # rerun after the expiry: the reader it removed is back
    assert Table.open(table.uri).consumer("reader").next_snapshot == 4


# -- Apache Paimon tables (the same code paths, Paimon's files), judged by pypaimon ----------------


@pytest.mark.parametrize("run_at", RUN_AT)
@pytest.mark.parametrize("days", RETENTIONS)
def test_paimon_orphan_removal_deletes_no_file_a_run_and_its_undo_move_between_its_reads(paimon, tmp_path, monkeypatch, days, run_at):
    from tests.paimon.test_paimon_lifecycle import check
    from tests.paimon.test_paimon_noncurrent import EXPIRE as PAIMON_EXPIRE

    warehouse = paimon.copy(tmp_path / "w")
    path = os.path.join(warehouse, "db.db", "app")
    table = Table.open(path)
    snapshots, tags = [s.id for s in table.snapshots()], [t.name for t in table.tags()]
    run_ids, refused = run_and_undo_inside_orphan_removal(
        monkeypatch, run_at,
        run=lambda: _expired_with_a_retention(path, PAIMON_EXPIRE),
        undo=lambda run_id: Table.open(path).undo(run_id),
    )
    cleaner = Table.open(path)
    result = _maybe_retained(cleaner, days, lambda: cleaner.remove_orphan_files(older_than="0 s", dry_run=False))
    monkeypatch.undo()
    assert result.orphan_count == 0, f"files the run held were taken for orphans: {result.orphan_files[:5]}"
    assert run_ids and refused, "the undo went through while the orphan removal was under way"
    Table.open(path).undo(run_ids[0])
    check(paimon, warehouse, "app", snapshots, tags)


@pytest.mark.parametrize("days", RETENTIONS)
def test_deleting_a_tag_of_a_live_snapshot_during_an_undo_backs_out(rich, monkeypatch, days):
    """The deletion outside a plan (the snapshot still holds the files): no plan fences it, it reads the marks."""
    table = rich.table
    run_id = _noncurrent(table, 10, lambda: table.delete_tag("t10"))
    def delete_tag():
        other = Table.open(table.uri)
        _maybe_retained(other, days, lambda: other.delete_tag("t10"))

    # Inside the undo: the tag is back, the undo not finished.
    raced = refusals_inside_undo(monkeypatch, undo_module.NoncurrentUndo, "_apply", delete_tag)
    assert Table.open(table.uri).undo(run_id).restored_tags == ["t10"]
    monkeypatch.undo()
    assert raced, "the tag deletion ran while an undo was marked"
    assert "t10" in [t.name for t in Table.open(table.uri).tags()] and Table.open(table.uri).trash() == []


# -- the racing run in another process (the command line): the fence lives on storage only -----------


def _snaptable(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SNAPTABLE, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("days", RETENTIONS)
def test_orphan_removal_in_another_process_during_an_undo_backs_out_and_an_undo_in_another_process_loses_nothing(
    rich, monkeypatch, days
):
    table = rich.table
    before = _rows(table)
    retention = [] if days is None else ["--noncurrent-days", str(days)]
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**EXPIRE))
    # 1. The undo here, a `snaptable clean-orphans` process while it is marked: refused, nothing deleted.
    outcomes: list[subprocess.CompletedProcess] = []
    apply = undo_module.NoncurrentUndo._apply

    def orphans_meanwhile(self, *args, **kwargs):
        apply(self, *args, **kwargs)
        outcomes.append(_snaptable("clean-orphans", table.uri, "--older-than", "0 s", "--no-dry-run", "--json", *retention))

    monkeypatch.setattr(undo_module.NoncurrentUndo, "_apply", orphans_meanwhile)
    Table.open(table.uri).undo(run_id)
    monkeypatch.undo()
    [refused] = outcomes
    assert refused.returncode != 0 and "UndoInProgressError" in refused.stdout + refused.stderr, refused
    assert _rows(table) == before
    # 2. The orphan removal here, a `snaptable undo` process between its reads: refused, nothing it would restore goes.
    outcomes.clear()
    run_ids, _refused = run_and_undo_inside_orphan_removal(
        monkeypatch, "inside",
        run=lambda: _expired_with_a_retention(table.uri, EXPIRE),
        undo=lambda run_id: outcomes.append(_snaptable("undo", table.uri, run_id, "--json")),
    )
    cleaner = Table.open(table.uri)
    result = _maybe_retained(cleaner, days, lambda: cleaner.remove_orphan_files(older_than="0 s", dry_run=False))
    monkeypatch.undo()
    [refused] = outcomes
    assert refused.returncode != 0 and "DeletionInProgressError" in refused.stdout + refused.stderr, refused
    assert result.orphan_count == 0, result.orphan_files[:5]
    done = _snaptable("undo", table.uri, run_ids[0], "--json")
    assert done.returncode == 0, done
    assert _rows(table) == before and Table.open(table.uri).verify().ok


@pytest.mark.parametrize("days", RETENTIONS)
def test_a_consumer_expiry_leaves_a_consumer_an_undo_brought_back_between_its_last_read_and_its_delete(tmp_path, monkeypatch, days):
    from airflow_snaptable.core.native import consumers as native_consumers

    table, run_id = _consumer_expired(tmp_path, 4)
    table.update_consumer("reader", 4)
    undone: list[bool] = []
    store_class = native_consumers.ConsumerManager
    delete = store_class.delete

    def undo_right_before_the_delete(self, consumer_id):
        if not undone:
            undone.append(True)
            try:
                Table.open(table.uri).undo(run_id)  # marks, writes the removed reader back
            except DeletionInProgressError:
                pass
        return delete(self, consumer_id)

    monkeypatch.setattr(store_class, "delete", undo_right_before_the_delete)
    other = Table.open(table.uri)
    try:
        _maybe_retained(other, days, lambda: other.expire_consumers(now=FAR_FUTURE))
    except UndoInProgressError:
        pass
    monkeypatch.undo()
    assert undone
    undone_run = run_id not in {r.run_id for r in Table.open(table.uri).trash()}
    # Either the undo was refused (its run still in the trash) or the consumer it restored is there.
    assert not undone_run or Table.open(table.uri).consumer("reader").next_snapshot == 4
    Table.open(table.uri).undo(run_id)  # the expiry is over: the undo goes through
    assert Table.open(table.uri).consumer("reader").next_snapshot == 4


def test_a_crashed_consumer_expiry_holds_an_undo_back_only_until_its_mark_is_stale(tmp_path, monkeypatch):
    from airflow_snaptable.core.lifecycle.noncurrent import journal as journal_module

    table, run_id = _consumer_expired(tmp_path, 4)
    table.update_consumer("reader", 1)
    crash = RuntimeError("crash after the mark")

    def crashing(*args, **kwargs):
        raise crash

    monkeypatch.setattr(journal_module.NoncurrentJournal, "unmark", crashing)  # the mark stays up
    monkeypatch.setattr(consumers_module, "record_removed", crashing)
    with pytest.raises(RuntimeError):
        Table.open(table.uri).expire_consumers(now=FAR_FUTURE)
    monkeypatch.undo()
    assert NoncurrentJournal(Table.open(table.uri).store.lifecycle).marked_runs(journal_module.DELETING_PREFIX)
    with pytest.raises(DeletionInProgressError):
        Table.open(table.uri).undo(run_id)
    real_now = journal_module.real_now_millis()
    monkeypatch.setattr(journal_module, "real_now_millis", lambda: real_now + journal_module.STALE_MARK_MILLIS + 1)
    Table.open(table.uri).undo(run_id)  # the crashed expiry's mark is stale: it holds nothing back
    assert Table.open(table.uri).consumer("reader").next_snapshot == 4
