"""Deletion progress: chunked deletes report to the current listener, to the log by default, as a bar on a terminal."""

from __future__ import annotations

import logging
import os
import pty
import subprocess
import sys
import time

from airflow_snaptable.core import Table
from airflow_snaptable.core.lifecycle import progress
from tests.conftest import SCHEMA, make_rows


def _orphans(table: Table, count: int) -> None:
    old = time.time() - 3 * 86400
    directory = os.path.join(table.uri, "data", "p=0")
    os.makedirs(directory, exist_ok=True)
    for i in range(count):
        path = os.path.join(directory, f"stray-{i}.parquet")
        with open(path, "wb") as handle:
            handle.write(b"x")
        os.utime(path, (old, old))


def test_a_clean_reports_each_chunk_to_the_listener_and_deletes_everything(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.append(make_rows(range(6)))
    _orphans(table, 45)
    events = []
    with progress.reporting(events.append, chunk_files=10):
        result = table.remove_orphan_files(older_than="1 d", dry_run=False)
    assert result.orphan_count == 45
    assert [(e.phase, e.done, e.total) for e in events] == [("deleting orphan files", d, 45) for d in (10, 20, 30, 40, 45)]
    assert "45/45 (100%)" in str(events[-1])
    assert table.verify().ok


def test_expiry_logs_its_progress_by_default(tmp_path, caplog):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    for i in range(4):
        table.overwrite(make_rows(range(i * 10, i * 10 + 10)))
    with caplog.at_level(logging.INFO, logger="airflow_snaptable.progress"):
        table.expire_snapshots(retain_min=1, time_retained="0 s")
    lines = [r.getMessage() for r in caplog.records if r.name == "airflow_snaptable.progress"]
    assert any(line.startswith("deleting data files: ") and "(100%)" in line for line in lines), lines
    assert any(line.startswith("deleting metadata files: ") for line in lines), lines


def test_log_progress_is_rate_limited():
    records = []

    class Logger:
        def info(self, fmt, event):
            records.append(str(event))

    listener = progress.LogProgress(every_files=100, every_seconds=60, logger=Logger())
    for done in range(10, 1001, 10):
        listener(progress.ProgressEvent("deleting data files", done, 1000, 1.0))
    assert len(records) == 10 and records[-1].startswith("deleting data files: 1,000/1,000")


def test_the_cli_draws_a_bar_on_a_terminal_only(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.append(make_rows(range(6)))
    _orphans(table, 3)
    command = [sys.executable, "-m", "airflow_snaptable.cli", "clean-orphans", table.uri, "--older-than", "1 d", "--no-dry-run", "--json"]
    leader, follower = pty.openpty()
    proc = subprocess.run(command, stderr=follower, stdout=subprocess.PIPE, timeout=120)
    os.close(follower)
    terminal = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        terminal += chunk
    os.close(leader)
    assert proc.returncode == 0
    assert b"[" + b"#" * 30 + b"] deleting orphan files: 3/3 (100%)" in terminal
    _orphans(table, 2)
    piped = subprocess.run(command, capture_output=True, timeout=120)
    assert piped.returncode == 0 and b"deleting orphan files" not in piped.stderr
