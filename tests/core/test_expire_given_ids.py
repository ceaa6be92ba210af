"""Expiring given snapshot ids (Iceberg's expireSnapshotId): the oldest retained ones, never the latest or a held one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_snaptable.core import ProtectedSnapshotError, SnapshotNotFoundError, Table
from airflow_snaptable.core.errors import InvalidArgumentError
from tests.conftest import SCHEMA, make_rows, sorted_ids


@pytest.fixture
def table(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.append(make_rows(range(0, 6)))  # 1
    table.overwrite(make_rows(range(6, 12)))  # 2: frees every data file of 1
    table.append(make_rows(range(12, 15)))  # 3
    table.append(make_rows(range(15, 18)))  # 4
    return table


def _ids(table):
    return [s.id for s in Table.open(table.uri).snapshots()]


def test_expires_exactly_the_given_oldest_snapshots_and_their_files(table):
    dry = table.expire_snapshots(snapshot_ids=[2, 1], dry_run=True)  # order does not matter
    assert dry.expired_snapshot_ids == [1, 2] and dry.data_files  # the files of 1 that 2 deleted
    result = table.expire_snapshots(snapshot_ids=[1, 2])
    assert result.expired_snapshot_ids == [1, 2] and result.deleted_data_files == len(dry.data_files)
    assert _ids(table) == [3, 4]
    assert sorted_ids(table.scan(snapshot_id=3).to_arrow()) == list(range(6, 15))
    assert table.verify().ok
    # Rerun: what is expired already is done.
    assert table.expire_snapshots(snapshot_ids=[1, 2]).expired_snapshot_ids == []


@pytest.mark.parametrize(
    "ids, error, match",
    [
        ([4], ProtectedSnapshotError, "latest"),
        ([2], InvalidArgumentError, r"snapshots \[1\] are older"),
        ([1, 3], InvalidArgumentError, r"snapshots \[2\] are older"),
        ([9], SnapshotNotFoundError, "does not exist"),
        ([], InvalidArgumentError, "non-empty"),
        (["1"], InvalidArgumentError, "snapshot id"),
    ],
)
def test_refused_ids_change_nothing(table, ids, error, match):
    with pytest.raises(error, match=match):
        table.expire_snapshots(snapshot_ids=ids)
    assert _ids(table) == [1, 2, 3, 4]


def test_a_consumer_protects_what_it_holds_and_bounds_cannot_be_mixed_in(table):
    table.update_consumer("reader", 3)  # holds 2 (the base of its next change set) and later
    with pytest.raises(ProtectedSnapshotError, match="consumer"):
        table.expire_snapshots(snapshot_ids=[1, 2])
    with pytest.raises(InvalidArgumentError, match="without retain_min"):
        table.expire_snapshots(snapshot_ids=[1], retain_min=1)
    assert _ids(table) == [1, 2, 3, 4]
    assert table.expire_snapshots(snapshot_ids=[1]).expired_snapshot_ids == [1]


def test_the_cli_and_the_action_take_a_json_list(table):
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_snaptable.cli", "expire", table.uri, "--snapshot-ids", "[1]", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"]["expired_snapshot_ids"] == [1]
    bad = subprocess.run(
        [sys.executable, "-m", "airflow_snaptable.cli", "expire", table.uri, "--snapshot-ids", "[4]"],
        capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 2 and "ProtectedSnapshotError" in bad.stderr
    assert _ids(table) == [2, 3, 4]
