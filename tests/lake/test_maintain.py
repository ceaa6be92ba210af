"""Maintaining a mixed lake (our tables and a Paimon warehouse side by side) by policy (core/lake/run.py).

Every table is judged by its own reader after the run: pypaimon reads every retained Paimon
snapshot and tag with the rows it had before and the files left are exactly theirs; our tables
verify clean and read their latest rows.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, TableNotFoundError
from airflow_snaptable.core.lake import DISABLED, FAILED, NOT_YET_RUN, SUCCESSFUL, Policy, lake_status, maintain
from airflow_snaptable.core.lake.policy import JOBS
from airflow_snaptable.core.lake.status import MAX_RUNS
from tests.conftest import make_rows, sorted_ids
from tests.lake.conftest import NATIVE_SNAPSHOTS, NATIVE_TABLES, PAIMON_TABLES, native_dir, storage_image, write_native
from tests.paimon.test_paimon_lifecycle import check as check_paimon

EXPIRE_TO_TWO = {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}}


def _jobs(report, table: str) -> dict:
    return next(t for t in report.to_dict()["tables"] if t["table"] == table)["jobs"]


def _break_snapshot(lake: str, name: str) -> None:
    path = os.path.join(native_dir(lake, name), "snapshot", "snapshot-2")
    with open(path, "w") as f:
        f.write("{not json")


def test_a_mixed_lake_is_maintained_and_a_broken_table_fails_alone(mixed_lake):
    lake = mixed_lake.path
    write_native(native_dir(lake, "sales.broken"))
    _break_snapshot(lake, "sales.broken")
    os.makedirs(native_dir(lake, "ops.unopenable.schema"))
    with open(os.path.join(native_dir(lake, "ops.unopenable"), "schema", "schema-0"), "w") as f:
        f.write("garbage")
    policy = Policy.from_mapping({
        "defaults": {**EXPIRE_TO_TWO, "consumer-expiry": {}, "tag-expiry": {}},
        "tables": {"sales.returns": {"snapshot-expiry": {"enabled": False}},
                   "db.pk": {"snapshot-expiry": {"enabled": False}, "clean": {"policy": "KEEP_LATEST_COMMITS", "commits-retained": 2}}},
    })
    report = maintain(lake, policy, parallel=3)
    assert report.failed
    assert [t.table for t in report.tables] == sorted([*NATIVE_TABLES, *PAIMON_TABLES, "sales.broken", "ops.unopenable"])

    broken = _jobs(report, "sales.broken")
    assert broken["snapshot-expiry"]["status"] == FAILED
    assert "CorruptMetadataError" in broken["snapshot-expiry"]["failureMessage"]
    assert "snapshot-2" in broken["snapshot-expiry"]["failureMessage"]
    assert broken["consumer-expiry"]["status"] == SUCCESSFUL  # the table's other jobs still ran
    unopenable = _jobs(report, "ops.unopenable")
    assert {unopenable[j]["status"] for j in ("snapshot-expiry", "consumer-expiry", "tag-expiry")} == {FAILED}
    assert unopenable["orphan-file-removal"]["status"] == DISABLED

    for name in NATIVE_TABLES:
        jobs = _jobs(report, name)
        table = mixed_lake.native(name)
        expected = NATIVE_SNAPSHOTS if name == "sales.returns" else 2
        assert len(table.snapshots()) == expected, name
        assert table.verify().ok, name
        assert sorted_ids(table.scan().to_arrow()) == list(range((NATIVE_SNAPSHOTS - 1) * 10, (NATIVE_SNAPSHOTS - 1) * 10 + 6))
        if name == "sales.returns":
            assert jobs["snapshot-expiry"] == {
                "status": DISABLED, "lastRunTimestamp": None, "failureMessage": None,
                "reason": "disabled by the policy (tables.sales.returns)",
            }
        else:
            done = jobs["snapshot-expiry"]
            assert done["status"] == SUCCESSFUL and done["failureMessage"] is None
            assert done["snapshotsExpired"] == NATIVE_SNAPSHOTS - 2
            assert done["filesDeleted"]["data"] > 0 and done["filesDeleted"]["snapshot"] == NATIVE_SNAPSHOTS - 2
            assert done["bytesDeleted"] > 0 and done["durationMs"] >= 0 and done["runId"] == report.run_id
            assert done["arguments"] == {"retain_min": 2, "time_retained": "0 s"}
            assert done["lastRunTimestamp"].endswith("Z")
        assert jobs["clean"]["status"] == DISABLED and jobs["orphan-file-removal"]["status"] == DISABLED
    # Paimon: app and lsm expired to two snapshots, pk cleaned to its two latest commits and the one
    # before them (Hudi keeps the version before the earliest commit to retain).

    # pypaimon reads every snapshot and tag left as before (tags hold theirs), and the files left are exactly theirs.
    for name in PAIMON_TABLES:
        expired_by = "clean" if name == "db.pk" else "snapshot-expiry"
        done = _jobs(report, name)[expired_by]
        assert done["status"] == SUCCESSFUL and done["snapshotsExpired"] == {"db.app": 4, "db.pk": 2, "db.lsm": 3}[name], name
        assert _jobs(report, name)["data-compaction"] == {
            "status": DISABLED, "lastRunTimestamp": None, "failureMessage": None, "reason": "not supported on paimon tables",
        }
    check_paimon(mixed_lake.paimon, lake, "app", [5, 6], ["t2", "t4"])
    check_paimon(mixed_lake.paimon, lake, "pk", [3, 4, 5], ["t1"])
    check_paimon(mixed_lake.paimon, lake, "lsm", [4, 5], ["compacted"])


def test_the_status_is_stored_with_each_table_and_read_back(mixed_lake):
    lake = mixed_lake.path
    never = lake_status(lake)
    for table in never.tables:
        for job, record in table.jobs.items():
            if table.format not in JOBS[job].formats:  # data-compaction, data-expiry on Paimon tables
                assert record["status"] == DISABLED
            else:
                assert record == {"status": NOT_YET_RUN, "lastRunTimestamp": None, "failureMessage": None}
    policy = Policy.from_mapping({"defaults": EXPIRE_TO_TWO, "namespaces": {"ops": {"snapshot-expiry": {"enabled": False}}}})
    report = maintain(lake, policy)
    stored = lake_status(lake)
    assert stored.to_dict()["tables"] == [
        {key: value for key, value in table.items() if key in ("table", "format", "location", "jobs")}
        for table in report.to_dict()["tables"]
    ]
    assert _jobs(stored, "ops.audit")["snapshot-expiry"]["status"] == DISABLED
    # Ours beside the table's lifecycle files, Paimon's in the directory Paimon never reads.
    assert os.path.exists(os.path.join(native_dir(lake, "sales.orders"), "maintenance", "status.json"))
    doc = json.load(open(os.path.join(lake, "db.db", "app", "snaptable", "maintenance", "status.json")))
    assert doc["table"] == "db.app" and doc["format"] == "paimon"
    assert doc["runs"][-1]["runId"] == report.run_id and doc["runs"][-1]["jobs"]["snapshot-expiry"] == SUCCESSFUL


def test_the_history_is_bounded(tmp_path):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "a.t"), snapshots=2)
    policy = Policy.from_mapping({"defaults": {"consumer-expiry": {}}})
    ids = [maintain(lake, policy).run_id for _ in range(MAX_RUNS + 2)]
    doc = json.load(open(os.path.join(native_dir(lake, "a.t"), "maintenance", "status.json")))
    assert [run["runId"] for run in doc["runs"]] == ids[-MAX_RUNS:]
    assert all(run["finishedAt"] is not None for run in doc["runs"])


def test_a_table_setting_that_keeps_more_wins_over_the_policy_and_the_status_says_so(tmp_path):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "t.min4"), options={"snapshot.num-retained.min": "4"})
    write_native(native_dir(lake, "t.min1"), options={"snapshot.num-retained.min": "1"})
    write_native(native_dir(lake, "age.hour"), options={"snapshot.time-retained": "1 h"})
    write_native(native_dir(lake, "t.max"), options={"snapshot.num-retained.max": "4", "snapshot.num-retained.min": "1",
                                                     "snapshot.time-retained": "0 s"})
    write_native(native_dir(lake, "silent.min3"), options={"snapshot.num-retained.min": "3", "snapshot.time-retained": "0 s"})
    write_native(native_dir(lake, "cap.default"))
    write_native(native_dir(lake, "cap.min4"), options={"snapshot.num-retained.min": "4", "snapshot.time-retained": "0 s"})
    policy = Policy.from_mapping({
        "defaults": EXPIRE_TO_TWO,
        "namespaces": {
            "t": {"snapshot-expiry": {"max-snapshots": 3}},
            "silent": {"snapshot-expiry": {"min-snapshots-to-keep": None, "max-snapshot-age-hours": None}},
            "cap": {"snapshot-expiry": {"min-snapshots-to-keep": None, "max-snapshots": 2}},
        },
    })
    report = maintain(lake, policy)
    kept = {name: len(Table.open(native_dir(lake, name)).snapshots()) for name in
            ("t.min4", "t.min1", "age.hour", "t.max", "silent.min3", "cap.default", "cap.min4")}
    # min 4 > the policy's 2: four kept. min 1 < 2: the policy's 2. 1 h > 0 h: nothing old enough.
    # max 4 > the policy's 3: at most 4 (the policy's minimum 2 and age 0 expire down to 2 anyway).
    # Policy silent: the table's own min 3 applies. The policy's max 2 over a default minimum of 10: 2 kept;
    # over an explicit minimum 4: the minimum wins.
    assert kept == {"t.min4": 4, "t.min1": 2, "age.hour": NATIVE_SNAPSHOTS, "t.max": 2, "silent.min3": 3, "cap.default": 2, "cap.min4": 4}
    notes = {name: _jobs(report, name)["snapshot-expiry"].get("notes", []) for name in kept}
    assert notes["t.min4"] == [
        "the table's snapshot.num-retained.min=4 keeps more than the policy's min-snapshots-to-keep=2: the table's setting wins",
        "max-snapshots=3 is below the 4 snapshots always kept: 4 is the maximum",
    ]
    assert notes["age.hour"] == [
        "the table's snapshot.time-retained=1 h keeps more than the policy's max-snapshot-age-hours=0 h: the table's setting wins"
    ]
    assert notes["t.max"] == [
        "the table's snapshot.num-retained.max=4 keeps more than the policy's max-snapshots=3: the table's setting wins"
    ]
    assert notes["t.min1"] == notes["silent.min3"] == notes["cap.default"] == []
    assert notes["cap.min4"] == ["max-snapshots=2 is below the 4 snapshots always kept: 4 is the maximum"]
    assert _jobs(report, "silent.min3")["snapshot-expiry"]["arguments"] == {}
    assert all(_jobs(report, name)["snapshot-expiry"]["status"] == SUCCESSFUL for name in kept)


def test_a_dry_run_changes_no_byte_and_reports_what_would_be_done(mixed_lake):
    lake = mixed_lake.path
    orphan = os.path.join(native_dir(lake, "sales.orders"), "data", "p=0", "orphan.parquet")
    with open(orphan, "wb") as f:
        f.write(b"left by a crashed writer")
    old = time.time() - 10 * 86400
    os.utime(orphan, (old, old))
    policy = Policy.from_mapping({"defaults": {
        **EXPIRE_TO_TWO, "orphan-file-removal": {"older-than-days": 1}, "tag-expiry": {}, "periodic-tags": {"period": "daily"},
        "consumer-expiry": {},
    }, "namespaces": {"sales": {"clean": {"policy": "KEEP_LATEST_COMMITS", "commits-retained": 1}}}})
    before = storage_image(lake)
    report = maintain(lake, policy, dry_run=True)
    assert storage_image(lake) == before
    assert report.dry_run and not report.failed
    orders = _jobs(report, "sales.orders")
    assert orders["snapshot-expiry"]["dryRun"] and orders["snapshot-expiry"]["snapshotsExpired"] == NATIVE_SNAPSHOTS - 2
    assert orders["orphan-file-removal"]["filesDeleted"] == {"orphan": 1}
    assert orders["clean"]["status"] == SUCCESSFUL and orders["clean"]["dryRun"]
    for job in ("tag-expiry", "periodic-tags", "consumer-expiry"):
        assert orders[job]["status"] == NOT_YET_RUN and orders[job]["dryRun"], job
        assert orders[job]["reason"] == f"{job} has no dry run: a real run would run it"
    assert lake_status(lake).tables[0].jobs["snapshot-expiry"]["status"] == NOT_YET_RUN


def test_status_and_lease_files_are_neither_orphans_nor_problems(mixed_lake):
    """Orphan cleaning lists what the format keeps its files in; verify reads what it knows: the status
    and lease files beside a table are neither, on our tables and on Paimon's."""
    lake = mixed_lake.path
    maintain(lake, Policy.from_mapping({"defaults": {"consumer-expiry": {}}}))
    old = time.time() - 30 * 86400
    ours = []
    for directory, _dirs, names in os.walk(lake):
        if os.sep + "maintenance" in directory:
            for name in names:
                ours.append(os.path.join(directory, name))
                os.utime(ours[-1], (old, old))
    assert any(path.endswith("status.json") for path in ours) and any("lease-" in path for path in ours)
    assert len([p for p in ours if p.endswith("status.json")]) == len(NATIVE_TABLES) + len(PAIMON_TABLES)
    for name in NATIVE_TABLES:
        table = mixed_lake.native(name)
        assert table.remove_orphan_files(older_than="1 d", dry_run=True).orphan_count == 0
        assert table.verify().ok, table.verify().to_dict()
    for name in ("app", "pk", "lsm"):
        table = Table.open(os.path.join(lake, "db.db", name))
        assert table.remove_orphan_files(older_than="1 d", dry_run=True).orphan_count == 0
        assert table.verify().ok
    report = maintain(lake, Policy.from_mapping({"defaults": {"orphan-file-removal": {"older-than-days": 1}}}))
    assert not report.failed
    assert all(os.path.exists(path) or "lease-" in path for path in ours)


