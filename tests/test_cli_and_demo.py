"""The snaptable CLI, core's JSON actions, and the demo, run as a user runs them."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core.arguments.times import iso_time
from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import ACTIONS, UpdateConsumer, action_from_json, run_action
from airflow_snaptable.core.errors import InvalidArgumentError, TagAlreadyExistsError
from devtools import demo
from tests.conftest import make_rows

SNAPTABLE = str(Path(sys.executable).with_name("snaptable"))


def test_snapshots_json_and_human_output(table, table_uri, capsys):
    table.append(make_rows(range(5)), watermark=7)
    table.delete(partitions=[{"p": 0}])
    assert main(["snapshots", table_uri, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(s["id"], s["commit_kind"], s["total_record_count"]) for s in doc] == [(1, "APPEND", 5), (2, "DELETE", 3)]
    assert main(["snapshots", table_uri]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "kind", "committed", "(UTC)", "records", "delta", "+files", "-files", "user", "watermark"]
    assert lines[3].split()[:2] == ["2", "DELETE"]
    assert len({len(line) for line in lines[:2]}) == 1  # header and rule aligned


def test_show(table, table_uri, capsys):
    table.append(make_rows(range(5)))
    assert main(["show", table_uri, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["latest_snapshot_id"] == 1 and info["partition_keys"] == ["p"] and info["data_files"] == 3


def test_console_script_reports_typed_errors(tmp_path):
    result = subprocess.run([SNAPTABLE, "show", str(tmp_path / "missing")], capture_output=True, text=True)
    assert result.returncode == 2
    assert "TableNotFoundError" in result.stderr and result.stdout == ""


# -- core actions: update-consumer, create-tag if_exists ---------------------------------------


def test_update_consumer_action_is_validated_and_runs_through_run_action_and_the_cli(table, table_uri, capsys):
    for i in range(3):
        table.append(make_rows(range(i * 5, i * 5 + 5)))
    assert ACTIONS["update-consumer"] is UpdateConsumer  # the Spark job parses with this registry
    action = action_from_json(json.dumps({"action": "update-consumer", "table": table_uri, "consumer_id": "etl", "next_snapshot": 3}))
    assert run_action(action) == {
        "action": "update-consumer",
        "table": table_uri,
        "result": {"id": "etl", "next_snapshot": 3, "update_time_millis": table.consumer("etl").update_time_millis,
                   "update_time_iso": iso_time(table.consumer("etl").update_time_millis)},
    }
    for doc, message in [
        ({"consumer_id": "etl"}, "next_snapshot is required"),
        ({"consumer_id": "", "next_snapshot": 2}, "consumer_id must be a non-empty string"),
        ({"consumer_id": "etl", "next_snapshot": 0}, "next_snapshot must be an integer >= 1"),
        ({"consumer_id": "etl", "next_snapshot": "2"}, "next_snapshot must be an integer >= 1"),
        ({"consumer_id": "etl", "next_snapshot": 2, "position": 1}, "takes no argument"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            action_from_json({"action": "update-consumer", "table": table_uri, **doc})
    with pytest.raises(InvalidArgumentError):  # beyond latest + 1: core refuses, nothing changes
        run_action(UpdateConsumer(table_uri, consumer_id="etl", next_snapshot=9))
    assert table.consumer("etl").next_snapshot == 3
    # The CLI's run-action takes the same JSON.
    doc = json.dumps({"action": "update-consumer", "table": table_uri, "consumer_id": "etl", "next_snapshot": 4})
    assert main(["run-action", doc, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["next_snapshot"] == 4
    assert table.consumer("etl").next_snapshot == 4


def test_create_tag_action_if_exists(table, table_uri):
    for i in range(3):
        table.append(make_rows(range(i * 5, i * 5 + 5)))
    tag = {"action": "create-tag", "table": table_uri, "tag_name": "good"}
    first = run_action(action_from_json({**tag, "snapshot_id": 2}))
    assert "skipped" not in first and first["result"]["snapshot_id"] == 2
    with pytest.raises(TagAlreadyExistsError, match="exists already"):
        run_action(action_from_json({**tag, "snapshot_id": 2}))  # default: fail
    again = run_action(action_from_json({**tag, "snapshot_id": 2, "if_exists": "skip"}))
    assert again["skipped"] is True and again["result"] == first["result"]
    with pytest.raises(TagAlreadyExistsError, match="points at snapshot 2, not at the requested snapshot 3"):
        run_action(action_from_json({**tag, "if_exists": "skip"}))  # the latest is 3
    with pytest.raises(InvalidArgumentError, match="if_exists must be one of"):
        action_from_json({**tag, "if_exists": "replace"})
    assert [(t.name, t.snapshot_id) for t in table.tags()] == [("good", 2)]


# -- the demo ----------------------------------------------------------------------------------


def test_new_snapshots_consumer_and_tag_if_exists_commands(table, table_uri, capsys):
    for i in range(3):
        table.append(make_rows([10 * i, 10 * i + 1]))
    table.compact(min_file_num=2)  # snapshot 4: COMPACT, not a kind a downstream job waits for
    assert main(["new-snapshots", table_uri, "--after", "1", "--kinds", "APPEND,OVERWRITE", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["from_snapshot_id"], found["to_snapshot_id"], found["matching_snapshot_ids"]) == (1, 4, [2, 3])
    assert found["added_records"] == table.snapshot(4).total_record_count - table.snapshot(1).total_record_count + found["deleted_records"]
    assert main(["new-snapshots", table_uri, "--after", "3", "--kinds", "APPEND", "--json"]) == 1  # only the compaction is new
    assert main(["new-snapshots", table_uri, "--after", "3", "--json"]) == 1  # the sensor's kinds by default: no new data
    assert main(["new-snapshots", table_uri, "--after", "3", "--kinds", "APPEND,COMPACT", "--json"]) == 0
    capsys.readouterr()

    assert main(["consumer", "update", table_uri, "etl", "3"]) == 0
    assert Table.open(table_uri).consumer("etl").next_snapshot == 3
    capsys.readouterr()
    assert main(["new-snapshots", table_uri, "--consumer", "etl", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["matching_snapshot_ids"] == [3]
    assert main(["consumer", "update", table_uri, "etl", "99"]) == 2  # beyond latest + 1: typed error, nothing written
    assert Table.open(table_uri).consumer("etl").next_snapshot == 3
    assert main(["consumer", "delete", table_uri, "etl"]) == 0
    assert Table.open(table_uri).consumers() == []

    assert main(["tag", "create", table_uri, "d1", "--snapshot-id", "2"]) == 0
    assert main(["tag", "create", table_uri, "d1", "--snapshot-id", "2"]) == 2  # exists
    assert main(["tag", "create", table_uri, "d1", "--snapshot-id", "2", "--if-exists", "skip", "--json"]) == 0
    assert main(["tag", "create", table_uri, "d1", "--snapshot-id", "3", "--if-exists", "skip"]) == 2  # elsewhere
    capsys.readouterr()
    assert Table.open(table_uri).tag("d1").snapshot_id == 2


def test_core_only_demo_runs_end_to_end(tmp_path, capsys):
    assert demo.main(["--core-only", "--dir", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "retry of the last append (same commit identifier) -> snapshot 6, applied once" in out
    assert "restored at 10: snapshot 10 +10" in out
    assert " 9  COMPACT " in out


def parse_timeline(block: list[str]) -> list[dict[str, str]]:
    """The printed timeline's rows as dicts, cut at the header's column starts (cells may hold spaces)."""
    header, rule, *rows = block
    starts = [m.start() for m in re.finditer(r"-+", rule)]
    names = [header[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]
    assert names == demo.TIMELINE_HEADERS
    return [{n: row[a:b].strip() for n, a, b in zip(names, starts, starts[1:] + [None])} for row in rows]


@pytest.mark.slow
def test_demo_runs_the_airflow_and_spark_story_end_to_end(tmp_path, capsys):
    """scripts/demo's story: real `airflow dags test` runs, real spark-submit, one table on local files."""
    started = time.monotonic()
    assert demo.main(["--dir", str(tmp_path / "demo")]) == 0
    seconds = time.monotonic() - started
    out = capsys.readouterr().out
    lines = out.splitlines()
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    headers = [line for line in lines if line.startswith("== ")]
    assert [h.split(".")[0] for h in headers] == ["== 0", "== 1", "== 2", "== 3", "== 4", "== 5", "== 6"]
    assert out.count(": success (") == 5  # five DAG runs

    table = Table.open(str(tmp_path / "demo" / "warehouse" / "orders"))
    snapshots = table.snapshots()
    tags = {t.name: t.snapshot_id for t in table.tags()}
    consumer = table.consumer(demo.CONSUMER)

    # 6. the printed timeline is the table's state ...
    start = lines.index(next(h for h in headers if h.startswith("== 6.")))
    block = lines[start + 1 : lines.index("", start + 1)]
    assert "\n".join(block) == demo.render_timeline(table)
    rows = parse_timeline(block)
    assert [int(r["snapshot"]) for r in rows] == [s.id for s in snapshots]
    assert [r["kind"] for r in rows] == [s.commit_kind.value for s in snapshots]
    assert [int(r["records"]) for r in rows] == [s.total_record_count for s in snapshots]
    assert {r["tags"]: int(r["snapshot"]) for r in rows if r["tags"]} == tags
    assert [int(r["snapshot"]) for r in rows if r[demo.TIMELINE_HEADERS[-1]] == demo.CONSUMER] == [consumer.next_snapshot]

    # ... and the state the story made:
    backfill_tags = [name for name in tags if name.startswith("backfill-")]
    assert set(tags) == {today, *backfill_tags} and len(backfill_tags) == 1
    latest = snapshots[-1]
    assert snapshots[0].id > 1  # 3. expiry removed the oldest snapshot (retain_max=2)
    assert tags[today] == latest.id - 1  # 3. the daily tag: the state before today's broken extract
    assert tags[backfill_tags[0]] == latest.id  # 5. the repaired state, tagged
    assert consumer.next_snapshot == latest.id  # 2. the consumer read everything up to the daily tag
    # 4.-5. today's broken extract (4 rows) was rolled back and re-ingested in full by Spark.
    today_rows = table.scan(filter=[("day", "=", today)]).to_arrow()
    assert today_rows.num_rows == 10 and latest.total_record_count == 40
    assert latest.commit_user == "ingest"

    # The steps report what the DAG runs did (read back from the runs' XComs and Spark output).
    assert f"SnapTableNewSnapshotSensor: snapshots [1, 2, {tags[today]}] are new (range (0, {tags[today]}], +30 records)" in out
    assert f'Spark: order changes: {{"between": "0,{tags[today]}", "added_rows": 30,' in out
    assert f"tag_day: tag '{today}' -> snapshot {tags[today]}" in out
    assert f"expired {list(range(1, snapshots[0].id))} of [1, 2, 3]" in out
    assert f'ingested: {{"day": "{today}", "rows": 4, "snapshot_id": {latest.id}}}' in out
    assert f"discarded_snapshot_ids=[{latest.id}]" in out
    assert f"tag_backfill: tag '{backfill_tags[0]}' -> snapshot {latest.id}" in out
    print(f"demo story: {seconds:.0f} s", file=sys.stderr)


def test_every_path_the_demo_prints_exists_when_it_ends(tmp_path, capsys, monkeypatch):
    """scripts/demo without --dir removes its work directory at the end; the timeline pictures it ends by naming
    are kept. The story's Airflow and Spark steps take minutes (test_demo_runs_the_airflow_and_spark_story_end_to_end
    runs them); here the story is its last step on a real table: the table's timeline, drawn where main says."""
    import re

    from airflow_snaptable.core import Table

    def last_step_only(workdir, say=print, picture_dir=None):
        workdir.mkdir(parents=True)
        table = Table.create(str(workdir / "warehouse" / "orders"), demo.SCHEMA, partition_by=["day"])
        table.append(demo.orders(dt.date(2026, 1, 1), 1, 5))
        say(demo.write_timeline_picture(table, picture_dir or workdir))  # as Story.run's last step
        return table

    monkeypatch.setattr(demo, "run_story", last_step_only)
    monkeypatch.setattr(demo.tempfile, "tempdir", str(tmp_path))  # the demo's temporary directories, under tmp_path
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    printed = re.findall(r"(/\S+\.(?:html|svg))", out)
    assert printed, out
    for path in printed:
        assert os.path.exists(path), f"the demo printed {path} and removed it:\n{out}"
