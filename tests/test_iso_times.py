"""ISO-8601 beside every time in epoch millis (issue 28 item 4): in action results (XCom, the Spark
job, ``run-action``), the CLI's JSON and tables, and the hook's log line of a result."""

from __future__ import annotations

import datetime as dt
import io
import json
from contextlib import redirect_stdout

from airflow_snaptable.cli import main
from airflow_snaptable.core.actions import ACTIONS, run_action
from airflow_snaptable.core.arguments.times import is_time_field, with_iso_times
from tests.conftest import make_rows


def _millis(iso: str) -> int:
    return round(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def check_iso_beside_millis(doc) -> int:
    """Every time field ``x_millis`` is followed by ``x_iso`` naming the same instant; durations get none.
    Returns how many time fields were seen."""
    seen = 0
    if isinstance(doc, list):
        return sum(check_iso_beside_millis(item) for item in doc)
    if not isinstance(doc, dict):
        return 0
    keys = list(doc)
    for i, key in enumerate(keys):
        seen += check_iso_beside_millis(doc[key])
        if not key.endswith("_millis") or not isinstance(doc[key], int):
            continue
        iso_key = key[: -len("_millis")] + "_iso"
        if is_time_field(key):
            assert keys[i + 1] == iso_key, (key, keys)
            assert _millis(doc[iso_key]) == doc[key], (key, doc[key], doc[iso_key])
            assert doc[iso_key].endswith("Z")
            seen += 1
        else:
            assert iso_key not in doc, f"{key} is a duration, not a time"
    return seen


def _cli_json(args: list[str]):
    out = io.StringIO()
    with redirect_stdout(out):
        main(args + ["--json"])
    return json.loads(out.getvalue())


def test_action_results_and_cli_json_carry_iso_times(table, table_uri):
    for i in range(4):
        table.append(make_rows([i]))
    seen = 0
    for name, arguments in [
        ("create-tag", {"tag_name": "d", "time_retained": "1 d"}),
        ("update-consumer", {"consumer_id": "reader", "next_snapshot": 2}),
        ("remove-orphan-files", {"older_than": "1 d"}),
        ("expire-snapshots", {"older_than": "2020-01-01T00:00:00Z", "dry_run": True}),
        ("periodic-tags", {"period": "daily"}),
    ]:
        seen += check_iso_beside_millis(run_action(ACTIONS[name].from_values(table_uri, arguments)))
    for words in (["snapshots"], ["tags"], ["consumers"], ["run-action"]):
        if words == ["run-action"]:
            doc = _cli_json(["run-action", json.dumps({"action": "remove-orphan-files", "table": table_uri})])
        else:
            doc = _cli_json([*words, table_uri])
        seen += check_iso_beside_millis(doc)
    assert seen >= 12  # snapshots' times, tags' create/expiry/snapshot times, consumers, the orphan window


def test_the_cli_table_and_the_log_line_show_the_time(table, table_uri, capsys):
    table.append(make_rows([1]))
    assert main(["clean-orphans", table_uri, "--older-than", "2026-01-02T03:04:05Z"]) == 0
    out = capsys.readouterr().out
    assert "older_than_iso" in out and "2026-01-02T03:04:05.000Z" in out
    from airflow_snaptable.hooks.snaptable import _summary

    result = run_action(ACTIONS["remove-orphan-files"].from_values(table_uri, {"older_than": "2026-01-02T03:04:05Z"}))
    assert "older_than_iso=2026-01-02T03:04:05.000Z" in _summary(result["result"])


def test_with_iso_times_is_idempotent_and_leaves_odd_values_alone():
    doc = {"a_millis": 0, "ttl_millis": 5, "n": {"b_time_millis": True, "c_at_millis": 10**18}}
    once = with_iso_times(doc)
    assert once == with_iso_times(once)
    assert once["a_iso"] == "1970-01-01T00:00:00.000Z" and "ttl_iso" not in once
    assert "b_time_iso" not in once["n"] and once["n"]["c_at_iso"] is None  # a bool is no time; beyond the calendar
