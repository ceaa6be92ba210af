"""Every duration a lake job hands its action reaches the action exactly (core/lake/jobs.py), over the whole
range a policy takes (1 ms to 1000 years), and a policy outside that range is refused when it is loaded.

A job once formatted seconds with ``{:g}``: ``max-snapshot-age-hours: 720`` became ``2.592e+06 s``, which
the duration parser refused, so the most common retention failed on every run.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings, strategies as st

from airflow_snaptable.core import Table
from airflow_snaptable.core.arguments.table_options import duration_text, parse_duration
from airflow_snaptable.core.errors import InvalidPolicyError
from airflow_snaptable.core.lake import SUCCESSFUL, Policy, maintain
from airflow_snaptable.core.lake.jobs import plan_job
from airflow_snaptable.core.lake.policy import MAX_DURATION
from tests.conftest import SCHEMA
from tests.lake.conftest import native_dir, write_native

#: Lengths of time from a millisecond to a thousand years, spread over every magnitude (log-uniform).
SECONDS = st.floats(min_value=-3, max_value=10.49, allow_nan=False).map(lambda exponent: 10 ** exponent)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """A table with no retention of its own, and one whose own retentions (14 days) win over a shorter policy."""
    root = tmp_path_factory.mktemp("durations")
    plain = Table.create(str(root / "plain"), SCHEMA)
    own = Table.create(str(root / "own"), SCHEMA, options={"snapshot.time-retained": "14 d", "consumer.expiration-time": "14 d"})
    return plain, own


def _argument(policy: dict, job: str, table, name: str) -> timedelta:
    """The duration the job's action received, read as the action reads it."""
    resolved = Policy.from_mapping({"defaults": {job: policy}}).resolve("ns.t")[job]
    plan = plan_job(resolved, table)
    assert getattr(plan.action, name) == plan.arguments[name]  # the status shows what the action got
    return parse_duration(plan.arguments[name], name)


@settings(max_examples=60, deadline=None)
@given(seconds=SECONDS)
def test_every_job_hands_its_action_the_duration_the_policy_gave_at_every_magnitude(tables, seconds):
    plain, _own = tables
    hours, days = seconds / 3600, seconds / 86400
    assert _argument({"max-snapshot-age-hours": hours}, "snapshot-expiry", plain, "time_retained") == timedelta(hours=hours)
    assert _argument({"older-than-days": days}, "orphan-file-removal", plain, "older_than") == timedelta(days=days)
    exact = timedelta(milliseconds=round(seconds * 1000))  # a duration's text, to the millisecond
    for text in (seconds, duration_text(exact)):
        assert _argument({"expiration-time": text}, "consumer-expiry", plain, "expiration_time") == parse_duration(text)
        assert _argument({"column": "t", "retention": text}, "data-expiry", plain, "retention") == parse_duration(text)
    if seconds < 3600:  # a delay is shorter than its period (hourly)
        assert _argument({"period": "hourly", "delay": seconds}, "periodic-tags", plain, "delay") == timedelta(seconds=seconds)


@pytest.mark.parametrize("policy, job, name", [
    ({"max-snapshot-age-hours": 1}, "snapshot-expiry", "time_retained"),
    ({"expiration-time": "1 h"}, "consumer-expiry", "expiration_time"),
])
def test_a_table_s_own_long_retention_that_wins_reaches_the_action(tables, policy, job, name):
    _plain, own = tables
    assert _argument(policy, job, own, name) == timedelta(days=14)


@pytest.mark.parametrize("text", ["2.592e+06 s", "30 d", "720 h", "2592000 s", "2592000000 ms", "90 min", "1500 ms", "0.000250 s"])
def test_duration_text_reads_back_exactly(text):
    duration = parse_duration(text)
    assert parse_duration(duration_text(duration)) == duration
    assert "e" not in duration_text(duration)