def test_a_rerun_with_the_same_run_id_skips_the_jobs_that_run_completed(tmp_path):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "a.t"))
    policy = Policy.from_mapping({"defaults": EXPIRE_TO_TWO})
    first = maintain(lake, policy, run_id="nightly-1")
    Table.open(native_dir(lake, "a.t")).append(make_rows(range(100, 103)))
    again = maintain(lake, policy, run_id="nightly-1")
    assert _jobs(again, "a.t")["snapshot-expiry"] == {**_jobs(first, "a.t")["snapshot-expiry"], "resumed": True}
    assert len(Table.open(native_dir(lake, "a.t")).snapshots()) == 3  # not expired again
    other = maintain(lake, policy, run_id="nightly-2")
    assert _jobs(other, "a.t")["snapshot-expiry"]["snapshotsExpired"] == 1
    doc = json.load(open(os.path.join(native_dir(lake, "a.t"), "maintenance", "status.json")))
    assert [run["runId"] for run in doc["runs"]] == ["nightly-1", "nightly-2"]


def test_bad_arguments_fail_before_any_table_is_touched(mixed_lake, tmp_path):
    lake = mixed_lake.path
    before = storage_image(lake)
    policy = Policy.from_mapping({"defaults": EXPIRE_TO_TWO})
    for kwargs in ({"parallel": 0}, {"parallel": True}, {"dry_run": "false"}, {"run_id": ""}):
        with pytest.raises(InvalidArgumentError):
            maintain(lake, policy, **kwargs)
    with pytest.raises(InvalidArgumentError, match="loaded Policy"):
        maintain(lake, {"defaults": EXPIRE_TO_TWO})
    with pytest.raises(TableNotFoundError, match="does not exist"):
        maintain(str(tmp_path / "nope"), policy)
    with pytest.raises(TableNotFoundError, match="does not exist"):
        lake_status(str(tmp_path / "nope"))
    assert storage_image(lake) == before


