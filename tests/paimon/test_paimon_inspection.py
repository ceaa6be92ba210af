"""``snaptable show`` and ``snapshots`` on Paimon tables pypaimon wrote, each figure checked against
what pypaimon itself reads (tests/paimon/conftest.py: the session's tables, read before any change)."""

from __future__ import annotations

import json
import os

from airflow_snaptable.cli import main
from tests.paimon.conftest import run_client


def _data_files(read: dict) -> set[str]:
    """The data files pypaimon read for a snapshot: not the manifests, not the file indexes beside them."""
    return {f for f in read["files"] if not f.startswith("manifest/") and not f.endswith(".index")}


def _schema_document(table_dir: str) -> dict:
    names = [n for n in os.listdir(os.path.join(table_dir, "schema")) if n.startswith("schema-")]
    latest = max(names, key=lambda n: int(n.split("-", 1)[1]))
    with open(os.path.join(table_dir, "schema", latest)) as handle:
        return json.load(handle)


def test_show_text_and_json(paimon, tmp_path, capsys):
    warehouse = paimon.copy(tmp_path / "w")
    run_client(paimon.python, warehouse, [{"consumer": "db.app", "id": "flink", "next_snapshot": 5}])
    for name, tags, consumers in (("app", {"t2": 2, "t4": 4}, [{"id": "flink", "next_snapshot": 5}]), ("pk", {"t1": 1}, [])):
        table_dir = os.path.join(warehouse, "db.db", name)
        doc = _schema_document(table_dir)
        before = paimon.before[name]["snapshots"]
        latest = max(map(int, before))
        assert main(["show", table_dir, "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["format"] == "paimon"
        assert [(c["name"], c["type"]) for c in info["schema"]] == [(f["name"], f["type"]) for f in doc["fields"]]
        assert info["partition_keys"] == doc["partitionKeys"] and info["primary_keys"] == doc["primaryKeys"]
        assert info["options"] == doc["options"]  # every option, not only those the lifecycle reads
        assert (info["earliest_snapshot_id"], info["latest_snapshot_id"], info["snapshot_count"]) == (1, latest, latest)
        assert info["data_files"] == len(_data_files(before[str(latest)]))
        assert {t["name"]: t["snapshot_id"] for t in info["tags"]} == tags
        assert info["consumers"] == consumers
        if name == "app":  # an append table: every record is a row pypaimon reads
            assert info["total_record_count"] == len(before[str(latest)]["rows"])

        assert main(["show", table_dir]) == 0
        text = capsys.readouterr().out
        assert "format      paimon" in text and f"snapshots   1 .. {latest} ({latest})" in text
        assert f"data files  {info['data_files']}" in text
        assert ("primary key p, id" in text) == (name == "pk")
        assert "BIGINT" in text and all(t in text for t in tags)


def test_snapshots_count_the_files_each_commit_added_and_deleted(paimon, tmp_path, capsys):
    """On the append table, what a commit added and deleted is the difference of the data files pypaimon
    reads before and after it (counted as data files: a file index goes with its data file)."""
    warehouse = paimon.copy(tmp_path / "w")
    before = paimon.before["app"]["snapshots"]
    expected, previous = {}, set()
    for snapshot_id in sorted(map(int, before)):
        files = _data_files(before[str(snapshot_id)])
        expected[snapshot_id] = (len(files - previous), len(previous - files))
        previous = files
    assert any(deleted for _added, deleted in expected.values())  # the overwrites deleted files
    table_dir = os.path.join(warehouse, "db.db", "app")
    assert main(["snapshots", table_dir, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {s["id"]: (s["added_files"], s["deleted_files"]) for s in doc} == expected
    assert main(["snapshots", table_dir]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    added, deleted = header.index("+files"), header.index("-files")  # "committed (UTC)" is two words, as its value
    assert {int(line.split()[0]): (int(line.split()[added]), int(line.split()[deleted])) for line in lines[2:]} == expected
