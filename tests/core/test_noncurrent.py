"""Recoverable deletes on this package's tables (core/lifecycle/noncurrent/, issue 26).

- With ``noncurrent_days`` 10, expiry, tag deletion and expiry, rollback, consumer expiry, clean and
  orphan removal delete no data or metadata file, and undo brings back every snapshot and tag
  reading the same rows (and consumers as they were); verify and orphan removal see no orphan.
- With 0, ``purge`` deletes exactly the files the plain operation deletes (the same set, compared
  on byte-identical copies of one table).
- Undo refuses with a typed error, changing nothing, when the run was purged, a later run depends
  on it, or an invariant would break; undoing twice is a no-op; purge never shortens a retention
  for a ``now`` in the future and keeps a file referenced again.
"""

from __future__ import annotations

import os
import shutil

import pyarrow.parquet as pq
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import ExpireSnapshots, Undo, build_action, run_action
from airflow_snaptable.core.errors import (
    DependentRunError,
    InvalidArgumentError,
    RunNotFoundError,
    RunPurgedError,
    UndoInvariantError,
)
from airflow_snaptable.core.lifecycle.noncurrent.journal import NoncurrentJournal
from airflow_snaptable.core.native.manifest import DataFile
from tests.conftest import make_rows, sorted_ids
from tests.core.test_lifecycle import FAR_FUTURE, START, build_rich_history, check_clean, diff, make_table, tree

EXPIRE = dict(retain_min=1, time_retained="0 s", now=FAR_FUTURE)


def _files(uri: str) -> dict[str, bytes]:
    """The table's data and metadata files (what a run with a retention must not delete)."""
    return {p: b for p, b in tree(uri).items() if p.startswith(("data/", "manifest/"))}


def _rows(table: Table) -> tuple[dict[int, list[int]], dict[str, list[int]]]:
    fresh = Table.open(table.uri)
    return (
        {s.id: sorted_ids(fresh.scan(snapshot_id=s.id).to_arrow()) for s in fresh.snapshots()},
        {t.name: sorted_ids(fresh.scan(tag=t.name).to_arrow()) for t in fresh.tags()},
    )


@pytest.fixture
def rich(tmp_path):
    uri = str(tmp_path / "t")
    history = make_table(uri, **{"manifest.merge-min-count": "2"})
    build_rich_history(history)
    return history


def _noncurrent(table: Table, days: int, call):
    with table.retaining_noncurrent(days, "test") as run:
        call()
    return run.run_id


DELETING = {
    "expire": lambda t: t.expire_snapshots(**EXPIRE),
    "delete-tag": lambda t: t.delete_tag("t5"),
    "delete-tag-of-a-live-snapshot": lambda t: t.delete_tag("t10"),
    "rollback": lambda t: t.rollback_to(6),
    "rollback-to-an-expired-tag": lambda t: t.rollback_to(tag="t2"),
    "expire-tags": lambda t: t.expire_tags(now=FAR_FUTURE),
    "clean": lambda t: t.clean("KEEP_LATEST_COMMITS", commits_retained=2),
}
#: Operations whose subject is a tag of an expired snapshot: the history is expired plainly first.
AFTER_EXPIRY = {"delete-tag", "rollback-to-an-expired-tag", "expire-tags"}


