"""Periodic tags and rollback: rules, bad inputs, and crash injection at every storage operation."""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest

from airflow_snaptable.core import (
    InvalidArgumentError,
    SnapshotNotFoundError,
    StreamPositionLostError,
    Table,
    TagNotFoundError,
)
from tests.conftest import SCHEMA, InjectedCrash, make_rows, sorted_ids

H = 3_600_000  # one hour in millis


def table_with_times(tmp_path, times_h, name="t"):
    """One single-row append per entry of ``times_h`` (hours since the epoch); row id = index."""
    table = Table.create(str(tmp_path / name), SCHEMA, partition_by=["p"])
    times = iter([int(h * H) for h in times_h])
    table.clock = lambda: next(times, int(times_h[-1] * H))
    for i in range(len(times_h)):
        table.append(make_rows([i]))
    return table


# -- periodic tags -------------------------------------------------------------------


def test_daily_tag_holds_the_state_at_the_end_of_the_day(tmp_path):
    table = table_with_times(tmp_path, [1, 5, 25, 26, 49, 80])
    result = table.create_periodic_tags("daily", now=81 * H)
    assert result.created == ["1970-01-03"]  # day 3 is the newest complete day at 81 h
    assert sorted_ids(table.scan(tag="1970-01-03").to_arrow()) == [0, 1, 2, 3, 4]
    assert table.create_periodic_tags("daily", now=81 * H).created == []  # idempotent


def test_catch_up_tags_every_missed_period_and_retain_max_prunes_only_periodic_tags(tmp_path):
    table = table_with_times(tmp_path, [1, 5, 25, 26, 49, 80])
    table.create_tag("manual", 1)
    result = table.create_periodic_tags("daily", now=81 * H, catch_up=True, num_retained_max=2)
    assert result.created == ["1970-01-01", "1970-01-02", "1970-01-03"]
    assert result.deleted == ["1970-01-01"]
    assert {t.name: t.snapshot_id for t in table.tags()} == {"manual": 1, "1970-01-02": 4, "1970-01-03": 5}
    assert table.verify().ok


def test_delay_and_formatters(tmp_path):
    table = table_with_times(tmp_path, [1, 5, 25])
    # At 24h30 with a 1 h delay, day 1 is not due yet.
    assert table.create_periodic_tags("daily", delay="1 h", now=int(24.5 * H)).created == []
    assert table.create_periodic_tags("daily", delay="1 h", now=25 * H).created == ["1970-01-01"]
    assert table.create_periodic_tags("hourly", formatter="without_dashes_and_spaces", now=26 * H).created == ["1970010201"]
    # Paimon's TagPeriodHandler: two-hour tags and period durations ignore the formatter (issue 22 item 8).
    assert table.create_periodic_tags("two-hours", formatter="without_dashes", now=26 * H).created == ["1970-01-02 00"]
    assert table.create_periodic_tags(timedelta(minutes=30), now=26 * H).created == ["197001020130"]


def test_options_give_the_defaults(tmp_path):
    table = Table.create(
        str(tmp_path / "t"), SCHEMA, partition_by=["p"],
        options={"tag.creation-period": "hourly", "tag.period-formatter": "without_dashes", "tag.num-retained-max": "1"},
    )
    times = iter([H, 2 * H, 3 * H])
    table.clock = lambda: next(times, 3 * H)
    for i in range(3):
        table.append(make_rows([i]))
    assert table.create_periodic_tags(now=4 * H, catch_up=True).created == ["19700101 01", "19700101 02", "19700101 03"]
    assert [t.name for t in table.tags()] == ["19700101 03"]


def test_expired_period_is_skipped_not_tagged_with_a_later_state(tmp_path):
    table = table_with_times(tmp_path, [1, 5, 25, 26, 49, 50])
    assert table.create_periodic_tags("daily", now=25 * H).created == ["1970-01-01"]
    table.expire_snapshots(retain_min=1, time_retained="0 s", now=60 * H)  # only snapshot 6 (50 h) is left
    result = table.create_periodic_tags("daily", now=73 * H, catch_up=True)
    # Day 2's end state (snapshot 4) expired: reported, not replaced by a later state. Day 3 ends at 72 h: snapshot 6.
    assert result.skipped == ["1970-01-02"] and result.created == ["1970-01-03"]
    assert table.tag("1970-01-03").snapshot_id == 6


