"""Recoverable deletes on Apache Iceberg tables (issue 26), judged by pyiceberg.

With ``noncurrent_days`` 10, expiry (with a tag and a branch around), tag deletion and rollback delete
no file; undo puts the snapshots, their history and the refs back in one catalog commit, and pyiceberg
reads every snapshot and ref exactly as before. With 0, purge deletes exactly the files the plain
expiry deletes.
"""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.core.errors import RunNotFoundError, RunPurgedError, UndoInvariantError
from tests.iceberg.conftest import IcebergEnv, files_on_disk, read_everything
# FAR, _history and _open: the names other test modules import from here.
from tests.iceberg.undo_support import FAR, expired_consumer, expired_history
from tests.iceberg.undo_support import history as _history
from tests.iceberg.undo_support import open_orders as _open


OPERATIONS = {
    "expire": lambda t, ids: t.expire_snapshots(retain_min=1, older_than=FAR),
    "delete-tag": lambda t, ids: t.delete_tag("t1"),
    "rollback": lambda t, ids: t.rollback_to(ids[2]),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_with_a_retention_nothing_is_deleted_and_undo_brings_back_what_pyiceberg_read(iceberg_env, operation):
    table, ids = _history(iceberg_env)
    before, files = read_everything(table), files_on_disk(iceberg_env.location())
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(10, operation) as run:
        OPERATIONS[operation](ours, ids)
    assert files_on_disk(iceberg_env.location()) >= files, "a run with a retention deletes no file"
    assert read_everything(table) != before
    assert _open(iceberg_env).verify().ok, _open(iceberg_env).verify().to_dict()
    assert _open(iceberg_env).remove_orphan_files(older_than="0 s", dry_run=True).orphan_count == 0
    [summary] = _open(iceberg_env).trash()
    assert summary.run_id == run.run_id
    result = _open(iceberg_env).undo(run.run_id)
    assert read_everything(table) == before
    assert _open(iceberg_env).trash() == []
    assert _open(iceberg_env).undo(run.run_id).already_undone
    if operation == "expire":
        assert sorted(result.restored_snapshot_ids) == sorted(set(before["snapshots"]) - {before["refs"]["main"], ids[1], before["refs"]["audit"]})
        # pyiceberg's time travel by timestamp sees the history again.
        assert table.refresh().snapshot_as_of_timestamp(table.metadata.snapshot_by_id(ids[0]).timestamp_ms).snapshot_id == ids[0]


def test_with_zero_days_purge_deletes_exactly_what_the_plain_expiry_deletes(tmp_path):
    """The same table (catalog and files copied back to the same place: the metadata names absolute paths)
    expired plainly, then with a retention of 0 days and purged: the same set of files goes."""
    import shutil

    from tests.iceberg.test_iceberg_undo_statistics import _with_statistics

    env = _fresh_env(tmp_path, "table")
    table, ids = _history(env)
    _with_statistics(table, ids[0])  # a statistics and a partition-statistics file go with their snapshot
    root, pristine = tmp_path / "table", tmp_path / "pristine"
    shutil.copytree(root, pristine)
    before = files_on_disk(env.location())
    _open(env).expire_snapshots(retain_min=1, older_than=FAR)
    deleted_plainly = before - files_on_disk(env.location())
    assert {p.split("/")[0] for p in deleted_plainly} == {"data", "metadata"}
    assert {f"metadata/{ids[0]}-stats.puffin", f"metadata/{ids[0]}-partition-stats.puffin"} <= deleted_plainly
    shutil.rmtree(root)
    shutil.copytree(pristine, root)
    ours = _open(env)
    with ours.retaining_noncurrent(0, "expire"):
        ours.expire_snapshots(retain_min=1, older_than=FAR)
    assert files_on_disk(env.location()) >= before, "a run with a retention deletes no file"
    result = _open(env).purge()
    assert before - files_on_disk(env.location()) == deleted_plainly
    assert result.deleted_files == len(deleted_plainly)
    assert _open(env).verify().ok


def test_undo_refuses_when_a_ref_was_moved_since_and_when_a_file_is_gone(iceberg_env):
    table, ids = _history(iceberg_env)
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(10, "delete-tag") as run:
        ours.delete_tag("t1")
    table.refresh().manage_snapshots().create_tag(ids[3], "t1").commit()
    with pytest.raises(UndoInvariantError, match="t1"):
        _open(iceberg_env).undo(run.run_id)
    with ours.retaining_noncurrent(10, "expire") as expiry:
        ours.expire_snapshots(retain_min=1, older_than=FAR)
    entries = list(_open(iceberg_env).noncurrent_journal().entries(expiry.run_id))
    # A manifest list of an expired snapshot: undo would publish a snapshot that cannot be read.
    gone = next(p for entry in entries for p, _s in entry.files if p.rsplit("/", 1)[-1].startswith("snap-"))
    os.remove(os.path.join(iceberg_env.location(), gone))
    with pytest.raises(RunPurgedError, match="invariant 1"):
        _open(iceberg_env).undo(expiry.run_id)


def test_consumer_expiry_is_undone(iceberg_env):
    expired = expired_consumer(iceberg_env)
    assert expired.expired == ["reader"]
    assert _open(iceberg_env).consumers() == []
    result = _open(iceberg_env).undo(expired.run_id)
    assert result.restored_consumers == ["reader"] and _open(iceberg_env).consumer("reader") == expired.position


def _fresh_env(tmp_path, name: str) -> IcebergEnv:
    (tmp_path / name / "warehouse").mkdir(parents=True)
    return IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path / name}/catalog.db",
                       "warehouse": f"file://{tmp_path / name / 'warehouse'}"}, str(tmp_path / name / "warehouse"))