def test_every_job_runs_through_its_action_and_reports_what_it_did(tmp_path):
    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "a.t"), snapshots=2, options={"consumer.expiration-time": "1 ms"})
    for i in range(3):
        table.append(make_rows(range(100 + i * 3, 103 + i * 3), partitions=1))  # small files in partition 0
    table.create_tag("short", time_retained="1 ms")
    table.create_tag("kept")
    table.update_consumer("idle", 1 + len(table.snapshots()))
    orphan = os.path.join(native_dir(lake, "a.t"), "data", "p=1", "orphan.parquet")
    with open(orphan, "wb") as f:
        f.write(b"x" * 100)
    old = time.time() - 10 * 86400
    os.utime(orphan, (old, old))
    time.sleep(0.01)  # the tag's and the consumer's time to live (1 ms) have passed
    rows_before = sorted_ids(table.scan().to_arrow())
    policy = Policy.from_mapping({"defaults": {
        "consumer-expiry": {}, "tag-expiry": {}, "data-compaction": {"min-file-num": 2},
        "clean": {"policy": "KEEP_LATEST_COMMITS", "commits-retained": 1}, "orphan-file-removal": {"older-than-days": 1},
    }})
    report = maintain(lake, policy)
    jobs = report.tables[0].jobs
    assert not report.failed, jobs
    assert jobs["consumer-expiry"]["consumersExpired"] == ["idle"]
    assert jobs["tag-expiry"]["tagsDeleted"] == ["short"]
    assert jobs["data-compaction"]["snapshotCommitted"] == 6 and jobs["data-compaction"]["arguments"] == {"min_file_num": 2}
    assert jobs["clean"]["snapshotsExpired"] == 4 and jobs["clean"]["earliestCommitRetained"] == 5  # and the commit before 6 (Hudi)
    assert jobs["orphan-file-removal"]["filesDeleted"] == {"orphan": 1} and jobs["orphan-file-removal"]["bytesDeleted"] == 100
    assert jobs["periodic-tags"]["status"] == DISABLED and jobs["snapshot-expiry"]["status"] == DISABLED
    table = Table.open(native_dir(lake, "a.t"))
    assert [t.name for t in table.tags()] == ["kept"] and table.consumers() == []
    assert sorted_ids(table.scan().to_arrow()) == rows_before and table.verify().ok
    assert not os.path.exists(orphan)


