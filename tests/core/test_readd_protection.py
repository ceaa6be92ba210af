"""Issue 9 item 1: files that a ``keep_history`` rollback adds back have several live intervals.

Every deletion rule used to ask only the newest tag below the deleting snapshot, which is
right only while a file is never added back. These tests build a file with two live
intervals (snapshot 1, and snapshot 3 which re-adds it) and a tag on the first interval
only, then run each deletion path that could free it: expiry, a rollback discarding the
re-adding snapshot, and deleting a tag.
"""

from __future__ import annotations

from airflow_snaptable.core import Table
from tests.conftest import SCHEMA, make_rows, sorted_ids


def _two_interval_history(table: Table) -> str:
    """1: append p=0 (file A). tag old@1. 2: overwrite p=0 (A deleted). tag mid@2.
    3: keep-history rollback to old (A added back). 4: overwrite p=0 (A deleted again).
    5: append p=1. Returns A's path."""
    table.append(make_rows([0]))
    (a,) = [f.path for f in table.scan().files()]
    table.create_tag("old", 1)
    table.overwrite(make_rows([3]), partitions=[{"p": 0}])
    table.create_tag("mid", 2)
    table.rollback_to(tag="old", keep_history=True)
    assert a in {f.path for f in table.scan().files()}
    table.overwrite(make_rows([6]), partitions=[{"p": 0}])
    table.append(make_rows([1]))
    return a


def test_expiry_keeps_a_file_an_older_tag_holds_in_an_earlier_live_interval(table):
    """The issue's repro: expiry freed A because the newest tag below its last deletion (mid) does not hold it."""
    _two_interval_history(table)
    table.expire_snapshots(retain_min=1, time_retained="0 s")
    assert [s.id for s in table.snapshots()] == [5]
    assert sorted_ids(table.scan(tag="old").to_arrow()) == [0]
    assert sorted_ids(table.scan(tag="mid").to_arrow()) == [3]
    assert table.verify().missing_files == []


def test_expiry_in_two_runs_keeps_the_file(table):
    """The first run sees A deleted then added back (kept); the second sees only the second deletion."""
    _two_interval_history(table)
    table.expire_snapshots(retain_min=3, time_retained="0 s")  # expires 1, 2; keeps 3 (which holds A)
    assert [s.id for s in table.snapshots()] == [3, 4, 5]
    table.expire_snapshots(retain_min=1, time_retained="0 s")
    assert sorted_ids(table.scan(tag="old").to_arrow()) == [0]
    assert table.verify().missing_files == []
    table.delete_tag("old")  # now A is held by nothing: it goes, nothing leaks
    assert table.verify().ok


def test_rollback_discarding_the_readding_snapshot_keeps_the_older_tags_file(table):
    """Rollback to mid (2) discards 3..5; A, added back by 3, is still held by tag old@1 (expired)."""
    a = _two_interval_history(table)
    table.expire_snapshots(retain_min=4, time_retained="0 s")  # expire snapshot 1: only tag old holds state 1
    assert [s.id for s in table.snapshots()] == [2, 3, 4, 5]
    table.rollback_to(tag="mid")
    assert [s.id for s in table.snapshots()] == [2]
    assert sorted_ids(table.scan(tag="old").to_arrow()) == [0]
    assert table.verify().missing_files == []
    table.delete_tag("old")
    assert a not in {f for f in table.verify().unreferenced_files}
    assert table.verify().ok


def test_delete_tag_keeps_a_file_a_newer_tag_on_the_readding_snapshot_holds(table):
    """delete_tag(old) used to free A although tag new@3 (on the re-adding snapshot) holds it."""
    _two_interval_history(table)
    table.create_tag("new", 3)
    table.expire_snapshots(retain_min=1, time_retained="0 s")
    table.delete_tag("old")
    assert sorted_ids(table.scan(tag="new").to_arrow()) == [0]
    assert table.verify().missing_files == []
    table.delete_tag("new")
    table.delete_tag("mid")
    assert table.verify().ok
