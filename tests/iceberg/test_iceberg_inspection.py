"""``snaptable show``, ``snapshots``, ``verify`` and ``timeline`` on an Iceberg table pyiceberg wrote,
each figure checked against what pyiceberg itself reads from the table.

The table: partitioned by ``p``; appends, a row delete (pyiceberg rewrites the files), a tag on the
second snapshot, a branch with its own commit and a tag on it, a consumer, and expiry settings under
which the next expiry removes the oldest snapshot of ``main``.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET

import pyarrow as pa
import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import Table
from tests.iceberg.conftest import files_on_disk, reachable_files, rows

SVG = "{http://www.w3.org/2000/svg}"
PROPERTIES = {"history.expire.min-snapshots-to-keep": "2", "history.expire.max-snapshot-age-ms": "1"}


def _build(env):
    """(pyiceberg table, ids of main's history oldest first, the branch's head)."""
    table = env.create(properties=PROPERTIES)
    with table.update_spec() as spec:
        spec.add_identity("p")
    table.append(pa.concat_tables([rows(0, "a"), rows(1, "b")]))
    table.append(rows(2, "a"))
    table.append(rows(3, "c"))
    table.delete("id = 0")  # rewrites the p=a file holding row 0
    table = table.refresh()
    main_ids = [s.snapshot_id for s in table.metadata.snapshots]
    table.manage_snapshots().create_tag(main_ids[1], "t1").create_branch(main_ids[2], "audit").commit()
    table = table.refresh()
    table.append(rows(50, "z"), branch="audit")
    head = table.refresh().metadata.refs["audit"].snapshot_id
    table.manage_snapshots().create_tag(head, "audit-head").commit()
    ours = Table.open("iceberg://db.orders", catalog=env.properties)
    ours.update_consumer("reader", ours.snapshot_manager.latest_id())  # has read all but the latest
    return table.refresh(), main_ids, head


def _cli(env, *words, expect: int = 0, capsys) -> str:
    code = main([*words[:1], "iceberg://db.orders", *words[1:], "--catalog", env.catalog_json])
    out = capsys.readouterr().out
    assert code == expect, out
    return out


def _live_data_files(table, snapshot_id: int) -> set[str]:
    return {task.file.file_path for task in table.scan(snapshot_id=snapshot_id).plan_files()}


def test_show_text_and_json(iceberg_env, capsys):
    table, main_ids, _head = _build(iceberg_env)
    current = table.metadata.current_snapshot_id
    info = json.loads(_cli(iceberg_env, "show", "--json", capsys=capsys))
    assert info["format"] == "iceberg"
    assert [(c["name"], c["type"], c["nullable"]) for c in info["schema"]] == [("p", "string", True), ("id", "long", True)]
    assert info["partition_keys"] == ["p"]
    assert (info["earliest_snapshot_id"], info["latest_snapshot_id"], info["snapshot_count"]) == (main_ids[0], current, 4)
    assert info["total_record_count"] == table.scan().to_arrow().num_rows == 7
    assert info["data_files"] == len(_live_data_files(table, current)) and info["delete_files"] == 0
    assert {(t["name"], t["snapshot_id"]) for t in info["tags"]} == {("t1", main_ids[1]), ("audit-head", _head)}
    position = table.metadata.snapshot_by_id(current).sequence_number
    assert info["consumers"] == [{"id": "reader", "next_snapshot": position}]
    assert info["options"] == PROPERTIES  # the consumer's property is shown as a consumer

    text = _cli(iceberg_env, "show", capsys=capsys)
    assert f"snapshots   {main_ids[0]} .. {current} (4)" in text
    assert "partitions  p" in text and "records     7" in text
    assert "tags        t1 " in text and "audit-head" in text and f"consumers   reader (next {position})" in text
    assert re.search(r"^id\s+long\s+True$", text, re.M)


def test_snapshots_count_the_files_each_commit_added_and_deleted(iceberg_env, capsys):
    """+files / -files are what pyiceberg's manifests record as added and deleted by each snapshot."""
    table, main_ids, _head = _build(iceberg_env)
    io = table.io
    expected = {}
    for snapshot_id in main_ids:
        snapshot = table.metadata.snapshot_by_id(snapshot_id)
        statuses = [
            entry.status.value for manifest in snapshot.manifests(io)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False) if entry.snapshot_id == snapshot_id
        ]
        expected[snapshot_id] = (statuses.count(1), statuses.count(2))  # ADDED, DELETED
    assert expected[main_ids[0]] == (2, 0) and expected[main_ids[-1]][1] == 1  # the delete rewrote one file
    doc = json.loads(_cli(iceberg_env, "snapshots", "--json", capsys=capsys))
    assert {s["id"]: (s["added_files"], s["deleted_files"]) for s in doc} == expected
    lines = _cli(iceberg_env, "snapshots", capsys=capsys).splitlines()
    header = lines[0].split()
    added, deleted = header.index("+files"), header.index("-files")  # "committed (UTC)" is two words, as its value
    assert {int(line.split()[0]): (int(line.split()[added]), int(line.split()[deleted])) for line in lines[2:]} == expected


