"""Crash sweeps and races of recoverable deletes (core/lifecycle/noncurrent/, issue 26).

- A crash at storage operations of a noncurrent expiry (the first and last four and about five evenly
  between, deterministic), and at every storage operation of an undo and of a purge (of a small
  history; each point copies the table and reruns): after it,
  every snapshot and tag still reads its rows, and rerunning the same call finishes the job (the
  same end state as an uninterrupted run; nothing lost, nothing left noncurrent for ever).
- Purge against undo, each paused at its check of the other's mark: exactly one acts.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import RunPurgedError
from airflow_snaptable.core.lifecycle.deletion_plans import STALE_PENDING_SECONDS
from airflow_snaptable.core.lifecycle.noncurrent.journal import PURGE_PREFIX, UNDO_PREFIX, NoncurrentJournal
from tests.conftest import FailAt, InjectedCrash, sorted_ids
from tests.core.test_lifecycle import FAR_FUTURE, Clock, build_rich_history, make_table
from tests.noncurrent_support import data_and_manifest_files as _files

EXPIRE = dict(retain_min=1, time_retained="0 s", now=FAR_FUTURE)
#: Crash points swept per call besides the first and last four (runtime: each point copies and reruns).
POINTS = 5


def _open(uri: str) -> Table:
    table = Table.open(uri)
    table.clock = Clock(FAR_FUTURE)
    return table


def _rows(uri: str):
    fresh = Table.open(uri)
    return (
        {s.id: sorted_ids(fresh.scan(snapshot_id=s.id).to_arrow()) for s in fresh.snapshots()},
        {t.name: sorted_ids(fresh.scan(tag=t.name).to_arrow()) for t in fresh.tags()},
    )


def _readable(uri: str, model: dict[int, list[int]]) -> None:
    fresh = Table.open(uri)
    for snapshot in fresh.snapshots():
        assert sorted_ids(fresh.scan(snapshot_id=snapshot.id).to_arrow()) == model[snapshot.id]
    for tag in fresh.tags():
        assert sorted_ids(fresh.scan(tag=tag.name).to_arrow()) == model[tag.snapshot_id]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("noncurrent") / "template")
    history = make_table(uri, **{"manifest.merge-min-count": "2"})
    build_rich_history(history)
    return uri, history.model


def _count(call, uri: str) -> int:
    table = _open(uri)
    seen = []
    table.storage.on_operation = lambda kind, path: seen.append(kind)
    call(table)
    return len(seen)


def _points(total: int) -> list[int]:
    """The first and last four crash points and about POINTS between (deterministic)."""
    step = max(1, total // POINTS)
    return sorted(set(range(1, min(total, 4) + 1)) | set(range(1, total + 1, step)) | set(range(max(1, total - 3), total + 1)))


def _owner_gone(uri: str) -> None:
    """The crashed run's pending plan fences undo until it is stale (deletion_plans.STALE_PENDING_SECONDS): age it."""
    past = time.time() - STALE_PENDING_SECONDS - 60
    for directory, _dirs, names in os.walk(uri):
        for name in names:
            if name.startswith("pending-"):
                os.utime(os.path.join(directory, name), (past, past))


def _expire(table: Table, days: int) -> str:
    with table.retaining_noncurrent(days, "expire-snapshots") as run:
        table.expire_snapshots(**EXPIRE)
    return run.run_id


def test_a_crash_anywhere_in_a_noncurrent_expiry_deletes_nothing_and_the_rerun_records_it(template, tmp_path):
    uri, model = template
    before = _files(uri)
    total = _count(lambda t: _expire(t, 10), _copy(uri, tmp_path / "count"))
    for n in _points(total):
        work = _copy(uri, tmp_path / "work")
        crashing = _open(work)
        crashing.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            _expire(crashing, 10)
        _readable(work, model)
        assert _files(work) == before, f"crash at {n}: a file was deleted"
        _owner_gone(work)
        rerun = _open(work)
        run_id = _expire(rerun, 10)
        assert _files(work) == before
        # Every run recorded is undoable back to the full history (the interrupted one too: its plan was finished).
        for summary in reversed(rerun.trash()):
            _open(work).undo(summary.run_id)
        assert _rows(work)[0] == {i: model[i] for i in range(1, 13)}, f"crash at {n}"
        assert run_id


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A small history for the sweeps of every storage operation: a partition overwritten, a tag on a
    snapshot the expiry removes, one partition's files shared by every snapshot."""
    uri = str(tmp_path_factory.mktemp("noncurrent") / "tiny")
    history = make_table(uri)
    history.append(2, partitions=(0, 1))  # 1
    history.append(1, partitions=(0,))  # 2
    history.table.create_tag("t2", 2)
    history.overwrite(1, partition=0)  # 3
    history.append(1, partitions=(1,))  # 4
    return uri, history.model


def test_a_crash_at_every_storage_operation_of_an_undo_then_the_rerun_restores_everything(tiny, tmp_path):
    uri, model = tiny
    base = _copy(uri, tmp_path / "base")
    run_id = _expire(_open(base), 10)
    total = _count(lambda t: t.undo(run_id), _copy(base, tmp_path / "count"))
    assert total > 20
    for n in range(1, total + 1):
        work = _copy(base, tmp_path / "work")
        crashing = _open(work)
        crashing.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            crashing.undo(run_id)
        _readable(work, model)
        # A crashed undo leaves its mark: purge leaves the run alone until the undo is rerun.
        _open(work).purge(now=None)
        assert _open(work).undo(run_id).run_id == run_id
        assert _rows(work)[0] == model, f"crash at {n}"
        assert Table.open(work).verify().ok
        assert NoncurrentJournal(Table.open(work).storage).names() == []