@pytest.mark.parametrize("operation", sorted(DELETING))
def test_with_a_retention_nothing_is_deleted_and_undo_restores_every_snapshot_and_tag(rich, operation):
    table = rich.table
    if operation in AFTER_EXPIRY:
        table.expire_snapshots(**EXPIRE)
        _give_ttl(table, ("t2", "t5"))
    rows_before, before = _rows(table), _files(table.uri)
    run_id = _noncurrent(table, 10, lambda: DELETING[operation](table))
    assert set(before) <= set(_files(table.uri)), f"deleted: {sorted(set(before) - set(_files(table.uri)))}"
    assert _rows(table) != rows_before, "the operation removed something"
    [summary] = [s for s in table.trash() if s.run_id == run_id]
    assert summary.snapshot_ids or summary.tags
    # Neither orphans nor missing while noncurrent.
    fresh = Table.open(table.uri)
    assert fresh.verify().ok, fresh.verify()
    assert fresh.remove_orphan_files(older_than="0 s", dry_run=True).orphan_count == 0
    undone = fresh.undo(run_id)
    assert not undone.already_undone
    assert _rows(table) == rows_before
    assert table.trash() == []
    assert Table.open(table.uri).verify().ok
    # Idempotent: the same undo again changes nothing and says so.
    assert Table.open(table.uri).undo(run_id).already_undone
    assert _rows(table) == rows_before


def _give_ttl(table: Table, names) -> None:
    """Tags t2/t5 with a time to live of one day (recreated on the same snapshots)."""
    from airflow_snaptable.core.native.tags import Tag

    for name in names:
        old = table.tag(name)
        table.tag_manager.replace(Tag(old.name, old.snapshot, old.create_time_millis, 86_400_000, old.source))


def _copies(table: Table, tmp_path):
    plain = str(tmp_path / "plain")
    shutil.copytree(table.uri, plain)
    return Table.open(plain)


@pytest.mark.parametrize("operation", ["expire", "delete-tag", "rollback", "clean", "orphans", "expire-tags"])
def test_with_zero_days_purge_deletes_exactly_what_the_plain_operation_deletes(rich, tmp_path, operation):
    table = rich.table
    if operation in ("delete-tag", "expire-tags"):
        table.expire_snapshots(**EXPIRE)
        _give_ttl(table, ("t2", "t5"))
    if operation == "orphans":
        for name in ("data/p=0/stray.parquet", "manifest/stray-manifest"):
            with open(os.path.join(table.uri, name), "wb") as f:
                f.write(b"left by a crashed writer")
            old = START / 1000 - 10_000  # older than the window at the table's clock
            os.utime(os.path.join(table.uri, name), (old, old))
    plain = _copies(table, tmp_path)
    plain.clock = table.clock
    calls = {
        "expire": lambda t: t.expire_snapshots(**EXPIRE),
        "delete-tag": lambda t: t.delete_tag("t5"),
        "rollback": lambda t: t.rollback_to(6),
        "clean": lambda t: t.clean("KEEP_LATEST_COMMITS", commits_retained=2),
        "orphans": lambda t: t.remove_orphan_files(older_than="0 s", dry_run=False),
        "expire-tags": lambda t: t.expire_tags(now=FAR_FUTURE),
    }
    before = _files(table.uri)
    calls[operation](plain)
    deleted_plainly = set(before) - set(_files(plain.uri))
    assert deleted_plainly, "the plain operation deletes something"
    _noncurrent(table, 0, lambda: calls[operation](table))
    assert set(_files(table.uri)) == set(before), "a run with a retention deletes nothing"
    result = Table.open(table.uri).purge()
    assert set(before) - set(_files(table.uri)) == deleted_plainly
    assert result.deleted_files >= len(deleted_plainly)
    assert Table.open(table.uri).trash() == []
    assert Table.open(table.uri).verify().ok


def test_a_retention_of_ten_days_is_not_purged_even_with_a_now_far_in_the_future(rich):
    table = rich.table
    before = _files(table.uri)
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**EXPIRE))
    result = table.purge(now=FAR_FUTURE * 100)
    assert result.deleted_files == 0 and result.waiting_run_ids == [run_id]
    assert _files(table.uri) == before
    assert table.undo(run_id).restored_snapshot_ids


