"""Which tags are automatic, and what automatic tags are named (issue 22 items 8 and 9).

Paimon's TagPeriodHandler has one name pattern per period and formatter, and counts a tag as
automatic only if its whole name is the table's own. Our tables record who made a tag; a tag file
of ours that records no source (an older writer's) follows Paimon's rule. A tag naming a period
that is not over yet never moves where catch-up resumes.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, InvalidOptionError
from airflow_snaptable.core.native.tags import Tag, tag_path
from tests.conftest import SCHEMA, make_rows

H = 3_600_000
D = 24 * H
START = 1_577_854_800_000  # 2020-01-01 05:00 UTC


@pytest.mark.parametrize(
    "period, formatter, name",
    [
        ("daily", "with_dashes", "2020-01-01"),
        ("daily", "without_dashes", "20200101"),
        ("daily", "without_dashes_and_spaces", "20200101"),
        ("hourly", "with_dashes", "2020-01-01 05"),
        ("hourly", "without_dashes", "20200101 05"),
        ("hourly", "without_dashes_and_spaces", "2020010105"),
        # Two-hour tags and period durations ignore the formatter (TwoHoursTagPeriodHandler, PeriodDurationTagPeriodHandler).
        ("two-hours", "with_dashes", "2020-01-01 04"),
        ("two-hours", "without_dashes", "2020-01-01 04"),
        ("two-hours", "without_dashes_and_spaces", "2020-01-01 04"),
        (timedelta(minutes=30), "with_dashes", "202001010500"),
        (timedelta(minutes=30), "without_dashes", "202001010500"),
        (timedelta(days=1), "with_dashes", "202001010000"),
    ],
)
def test_each_period_and_formatter_names_its_tags_as_paimon_does(tmp_path, period, formatter, name):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.clock = lambda: START - 4 * H  # the first commit, early in the day
    table.append(make_rows([1]))
    step = {"daily": D, "hourly": H, "two-hours": 2 * H}.get(period) or period // timedelta(milliseconds=1)
    now = (START // step + 1) * step + 1000  # just after the period containing 05:00 ended
    assert table.create_periodic_tags(period, formatter=formatter, now=now).created == [name]


def test_the_period_duration_option_wins_over_the_period(tmp_path):
    """Paimon's ``tag.creation-period-duration``: the period is the duration, named yyyyMMddHHmm."""
    options = {"tag.creation-period": "daily", "tag.creation-period-duration": "90 min"}
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"], options=options)
    table.clock = lambda: START
    table.append(make_rows([1]))
    assert table.create_periodic_tags(now=START + 3 * H).created == ["202001010600"]
    for bad in ("30 s", "90 s", "0 s", "soon"):
        with pytest.raises(InvalidOptionError, match="tag.creation-period-duration"):
            Table.create(str(tmp_path / f"bad-{bad}"), SCHEMA, options={"tag.creation-period-duration": bad})
    with pytest.raises(InvalidArgumentError, match="whole number of minutes"):
        table.create_periodic_tags(timedelta(seconds=90), now=START + 3 * H)


def _sourceless_tag(table: Table, name: str, snapshot_id: int) -> None:
    """A tag file of ours without a "source" field, as a writer that records none leaves it."""
    snapshot = table.snapshot(snapshot_id)
    doc = json.loads(Tag(name, snapshot, snapshot.time_millis).to_json())
    del doc["source"]
    table.storage.write_bytes(tag_path(name), json.dumps(doc).encode())


def test_a_tag_that_records_no_source_is_automatic_only_in_the_tables_own_pattern(tmp_path):
    """issue 22 item 8, on our own tables: a tag file without a source counts as automatic exactly when its whole
    name is the daily with_dashes pattern of a complete period; the others (the names the report lists,
    a future period, a non-date) are never pruned, never move catch-up, and show as manual."""
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"], options={"tag.creation-period": "daily"})
    for i, at in enumerate([START, START + D, START + 2 * D], start=1):
        table.clock = lambda at=at: at
        table.append(make_rows([i]))
    manual = ["20200101", "2020-01-01 05", "202001010530", "2020-01-01 05:30", "2099-12-31", "2020-1-01", "release"]
    for name in manual + ["2020-01-01"]:
        _sourceless_tag(table, name, 1)
    now = START + 3 * D
    table.clock = lambda: now
    assert {t.name: t.source for t in table.tags()} == {**dict.fromkeys(manual, "manual"), "2020-01-01": "periodic"}
    result = table.create_periodic_tags(catch_up=True, num_retained_max=1, now=now)
    # Catch-up resumes after the automatic 2020-01-01 (not after 2099-12-31); retention counts only automatic tags.
    assert (result.created, result.deleted) == (["2020-01-02", "2020-01-03"], ["2020-01-01", "2020-01-02"])
    assert sorted(t.name for t in table.tags()) == sorted(manual + ["2020-01-03"])
    assert table.verify().ok


def test_a_tag_naming_a_period_not_over_yet_never_moves_catch_up(tmp_path):
    """issue 22 item 9: a periodic tag of a future period (a run given a wrong ``now``) made every later catch-up
    create nothing, with success; and a manual tag in the table's own pattern for 2099 on a table that
    records no source (tests/paimon) did the same."""
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"], options={"tag.creation-period": "daily"})
    for i, at in enumerate([START, START + D, START + 2 * D], start=1):
        table.clock = lambda at=at: at
        table.append(make_rows([i]))
    assert table.create_periodic_tags(now=4_102_444_800_000).created == ["2099-12-31"]  # a run told it is 2100
    result = table.create_periodic_tags(catch_up=True, now=START + 3 * D)
    assert result.created == ["2020-01-01", "2020-01-02", "2020-01-03"]
    again = table.create_periodic_tags(catch_up=True, now=START + 4 * D)
    assert again.created == ["2020-01-04"]  # resumes after the newest complete period, not after 2099
