"""A deletion plan's temp file left by an expiry killed with SIGKILL mid-write is removed by the rerun
(issue 22 item 11). Orphan cleaning leaves the engine's directory alone, so before nothing ever removed it."""

from __future__ import annotations

from airflow_snaptable.core import Table
from tests.iceberg.conftest import assert_exactly_reachable_left, read_everything, rows
from tests.killed_writer import run_killed, temp_files

FAR = 4_102_444_800_000
EXPIRE = f"Table.open('iceberg://db.orders', catalog=catalog).expire_snapshots(retain_min=1, older_than={FAR})"


def test_the_rerun_of_a_killed_plan_write_removes_its_temp_file(iceberg_env):
    table = iceberg_env.create()
    for i in range(4):
        table.append(rows(i))
    location = iceberg_env.location()
    run_killed(location, "/snaptable/plan/expire-", EXPIRE, catalog=iceberg_env.properties)
    assert len(temp_files(location, "snaptable/plan")) == 1
    exec(EXPIRE, {"Table": Table, "catalog": iceberg_env.properties})
    assert temp_files(location, "snaptable/plan") == []
    table = table.refresh()
    assert len(read_everything(table)["snapshots"]) == 1
    assert_exactly_reachable_left(table, location)
