"""Crashes, a concurrent pyiceberg writer, and bad input on real Iceberg tables.

- Crash injection: for every storage operation n of a clean expiry (and orphan removal), a
  fresh table crashes at operation n; right after the crash pyiceberg still reads every
  snapshot and ref the catalog has; the rerun finishes, and exactly the reachable files are left.
- A pyiceberg writer in another process appends while this process expires over and over:
  each append lands or fails cleanly, the newest snapshot reads every landed row, and no
  reachable file is gone.
- Bad input fails with a typed error and changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, SnapTableError, TableNotFoundError
from tests.conftest import FailAt, InjectedCrash
from tests.iceberg.conftest import IcebergEnv, assert_exactly_reachable_left, files_on_disk, reachable_files, read_everything, rows

FAR = 4_102_444_800_000


def _build(tmp_path, name: str) -> IcebergEnv:
    warehouse = tmp_path / name / "warehouse"
    warehouse.mkdir(parents=True)
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path / name}/catalog.db", "warehouse": f"file://{warehouse}"}, str(warehouse))
    table = env.create()
    for i in range(4):
        table.append(rows(i))
    table.overwrite(rows(50, "b"))
    table.append(rows(60, "c"))
    table.manage_snapshots().create_tag(table.refresh().metadata.snapshots[1].snapshot_id, "t").commit()
    return env


def _expire(table) -> None:
    table.expire_snapshots(retain_min=1, older_than=FAR)


def _orphans(table) -> None:
    table.remove_orphan_files(older_than="0 s", dry_run=False)


@pytest.mark.parametrize("operation", ["expire", "orphans"])
def test_crash_at_every_storage_operation_then_rerun(tmp_path, operation):
    run = {"expire": _expire, "orphans": _orphans}[operation]
    clean = _build(tmp_path, "clean")
    if operation == "orphans":
        Table.open("iceberg://db.orders", catalog=clean.properties).expire_snapshots(retain_min=1, older_than=FAR, delete_files=False)
    table = Table.open("iceberg://db.orders", catalog=clean.properties)
    counter = FailAt(10**9)
    table.storage.on_operation = counter
    run(table)
    operations = counter.seen
    expected_snapshots = len(read_everything(clean.table())["snapshots"])
    assert operations > 5
    assert_exactly_reachable_left(clean.table(), clean.location())

    for n in range(1, operations + 1):
        env = _build(tmp_path, f"crash-{n}")
        if operation == "orphans":
            Table.open("iceberg://db.orders", catalog=env.properties).expire_snapshots(retain_min=1, older_than=FAR, delete_files=False)
        before = read_everything(env.table())
        table = Table.open("iceberg://db.orders", catalog=env.properties)
        table.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            run(table)
        middle = read_everything(env.table())  # every snapshot the catalog still has reads, with its rows
        assert all(middle["snapshots"][k] == before["snapshots"][k] for k in middle["snapshots"])
        run(Table.open("iceberg://db.orders", catalog=env.properties))
        assert len(read_everything(env.table())["snapshots"]) == expected_snapshots, n
        assert_exactly_reachable_left(env.table(), env.location())
        assert not os.listdir(os.path.join(env.location(), "snaptable", "plan")) if os.path.isdir(os.path.join(env.location(), "snaptable", "plan")) else True


WRITER = """
import json, os, sys, time
import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import CommitFailedException
props, n, ticks = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def expiries():
    try:
        return int(open(ticks).read() or 0)
    except (OSError, ValueError):
        return 0
table = load_catalog("default", **props).load_table("db.orders")
landed, failed = [], 0
for i in range(n):
    try:
        table = table.refresh()
        table.append(pa.table({"p": ["w"], "id": [10_000 + i]}, schema=table.schema().as_arrow()))
        landed.append(10_000 + i)
    except CommitFailedException:
        failed += 1
    seen, deadline = expiries(), time.time() + 2
    while expiries() == seen and time.time() < deadline:  # let an expiry run between two commits
        time.sleep(0.005)
