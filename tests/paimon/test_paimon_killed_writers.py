"""Temp files left by writers killed with SIGKILL mid-write on a Paimon table are removed by the rerun
(issue 22 item 11): ``snaptable/plan/.pending-*.tmp`` and ``.plan-*.tmp`` (4 of 12 kills of an expiry left
them, and verify failed until an orphan clean's window passed), and their siblings in
``snaptable/intent/``, ``tag/`` and ``consumer/``. The process is really killed (tests/killed_writer.py);
pypaimon then reads every snapshot and tag left."""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.core import Table
from tests.killed_writer import run_killed, temp_files
from tests.paimon.conftest import FAR_FUTURE

EXPIRE = f"Table.open(uri).expire_snapshots(retain_min=2, retain_max=2, now={FAR_FUTURE})"
TAG = "Table.open(uri).create_tag('audit', 5)"
CONSUMER = "Table.open(uri).update_consumer('reader', 5)"


@pytest.mark.parametrize(
    "at, code, directory",
    [
        ("/snaptable/plan/pending-", EXPIRE, "snaptable/plan"),
        ("/snaptable/plan/plan-", EXPIRE, "snaptable/plan"),
        ("/snaptable/intent/intent-", TAG, "snaptable/intent"),
        ("/tag/tag-audit", TAG, "tag"),
        ("/consumer/consumer-reader", CONSUMER, "consumer"),
    ],
    ids=["pending-plan", "active-plan", "intent", "tag", "consumer"],
)
def test_the_rerun_of_a_killed_write_removes_its_temp_file(paimon, tmp_path, at, code, directory):
    warehouse = paimon.copy(tmp_path / "w")
    uri = os.path.join(warehouse, "db.db", "app")
    run_killed(uri, at, code)
    assert len(temp_files(uri, directory)) == 1  # what the kill left
    exec(code, {"Table": Table, "uri": uri})  # the rerun
    assert temp_files(uri, directory) == []
    result = Table.open(uri).verify()
    assert result.ok, result.to_dict()
    if directory == "snaptable/plan":  # the expiry deleted files: pypaimon reads every snapshot and tag left
        read = paimon.read(warehouse, "app")["app"]
        assert all("error" not in r for r in list(read["snapshots"].values()) + list(read["tags"].values()))