@pytest.mark.parametrize(
    "kwargs",
    [
        {"period": "weekly"},
        {"period": timedelta(seconds=30)},
        {"period": "daily", "delay": "25 h"},
        {"period": "daily", "formatter": "iso"},
        {"period": "daily", "num_retained_max": 0},
        {},  # no period and no option
    ],
)
def test_periodic_bad_arguments(tmp_path, kwargs):
    table = table_with_times(tmp_path, [1, 30])
    with pytest.raises(InvalidArgumentError):
        table.create_periodic_tags(now=40 * H, **kwargs)
    assert table.tags() == []


# -- rollback ----------------------------------------------------------------------------


def test_rollback_discards_later_snapshots_tags_and_their_files(tmp_path):
    table = table_with_times(tmp_path, [1, 2, 3, 4, 5])
    table.create_tag("early", 2)
    table.create_tag("late", 4)
    result = table.rollback_to(tag="early")
    assert result.discarded_snapshot_ids == [3, 4, 5] and result.discarded_tags == ["late"]
    assert sorted_ids(table.scan().to_arrow()) == [0, 1]
    assert table.verify().ok
    assert table.append(make_rows([9])).id == 3  # ids above the target are reused


def test_rollback_as_of_and_keep_history(tmp_path):
    table = table_with_times(tmp_path, [1, 2, 3, 4])
    result = table.rollback_to(as_of=int(2.5 * H), keep_history=True)
    assert (result.target_snapshot_id, result.latest_snapshot_id) == (2, 5)
    assert sorted_ids(table.scan().to_arrow()) == [0, 1]
    assert [s.id for s in table.snapshots()] == [1, 2, 3, 4, 5]
    table.expire_snapshots(retain_min=1, time_retained="0 s", now=10 * H)
    assert sorted_ids(table.scan().to_arrow()) == [0, 1] and table.verify().ok


def test_rollback_refuses_consumers_past_the_target_unless_forced(tmp_path):
    table = table_with_times(tmp_path, [1, 2, 3, 4])
    table.update_consumer("downstream", 4)
    with pytest.raises(InvalidArgumentError, match="downstream"):
        table.rollback_to(snapshot_id=2)
    assert table.latest_snapshot().id == 4
    result = table.rollback_to(snapshot_id=2, force=True)
    assert result.moved_consumers == ["downstream"]
    assert table.consumer("downstream").next_snapshot == 3


def test_stream_past_the_target_gets_a_clear_error(tmp_path):
    table = table_with_times(tmp_path, [1, 2, 3, 4])
    stream = table.stream("from-snapshot", snapshot_id=1)
    assert [p.snapshot_id for p in stream] == [1, 2, 3, 4]
    table.rollback_to(snapshot_id=2)
    table.append(make_rows([7]))
    table.append(make_rows([8]))  # ids 3 and 4 exist again, with other contents
    assert stream.next_plan() is None  # its next snapshot (5) does not exist yet ...
    table.append(make_rows([9]))
    with pytest.raises(StreamPositionLostError):  # ... and once it does, its predecessor is not the one read
        list(stream)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({}, InvalidArgumentError),
        ({"snapshot_id": 2, "tag": "x"}, InvalidArgumentError),
        ({"snapshot_id": 0}, InvalidArgumentError),
        ({"snapshot_id": 99}, SnapshotNotFoundError),
        ({"tag": "missing"}, TagNotFoundError),
        ({"as_of": 0}, SnapshotNotFoundError),
    ],
)
def test_rollback_bad_arguments_change_nothing(tmp_path, kwargs, error):
    table = table_with_times(tmp_path, [1, 2, 3])
    with pytest.raises(error):
        table.rollback_to(**kwargs)
    assert [s.id for s in table.snapshots()] == [1, 2, 3]