print(json.dumps({"landed": landed, "failed": failed}))
"""


def test_a_pyiceberg_writer_appending_while_we_expire(iceberg_env, tmp_path):
    table = iceberg_env.create()
    for i in range(3):
        table.append(rows(i))
    base_rows = sorted(read_everything(table)["snapshots"][table.refresh().metadata.current_snapshot_id])
    ticks = tmp_path / "expiries"  # the writer waits for an expiry between two of its commits
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, json.dumps(iceberg_env.properties), "20", str(ticks)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    runs, runs_that_expired = 0, 0
    while writer.poll() is None:
        result = Table.open("iceberg://db.orders", catalog=iceberg_env.properties).expire_snapshots(retain_min=1, older_than=FAR)
        runs_that_expired += bool(result.expired_snapshot_ids)
        runs += 1
        ticks.write_text(str(runs))
    out, err = writer.communicate()
    assert writer.returncode == 0, err[-3000:]
    report = json.loads(out)
    assert report["landed"], report
    assert runs_that_expired >= 5, "expiries must have interleaved with the writer's commits"
    Table.open("iceberg://db.orders", catalog=iceberg_env.properties).expire_snapshots(retain_min=1, older_than=FAR)
    latest = iceberg_env.table()
    rows_now = read_everything(latest)["snapshots"][latest.metadata.current_snapshot_id]
    assert sorted(rows_now) == sorted(base_rows + [("w", i) for i in report["landed"]])
    # Nothing reachable is gone. A commit that lost the race (the writer's or an expiry's, retried)
    # leaves the metadata file it wrote, as in Iceberg: orphan removal takes those.
    left = files_on_disk(iceberg_env.location())
    assert reachable_files(latest) <= left
    assert all(p.endswith(".metadata.json") for p in left - reachable_files(latest)), left - reachable_files(latest)
    Table.open("iceberg://db.orders", catalog=iceberg_env.properties).remove_orphan_files(older_than="0 s", dry_run=False)
    assert_exactly_reachable_left(latest, iceberg_env.location())


def _unchanged(env: IcebergEnv, call, error: type[SnapTableError]):
    before = {p: os.path.getmtime(os.path.join(env.location(), p)) for p in files_on_disk(env.location())}
    with pytest.raises(error) as raised:
        call()
    assert {p: os.path.getmtime(os.path.join(env.location(), p)) for p in files_on_disk(env.location())} == before
    return raised.value


def test_bad_input_is_a_typed_error_and_changes_nothing(iceberg_env):
    table = iceberg_env.create()
    table.append(rows(1))
    props = iceberg_env.properties
    opened = lambda uri="iceberg://db.orders", catalog=props: Table.open(uri, catalog=catalog)
    _unchanged(iceberg_env, lambda: opened(catalog={**props, "type": "no-such-catalog"}), InvalidArgumentError)
    _unchanged(iceberg_env, lambda: opened("iceberg://db.missing"), TableNotFoundError)
    _unchanged(iceberg_env, lambda: opened("iceberg://nowhere.orders"), TableNotFoundError)
    for bad in ("iceberg://orders", "iceberg://db..orders", "iceberg://db.or/ders", "iceberg://"):
        _unchanged(iceberg_env, lambda bad=bad: opened(bad), InvalidArgumentError)
    _unchanged(iceberg_env, lambda: opened(catalog=None), InvalidArgumentError)
    _unchanged(iceberg_env, lambda: opened(catalog={"type": "sql", "uri": {"nested": 1}}), InvalidArgumentError)
    ours = opened()
    table.transaction().set_properties({"history.expire.min-snapshots-to-keep": "many"}).commit_transaction()
    _unchanged(iceberg_env, lambda: ours.expire_snapshots(older_than=FAR), InvalidArgumentError)
    _unchanged(iceberg_env, lambda: ours.expire_snapshots(retain_min=3, retain_max=2), InvalidArgumentError)
    _unchanged(iceberg_env, lambda: ours.create_tag("bad/name"), SnapTableError)
    _unchanged(iceberg_env, lambda: ours.rollback_to(42), SnapTableError)