def test_a_crash_at_every_storage_operation_of_a_purge_then_the_rerun_deletes_exactly_the_plain_set(tiny, tmp_path):
    uri, model = tiny
    plain = _copy(uri, tmp_path / "plain")
    _open(plain).expire_snapshots(**EXPIRE)
    expected = _files(plain)
    assert expected < _files(uri)
    base = _copy(uri, tmp_path / "base")
    run_id = _expire(_open(base), 0)
    total = _count(lambda t: t.purge(), _copy(base, tmp_path / "count"))
    assert total > 10
    for n in range(1, total + 1):
        work = _copy(base, tmp_path / "work")
        crashing = _open(work)
        crashing.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            crashing.purge()
        _readable(work, model)
        journal = NoncurrentJournal(Table.open(work).storage)
        if journal.marked(PURGE_PREFIX, run_id):
            with pytest.raises(RunPurgedError):  # a purge of the run started: no undo any more
                _open(work).undo(run_id)
        _open(work).purge()
        assert _files(work) == expected, f"crash at {n}"
        assert journal.names() == [] and not journal.marked(PURGE_PREFIX, run_id)
        assert Table.open(work).verify().ok


def _copy(source, dest) -> str:
    dest = str(dest)
    if os.path.exists(dest):
        shutil.rmtree(dest)
    shutil.copytree(str(source), dest)
    return dest


class PauseAt:
    """Runs ``other`` once, when the paused call reaches the storage operation on a path containing ``marker``."""

    def __init__(self, kind: str, marker: str, other):
        self.kind, self.marker, self.other, self.done = kind, marker, other, False

    def __call__(self, kind: str, path: str) -> None:
        if not self.done and kind == self.kind and self.marker in path:
            self.done = True
            self.other()


def test_purge_racing_an_undo_that_marked_first_leaves_the_run_to_the_undo(template, tmp_path):
    uri, model = template
    work = _copy(uri, tmp_path / "work")
    run_id = _expire(_open(work), 0)
    undoing = _open(work)
    results = []
    # The undo has written its mark and is checking for a purge mark: the purge runs now.
    undoing.storage.on_operation = PauseAt("exists", PURGE_PREFIX, lambda: results.append(_open(work).purge()))
    undone = undoing.undo(run_id)
    [purge] = results
    assert purge.deleted_files == 0 and purge.undoing_run_ids == [run_id]
    assert undone.restored_snapshot_ids
    assert _rows(work)[0] == {i: model[i] for i in range(1, 13)}


def test_undo_racing_a_purge_that_marked_first_is_refused_and_changes_nothing(template, tmp_path):
    uri, model = template
    work = _copy(uri, tmp_path / "work")
    run_id = _expire(_open(work), 0)
    purging = _open(work)
    refused = []

    def undo() -> None:
        with pytest.raises(RunPurgedError):
            _open(work).undo(run_id)
        refused.append(True)

    # The purge has written its mark and is checking for an undo mark: the undo runs now.
    purging.storage.on_operation = PauseAt("exists", UNDO_PREFIX, undo)
    result = purging.purge()
    assert refused == [True] and result.purged_run_ids == [run_id]
    _readable(work, model)
    assert Table.open(work).verify().ok


def test_a_commit_re_referencing_a_noncurrent_file_while_a_purge_runs_keeps_it(template, tmp_path):
    """The commit lands after the purge marked the run and before it read the live metadata: kept."""
    import pyarrow.parquet as pq

    from airflow_snaptable.core.native.manifest import DataFile

    uri, model = template
    work = _copy(uri, tmp_path / "work")
    run_id = _expire(_open(work), 0)
    path, size = next(e for e in NoncurrentJournal(Table.open(work).storage).entries(run_id) if e.data_files).data_files[0]
    partition = int(path.split("p=")[1].split("/")[0])
    rows = pq.read_metadata(os.path.join(work, path)).num_rows

    def commit() -> None:
        _open(work).commit_files([DataFile(path, (partition,), rows, size)])

    purging = _open(work)
    purging.storage.on_operation = PauseAt("exists", UNDO_PREFIX, commit)
    result = purging.purge()
    assert result.purged_run_ids == [run_id] and result.kept_referenced_files == 1
    assert os.path.exists(os.path.join(work, path))
    assert Table.open(work).verify().ok


def test_a_commit_re_referencing_a_file_while_purge_deletes_others_of_the_same_entry_keeps_it(template, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from airflow_snaptable.core.lifecycle.noncurrent import purge as purge_module
    from airflow_snaptable.core.native.manifest import DataFile

    monkeypatch.setattr(purge_module, "PURGE_RECHECK_FILES", 1, raising=False)
    uri, _model = template
    work = _copy(uri, tmp_path / "work")
    run_id = _expire(_open(work), 0)
    files = [f for e in NoncurrentJournal(Table.open(work).storage).entries(run_id) for f in e.data_files]
    entry = next(e for e in NoncurrentJournal(Table.open(work).storage).entries(run_id) if len(e.data_files) >= 2)
    (first, _), (path, size) = entry.data_files[0], entry.data_files[-1]
    partition = int(path.split("p=")[1].split("/")[0])
    rows = pq.read_metadata(os.path.join(work, path)).num_rows
    assert files

    def commit() -> None:
        _open(work).commit_files([DataFile(path, (partition,), rows, size)])

    purging = _open(work)
    # The purge deletes the entry's first file: the commit naming its last one lands now.
    purging.storage.on_operation = PauseAt("delete", first, commit)
    result = purging.purge()
    assert result.purged_run_ids == [run_id] and result.kept_referenced_files == 1
    assert os.path.exists(os.path.join(work, path))
    assert Table.open(work).verify().ok