# -- crash injection ------------------------------------------------------------------------


def _count_ops(tmp_path, build, operation) -> int:
    table = build(tmp_path / "count")
    ops = []
    table.storage.on_operation = lambda kind, path: ops.append((kind, path))
    operation(table)
    return len(ops)


def _crash_sweep(tmp_path, build, operation, check_done, fail_at):
    total = _count_ops(tmp_path, build, operation)
    for n in range(1, total + 1):
        directory = tmp_path / f"run-{n}"
        table = build(directory)
        before = {s.id: sorted_ids(table.scan(snapshot_id=s.id).to_arrow()) for s in table.snapshots()}
        tags_before = {t.name: sorted_ids(table.scan(tag=t.name).to_arrow()) for t in table.tags()}
        table.storage.on_operation = fail_at(n)
        try:
            operation(table)
        except InjectedCrash:
            pass
        reopened = Table.open(table.uri)
        reopened.clock = table.clock
        # Invariants 1-2 right after the crash: everything still published reads as before.
        for snapshot in reopened.snapshots():
            if snapshot.id in before:
                assert sorted_ids(reopened.scan(snapshot_id=snapshot.id).to_arrow()) == before[snapshot.id], (n, snapshot.id)
        for tag in reopened.tags():
            if tag.name in tags_before:
                assert sorted_ids(reopened.scan(tag=tag.name).to_arrow()) == tags_before[tag.name], (n, tag.name)
        # The rerun finishes the job; nothing is missing and nothing leaks.
        operation(reopened)
        check_done(reopened)
        result = reopened.verify()
        assert result.ok, (n, total, result)
        shutil.rmtree(directory)
    return total


def _rollback_table(directory):
    table = Table.create(str(directory), SCHEMA, partition_by=["p"])
    times = iter(range(H, 100 * H, H))
    table.clock = lambda: next(times)
    for i in range(6):
        table.append(make_rows([i, i + 10]))
    table.create_tag("keep", 3)
    table.create_tag("drop", 5)
    return table


def test_rollback_crash_at_every_operation(tmp_path, fail_at):
    def check(table):
        assert [s.id for s in table.snapshots()] == [1, 2, 3]
        assert [t.name for t in table.tags()] == ["keep"]

    total = _crash_sweep(tmp_path, _rollback_table, lambda t: t.rollback_to(snapshot_id=3), check, fail_at)
    assert total > 10


def test_rollback_to_an_expired_tag_crash_at_every_operation(tmp_path, fail_at):
    def build(directory):
        table = _rollback_table(directory)
        table.expire_snapshots(retain_min=2, time_retained="0 s", now=100 * H)  # snapshot 3 lives on in "keep"
        return table

    def rollback(table):
        table.rollback_to(tag="keep")

    def check(table):
        assert [s.id for s in table.snapshots()] == [3]
        assert sorted_ids(table.scan().to_arrow()) == [0, 1, 2, 10, 11, 12]

    assert _crash_sweep(tmp_path, build, rollback, check, fail_at) > 10


def test_periodic_tags_crash_at_every_operation(tmp_path, fail_at):
    def build(directory):
        table = Table.create(str(directory), SCHEMA, partition_by=["p"])
        times = iter([1 * H, 5 * H, 25 * H, 26 * H, 49 * H, 80 * H])
        table.clock = lambda: next(times, 81 * H)
        for i in range(6):
            table.append(make_rows([i]))
        table.create_periodic_tags("daily", now=26 * H)  # 1970-01-01 on snapshot 2
        table.expire_snapshots(retain_min=3, time_retained="0 s", now=90 * H)  # 4, 5, 6 left
        return table

    def periodic(table):
        table.create_periodic_tags("daily", now=81 * H, catch_up=True, num_retained_max=1)

    def check(table):
        assert [t.name for t in table.tags()] == ["1970-01-03"]

    assert _crash_sweep(tmp_path, build, periodic, check, fail_at) > 5