def test_periodic_tags_keep_what_the_table_asks_for_when_the_policy_would_keep_fewer(tmp_path):
    lake = str(tmp_path / "lake")
    now = int(time.time() * 1000)
    for name, options in (("a.explicit", {"tag.num-retained-max": "3"}), ("a.silent", {})):
        table = write_native(native_dir(lake, name), snapshots=1, options=options)
        table.create_periodic_tags(period="hourly", catch_up=True, now=now + 5 * 3_600_000, num_retained_max=10)  # five hourly tags
        assert len(table.tags()) == 5
    report = maintain(lake, Policy.from_mapping({"defaults": {"periodic-tags": {"period": "hourly", "num-retained-max": 1}}}))
    assert {name: len(Table.open(native_dir(lake, name)).tags()) for name in ("a.explicit", "a.silent")} == {"a.explicit": 3, "a.silent": 1}
    explicit = next(t for t in report.tables if t.table == "a.explicit").jobs["periodic-tags"]
    assert len(explicit["tagsDeleted"]) == 2 and explicit["arguments"] == {"period": "hourly", "num_retained_max": 3}
    assert explicit["notes"] == [
        "the table's tag.num-retained-max=3 keeps more than the policy's num-retained-max=1: the table's setting wins"
    ]


def test_one_table_at_a_time_is_the_same_run_as_the_whole_lake(mixed_lake):
    """``list_tables`` and ``maintain_table``: what a DAG maps one task per table onto."""
    from airflow_snaptable.core.lake import LakeTable, list_tables, maintain_table

    tables = list_tables(mixed_lake.path)
    assert [t.name for t in tables] == sorted([*NATIVE_TABLES, *PAIMON_TABLES])
    orders = LakeTable.from_dict(json.loads(json.dumps(tables[[t.name for t in tables].index("sales.orders")].to_dict())))
    report = maintain_table(orders, Policy.from_mapping({"defaults": EXPIRE_TO_TWO}), run_id="dag-run-1")
    assert report.jobs["snapshot-expiry"]["snapshotsExpired"] == NATIVE_SNAPSHOTS - 2 and report.jobs["snapshot-expiry"]["runId"] == "dag-run-1"
    assert _jobs(lake_status(mixed_lake.path), "sales.orders")["snapshot-expiry"] == report.jobs["snapshot-expiry"]
    for bad in ({"name": "a"}, {"name": "a", "format": "delta", "uri": "/x"}, {"name": "", "format": "paimon", "uri": "/x"}, "a.b"):
        with pytest.raises(InvalidArgumentError):
            LakeTable.from_dict(bad)
    with pytest.raises(InvalidArgumentError, match="LakeTable"):
        maintain_table(orders.to_dict(), Policy.from_mapping({}))
