"""Consumers on Iceberg tables (core/formats/iceberg/consumers.py): a table property with the position (a data
sequence number) and a tag ref on the snapshot read last; this package's expiry keeps main from there on,
pyiceberg reads everything kept, and a move racing an expiry either is seen by it or backs out."""

from __future__ import annotations

import json

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import ConsumerNotFoundError, ProtectedSnapshotError, SnapshotNotFoundError
from airflow_snaptable.core.formats.iceberg.expire import IcebergExpiry
from airflow_snaptable.core.incremental import find_new_snapshots
from tests.iceberg.conftest import assert_exactly_reachable_left, read_everything, rows

FAR = 4_102_444_800_000


def _table(env, n=5):
    table = env.create()
    for i in range(n):
        table.append(rows(i))
    table = table.refresh()
    return table, [s.snapshot_id for s in table.metadata.snapshots]


def _open(env) -> Table:
    return Table.open("iceberg://db.orders", catalog=env.properties)


def test_a_consumer_keeps_main_from_what_it_read_last(iceberg_env):
    table, ids = _table(iceberg_env)
    before = read_everything(table)
    ours = _open(iceberg_env)
    consumer = ours.update_consumer("reader", 3)  # has read positions 1 and 2
    metadata = table.refresh().metadata
    assert json.loads(metadata.properties["snaptable.consumer.reader"])["nextSnapshot"] == 3
    assert metadata.refs["snaptable-consumer-reader"].snapshot_id == ids[1]  # the base of its next changes
    assert ours.consumer("reader") == consumer and [c.id for c in ours.consumers()] == ["reader"]
    with pytest.raises(ProtectedSnapshotError):
        ours.expire_snapshots(snapshot_ids=[ids[2]])
    result = ours.expire_snapshots(retain_min=1, older_than=FAR)
    assert result.expired_snapshot_ids == [ids[0]]
    after = read_everything(table)
    assert sorted(after["snapshots"]) == sorted(ids[1:])
    for snapshot_id, read in after["snapshots"].items():
        assert read == before["snapshots"][snapshot_id]
    # The sensor's baseline is the consumer's position.
    assert find_new_snapshots(ours, consumer_id="reader").snapshot_ids == [3, 4, 5]
    # Moving on releases what it read; past the latest it holds only the latest.
    ours.update_consumer("reader", 6)
    assert table.refresh().metadata.refs["snaptable-consumer-reader"].snapshot_id == ids[-1]
    ours.expire_snapshots(retain_min=1, older_than=FAR)
    assert sorted(read_everything(table)["snapshots"]) == [ids[-1]]
    ours.delete_consumer("reader")
    metadata = table.refresh().metadata
    assert "snaptable.consumer.reader" not in metadata.properties and "snaptable-consumer-reader" not in metadata.refs
    with pytest.raises(ConsumerNotFoundError):
        ours.delete_consumer("reader")
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_positions_are_checked_and_idle_consumers_expire(iceberg_env):
    table, ids = _table(iceberg_env, 3)
    ours = _open(iceberg_env)
    with pytest.raises(Exception, match="beyond"):
        ours.update_consumer("r", 5)
    ours.expire_snapshots(retain_min=2, older_than=FAR)  # positions 2 and 3 left
    with pytest.raises(SnapshotNotFoundError):
        ours.update_consumer("r", 2)  # it would read from position 1, expired
    ours.update_consumer("r", 3)
    table.transaction().set_properties({"consumer.expiration-time": "1 h"}).commit_transaction()
    now = ours.consumer("r").update_time_millis
    assert ours.expire_consumers(now=now + 1000) == []
    assert ours.expire_consumers(now=now + 3_600_001) == ["r"]
    assert ours.consumers() == [] and "snaptable-consumer-r" not in table.refresh().metadata.refs


def test_a_move_during_an_expiry_is_seen_by_it_or_backs_out(iceberg_env, monkeypatch):
    """(a) The consumer moves after the expiry planned, before its journal: the expiry reads the consumers
    again after journaling and plans anew, keeping what the consumer holds. (b) The consumer moves after that
    re-read: its own check finds the journaled plan removing what it holds, restores itself and fails."""
    table, ids = _table(iceberg_env)
    before = read_everything(table)
    expirer, reader = _open(iceberg_env), _open(iceberg_env)
    state = {"done": False}

    def move_before_the_journal(kind, path):
        if not state["done"] and kind == "write" and path.startswith("snaptable/plan/"):
            state["done"] = True
            reader.update_consumer("a", 2)

    expirer.storage.on_operation = move_before_the_journal
    expirer.expire_snapshots(retain_min=1, older_than=FAR)
    expirer.storage.on_operation = None
    assert state["done"]
    after = read_everything(table)
    assert sorted(after["snapshots"]) == sorted(ids)  # consumer a read position 1: main from snapshot 1 on stays
    reader.delete_consumer("a")

    raised = {}
    real_commit = IcebergExpiry._commit

    def commit_after_a_move(self, iceberg, plan):
        if "error" not in raised:
            try:
                reader.update_consumer("b", 3)
                raised["error"] = None
            except SnapshotNotFoundError as exc:
                raised["error"] = exc
        return real_commit(self, iceberg, plan)

    monkeypatch.setattr(IcebergExpiry, "_commit", commit_after_a_move)
    expirer.expire_snapshots(retain_min=1, older_than=FAR)
    assert isinstance(raised["error"], SnapshotNotFoundError)
    assert reader.consumers() == [] and "snaptable-consumer-b" not in table.refresh().metadata.refs
    after = read_everything(table)
    assert sorted(after["snapshots"]) == [ids[-1]]
    assert after["snapshots"][ids[-1]] == before["snapshots"][ids[-1]]
    assert_exactly_reachable_left(table, iceberg_env.location())
