"""Issue 15: links to the commits that may delete (core/native/deleting_commits.py).

``commit_files``' known-path check reads the deltas of the retained commits that may delete files;
each snapshot links to the one below it where such a commit may be, so a long history of appends
costs one read. The links must find exactly the commits a read of every snapshot finds: after
expiry, after a rollback replaced ids (also for a reader that kept what it read before), below
snapshots written before links existed, and never trusting a bad link.
"""

from __future__ import annotations

import json
import os

import pytest

from airflow_snaptable.core import CorruptMetadataError, InvalidArgumentError, Table
from airflow_snaptable.core.native.deleting_commits import deleting_commits
from airflow_snaptable.core.native.snapshot import snapshot_path
from tests.conftest import SCHEMA, make_rows
from tests.core.test_commit_files import write_files


def _by_reading_every_snapshot(table: Table) -> list[int]:
    manager = table.snapshot_manager
    earliest, latest = manager.earliest_id(), manager.latest_id()
    return [i for i in range(latest, earliest, -1) if not manager.snapshot(i).deletes_no_file]


def _found(table: Table) -> list[int]:
    manager = table.snapshot_manager
    return [s.id for s in deleting_commits(manager, manager.earliest_id(), manager.latest_snapshot())]


def _history(table: Table, kinds: str) -> None:
    """``a``: an append, ``o``: an overwrite of partition 0, ``d``: a delete of partition 1."""
    for n, kind in enumerate(kinds):
        if kind == "a":
            table.append(make_rows([3 * n + 2]))
        elif kind == "o":
            table.overwrite(make_rows([3 * n]), partitions=[{"p": 0}])
        else:
            table.delete(partitions=[{"p": 1}])


def _edit_snapshot(table_uri: str, snapshot_id: int, edit) -> None:
    path = os.path.join(table_uri, snapshot_path(snapshot_id))
    with open(path) as handle:
        doc = json.load(handle)
    edit(doc)
    with open(path, "w") as handle:
        json.dump(doc, handle)


def test_links_skip_the_appends(table):
    _history(table, "aaoaada")  # 3 overwrites, 6 deletes
    manager = table.snapshot_manager
    links = {i: manager.snapshot(i).may_delete_below for i in range(1, 8)}
    assert [links[i]["id"] for i in range(1, 8)] == [0, 0, 0, 3, 3, 3, 6]
    assert links[5]["base_manifest_list"] == manager.snapshot(3).base_manifest_list
    assert links[7]["base_manifest_list"] == manager.snapshot(6).base_manifest_list


def test_links_find_what_reading_every_snapshot_finds(table):
    _history(table, "aoaaadaaoa")
    assert _found(table) == _by_reading_every_snapshot(table) == [9, 6, 2]
    table.expire_snapshots(retain_min=5, time_retained="0 s")  # earliest is 6: its own delta no longer counts
    assert _found(table) == _by_reading_every_snapshot(table) == [9]


def test_a_reader_that_kept_a_replaced_snapshot_finds_the_new_one(tmp_path):
    """The reader followed a link to snapshot 3 once; a rollback replaced 3 by another overwrite.
    The link's identity tells the kept snapshot 3 from the new one."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    _history(table, "aaoa")
    assert _found(table) == [3]
    other = Table.open(uri)
    other.rollback_to(snapshot_id=2)
    _history(other, "oaa")  # a new 3 overwrites; 4, 5 append
    manager = table.snapshot_manager
    found = deleting_commits(manager, manager.earliest_id(), manager.latest_snapshot())
    assert [s.base_manifest_list for s in found] == [other.snapshot(3).base_manifest_list]


def test_a_path_a_replaced_id_deleted_is_refused_by_a_reader_that_kept_the_old_one(tmp_path):
    """Manifests merge at every other commit, so only the delta of the new snapshot 3 names the
    file: the kept snapshot 3 would hide it."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "2"})
    table.commit_files(write_files(table, make_rows([0])))
    table.commit_files(write_files(table, make_rows([1])))
    table.delete(partitions=[{"p": 1}])  # 3 deletes: the reader's next check follows a link to it
    table.commit_files(write_files(table, make_rows([6])))
    other = Table.open(uri)
    other.rollback_to(snapshot_id=1)
    second = write_files(other, make_rows([9]))
    other.commit_files(second)  # a new 2 adds it
    other.delete(partitions=[{"p": 0}])  # a new 3 deletes it
    other.commit_files(write_files(other, make_rows([1])))  # a new 4
    with pytest.raises(InvalidArgumentError, match="snapshot 2"):
        table.commit_files(second)


def test_snapshots_without_links_are_read_one_by_one(table, table_uri):
    """A table written before links existed: its snapshots lack them, and are all read."""
    _history(table, "aodaa")
    for snapshot_id in range(1, 6):
        _edit_snapshot(table_uri, snapshot_id, lambda doc: doc.pop("may_delete_below"))
    _history(table, "aa")  # 6 links to snapshot 5, which has no link
    fresh = Table.open(table_uri)
    assert _found(fresh) == _by_reading_every_snapshot(fresh) == [3, 2]


def test_a_link_whose_target_is_not_the_named_commit_is_not_followed(table, table_uri):
    _history(table, "aoaaaa")
    _edit_snapshot(table_uri, 6, lambda doc: doc["may_delete_below"].update(base_manifest_list="not-that-one"))
    fresh = Table.open(table_uri)
    assert _found(fresh) == _by_reading_every_snapshot(fresh) == [2]


@pytest.mark.parametrize("link", [{"id": 7}, {"id": -1}, {"id": "2"}, {"id": True}, "2", {"id": 1, "base_manifest_list": 5}])
def test_a_bad_link_is_corrupt_metadata(table, table_uri, link):
    _history(table, "aoaaaa")
    _edit_snapshot(table_uri, 6, lambda doc: doc.update(may_delete_below=link))
    with pytest.raises(CorruptMetadataError, match="may_delete_below"):
        _found(Table.open(table_uri))


def test_a_missing_delta_of_a_linked_commit_fails_closed(table, table_uri):
    """The known-path check reads the delta lists the links lead to (no later snapshot's list
    names them); one that is gone stops the commit before anything is written."""
    from airflow_snaptable.core.errors import MissingMetadataError
    from airflow_snaptable.core.native.manifest import manifest_path

    _history(table, "aoaa")
    os.remove(os.path.join(table_uri, manifest_path(table.snapshot(2).delta_manifest_list)))
    fresh = Table.open(table_uri)
    new = write_files(fresh, make_rows([0]))
    with pytest.raises(MissingMetadataError):
        fresh.commit_files(new)
    assert fresh.latest_snapshot().id == 4


def test_without_links_the_history_is_read_in_chunks(table, table_uri, monkeypatch):
    from airflow_snaptable.core.native import deleting_commits as module

    monkeypatch.setattr(module, "READ_CHUNK", 2)
    _history(table, "aodaaoa")
    for snapshot_id in range(1, 8):
        _edit_snapshot(table_uri, snapshot_id, lambda doc: doc.pop("may_delete_below"))
    fresh = Table.open(table_uri)
    assert _found(fresh) == _by_reading_every_snapshot(fresh) == [6, 3, 2]
