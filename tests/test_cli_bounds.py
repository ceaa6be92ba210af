"""Numbers that make no date are refused when they are read (issue 34 item 16): ``--noncurrent-days
99999999999999999999`` was accepted and the trash then showed ``purge_after_iso: null`` (never purged); a tag's time
to live of 99999999 days gave ``expires_at_iso: null``. Every days count and duration argument is at most 1000 years:
one typed line, exit 2, nothing changed."""

from __future__ import annotations

import json

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, InvalidPolicyError
from airflow_snaptable.core.lake import Policy
from tests.conftest import make_rows
from tests.core.test_lifecycle import tree

HUGE_DAYS = "99999999999999999999"


@pytest.fixture
def three(table) -> Table:
    for i in range(3):
        table.append(make_rows(range(i * 3, i * 3 + 3)))
    return table


@pytest.mark.parametrize("command", [
    ["expire", "URI", "--retain-max", "1", "--noncurrent-days", HUGE_DAYS],
    ["clean", "URI", "--policy", "KEEP_LATEST_COMMITS", "--commits-retained", "1", "--noncurrent-days", "365001"],
    ["run-action", json.dumps({"action": "expire-snapshots", "table": "URI", "retain_max": 1, "noncurrent_days": 10**20})],
    ["tag", "create", "URI", "forever", "--time-retained", "99999999 d"],
    ["clean-orphans", "URI", "--older-than", "99999999 d", "--no-dry-run"],
    ["expire", "URI", "--time-retained", "400000 d"],
], ids=["expire-days", "clean-days", "run-action-days", "tag-ttl", "orphans-window", "expire-window"])
def test_a_count_of_days_or_a_duration_past_1000_years_is_refused_at_parse(three, command, capsys):
    before = tree(three.uri)
    argv = [word.replace("URI", three.uri) for word in command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: InvalidArgumentError: ") and "1000 years" in err and err.count("\n") == 1, err
    assert tree(three.uri) == before


def test_the_longest_noncurrent_days_still_has_a_purge_date(three, capsys):
    assert main(["expire", three.uri, "--retain-max", "1", "--noncurrent-days", "365000", "--json"]) == 0
    capsys.readouterr()
    assert main(["trash", three.uri, "--json"]) == 0
    [run] = json.loads(capsys.readouterr().out)["result"]
    assert run["purge_after_iso"] is not None and run["days"] == 365000


def test_the_core_api_and_the_policy_refuse_them_too(three):
    with pytest.raises(InvalidArgumentError, match="1000 years"):
        with three.retaining_noncurrent(10**20, "expire"):
            pass
    with pytest.raises(InvalidArgumentError, match="1000 years"):
        three.create_tag("forever", time_retained="99999999 d")
    with pytest.raises(InvalidPolicyError, match="noncurrent-days must be an integer from 0 to 365000"):
        Policy.from_mapping({"defaults": {"snapshot-expiry": {"noncurrent-days": 10**20}}})
