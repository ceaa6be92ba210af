"""Maintaining every table of a pyiceberg SQL catalog, across namespaces (core/lake/), judged by pyiceberg."""

from __future__ import annotations

import json
import os
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.lake import DISABLED, SUCCESSFUL, Policy, lake_status, maintain
from tests.iceberg.conftest import assert_exactly_reachable_left
from tests.lake.conftest import ICEBERG_SNAPSHOTS, ICEBERG_TABLES, iceberg_reads

POLICY = {
    "defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}, "tag-expiry": {},
                 "consumer-expiry": {}, "clean": {"policy": "KEEP_LATEST_COMMITS"}},
    "namespaces": {"ops.archive": {"snapshot-expiry": {"min-snapshots-to-keep": 1}},
                   "sales": {"orphan-file-removal": {"older-than-days": 3}}},
    "tables": {"sales.returns": {"snapshot-expiry": {"enabled": False}}, "nowhere.t": {}},
}


def _jobs(report, name: str) -> dict:
    return next(t for t in report.to_dict()["tables"] if t["table"] == name)["jobs"]


def test_every_namespace_of_a_catalog_is_maintained_and_pyiceberg_reads_every_table_back(iceberg_lake):
    catalog = iceberg_lake.catalog()
    metrics = catalog.load_table(("ops", "metrics"))
    with metrics.transaction() as transaction:
        transaction.set_properties({"history.expire.min-snapshots-to-keep": "3"})
    before = iceberg_reads(iceberg_lake)
    report = maintain("iceberg://", Policy.from_mapping(POLICY), catalog=iceberg_lake.properties, parallel=2)
    assert not report.failed
    assert [t.table for t in report.tables] == sorted(ICEBERG_TABLES)
    assert report.unmatched == {"tables": ["nowhere.t"], "namespaces": []}
    after = iceberg_reads(iceberg_lake)
    kept = {"sales.orders": 2, "sales.returns": ICEBERG_SNAPSHOTS, "ops.metrics": 3, "ops.archive.events": 1}
    for name in ICEBERG_TABLES:
        assert len(after[name]["snapshots"]) == kept[name], name
        for snapshot_id, rows in after[name]["snapshots"].items():
            assert rows == before[name]["snapshots"][snapshot_id], (name, snapshot_id)
        table = catalog.load_table(tuple(name.split(".")))
        assert_exactly_reachable_left(table, table.location()[len("file://"):])
        jobs = _jobs(report, name)
        assert jobs["clean"] == {"status": DISABLED, "lastRunTimestamp": None, "failureMessage": None,
                                 "reason": "not supported on iceberg tables"}
        assert jobs["tag-expiry"]["status"] == jobs["consumer-expiry"]["status"] == SUCCESSFUL
    assert _jobs(report, "ops.metrics")["snapshot-expiry"]["notes"] == [
        "the table's history.expire.min-snapshots-to-keep=3 keeps more than the policy's min-snapshots-to-keep=2: "
        "the table's setting wins"
    ]
    assert _jobs(report, "ops.archive.events")["snapshot-expiry"]["snapshotsExpired"] == ICEBERG_SNAPSHOTS - 1
    assert _jobs(report, "sales.orders")["orphan-file-removal"]["status"] == SUCCESSFUL
    assert _jobs(report, "ops.metrics")["orphan-file-removal"]["status"] == DISABLED

    # The status lives where the catalog's tables share it, never under a table's location.
    shared = os.path.join(iceberg_lake.warehouse, "snaptable-maintenance")
    assert sorted(os.listdir(shared)) == sorted(ICEBERG_TABLES)
    doc = json.load(open(os.path.join(shared, "sales.orders", "status.json")))
    assert doc["jobs"]["snapshot-expiry"]["status"] == SUCCESSFUL and doc["format"] == "iceberg"
    # Old status and lease files are no table's orphans: Iceberg's orphan removal lists only the table's location.
    old = time.time() - 30 * 86400
    for directory, _dirs, names in os.walk(shared):
        for name in names:
            os.utime(os.path.join(directory, name), (old, old))
    for name in ICEBERG_TABLES:
        assert Table.open(f"iceberg://{name}", catalog=iceberg_lake.properties).remove_orphan_files(older_than="1 d").orphan_count == 0
    stored = lake_status("iceberg://sales", catalog=iceberg_lake.properties)
    assert [t.table for t in stored.tables] == ["sales.orders", "sales.returns"]
    assert stored.tables[0].jobs["snapshot-expiry"] == _jobs(report, "sales.orders")["snapshot-expiry"]


def test_one_namespace_and_a_status_location_named_by_a_catalog_property(iceberg_lake, tmp_path):
    status_location = tmp_path / "status"
    catalog = {**iceberg_lake.properties, "snaptable.maintenance-location": f"file://{status_location}"}
    report = maintain("iceberg://ops", Policy.from_mapping(POLICY), catalog=catalog)
    assert [t.table for t in report.tables] == ["ops.archive.events", "ops.metrics"]
    assert report.unmatched == {"tables": ["nowhere.t", "sales.returns"], "namespaces": ["sales"]}
    assert sorted(os.listdir(status_location)) == ["ops.archive.events", "ops.metrics"]
    assert not os.path.exists(os.path.join(iceberg_lake.warehouse, "snaptable-maintenance"))
    # pyiceberg still opens the catalog with the property among the others: this package's keys are not the catalog's.
    assert len(iceberg_reads(iceberg_lake)["ops.metrics"]["snapshots"]) == 2


def test_a_catalog_without_a_status_location_fails_before_any_table(iceberg_lake):
    catalog = {key: value for key, value in iceberg_lake.properties.items() if key != "warehouse"}
    catalog["warehouse"] = "analytics"  # a REST catalog's warehouse is a name, not a location
    before = iceberg_reads(iceberg_lake)
    with pytest.raises(InvalidArgumentError, match="snaptable.maintenance-location"):
        maintain("iceberg://", Policy.from_mapping(POLICY), catalog=catalog)
    assert iceberg_reads(iceberg_lake) == before