def test_the_table_option_sets_the_retention(tmp_path):
    history = make_table(str(tmp_path / "t"), **{"noncurrent-days": "3"})
    for _ in range(4):
        history.overwrite(3)
    table = history.table
    before = _files(table.uri)
    document = run_action(ExpireSnapshots(table=table.uri, **{**EXPIRE, "now": FAR_FUTURE}), table=table)
    assert document["run_id"] and document["result"]["run_id"] == document["run_id"]
    assert document["result"]["deleted_data_files"] == 0 and document["result"]["noncurrent_data_files"] > 0
    assert _files(table.uri) == before
    [summary] = table.trash()
    assert summary.days == 3 and summary.snapshot_ids == [1, 2, 3]
    assert run_action(Undo(table=table.uri, run_id=document["run_id"]), table=table)["result"]["restored_snapshot_ids"] == [3, 2, 1]


def test_without_a_retention_nothing_changes(rich):
    table = rich.table
    document = run_action(build_action("expire-snapshots", table.uri, **EXPIRE), table=table)
    assert document["run_id"] is None and document["result"]["deleted_data_files"] > 0
    assert table.trash() == []


def test_consumer_expiry_is_undone(tmp_path):
    history = make_table(str(tmp_path / "t"), **{"consumer.expiration-time": "1 h"})
    history.appends(3)
    table = history.table
    table.update_consumer("reader", 2)
    run_id = _noncurrent(table, 10, lambda: table.expire_consumers(now=FAR_FUTURE))
    assert table.consumers() == []
    result = table.undo(run_id)
    assert result.restored_consumers == ["reader"] and table.consumer("reader").next_snapshot == 2


def test_undo_refuses_when_a_later_run_expired_the_snapshots_after_it(rich):
    table = rich.table
    first = _noncurrent(table, 10, lambda: table.expire_snapshots(retain_min=9, time_retained="0 s", now=FAR_FUTURE))
    second = _noncurrent(table, 10, lambda: table.expire_snapshots(**EXPIRE))
    state = tree(table.uri)
    with pytest.raises(DependentRunError, match=second):
        table.undo(first)
    assert tree(table.uri) == state
    table.undo(second)
    table.undo(first)
    check_clean(table.uri, rich.model)


def test_undo_refuses_once_purged_and_for_an_unknown_run(rich):
    table = rich.table
    run_id = _noncurrent(table, 0, lambda: table.expire_snapshots(**EXPIRE))
    table.purge()
    with pytest.raises(RunNotFoundError):
        table.undo(run_id)
    with pytest.raises(RunNotFoundError):
        table.undo("0" * 32)
    with pytest.raises(InvalidArgumentError):
        table.undo("../x")


def test_undo_refuses_when_a_tag_of_the_same_name_exists_again(rich):
    table = rich.table
    table.expire_snapshots(**EXPIRE)
    run_id = _noncurrent(table, 10, lambda: table.delete_tag("t5"))
    table.create_tag("t5")
    state = tree(table.uri)
    with pytest.raises(UndoInvariantError, match="tag name"):
        table.undo(run_id)
    assert tree(table.uri) == state


def test_undo_of_a_rollback_refuses_once_a_commit_reused_a_discarded_id(rich):
    table = rich.table
    run_id = _noncurrent(table, 10, lambda: table.rollback_to(6))
    rich.table.append(make_rows([1000, 1001]))  # snapshot 7 again: another commit
    state = tree(table.uri)
    with pytest.raises(UndoInvariantError, match="invariant 4"):
        table.undo(run_id)
    assert tree(table.uri) == state