@settings(max_examples=200, deadline=None)
@given(micros=st.integers(min_value=0, max_value=timedelta.max // timedelta(microseconds=1)))
def test_duration_text_is_the_parser_s_inverse_to_the_microsecond(micros):
    duration = timedelta(microseconds=micros)
    assert parse_duration(duration_text(duration)) == duration


@pytest.mark.parametrize("job, key, value", [
    ("snapshot-expiry", "max-snapshot-age-hours", 1e300),
    ("snapshot-expiry", "max-snapshot-age-hours", 1e-9),
    ("snapshot-expiry", "max-snapshot-age-hours", MAX_DURATION / timedelta(hours=1) * 1.001),
    ("orphan-file-removal", "older-than-days", 1e-9),
    ("orphan-file-removal", "older-than-days", 1e300),
    ("consumer-expiry", "expiration-time", "99999999 d"),
    ("consumer-expiry", "expiration-time", "0.5 ms"),
    ("consumer-expiry", "expiration-time", 1e15),
    ("data-expiry", "retention", "1e300 s"),
    ("periodic-tags", "delay", 1e-6),
])
def test_a_duration_out_of_range_is_refused_when_the_policy_loads(job, key, value):
    with pytest.raises(InvalidPolicyError, match=rf"defaults\.{job}\.{key}"):
        Policy.from_mapping({"defaults": {job: {key: value}}})


def test_the_most_common_retentions_run_on_every_table(tmp_path):
    """30 days (and a table's own 14 days) as a lake run meets them: every job succeeds, and runs again."""
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "sales.orders"), snapshots=3)
    write_native(native_dir(lake, "sales.own"), snapshots=3,
                 options={"snapshot.time-retained": "14 d", "consumer.expiration-time": "14 d"})
    policy = Policy.from_mapping({"defaults": {
        "snapshot-expiry": {"max-snapshot-age-hours": 720, "min-snapshots-to-keep": 1},
        "orphan-file-removal": {"older-than-days": 30},
        "consumer-expiry": {"expiration-time": "30 d"},
        "periodic-tags": {"period": "daily", "delay": 7200},
    }})
    for _ in range(2):
        report = maintain(lake, policy)
        assert not report.failed
        for table in report.tables:
            ran = {job: record for job, record in table.jobs.items() if record["status"] != "Disabled"}
            assert {record["status"] for record in ran.values()} == {SUCCESSFUL}, table.to_dict()
            assert ran["snapshot-expiry"]["arguments"]["time_retained"] == "30 d"
            assert ran["orphan-file-removal"]["arguments"]["older_than"] == "30 d"
            assert ran["consumer-expiry"]["arguments"]["expiration_time"] == "30 d"
            assert ran["snapshot-expiry"]["snapshotsExpired"] == 0  # nothing is 30 days old


@pytest.mark.parametrize("duration", [timedelta(days=30), timedelta(days=365 * 20), timedelta(milliseconds=1500)])
def test_a_timedelta_given_to_an_action_reaches_it_exactly(tables, duration):
    """The same rule for Python callers (an operator's or the hook's ``time_retained=timedelta(days=30)``)."""
    from airflow_snaptable.core.actions import build_action

    plain, _own = tables
    action = build_action("expire-snapshots", plain.uri, time_retained=duration)
    assert parse_duration(action.time_retained) == duration


THIRTY_DAYS = {
    "snapshot-expiry": {"max-snapshot-age-hours": 720},
    "orphan-file-removal": {"older-than-days": 30},
    "consumer-expiry": {"expiration-time": "30 d"},
}


def test_the_most_common_retentions_run_on_iceberg_tables_and_their_own_14_days_wins(iceberg_lake):
    catalog = iceberg_lake.catalog()
    with catalog.load_table(("sales", "orders")).transaction() as transaction:
        transaction.set_properties({"history.expire.max-snapshot-age-ms": str(14 * 86_400_000)})
    report = maintain("iceberg://sales", Policy.from_mapping({"defaults": {**THIRTY_DAYS, "snapshot-expiry": {
        "max-snapshot-age-hours": 1}}}), catalog=iceberg_lake.properties)
    assert not report.failed, report.to_dict()
    jobs = {table.table: table.jobs for table in report.tables}
    assert jobs["sales.orders"]["snapshot-expiry"]["arguments"]["time_retained"] == "14 d"
    assert jobs["sales.returns"]["snapshot-expiry"]["arguments"]["time_retained"] == "1 h"
    assert {jobs[name][job]["status"] for name in jobs for job in THIRTY_DAYS} == {SUCCESSFUL}
    assert jobs["sales.returns"]["orphan-file-removal"]["arguments"]["older_than"] == "30 d"


def test_the_most_common_retentions_run_on_paimon_tables(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    report = maintain(warehouse, Policy.from_mapping({"defaults": THIRTY_DAYS}))
    assert not report.failed, report.to_dict()
    for table in report.tables:
        assert {table.jobs[job]["status"] for job in THIRTY_DAYS} == {SUCCESSFUL}
        assert table.jobs["snapshot-expiry"]["arguments"]["time_retained"] == "30 d"