def test_a_crash_anywhere_in_a_noncurrent_expiry_deletes_nothing_and_every_run_is_undone_after(tmp_path):
    from tests.conftest import FailAt, InjectedCrash

    def expire(table) -> None:
        with table.retaining_noncurrent(10, "expire"):
            table.expire_snapshots(retain_min=1, older_than=FAR)

    count = _fresh_env(tmp_path, "count")
    _history(count)
    counter = FailAt(10**9)
    ours = _open(count)
    ours.storage.on_operation = counter
    expire(ours)
    for n in range(1, counter.seen + 1):
        env = _fresh_env(tmp_path, f"crash-{n}")
        table, _ids = _history(env)
        before, files = read_everything(table), files_on_disk(env.location())
        crashing = _open(env)
        crashing.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            expire(crashing)
        assert files_on_disk(env.location()) >= files, f"crash at {n}: a file was deleted"
        expire(_open(env))  # the rerun finishes (or drops) the interrupted plan, then expires
        assert files_on_disk(env.location()) >= files
        for summary in reversed(_open(env).trash()):
            _open(env).undo(summary.run_id)
        assert read_everything(table) == before, f"crash at {n}"
        assert _open(env).verify().ok


def test_an_expiry_starting_during_an_undo_backs_out_and_the_undo_restores_everything(iceberg_env, monkeypatch):
    from airflow_snaptable.core.errors import UndoInProgressError
    from airflow_snaptable.core.formats.iceberg import noncurrent

    expired = expired_history(iceberg_env, retain_min=3)
    table, before = expired.table, expired.before
    raced: list[BaseException] = []
    commit = noncurrent.IcebergNoncurrent._commit

    def expiry_meanwhile(self, *args, **kwargs):
        # The undo has marked the run and checked for plans: a plain expiry starts now.
        try:
            _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
        except UndoInProgressError as exc:
            raced.append(exc)
        return commit(self, *args, **kwargs)

    monkeypatch.setattr(noncurrent.IcebergNoncurrent, "_commit", expiry_meanwhile)
    _open(iceberg_env).undo(expired.run_id)
    assert raced, "the expiry ran while the undo was marked"
    assert read_everything(table) == before


def test_an_undo_starting_while_an_expiry_is_planned_refuses(iceberg_env, monkeypatch):
    from airflow_snaptable.core.formats.iceberg import expire

    table, _ids = _history(iceberg_env)
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(10, "expire") as run:
        ours.expire_snapshots(retain_min=3, older_than=FAR)
    after_first = read_everything(table)
    refused: list[BaseException] = []
    commit = expire.IcebergExpiry._commit

    def undo_meanwhile(self, *args, **kwargs):
        # The plain expiry has written its plan and is about to commit: the undo starts now.
        if not refused:
            try:
                _open(iceberg_env).undo(run.run_id)
            except UndoInvariantError as exc:
                refused.append(exc)
        return commit(self, *args, **kwargs)

    monkeypatch.setattr(expire.IcebergExpiry, "_commit", undo_meanwhile)
    _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
    monkeypatch.undo()
    assert refused, "the undo ran while an expiry was between its plan and its delete"
    # The expiry went through; everything left (snapshots and refs) is readable, nothing restored was lost.
    after = read_everything(table)
    assert after["snapshots"] and all(after_first["snapshots"][i] == data for i, data in after["snapshots"].items())
    assert after["refs"] == after_first["refs"]


def test_a_file_added_back_while_purge_deletes_others_of_the_same_entry_is_kept(iceberg_env, monkeypatch):
    from airflow_snaptable.core.lifecycle.noncurrent import purge as purge_module

    monkeypatch.setattr(purge_module, "PURGE_RECHECK_FILES", 1, raising=False)
    table, _ids = _history(iceberg_env)
    table.manage_snapshots().remove_tag("t1").remove_branch("audit").commit()  # every old data file is freed
    table = table.refresh()
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(0, "expire") as run:
        ours.expire_snapshots(retain_min=1, older_than=FAR)
    [entry] = [e for e in ours.noncurrent_journal().entries(run.run_id) if e.files]
    data = [p for p, _s in entry.files if p.endswith(".parquet") and "/metadata/" not in f"/{p}"]
    assert len(entry.files) >= 2 and data
    added = next(p for p in reversed(data) if p != entry.files[0][0])
    purging = _open(iceberg_env)
    storage_class = type(purging.storage)
    delete_files = storage_class.delete_files
    calls: list[int] = []

    def add_back_meanwhile(self, paths):
        if not calls:
            calls.append(1)
            # The purge deletes the entry's first file: a commit adds the last data file back now.
            table.refresh().add_files([self.full_uri(added)])
        return delete_files(self, paths)

    monkeypatch.setattr(storage_class, "delete_files", add_back_meanwhile)
    result = purging.purge()
    monkeypatch.undo()
    assert calls and result.purged_run_ids == [run.run_id]
    assert os.path.exists(os.path.join(iceberg_env.location(), added)) or added in files_on_disk(iceberg_env.location())
    read_everything(table.refresh())
    assert _open(iceberg_env).verify().ok


