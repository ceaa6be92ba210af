"""Recoverable deletes from a lake policy (issue 26): ``noncurrent-days`` on a deleting job keeps what it
removes noncurrent, the status names the run to undo, and the ``purge`` job deletes it once due."""

from __future__ import annotations

from airflow_snaptable.core import Table
from airflow_snaptable.core.lake import SUCCESSFUL, Policy, maintain
from tests.conftest import sorted_ids
from tests.lake.conftest import native_dir, write_native
from tests.noncurrent_support import data_and_manifest_files as _files


def _job(report, table: str, job: str) -> dict:
    return next(t for t in report.to_dict()["tables"] if t["table"] == table)["jobs"][job]


def test_a_policy_expiry_with_noncurrent_days_is_undone_from_its_status_then_purged(tmp_path):
    lake = str(tmp_path / "lake")
    uri = native_dir(lake, "sales.orders")
    write_native(uri)
    rows = {s.id: sorted_ids(Table.open(uri).scan(snapshot_id=s.id).to_arrow()) for s in Table.open(uri).snapshots()}
    before = _files(uri)
    expire = {"min-snapshots-to-keep": 1, "max-snapshot-age-hours": 0}
    report = maintain(lake, Policy.from_mapping({"defaults": {"snapshot-expiry": {**expire, "noncurrent-days": 10}}}))
    status = _job(report, "sales.orders", "snapshot-expiry")
    assert status["status"] == SUCCESSFUL and status["bytesNoncurrent"] > 0 and status["filesDeleted"]["data"] == 0
    assert _files(uri) == before and [s.id for s in Table.open(uri).snapshots()] == [5]
    Table.open(uri).undo(status["noncurrentRunId"])
    table = Table.open(uri)
    assert {s.id: sorted_ids(table.scan(snapshot_id=s.id).to_arrow()) for s in table.snapshots()} == rows

    # Expire again with 0 days, then the purge job deletes what the plain expiry deletes.
    maintain(lake, Policy.from_mapping({"defaults": {"snapshot-expiry": {**expire, "noncurrent-days": 0}}}))
    assert _files(uri) == before
    report = maintain(lake, Policy.from_mapping({"defaults": {"purge": {}}}))
    purge = _job(report, "sales.orders", "purge")
    assert purge["status"] == SUCCESSFUL and purge["filesDeleted"]["noncurrent"] > 0 and len(purge["runsPurged"]) == 1
    assert _files(uri) < before and Table.open(uri).verify().ok
    assert Table.open(uri).trash() == []
