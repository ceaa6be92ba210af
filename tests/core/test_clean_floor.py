"""A clean's floor (``retain_min``, ``time_retained``): what stays whatever the Hudi policy says, and the result says
when the floor kept more (issue 34 item 1: the lake's clean job passes a table's explicit retention as its floor)."""

from __future__ import annotations

import json

from airflow_snaptable.cli import main
from tests.conftest import make_rows


def test_the_floor_keeps_more_than_the_policy_and_the_result_says_so(table, capsys):
    for i in range(6):
        table.append(make_rows(range(i * 3, i * 3 + 3)))
    base = ["clean", table.uri, "--policy", "KEEP_LATEST_COMMITS", "--commits-retained", "1", "--json"]
    assert main([*base, "--retain-min", "4", "--dry-run"]) == 0
    planned = json.loads(capsys.readouterr().out)["result"]
    assert (planned["floor_kept_from"], planned["floor_kept_by"]) == (3, "retain_min")
    assert main([*base, "--time-retained", "1 h", "--retain-min", "4"]) == 0  # every snapshot is younger than an hour
    kept = json.loads(capsys.readouterr().out)["result"]
    assert kept["expired_snapshot_ids"] == [] and (kept["floor_kept_from"], kept["floor_kept_by"]) == (1, "time_retained")
    assert main([*base, "--retain-min", "2"]) == 0  # the policy keeps 2 already: the floor changes nothing
    done = json.loads(capsys.readouterr().out)["result"]
    assert done["expired_snapshot_ids"] == [1, 2, 3, 4] and done["floor_kept_from"] is None
    assert [s.id for s in table.snapshots()] == [5, 6] and table.verify().ok