def test_purge_keeps_what_a_restorable_run_needs_and_undo_refuses_once_a_file_is_gone(rich):
    """Expiry with 10 days leaves what tag t5 holds to the tag; deleting t5 with 0 days makes those files
    noncurrent in a second run. Purging that run keeps the files snapshot 5 (in the first run, restorable)
    references; once one is gone anyway, undoing the first run would break invariant 1 and is refused."""
    table = rich.table
    rows_before = _rows(table)
    first = _noncurrent(table, 10, lambda: table.expire_snapshots(**EXPIRE))
    _noncurrent(table, 0, lambda: table.delete_tag("t5"))
    assert table.purge().kept_referenced_files > 0
    copy = str(rich.table.uri) + "-copy"
    shutil.copytree(table.uri, copy)
    table.undo(first)
    snapshots, tags = _rows(table)
    assert snapshots == rows_before[0] and tags == {k: v for k, v in rows_before[1].items() if k != "t5"}
    # The same state, with a file of snapshot 5 deleted out of band.
    other = Table.open(copy)
    needed = next(p for p in other.manifest_io.read_state(rich_snapshot(first, other, 5)))
    os.remove(os.path.join(copy, needed))
    state = tree(copy)
    with pytest.raises(RunPurgedError, match="invariant 1"):
        other.undo(first)
    assert tree(copy) == state


def rich_snapshot(run_id: str, table: Table, snapshot_id: int):
    from airflow_snaptable.core.native.snapshot import Snapshot

    for entry in NoncurrentJournal(table.storage).entries(run_id):
        for text in entry.snapshots:
            snapshot = Snapshot.from_json(text.encode())
            if snapshot.id == snapshot_id:
                return snapshot
    raise AssertionError(f"snapshot {snapshot_id} is not in run {run_id}")


def test_purge_keeps_a_noncurrent_file_a_commit_references_again(rich):
    table = rich.table
    run_id = _noncurrent(table, 0, lambda: table.expire_snapshots(**EXPIRE))
    path, size = next(e for e in NoncurrentJournal(table.storage).entries(run_id) if e.data_files).data_files[0]
    partition = int(path.split("p=")[1].split("/")[0])
    rows = pq.read_metadata(os.path.join(table.uri, path)).num_rows
    table.commit_files([DataFile(path, (partition,), rows, size)])
    result = table.purge()
    assert result.kept_referenced_files == 1 and result.purged_run_ids == [run_id]
    assert os.path.exists(os.path.join(table.uri, path))
    assert Table.open(table.uri).verify().ok


def test_the_timeline_shows_restorable_snapshots_and_the_cli_undoes_them(rich, capsys):
    import json

    from airflow_snaptable.cli import main
    from airflow_snaptable.core.timeline.model import build_timeline
    from airflow_snaptable.core.timeline.render import render_svg

    table = rich.table
    assert main(["expire", table.uri, "--retain-min", "1", "--noncurrent-days", "10", "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    timeline = build_timeline(Table.open(table.uri), now=FAR_FUTURE)
    restorable = sorted(p.id for p in timeline.snapshots if p.restorable_run_id == run_id)
    assert restorable == list(range(1, 12)) and not any(p.retained for p in timeline.snapshots if p.id in restorable)
    assert f'data-restorable-run-id="{run_id}"' in render_svg(timeline)
    assert main(["trash", table.uri, "--json"]) == 0
    [summary] = json.loads(capsys.readouterr().out)["result"]
    assert summary["run_id"] == run_id and summary["snapshot_ids"] == list(range(1, 12)) and summary["bytes"] > 0
    assert main(["undo", table.uri, run_id, "--json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)["result"]["restored_snapshot_ids"]) == list(range(1, 12))
    assert main(["undo", table.uri, "not-a-run"]) == 2  # a typed error, one line
    assert "InvalidArgumentError" in capsys.readouterr().err
    assert main(["purge", table.uri, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["deleted_files"] == 0
    check_clean(table.uri, rich.model)


def test_replacing_a_tag_inside_a_retention_deletes_nothing(rich):
    """Sibling: a tag replacement frees the old target's files through a plan published at once."""
    table = rich.table
    table.expire_snapshots(**EXPIRE)
    before = _files(table.uri)
    with table.retaining_noncurrent(10, "replace-tag") as run:
        table.replace_tag("t5", table.latest_snapshot().id)
    assert _files(table.uri) == before
    assert [s.run_id for s in table.trash()] == [run.run_id]
    assert Table.open(table.uri).verify().ok
