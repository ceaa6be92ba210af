"""Issue 9 item 14: a writer whose clock is far ahead.

Commit times never go backwards (time travel by time is a binary search). One writer a
year ahead used to stamp every later commit with its future time: ``scan(as_of=now)``
silently returned the state before it and time-based expiry stalled for a year. The
policy (Iceberg refuses timestamps too far behind the last one): a commit whose clock is
more than ``commit.max-clock-skew`` behind the latest snapshot fails, typed, and leaves
nothing behind; the message says what happened and how to repair it.
"""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import ClockSkewError, CommitFailedError, InvalidOptionError
from tests.conftest import SCHEMA, make_rows, sorted_ids

YEAR_MS = 365 * 24 * 3600 * 1000
NOW_MS = 1_800_000_000_000


def _files(uri: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), uri) for d, _, names in os.walk(uri) for n in names}


def _after_a_commit_from_a_year_ahead(tmp_path) -> Table:
    """Snapshot 1 by a correct writer (the returned table), snapshot 2 by one whose clock is a year ahead."""
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.clock = lambda: NOW_MS
    table.append(make_rows([0]))
    skewed = Table.open(table.uri)
    skewed.clock = lambda: NOW_MS + YEAR_MS
    skewed.append(make_rows([1]))  # the fast writer cannot tell its own clock is ahead
    return table


def test_a_commit_after_a_snapshot_from_the_future_fails_and_leaves_nothing(tmp_path):
    table = _after_a_commit_from_a_year_ahead(tmp_path)
    uri = table.uri
    before = _files(uri)
    with pytest.raises(ClockSkewError, match="ahead") as raised:
        table.append(make_rows([2]))
    assert isinstance(raised.value, CommitFailedError)
    assert "roll back" in str(raised.value)
    assert _files(uri) == before
    assert [s.id for s in table.snapshots()] == [1, 2]


def test_the_documented_repair_rolls_back_the_future_snapshot_and_commits_resume(tmp_path):
    table = _after_a_commit_from_a_year_ahead(tmp_path)
    table.rollback_to(snapshot_id=1)
    table.append(make_rows([1, 2]))
    assert sorted_ids(table.scan(as_of=NOW_MS).to_arrow()) == [0, 1, 2]


def test_a_small_skew_within_the_bound_is_absorbed(tmp_path):
    """Clocks a few seconds apart keep committing; the time never goes backwards."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.clock = lambda: NOW_MS + 5_000
    table.append(make_rows([0]))
    table.clock = lambda: NOW_MS
    second = table.append(make_rows([1]))
    assert second.time_millis == NOW_MS + 5_000


def test_the_bound_is_a_table_option(tmp_path):
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"commit.max-clock-skew": "2 d"})
    table.clock = lambda: NOW_MS + 24 * 3600 * 1000
    table.append(make_rows([0]))
    table.clock = lambda: NOW_MS
    assert table.append(make_rows([1])).id == 2
    with pytest.raises(InvalidOptionError):
        Table.create(str(tmp_path / "u"), SCHEMA, options={"commit.max-clock-skew": "soon"})
