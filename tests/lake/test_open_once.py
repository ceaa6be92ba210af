"""A run opens each table once (core/lake/run.py): the table its trigger count opened (core/lake/due.py) is
the one its jobs run on, and a table that cannot be opened is tried once and fails each enabled job."""

from __future__ import annotations

import os

from airflow_snaptable.core import Table
from airflow_snaptable.core.lake import FAILED, SUCCESSFUL, Policy, maintain
from tests.lake.conftest import native_dir, write_native

TRIGGERED_EXPIRY = {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0, "trigger": {"snapshots": 1}}}


def _count_opens(monkeypatch) -> list[str]:
    """The uri of each :meth:`Table.open` from now on."""
    opens: list[str] = []
    original = Table.open.__func__

    def counted(cls, uri, *args, **kwargs):
        opens.append(uri)
        return original(cls, uri, *args, **kwargs)

    monkeypatch.setattr(Table, "open", classmethod(counted))
    return opens


def _job(report, table: str, job: str = "snapshot-expiry") -> dict:
    return next(t for t in report.to_dict()["tables"] if t["table"] == table)["jobs"][job]


def test_a_due_triggered_table_of_ours_is_opened_once_by_the_run(tmp_path, monkeypatch):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "a.t"), 4)
    opens = _count_opens(monkeypatch)
    report = maintain(lake, Policy.from_mapping({"defaults": TRIGGERED_EXPIRY}))
    job = _job(report, "a.t")
    assert job["status"] == SUCCESSFUL and job["snapshotsExpired"] == 2  # counted, then ran on the same table
    assert opens == [native_dir(lake, "a.t")]
    assert [s.id for s in Table.open(native_dir(lake, "a.t")).snapshots()] == [3, 4]


def test_a_due_triggered_iceberg_table_is_opened_once_by_the_run(iceberg_lake, monkeypatch):
    policy = Policy.from_mapping({"tables": {"sales.orders": TRIGGERED_EXPIRY}})
    opens = _count_opens(monkeypatch)
    report = maintain("iceberg://sales", policy, catalog=iceberg_lake.properties, parallel=1)
    assert _job(report, "sales.orders")["snapshotsExpired"] == 2
    assert sorted(opens) == ["iceberg://sales.orders", "iceberg://sales.returns"]  # sales.returns: untriggered jobs
    assert len(iceberg_lake.catalog().load_table(("sales", "orders")).metadata.snapshots) == 2


def test_a_table_that_cannot_be_opened_is_tried_once_and_fails_each_enabled_job(tmp_path, monkeypatch):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "a.t"), 3)
    attempts: list[str] = []

    def unreadable(cls, uri, *args, **kwargs):
        attempts.append(uri)
        raise OSError("the store is down")

    monkeypatch.setattr(Table, "open", classmethod(unreadable))
    policy = Policy.from_mapping({"defaults": {**TRIGGERED_EXPIRY, "tag-expiry": {"trigger": {"snapshots": 2}}}})
    report = maintain(lake, policy)
    assert attempts == [native_dir(lake, "a.t")]
    for job in ("snapshot-expiry", "tag-expiry"):
        record = _job(report, "a.t", job)
        assert record["status"] == FAILED and record["failureMessage"] == "OSError: the store is down"
    assert os.path.isfile(os.path.join(native_dir(lake, "a.t"), "snapshot", "snapshot-1"))  # nothing expired
