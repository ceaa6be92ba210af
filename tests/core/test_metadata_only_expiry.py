"""Metadata-only expiry (delete_files=False, Iceberg's cleanExpiredFiles(false)), then orphan cleaning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from airflow_snaptable.core import Table
from tests.conftest import SCHEMA, make_rows, sorted_ids


def _tree(uri: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs}


def _history(tmp_path) -> Table:
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.append(make_rows(range(0, 6)))  # 1
    table.overwrite(make_rows(range(6, 12)))  # 2: every data file of 1 is deleted
    table.append(make_rows(range(12, 15)))  # 3
    return table


def test_only_the_snapshots_go_and_orphan_cleaning_removes_their_files_later(tmp_path):
    table = _history(tmp_path)
    before = _tree(table.uri)
    dry = table.expire_snapshots(retain_min=1, time_retained="0 s", delete_files=False, dry_run=True)
    assert dry.expired_snapshot_ids == [1, 2] and dry.data_files == [] and dry.manifest_files == []
    result = table.expire_snapshots(retain_min=1, time_retained="0 s", delete_files=False)
    assert result.expired_snapshot_ids == [1, 2]
    assert (result.deleted_data_files, result.deleted_manifest_files, result.deleted_snapshot_files) == (0, 0, 2)
    gone = before - _tree(table.uri)
    assert gone == {"snapshot/snapshot-1", "snapshot/snapshot-2"}
    assert sorted_ids(table.scan().to_arrow()) == list(range(6, 15))
    leftover = Table.open(table.uri).verify().unreferenced_files
    assert any(p.startswith("data/") for p in leftover) and any(p.startswith("manifest/") for p in leftover)

    # The files of the expired snapshots are orphans now: the clean (past its safety window) removes them.
    now = int(time.time() * 1000)
    cleaned = table.remove_orphan_files(older_than=now, dry_run=False, now=now + 1000)
    assert sorted(cleaned.orphan_files) == sorted(leftover)
    after = Table.open(table.uri).verify()
    assert after.ok and after.unreferenced_files == []
    assert sorted_ids(Table.open(table.uri).scan().to_arrow()) == list(range(6, 15))


def test_tags_still_protect_and_the_cli_spells_it_no_delete_files(tmp_path):
    table = _history(tmp_path)
    table.create_tag("first", 1)
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_snaptable.cli", "expire", table.uri, "--retain-min", "1", "--time-retained", "0 s",
         "--no-delete-files", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["result"]
    assert result["expired_snapshot_ids"] == [1, 2] and result["deleted_data_files"] == 0
    now = int(time.time() * 1000)
    table.remove_orphan_files(older_than=now, dry_run=False, now=now + 1000)
    assert sorted_ids(table.scan(tag="first").to_arrow()) == list(range(6))  # the tag's files were never orphans
    assert Table.open(table.uri).verify().ok
