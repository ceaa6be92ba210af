"""Undo of an Iceberg expiry makes each ref's history whole again (issue 34, item 7).

Iceberg's snapshot removal clears ``parent-snapshot-id`` on every snapshot it keeps whose parent it
removes; undo puts the snapshots back and links those children to them again, so that pyiceberg's
ancestry of ``main``, of a branch and of a tag is what it was before the expiry, and a later plain
expiry keeps what retention says. Undos go in the order of our tables: a run whose removed
snapshots' children a later run removed is undone after that run (``DependentRunError``).
"""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.core.errors import DependentRunError
from tests.iceberg.conftest import rows
from tests.iceberg.undo_support import FAR, open_orders


def _ancestry(table, ref: str) -> list[int]:
    """pyiceberg's ancestry of ``ref``, newest first."""
    from pyiceberg.table.snapshots import ancestors_of

    metadata = table.refresh().metadata
    return [s.snapshot_id for s in ancestors_of(metadata.snapshot_by_id(metadata.refs[ref].snapshot_id), metadata)]


def _appends(env, count: int):
    table = env.create()
    for n in range(count):
        table.append(rows(n))
    table = table.refresh()
    return table, [s.snapshot_id for s in table.metadata.snapshots]


def _expire(env, **retention) -> str:
    ours = open_orders(env)
    with ours.retaining_noncurrent(10, "expire") as run:
        ours.expire_snapshots(older_than=FAR, **retention)
    return run.run_id


def test_undo_links_main_a_branch_and_a_tag_to_their_history_again(iceberg_env, duckdb_iceberg):
    table, main = _appends(iceberg_env, 10)
    table.manage_snapshots().create_tag(main[2], "t").create_branch(main[4], "b").commit()
    table = table.refresh()
    for n in range(2):
        table.append(rows(50 + n, "b"), branch="b")
    table = table.refresh()
    before = {ref: _ancestry(table, ref) for ref in ("main", "b", "t")}
    assert len(before["main"]) == 10 and len(before["b"]) == 7 and len(before["t"]) == 3
    history = [(e.snapshot_id, e.timestamp_ms) for e in table.history()]

    run_id = _expire(iceberg_env, retain_min=3)
    # The expiry cut main after 3, b after 3 (two of its own and main[4]) and t after its snapshot.
    assert [len(_ancestry(table, ref)) for ref in ("main", "b", "t")] == [3, 3, 1]

    open_orders(iceberg_env).undo(run_id)
    assert {ref: _ancestry(table, ref) for ref in ("main", "b", "t")} == before
    # Each snapshot reads its rows again (test_iceberg_noncurrent.py reads them all): main's first, and b's head.
    assert table.refresh().scan(snapshot_id=main[0]).to_arrow().num_rows == 2
    assert table.scan(snapshot_id=before["b"][0]).to_arrow().num_rows == 14
    assert [(e.snapshot_id, e.timestamp_ms) for e in table.refresh().history()] == history

    # A plain expiry now keeps what retention keeps of the whole history: all of main's 10, and nothing else goes.
    again = open_orders(iceberg_env).expire_snapshots(retain_min=10, older_than=FAR)
    assert again.expired_snapshot_ids == []
    assert {ref: _ancestry(table, ref) for ref in ("main", "b", "t")} == before
    # DuckDB reads a snapshot that came back, and main's head.
    metadata = table.refresh().metadata_location
    oldest = duckdb_iceberg.execute("SELECT count(*) FROM iceberg_scan(?, snapshot_from_id = ?)", [metadata, main[0]]).fetchone()
    assert oldest == (2,)
    assert duckdb_iceberg.execute("SELECT count(*) FROM iceberg_scan(?)", [metadata]).fetchone() == (20,)


def test_an_older_expiry_is_undone_after_the_later_one_that_removed_its_children(iceberg_env):
    table, main = _appends(iceberg_env, 10)
    first = _expire(iceberg_env, retain_min=8)  # main[0..1]; main[2] loses its parent
    second = _expire(iceberg_env, retain_min=5)  # main[2..4], main[2] among them; main[5] loses its parent
    assert _ancestry(table, "main") == list(reversed(main[5:]))

    with pytest.raises(DependentRunError, match=second):
        open_orders(iceberg_env).undo(first)
    assert _ancestry(table, "main") == list(reversed(main[5:])), "a refused undo changes nothing"
    assert len(table.refresh().metadata.snapshots) == 5

    open_orders(iceberg_env).undo(second)
    assert _ancestry(table, "main") == list(reversed(main[2:]))
    open_orders(iceberg_env).undo(first)
    assert _ancestry(table, "main") == list(reversed(main))
    assert open_orders(iceberg_env).expire_snapshots(retain_min=10, older_than=FAR).expired_snapshot_ids == []
    # Retention counts the restored snapshots as main's: keeping 7 expires exactly the 3 oldest.
    assert open_orders(iceberg_env).expire_snapshots(retain_min=7, older_than=FAR).expired_snapshot_ids == main[:3]
    assert _ancestry(table, "main") == list(reversed(main[3:]))


def test_undo_is_refused_when_a_plain_expiry_removed_the_children_for_good(iceberg_env):
    table, main = _appends(iceberg_env, 6)
    run_id = _expire(iceberg_env, retain_min=4)  # main[0..1]
    open_orders(iceberg_env).expire_snapshots(retain_min=2, older_than=FAR)  # main[2..3], no retention
    with pytest.raises(DependentRunError, match="for good"):
        open_orders(iceberg_env).undo(run_id)
    assert _ancestry(table, "main") == list(reversed(main[4:]))
    assert len(table.refresh().metadata.snapshots) == 2


def test_an_entry_written_before_the_links_were_recorded_is_linked_by_the_manifest_lists(iceberg_env):
    """An entry of an earlier version has no ``parents``: undo finds the children by the ``parent-snapshot-id``
    that Iceberg writes in each manifest list's header, which the removal left as it was."""
    import glob
    import json

    table, main = _appends(iceberg_env, 6)
    table.manage_snapshots().create_branch(main[2], "b").commit()
    table.refresh().append(rows(50, "b"), branch="b")
    table = table.refresh()
    before = {ref: _ancestry(table, ref) for ref in ("main", "b")}
    run_id = _expire(iceberg_env, retain_min=2)
    [path] = glob.glob(os.path.join(iceberg_env.location(), "snaptable", "noncurrent", f"entry-{run_id}-*.json"))
    with open(path) as f:
        entry = json.load(f)
    assert entry.pop("parents")  # what this version records: written as an earlier one did, without it
    with open(path, "w") as f:
        json.dump(entry, f)
    assert [len(_ancestry(table, ref)) for ref in ("main", "b")] == [2, 2]
    open_orders(iceberg_env).undo(run_id)
    assert {ref: _ancestry(table, ref) for ref in ("main", "b")} == before
