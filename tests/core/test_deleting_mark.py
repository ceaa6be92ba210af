"""The deleting mark (core/lifecycle/noncurrent/journal.py ``DeletingMark``): the deleting steps no
deletion plan fences hold undo out from their first read to their last delete.

- the mark is renewed while the step works and never outlives it;
- an undo refuses while a fresh mark is up, naming the operation; a crashed step's mark holds it
  back only until it is stale;
- a holder whose mark went without renewal for half the stale time deletes nothing more;
- a tag deletion that frees nothing holds the mark too.
"""

from __future__ import annotations

import json
import os
import time
import types

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import DeletingMarkLapsedError, DeletionInProgressError
from airflow_snaptable.core.lifecycle import tags as tags_module
from airflow_snaptable.core.lifecycle.noncurrent import journal as journal_module
from airflow_snaptable.core.lifecycle.noncurrent.journal import (
    DELETING_PREFIX,
    REMOVE_ORPHANS,
    STALE_MARK_MILLIS,
    DeletingMark,
    NoncurrentJournal,
)
from tests.core.test_noncurrent import EXPIRE, _noncurrent, _rows, rich  # noqa: F401 - fixture


def _marks(table: Table) -> dict[str, dict]:
    journal = NoncurrentJournal(Table.open(table.uri).store.lifecycle)
    return {
        token: json.loads(journal.storage.read_bytes(f"{journal.directory}/{DELETING_PREFIX}{token}.json"))
        for token in journal.marked_runs(DELETING_PREFIX)
    }


def _orphan(table: Table) -> str:
    """An old file under the table that nothing references."""
    path = os.path.join(table.uri, "data", "p=0", "stray.parquet")
    with open(path, "wb") as f:
        f.write(b"not referenced")
    old = time.time() - 3 * 86_400
    os.utime(path, (old, old))
    return path


def test_the_mark_is_renewed_while_held_and_gone_after(rich):
    table = rich.table
    journal = NoncurrentJournal(table.store.lifecycle)
    with DeletingMark(journal, REMOVE_ORPHANS, renew_millis=20) as mark:
        [first] = _marks(table).values()
        assert first["operation"] == REMOVE_ORPHANS and first["run_id"] == mark.token
        deadline = time.monotonic() + 10
        while _marks(table)[mark.token]["at_millis"] == first["at_millis"]:
            assert time.monotonic() < deadline, "the mark was never renewed"
            time.sleep(0.02)
    time.sleep(0.1)  # several renewal periods: none may write the mark again
    assert _marks(table) == {}


def test_an_undo_during_an_orphan_removal_is_refused_naming_it_and_goes_through_after(rich, monkeypatch):
    table = rich.table
    before = _rows(table)
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**EXPIRE))
    refused: list[DeletionInProgressError] = []
    held_paths = NoncurrentJournal.held_paths

    def undo_meanwhile(self):
        if not refused:
            with pytest.raises(DeletionInProgressError) as caught:
                Table.open(table.uri).undo(run_id)
            refused.append(caught.value)
        return held_paths(self)

    monkeypatch.setattr(NoncurrentJournal, "held_paths", undo_meanwhile)
    Table.open(table.uri).remove_orphan_files(older_than="0 s", dry_run=False)
    monkeypatch.undo()
    assert REMOVE_ORPHANS in str(refused[0])
    assert [r.run_id for r in Table.open(table.uri).trash()] == [run_id]  # refused: nothing changed
    Table.open(table.uri).undo(run_id)
    assert _rows(table) == before and _marks(table) == {}


def test_a_dry_run_takes_no_mark(rich, monkeypatch):
    table = rich.table
    seen: list[dict] = []
    held_paths = NoncurrentJournal.held_paths

    def looking(self):
        seen.append(_marks(table))
        return held_paths(self)

    monkeypatch.setattr(NoncurrentJournal, "held_paths", looking)
    Table.open(table.uri).remove_orphan_files(older_than="0 s", dry_run=True)
    assert seen and all(marks == {} for marks in seen)


def test_a_crashed_orphan_removal_holds_an_undo_back_only_until_its_mark_is_stale(rich, monkeypatch):
    table = rich.table
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**EXPIRE))
    _orphan(table)

    def crash(*args, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(NoncurrentJournal, "unmark", crash)  # the mark stays up, as after a kill
    monkeypatch.setattr(Table.open(table.uri).store.files.__class__, "delete", crash)
    with pytest.raises(RuntimeError):
        Table.open(table.uri).remove_orphan_files(older_than="0 s", dry_run=False)
    monkeypatch.undo()
    assert list(_marks(table).values())[0]["operation"] == REMOVE_ORPHANS
    with pytest.raises(DeletionInProgressError):
        Table.open(table.uri).undo(run_id)
    real_now = journal_module.real_now_millis()
    monkeypatch.setattr(journal_module, "real_now_millis", lambda: real_now + STALE_MARK_MILLIS + 1)
    Table.open(table.uri).purge()
    assert _marks(table), "a purge dropped a mark a live run could still renew"
    assert Table.open(table.uri).undo(run_id).restored_snapshot_ids
    monkeypatch.setattr(journal_module, "real_now_millis", lambda: real_now + 4 * STALE_MARK_MILLIS)
    Table.open(table.uri).purge()  # housekeeping: the crashed run's mark goes
    assert _marks(table) == {}


def test_an_orphan_removal_whose_mark_lapsed_deletes_nothing(rich, monkeypatch):
    """Renewals failed (or the process stood still) for half the stale time while it read the files in
    use: an undo may have taken its mark for a crashed run's, so its reads are not trusted."""
    table = rich.table
    stray = _orphan(table)
    clock = [time.monotonic()]
    monkeypatch.setattr(journal_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0], time=time.time))
    held_paths = NoncurrentJournal.held_paths

    def a_long_read(self):
        clock[0] += STALE_MARK_MILLIS / 2 / 1000
        return held_paths(self)

    monkeypatch.setattr(NoncurrentJournal, "held_paths", a_long_read)
    with pytest.raises(DeletingMarkLapsedError):
        Table.open(table.uri).remove_orphan_files(older_than="0 s", dry_run=False)
    monkeypatch.undo()
    assert os.path.exists(stray) and _marks(table) == {}
    assert Table.open(table.uri).remove_orphan_files(older_than="0 s", dry_run=False).orphan_count == 1
    assert not os.path.exists(stray)


def test_an_undo_during_a_tag_deletion_that_frees_nothing_is_refused(rich, monkeypatch):
    table = rich.table
    run_id = _noncurrent(table, 10, lambda: table.delete_tag("t10"))
    table.create_tag("t10b", 10)
    refused: list[BaseException] = []
    record_removed = tags_module.record_removed

    def undo_meanwhile(*args, **kwargs):
        try:
            Table.open(table.uri).undo(run_id)
        except DeletionInProgressError as exc:
            refused.append(exc)
        return record_removed(*args, **kwargs)

    monkeypatch.setattr(tags_module, "record_removed", undo_meanwhile)
    Table.open(table.uri).delete_tag("t10b")
    monkeypatch.undo()
    assert refused, "the undo went through while the tag deletion was under way"
    assert Table.open(table.uri).undo(run_id).restored_tags == ["t10"]
    assert {t.name for t in Table.open(table.uri).tags()} >= {"t10"} and "t10b" not in {t.name for t in Table.open(table.uri).tags()}
