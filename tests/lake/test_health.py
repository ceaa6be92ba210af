"""A lake's health table by table (core/lake/health.py): the lake page's data, judged against the tables."""

from __future__ import annotations

import os

from airflow_snaptable.core import Table
from airflow_snaptable.core.lake import Policy, maintain
from airflow_snaptable.core.lake.health import lake_health
from tests.lake.conftest import native_dir, write_native


def test_failed_tables_come_first_with_figures_from_the_tables(mixed_lake):
    lake = mixed_lake.path
    write_native(native_dir(lake, "a.broken"))
    with open(os.path.join(native_dir(lake, "a.broken"), "snapshot", "snapshot-2"), "w") as f:
        f.write("{")
    maintain(lake, Policy.from_mapping({"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 3, "max-snapshot-age-hours": 0}}}))
    found = lake_health(lake, now_millis=Table.open(native_dir(lake, "sales.orders")).latest_snapshot().time_millis + 3_600_000)
    assert found[0].table == "a.broken" and found[0].failed
    assert found[0].jobs["snapshot-expiry"]["status"] == "Failed"
    assert [h.failed for h in found[1:]] == [False] * (len(found) - 1)
    assert [h.table for h in found[1:]] == sorted(h.table for h in found[1:])
    by_name = {h.table: h for h in found}
    for name in ("sales.orders", "db.app", "db.lsm"):
        health, table = by_name[name], Table.open(by_name[name].uri)
        live = list(table.store.files.state(table.latest_snapshot()).values())
        assert health.snapshots == len(table.snapshots()) == 3
        assert (health.data_files, health.bytes) == (len(live), sum(f.file_size for f in live)), name
        if name != "db.app":  # pypaimon recorded db.app's sizes 69 bytes off the files': the metadata's figure is shown
            assert health.bytes == sum(os.path.getsize(os.path.join(health.uri, f.path)) for f in live), name
        assert health.jobs["snapshot-expiry"]["status"] == "Successful"
    oldest = Table.open(by_name["sales.orders"].uri).earliest_snapshot().time_millis
    latest = Table.open(by_name["sales.orders"].uri).latest_snapshot().time_millis
    assert by_name["sales.orders"].oldest_snapshot_age_seconds == (latest + 3_600_000 - oldest) / 1000
    assert "tag-expiry" not in by_name["sales.orders"].jobs  # Disabled jobs are not shown


def test_an_iceberg_catalog_s_health_comes_from_the_snapshot_summary(iceberg_lake):
    found = {h.table: h for h in lake_health("iceberg://", catalog=iceberg_lake.properties)}
    table = iceberg_lake.catalog().load_table(("sales", "orders"))
    files = table.inspect.files()
    assert found["sales.orders"].snapshots == len(table.metadata.snapshots) == 4
    assert found["sales.orders"].data_files == files.num_rows
    assert found["sales.orders"].bytes == sum(files["file_size_in_bytes"].to_pylist())
    assert found["sales.orders"].jobs["snapshot-expiry"]["status"] == "Not_Yet_Run"


def test_the_cli_prints_the_same_health_failed_first(mixed_lake, capsys):
    import json

    from airflow_snaptable.cli import main

    lake = mixed_lake.path
    write_native(native_dir(lake, "a.broken"))
    with open(os.path.join(native_dir(lake, "a.broken"), "snapshot", "snapshot-2"), "w") as f:
        f.write("{")
    maintain(lake, Policy.from_mapping({"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 3, "max-snapshot-age-hours": 0}}}))
    expected = lake_health(lake)
    assert main(["health", lake, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["tables"]
    assert [t["table"] for t in printed] == [h.table for h in expected] and printed[0]["table"] == "a.broken"
    assert [(t["snapshots"], t["dataFiles"], t["bytes"]) for t in printed] == [(h.snapshots, h.data_files, h.bytes) for h in expected]
    assert printed[0]["failed"] and printed[0]["jobs"]["snapshot-expiry"]["status"] == "Failed"
    assert main(["health", lake]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["table", "format", "snapshots"]
    assert lines[2].startswith("a.broken") and "FAILED snapshot-expiry" in lines[2]
    assert any(line.startswith("sales.orders") and "1 ok" in line for line in lines[3:])