def test_orphan_removal_with_a_retention_keeps_the_orphan_noncurrent_then_undo_or_purge(iceberg_env):
    table, _ids = _history(iceberg_env)
    stray = os.path.join(iceberg_env.location(), "data", "stray.parquet")
    with open(stray, "wb") as f:
        f.write(b"left by a crashed writer")
    os.utime(stray, (1_000_000, 1_000_000))
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(10, "remove-orphan-files") as run:
        result = ours.remove_orphan_files(older_than="1 h", dry_run=False)
    assert result.orphan_count == 1 and result.run_id == run.run_id and os.path.exists(stray)
    assert _open(iceberg_env).remove_orphan_files(older_than="1 h").orphan_count == 0  # noncurrent: not an orphan
    assert _open(iceberg_env).verify().ok
    assert _open(iceberg_env).purge().deleted_files == 0 and os.path.exists(stray)  # retention not passed
    # Undo: a plain file again, which the next orphan run finds.
    assert _open(iceberg_env).undo(run.run_id).released_files == 1
    assert _open(iceberg_env).remove_orphan_files(older_than="1 h").orphan_count == 1
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(0, "remove-orphan-files"):
        ours.remove_orphan_files(older_than="1 h", dry_run=False)
    assert os.path.exists(stray)
    assert _open(iceberg_env).purge().deleted_files == 1 and not os.path.exists(stray)
    assert read_everything(table.refresh())


def test_a_crash_anywhere_in_a_purge_then_the_rerun_deletes_the_same_files_and_pyiceberg_reads_everything(tmp_path):
    import shutil

    from tests.conftest import FailAt, InjectedCrash

    crash = tmp_path / "crash"
    (crash / "warehouse").mkdir(parents=True)
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{crash}/catalog.db", "warehouse": f"file://{crash / 'warehouse'}"},
                     str(crash / "warehouse"))
    table, _ids = _history(env)
    ours = _open(env)
    with ours.retaining_noncurrent(0, "expire") as run:
        ours.expire_snapshots(retain_min=1, older_than=FAR)
    before, files = read_everything(table.refresh()), files_on_disk(env.location())
    pristine = tmp_path / "pristine"
    shutil.copytree(crash, pristine)  # each crash starts from the same table (its metadata names absolute paths)
    counter = FailAt(10**9)
    ours = _open(env)
    ours.storage.on_operation = counter
    expected = ours.purge()
    left = files_on_disk(env.location())
    assert expected.deleted_files and counter.seen > 3
    for n in range(1, counter.seen + 1):  # every storage operation
        shutil.rmtree(crash)
        shutil.copytree(pristine, crash)
        crashing = _open(env)
        crashing.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            crashing.purge()
        assert read_everything(table.refresh()) == before, n
        assert files_on_disk(env.location()) >= left, n
        _open(env).purge()
        assert files_on_disk(env.location()) == left, f"crash at {n}"
        assert _open(env).noncurrent_journal().names() == [] and _open(env).verify().ok, n
        with pytest.raises((RunPurgedError, RunNotFoundError)):
            _open(env).undo(run.run_id)


def test_a_crash_at_every_storage_operation_of_an_undo_then_the_rerun_restores_what_pyiceberg_read(tmp_path):
    import shutil

    from tests.conftest import FailAt, InjectedCrash

    env = _fresh_env(tmp_path, "crash")
    run = expired_history(env)
    table, before = run.table, run.before
    expired = read_everything(table)
    root, pristine = tmp_path / "crash", tmp_path / "pristine"
    shutil.copytree(root, pristine)  # each crash starts from the same table (its metadata names absolute paths)
    counter = FailAt(10**9)
    ours = _open(env)
    ours.storage.on_operation = counter
    ours.undo(run.run_id)
    assert counter.seen > 5
    for n in range(1, counter.seen + 1):
        shutil.rmtree(root)
        shutil.copytree(pristine, root)
        crashing = _open(env)
        crashing.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            crashing.undo(run.run_id)
        assert read_everything(env.table()) in (expired, before), f"crash at {n}"
        # A crashed undo leaves its mark: purge leaves the run alone until the undo is rerun.
        assert run.run_id not in _open(env).purge().purged_run_ids
        _open(env).undo(run.run_id)
        assert read_everything(env.table()) == before, f"crash at {n}"
        assert _open(env).noncurrent_journal().names() == [] and _open(env).verify().ok, n
        assert _open(env).undo(run.run_id).already_undone
