"""The snaptable CLI and the demo, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from airflow_snaptable import demo
from airflow_snaptable.cli import main
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


def test_demo_runs_end_to_end(tmp_path, capsys):
    assert demo.main(["--dir", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "retry of the last append (same commit identifier) -> snapshot 6, applied once" in out
    assert "restored at 10: snapshot 10 +10" in out
    assert " 9  COMPACT " in out