def test_verify_reports_what_is_wrong_with_the_files(iceberg_env, capsys):
    table, main_ids, _head = _build(iceberg_env)
    location = iceberg_env.location()
    assert files_on_disk(location) == reachable_files(table)
    assert "OK" in _cli(iceberg_env, "verify", capsys=capsys)
    ok = json.loads(_cli(iceberg_env, "verify", "--json", capsys=capsys))
    assert ok["ok"] and sorted(ok["snapshot_ids"]) == sorted(s.snapshot_id for s in table.metadata.snapshots)
    assert sorted(ok["tags"]) == ["audit-head", "t1"]

    # Damage: a live data file gone, another truncated, an orphan, an unreadable manifest list.
    live = sorted(p[len(table.location()) + 1:] for p in _live_data_files(table, table.metadata.current_snapshot_id))
    gone, truncated = live[0], live[1]
    os.remove(os.path.join(location, gone))
    with open(os.path.join(location, truncated), "r+b") as handle:
        handle.truncate(10)
    with open(os.path.join(location, "data", "orphan.parquet"), "wb") as handle:
        handle.write(b"left by a crashed writer")
    oldest_list = table.metadata.snapshot_by_id(main_ids[0]).manifest_list[len(table.location()) + 1:]
    with open(os.path.join(location, oldest_list), "wb") as handle:
        handle.write(b"not avro")
    text = _cli(iceberg_env, "verify", expect=1, capsys=capsys)
    assert "PROBLEMS" in text and f"missing      {gone}" in text
    report = json.loads(_cli(iceberg_env, "verify", "--json", expect=1, capsys=capsys))
    assert [m["path"] for m in report["missing_files"]] == [gone]
    assert [(m["path"], m["actual_size"]) for m in report["size_mismatches"]] == [(truncated, 10)]
    assert report["unreferenced_files"] == ["data/orphan.parquet"]
    assert [c["path"] for c in report["corrupt_metadata"]] == [oldest_list]


def test_timeline_svg_html_and_json(iceberg_env, tmp_path, capsys):
    table, main_ids, head = _build(iceberg_env)
    before = files_on_disk(iceberg_env.location())
    current = table.metadata.current_snapshot_id
    expired = Table.open("iceberg://db.orders", catalog=iceberg_env.properties).expire_snapshots(dry_run=True)
    assert expired.expired_snapshot_ids  # the settings leave something for the next expiry
    doc = json.loads(_cli(iceberg_env, "timeline", "--out", str(tmp_path / "t.svg"), "--json", capsys=capsys))
    assert files_on_disk(iceberg_env.location()) == before and table.refresh().metadata.snapshots == table.metadata.snapshots
    assert doc["format"] == "iceberg" and doc["numbered_ids"] is False and doc["gaps"] == []
    # main's history, and the branch's tagged head (still in the metadata, so not an expired copy).
    assert [p["id"] for p in doc["snapshots"]] == main_ids + [head]
    assert all(p["retained"] for p in doc["snapshots"])
    assert (doc["earliest_snapshot_id"], doc["latest_snapshot_id"]) == (main_ids[0], current)
    assert sorted(doc["expiry_window"]) == sorted(expired.expired_snapshot_ids)
    assert [(t["name"], t["snapshot_id"], t["snapshot_expired"]) for t in doc["tags"]] == [("t1", main_ids[1], False), ("audit-head", head, False)]
    (consumer,) = doc["consumers"]
    assert (consumer["id"], consumer["next_snapshot_id"], consumer["caught_up"]) == ("reader", current, False)
    assert doc["expiry_options"] == PROPERTIES
    assert {p["id"]: (p["added_files"], p["deleted_files"]) for p in doc["snapshots"]}[main_ids[0]] == (2, 0)

    root = ET.parse(tmp_path / "t.svg").getroot()
    drawn = [g.get("data-snapshot-id") for g in root.iter(f"{SVG}g") if g.get("class") == "snapshot"]
    assert drawn == [str(i) for i in main_ids + [head]]
    (mark,) = [g for g in root.iter(f"{SVG}g") if g.get("class") == "consumer"]
    assert mark.get("data-next-snapshot-id") == str(current)

    text = _cli(iceberg_env, "timeline", "--out", str(tmp_path / "t.html"), capsys=capsys)
    assert text.startswith(f"wrote {tmp_path / 't.html'}: 5 snapshot(s), 2 tag(s), 1 consumer(s)")
    assert "<svg" in (tmp_path / "t.html").read_text()


def test_the_orphan_window_the_help_states_is_the_one_each_format_applies(iceberg_env, tmp_path, capsys):
    """``clean-orphans --help`` names each format's default window; a dry run of each applies it."""
    _build(iceberg_env)
    with pytest.raises(SystemExit):
        main(["clean-orphans", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    found = re.search(r"default: (\d+) days? on this package's and Paimon tables, (\d+) days? on Iceberg tables", help_text)
    assert found, help_text
    native_days, iceberg_days = int(found.group(1)), int(found.group(2))
    now = 1_767_225_600_000  # 2026-01-01: before the real clock, so the window is measured from it
    native = Table.create(str(tmp_path / "native"), pa.schema([("id", pa.int64())]))
    day = 86_400_000
    assert native.remove_orphan_files(now=now).older_than_millis == now - native_days * day
    iceberg = Table.open("iceberg://db.orders", catalog=iceberg_env.properties)
    assert iceberg.remove_orphan_files(now=now).older_than_millis == now - iceberg_days * day
    assert (native_days, iceberg_days) == (1, 3)


def test_savepoints_are_a_typed_refusal(iceberg_env, capsys):
    """Iceberg tables have no savepoints (creating one is refused): listing them is refused alike, not a crash."""
    _build(iceberg_env)
    assert main(["savepoints", "iceberg://db.orders", "--catalog", iceberg_env.catalog_json]) == 2
    assert "UnsupportedOperationError" in capsys.readouterr().err
