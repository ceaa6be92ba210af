"""Periodic catch-up starts after the newest periodic tag's *period* (Paimon's TagAutoCreation, docs/lifecycle.md).

Item numbers refer to issue 9 ("data-loss and wrong-result bugs").
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.lifecycle.periodic_tags import period_start_of, tag_name
from tests.conftest import SCHEMA, make_rows

H = 3_600_000
M = 60_000


class Clock:
    def __init__(self):
        self.now = 0

    def __call__(self) -> int:
        return self.now


def make_table(tmp_path) -> tuple[Table, Clock]:
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    clock = Clock()
    table.clock = clock
    return table, clock


def commit_at(table: Table, clock: Clock, millis: int, row: int) -> int:
    clock.now = millis
    return table.append(make_rows([row])).id


def test_catch_up_tags_only_periods_after_the_newest_periodic_tag(tmp_path):
    """issue 9 item 13: catch-up re-tagged 12, 13, 14 (before the newest periodic tag "15"), because "newest" was taken
    from the tag's snapshot time (12:12) instead of the period the tag names."""
    table, clock = make_table(tmp_path)
    first = commit_at(table, clock, 12 * H + 12 * M, 0)
    assert table.create_periodic_tags("hourly", now=16 * H + 5 * M).created == ["1970-01-01 15"]
    commit_at(table, clock, 18 * H + 5 * M, 1)
    result = table.create_periodic_tags("hourly", catch_up=True, now=18 * H + 5 * M)
    assert result.created == ["1970-01-01 16", "1970-01-01 17"]
    assert {t.name: t.snapshot_id for t in table.tags()} == {f"1970-01-01 {h}": first for h in (15, 16, 17)}


@pytest.mark.parametrize(
    "period, formatter, names",
    [
        ("hourly", "without_dashes", ["19700101 16", "19700101 17"]),
        ("hourly", "without_dashes_and_spaces", ["1970010116", "1970010117"]),
        ("two-hours", "with_dashes", ["1970-01-01 16"]),
        # A period duration is named yyyyMMddHHmm whatever the formatter (Paimon's; issue 22 item 8).
        (timedelta(minutes=30), "without_dashes", ["197001011600", "197001011630", "197001011700", "197001011730"]),
        ("daily", "without_dashes", ["19700103", "19700104"]),
    ],
)
def test_catch_up_rule_holds_for_every_formatter_and_period(tmp_path, period, formatter, names):
    """issue 9 item 13: the same rule whatever the names look like (the period is read back from the tag's name)."""
    table, clock = make_table(tmp_path)
    step = {"hourly": H, "two-hours": 2 * H, "daily": 24 * H}.get(period) or int(period / timedelta(milliseconds=1))
    commit_at(table, clock, 12 * H + 12 * M, 0)  # early in the first period: the old rule restarted here
    first_tag = table.create_periodic_tags(period, formatter=formatter, now=16 * H + 5 * M if step < 24 * H else 48 * H + 5 * M)
    assert len(first_tag.created) == 1
    later = 18 * H + 5 * M if step < 24 * H else 4 * 24 * H + 5 * M
    commit_at(table, clock, later, 1)
    result = table.create_periodic_tags(period, formatter=formatter, catch_up=True, now=later)
    assert result.created == names
    assert period_start_of(first_tag.created[0]) < min(period_start_of(n) for n in names)


def test_catch_up_does_not_recreate_periods_retention_deleted(tmp_path):
    """issue 9 item 13: with num_retained_max, every catch-up run re-created the pruned old periods and deleted them again."""
    table, clock = make_table(tmp_path)
    commit_at(table, clock, 12 * H + 12 * M, 0)
    first = table.create_periodic_tags("hourly", catch_up=True, num_retained_max=2, now=16 * H + 5 * M)
    assert first.created == [f"1970-01-01 {h}" for h in (12, 13, 14, 15)]
    assert first.deleted == ["1970-01-01 12", "1970-01-01 13"]
    commit_at(table, clock, 17 * H + 30 * M, 1)
    second = table.create_periodic_tags("hourly", catch_up=True, num_retained_max=2, now=18 * H + 5 * M)
    assert second.created == ["1970-01-01 16", "1970-01-01 17"]
    assert second.deleted == ["1970-01-01 14", "1970-01-01 15"]
    assert sorted(t.name for t in table.tags()) == ["1970-01-01 16", "1970-01-01 17"]


def test_retention_drops_the_oldest_periods_whatever_the_names_sort_like(tmp_path):
    """issue 9 item 13 (sibling): num_retained_max ordered periodic tags by (snapshot time, name); tags of one snapshot
    named with different formatters then sorted by spelling, and the newest period ("1970-01-02") was deleted."""
    table, clock = make_table(tmp_path)
    commit_at(table, clock, 1 * H, 0)
    assert table.create_periodic_tags("daily", formatter="without_dashes", now=25 * H).created == ["19700101"]
    result = table.create_periodic_tags("daily", formatter="with_dashes", now=49 * H, num_retained_max=1)
    assert result.created == ["1970-01-02"] and result.deleted == ["19700101"]
    assert [t.name for t in table.tags()] == ["1970-01-02"]


def test_a_manual_tag_named_like_a_later_period_does_not_stop_catch_up(tmp_path):
    """issue 9 item 13: only periodic tags say where catch-up resumes (a manual tag records its source)."""
    table, clock = make_table(tmp_path)
    commit_at(table, clock, 12 * H + 12 * M, 0)
    table.create_periodic_tags("hourly", now=13 * H + 5 * M)  # "1970-01-01 12"
    table.create_tag("1970-01-01 20")
    result = table.create_periodic_tags("hourly", catch_up=True, now=15 * H + 5 * M)
    assert result.created == ["1970-01-01 13", "1970-01-01 14"]


@pytest.mark.parametrize("formatter", ["with_dashes", "without_dashes", "without_dashes_and_spaces"])
@pytest.mark.parametrize("step", [timedelta(days=1), timedelta(hours=1), timedelta(hours=2), timedelta(minutes=30), timedelta(days=2)])
def test_tag_names_read_back_to_their_period_start(formatter, step):
    """issue 9 item 13: every name tag_name() can produce reads back to its period start; other names read as None."""
    start = 1_763_700_000_000 // int(step / timedelta(milliseconds=1)) * int(step / timedelta(milliseconds=1))
    assert period_start_of(tag_name(start, step, formatter)) == start
    for other in ("manual", "2026-11-21x", "2026-13-01", "20261121 1", "2026-11-21T13", ""):
        assert period_start_of(other) is None
