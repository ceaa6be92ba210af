"""Periodic tags by watermark (Paimon's tag.automatic-creation = watermark): periods of event time."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, InvalidOptionError
from tests.conftest import SCHEMA, make_rows

HOUR = 3_600_000
D0 = int(dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
DAY = 24 * HOUR


@pytest.fixture
def table(tmp_path):
    """Watermarks: 1 at Mar 1 10:00, 2 at Mar 1 20:00, 3 at Mar 2 05:00, 4 at Mar 3 01:00 (commit times: now)."""
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    for i, wm in enumerate([D0 + 10 * HOUR, D0 + 20 * HOUR, D0 + DAY + 5 * HOUR, D0 + 2 * DAY + HOUR]):
        table.append(make_rows([i]), watermark=wm)
    return table


def test_the_newest_complete_event_time_period_holds_the_last_snapshot_below_its_end(table):
    result = table.create_periodic_tags("daily", time_source="watermark")
    assert result.created == ["2026-03-02"]
    assert table.tag("2026-03-02").snapshot_id == 3  # watermark below Mar 3 00:00


def test_catch_up_tags_every_event_time_period_and_a_delay_holds_back_the_last(table):
    assert table.create_periodic_tags("daily", time_source="watermark", catch_up=True).created == ["2026-03-01", "2026-03-02"]
    assert [(t.name, t.snapshot_id) for t in table.tags()] == [("2026-03-01", 2), ("2026-03-02", 3)]


def test_a_delay_waits_for_the_watermark_to_pass_the_end_plus_delay(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.append(make_rows([0]), watermark=D0 + 10 * HOUR)
    table.append(make_rows([1]), watermark=D0 + DAY + HOUR)  # Mar 2 01:00: Mar 1 ended an hour ago
    assert table.create_periodic_tags("daily", time_source="watermark", delay="2 h").created == []
    table.append(make_rows([2]), watermark=D0 + DAY + 3 * HOUR)
    assert table.create_periodic_tags("daily", time_source="watermark", delay="2 h").created == ["2026-03-01"]
    assert table.tag("2026-03-01").snapshot_id == 1


def test_the_option_selects_watermark_and_no_watermark_means_nothing_to_tag(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, options={"tag.automatic-creation": "watermark", "tag.creation-period": "daily"})
    table.append(make_rows([0]))  # no watermark: no event-time period has ended
    assert table.create_periodic_tags().created == []
    table.append(make_rows([1]), watermark=D0 + DAY + HOUR)
    assert table.create_periodic_tags().created == ["2026-03-01"]
    with pytest.raises(InvalidArgumentError, match="time_source"):
        table.create_periodic_tags(time_source="event-time")
    with pytest.raises(InvalidOptionError):
        Table.create(str(tmp_path / "u"), SCHEMA, options={"tag.automatic-creation": "sometimes"})
