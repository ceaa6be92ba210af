"""Triggered maintenance (core/lake/triggers.py): a job runs after N new snapshots or M new data files.

Judged on our tables, a Paimon table written by pypaimon and an Iceberg table written by pyiceberg:
each run's status says whether the job ran, and when it did not, why and when it is due; the
tables read back as before. Due-ness is checked to read only the snapshots since the last run.
"""

from __future__ import annotations

import json
import os

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidPolicyError
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lake import SUCCESSFUL, Policy, lake_status, list_tables, maintain
from airflow_snaptable.core.lake.due import due_tables
from tests.conftest import make_rows
from tests.lake.conftest import native_dir, write_native
from tests.paimon.conftest import run_client

EXPIRY = {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}


def _job(report, table: str, job: str = "snapshot-expiry") -> dict:
    return next(t for t in report.to_dict()["tables"] if t["table"] == table)["jobs"][job]


def _append(table: Table, n: int, start: int = 1000) -> None:
    for i in range(n):
        table.append(make_rows(range(start + i * 10, start + i * 10 + 3), partitions=1))


@pytest.mark.parametrize(
    ("trigger", "named"),
    [
        ({}, "defaults.snapshot-expiry.trigger must be an object"),
        ([3], "defaults.snapshot-expiry.trigger must be an object"),
        ({"snapshot": 3}, "unknown key 'snapshot'"),
        ({"snapshots": 0}, "defaults.snapshot-expiry.trigger.snapshots must be an integer >= 1"),
        ({"small-files": True}, "trigger.small-files must be an integer >= 1"),
        ({"small-files": "10"}, "trigger.small-files must be an integer >= 1"),
    ],
)
def test_a_bad_trigger_is_refused_when_the_policy_is_loaded(trigger, named):
    with pytest.raises(InvalidPolicyError, match=named.replace(".", r"\.").replace("(", r"\(")):
        Policy.from_mapping({"defaults": {"snapshot-expiry": {**EXPIRY, "trigger": trigger}}})


def test_the_most_specific_trigger_replaces_the_others_whole_and_null_unsets_it():
    policy = Policy.from_mapping({
        "defaults": {"snapshot-expiry": {**EXPIRY, "trigger": {"snapshots": 5, "small-files": 40}}},
        "namespaces": {"ops": {"snapshot-expiry": {"trigger": {"small-files": 8}}}},
        "tables": {"ops.raw": {"snapshot-expiry": {"trigger": None}}},
    })
    assert policy.resolve("sales.orders")["snapshot-expiry"].trigger == {"snapshots": 5, "small-files": 40}
    assert policy.resolve("ops.audit")["snapshot-expiry"].trigger == {"small-files": 8}
    assert policy.resolve("ops.raw")["snapshot-expiry"].trigger is None
    # The trigger is no action argument: the job's settings are the action's keys only.
    assert policy.resolve("ops.audit")["snapshot-expiry"].settings == EXPIRY


def test_our_table_is_maintained_after_n_new_snapshots_and_skipped_as_not_due_before(tmp_path):
    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "sales.orders"), snapshots=4)
    policy = Policy.from_mapping({"defaults": {"snapshot-expiry": {**EXPIRY, "trigger": {"snapshots": 3}}}})

    first = _job(maintain(lake, policy), "sales.orders")  # never ran with a trigger: due
    assert first["status"] == SUCCESSFUL and first["snapshotsExpired"] == 2
    assert first["lastSnapshot"]["id"] == 4 and first["nextDue"] == "after 3 new snapshot(s)"
    assert first["dueBecause"] == "no run with a trigger recorded yet"

    _append(table, 2)
    second = _job(maintain(lake, policy), "sales.orders")
    assert second["skipped"] == "Not due: 2 of 3 new snapshot(s) since the last run"
    assert second["nextDue"] == "after 1 more snapshot(s)"
    assert (second["status"], second["lastRunTimestamp"], second["runId"]) == (SUCCESSFUL, first["lastRunTimestamp"], first["runId"])
    assert [s.id for s in Table.open(table.uri).snapshots()] == [3, 4, 5, 6]  # nothing expired
    # The stored status says so too, for `snaptable status` and the UI.
    stored = _job(lake_status(lake), "sales.orders")
    assert stored["skipped"] == second["skipped"] and stored["nextDue"] == second["nextDue"]

    _append(table, 1)
    third = _job(maintain(lake, policy), "sales.orders")
    assert "skipped" not in third and third["dueBecause"] == "3 new snapshot(s) >= 3"
    assert third["snapshotsExpired"] == 3 and third["lastSnapshot"]["id"] == 7
    assert [s.id for s in Table.open(table.uri).snapshots()] == [6, 7]
    assert Table.open(table.uri).verify().ok


def test_small_files_count_the_data_files_added_since_the_last_run(tmp_path):
    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "sales.orders"), snapshots=1)
    policy = Policy.from_mapping({"defaults": {"data-compaction": {"min-file-num": 2, "trigger": {"small-files": 3}}}})
    assert _job(maintain(lake, policy), "sales.orders", "data-compaction")["status"] == SUCCESSFUL
    marked = _job(lake_status(lake), "sales.orders", "data-compaction")["lastSnapshot"]["id"]
    assert marked == Table.open(table.uri).latest_snapshot().id  # the compaction's own snapshot, if it made one

    _append(table, 2)  # one partition: one file per append
    skipped = _job(maintain(lake, policy), "sales.orders", "data-compaction")
    assert skipped["skipped"] == "Not due: 2 of 3 new data file(s) since the last run"
    assert Table.open(table.uri).latest_snapshot().id == marked + 2
    _append(table, 1, start=5000)
    ran = _job(maintain(lake, policy), "sales.orders", "data-compaction")
    assert ran["dueBecause"] == "3 new data file(s) >= 3" and isinstance(ran["snapshotCommitted"], int)
    assert ran["lastSnapshot"]["id"] == ran["snapshotCommitted"]  # its own commit does not count toward the next run
    assert len(Table.open(table.uri).scan().files()) < 4
    assert _job(maintain(lake, policy), "sales.orders", "data-compaction")["skipped"].startswith("Not due: 0 of 3")


def test_due_ness_reads_only_the_snapshots_since_the_last_run(tmp_path, monkeypatch):
    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "t"), snapshots=1)
    _append(table, 30)
    policy = Policy.from_mapping({"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 100,
                                                                   "trigger": {"snapshots": 5, "small-files": 50}}}})
    maintain(lake, policy)
    _append(table, 2, start=9000)
    read: list[str] = []
    original = Storage.read_bytes

    def spy(self, path, *args, **kwargs):
        read.append(path)
        return original(self, path, *args, **kwargs)

    monkeypatch.setattr(Storage, "read_bytes", spy)
    job = _job(maintain(lake, policy), "t")
    assert job["skipped"] == "Not due: 2 of 5 new snapshot(s), 2 of 50 new data file(s) since the last run"
    snapshot_files = sorted(p.rsplit("/", 1)[-1] for p in read if "snapshot/snapshot-" in p)
    assert snapshot_files == ["snapshot-31", "snapshot-32", "snapshot-33"]  # the mark (still in the lineage?) and the new ones


def test_the_dag_lists_only_due_tables(tmp_path):
    lake = str(tmp_path / "lake")
    quiet, busy = write_native(native_dir(lake, "a.quiet"), 3), write_native(native_dir(lake, "a.busy"), 3)
    write_native(native_dir(lake, "b.always"), 3)
    policy = Policy.from_mapping({"defaults": {"snapshot-expiry": {**EXPIRY, "trigger": {"snapshots": 2}}},
                                  "namespaces": {"b": {"snapshot-expiry": {"trigger": None}}}})
    assert all(d.due for d in due_tables(list_tables(lake), policy))  # never ran
    maintain(lake, policy)
    _append(busy, 2)
    due = {d.table.name: d for d in due_tables(list_tables(lake), policy)}
    assert {name for name, d in due.items() if d.due} == {"a.busy", "b.always"}
    assert due["a.quiet"].reasons == {"snapshot-expiry": "Not due: 0 of 2 new snapshot(s) since the last run"}
    assert due["b.always"].reasons == {"snapshot-expiry": "no trigger: runs on every run"}
    assert quiet.latest_snapshot().id == 3


def test_a_failed_run_is_due_again_without_new_snapshots(tmp_path):
    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "t"), 3)
    policy = Policy.from_mapping({"defaults": {"snapshot-expiry": {**EXPIRY, "trigger": {"snapshots": 3}}}})
    maintain(lake, policy)  # keeps snapshots 2 and 3
    _append(table, 3)
    with open(os.path.join(native_dir(lake, "t"), "snapshot", "snapshot-2"), "w") as f:
        f.write("{")  # the table breaks: the due run fails
    failed = _job(maintain(lake, policy), "t")
    assert failed["status"] == "Failed" and failed["dueBecause"] == "3 new snapshot(s) >= 3" and "lastSnapshot" not in failed
    # No new snapshot since, yet the next run retries (and says why) rather than waiting for 3 more.
    retried = _job(maintain(lake, policy), "t")
    assert retried["status"] == "Failed" and retried["dueBecause"] == "the last run failed" and "skipped" not in retried


def test_a_paimon_table_is_due_after_pypaimon_commits(mixed_lake):
    lake = mixed_lake.path
    policy = Policy.from_mapping({"tables": {"db.app": {"snapshot-expiry": {"min-snapshots-to-keep": 3, "max-snapshot-age-hours": 0,
                                                                            "trigger": {"snapshots": 2, "small-files": 2}}}}})
    first = _job(maintain(lake, policy), "db.app")
    latest = Table.open(os.path.join(lake, "db.db", "app")).latest_snapshot().id
    assert first["status"] == SUCCESSFUL and first["lastSnapshot"]["id"] == latest
    assert _job(maintain(lake, policy), "db.app")["skipped"] == (
        "Not due: 0 of 2 new snapshot(s), 0 of 2 new data file(s) since the last run")
    # One pypaimon commit writing two partitions: two data files, counted from its delta manifest list.
    run_client(mixed_lake.paimon.python, lake, [{"write": "db.app", "rows": [["a", 91, "n"], ["b", 92, "n"]]}])
    ran = _job(maintain(lake, policy), "db.app")
    assert ran["dueBecause"] == "2 new data file(s) >= 2" and ran["lastSnapshot"]["id"] == latest + 1
    assert ran["snapshotsExpired"] > 0
    read = mixed_lake.read_paimon("app")["app"]
    assert sorted(map(int, read["snapshots"]))[-3:] == [latest - 1, latest, latest + 1] and len(read["snapshots"]) == 3


def test_an_iceberg_table_is_due_after_pyiceberg_commits(iceberg_lake):
    from tests.iceberg.conftest import rows as iceberg_rows

    props = iceberg_lake.properties
    policy = Policy.from_mapping({"tables": {"sales.orders": {"snapshot-expiry": {**EXPIRY, "trigger": {"snapshots": 2}}}}})
    first = _job(maintain("iceberg://sales", policy, catalog=props), "sales.orders")
    pyiceberg_table = iceberg_lake.catalog().load_table(("sales", "orders"))
    current = pyiceberg_table.metadata.current_snapshot()
    assert first["lastSnapshot"] == {"id": current.snapshot_id, "sequenceNumber": current.sequence_number,
                                     "table": str(pyiceberg_table.metadata.table_uuid)}
    pyiceberg_table.append(iceberg_rows(7))
    second = _job(maintain("iceberg://sales", policy, catalog=props), "sales.orders")
    assert second["skipped"] == "Not due: 1 of 2 new snapshot(s) since the last run"
    assert len(iceberg_lake.catalog().load_table(("sales", "orders")).metadata.snapshots) == 3
    iceberg_lake.catalog().load_table(("sales", "orders")).append(iceberg_rows(8))
    third = _job(maintain("iceberg://sales", policy, catalog=props), "sales.orders")
    assert third["dueBecause"] == "2 new snapshot(s) >= 2" and third["snapshotsExpired"] == 2
    reloaded = iceberg_lake.catalog().load_table(("sales", "orders"))
    assert len(reloaded.metadata.snapshots) == 2 and reloaded.scan().to_arrow().num_rows > 0


def test_snaptable_status_says_not_due_and_when_counted_as_it_is_read(tmp_path, capsys):
    from airflow_snaptable.cli import main

    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "t"), 3)
    policy = Policy.from_mapping({"defaults": {"snapshot-expiry": {**EXPIRY, "trigger": {"snapshots": 4}}}})
    maintain(lake, policy)

    def status() -> str:
        capsys.readouterr()
        assert main(["status", lake]) == 0
        return capsys.readouterr().out

    assert "Not due: 0 of 4 new snapshot(s) since the last run (due after 4 more snapshot(s))" in status()
    # Commits and no run since: the status counts them when it is read (an idle run writes nothing).
    _append(table, 1)
    assert "Not due: 1 of 4 new snapshot(s) since the last run (due after 3 more snapshot(s))" in status()
    _append(table, 3, start=5000)
    out = status()
    assert "next due now: 4 new snapshot(s) >= 4" in out and "Not due" not in out
    assert _job(maintain(lake, policy), "t")["dueBecause"] == "4 new snapshot(s) >= 4"


def test_a_table_with_no_job_due_is_left_alone_without_its_lease(tmp_path, monkeypatch):
    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "t"), 3)
    policy = Policy.from_mapping({"defaults": {"snapshot-expiry": {**EXPIRY, "trigger": {"snapshots": 3}},
                                               "tag-expiry": {"trigger": {"snapshots": 5}}}})
    maintain(lake, policy)
    _append(table, 2)
    status_dir = os.path.join(native_dir(lake, "t"), "maintenance")
    stored = {name: open(os.path.join(base, name), "rb").read()
              for base, _dirs, names in os.walk(status_dir) for name in names}
    operations: list[tuple[str, str]] = []
    original = Storage._op

    def record(self, kind, rel, n=1):
        operations.append((kind, rel))
        return original(self, kind, rel, n)

    monkeypatch.setattr(Storage, "_op", record)
    report = maintain(lake, policy)
    # Nothing is written: no lease taken or released, no status rewritten (it keeps each job's last run).
    assert [op for op in operations if op[0] in ("write", "delete")] == []
    assert not any("lease" in rel for _kind, rel in operations)
    assert {name: open(os.path.join(base, name), "rb").read()
            for base, _dirs, names in os.walk(status_dir) for name in names} == stored
    # The run still reports why each job waits.
    assert _job(report, "t")["skipped"] == "Not due: 2 of 3 new snapshot(s) since the last run"
    assert _job(report, "t", "tag-expiry")["skipped"] == "Not due: 2 of 5 new snapshot(s) since the last run"
    assert not report.failed and report.tables[0].skipped is None
    assert [s.id for s in Table.open(table.uri).snapshots()] == [2, 3, 4, 5]


def test_a_run_finishing_between_the_status_read_and_the_lease_is_continued_not_overwritten(tmp_path, monkeypatch):
    from airflow_snaptable.core.lake import lease as leases

    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "t"), 4)
    policy = Policy.from_mapping({"defaults": {"snapshot-expiry": EXPIRY}})
    original = leases.acquire
    raced: list[str] = []

    def acquire_after_another_run(storage, directory, run_id, *args, **kwargs):
        if run_id == "this-run" and not raced:  # the other run works and releases the lease before this one takes it
            raced.append(run_id)
            maintain(lake, policy, run_id="other-run")
        return original(storage, directory, run_id, *args, **kwargs)

    monkeypatch.setattr(leases, "acquire", acquire_after_another_run)
    maintain(lake, policy, run_id="this-run")
    doc = lake_status(lake).tables[0]
    runs = json.loads(open(os.path.join(native_dir(lake, "t"), "maintenance", "status.json")).read())["runs"]
    assert [run["runId"] for run in runs] == ["other-run", "this-run"]
    assert doc.jobs["snapshot-expiry"]["runId"] == "this-run"


def test_a_compaction_earlier_in_the_run_moves_the_mark_of_the_jobs_after_it(tmp_path):
    lake = str(tmp_path / "lake")
    _append(write_native(native_dir(lake, "t"), 1), 3)  # small files in one partition: the compaction commits
    # tag-expiry (triggered) reads the latest snapshot first; the untriggered compaction then commits one;
    # the expiry after it must mark the compaction's snapshot, or its own next run counts it as new.
    policy = Policy.from_mapping({"defaults": {
        "tag-expiry": {"trigger": {"snapshots": 1}}, "data-compaction": {"min-file-num": 2},
        "snapshot-expiry": {"min-snapshots-to-keep": 10, "trigger": {"snapshots": 1}}}})
    report = maintain(lake, policy)
    committed = _job(report, "t", "data-compaction")["snapshotCommitted"]
    assert isinstance(committed, int) and _job(report, "t", "tag-expiry")["lastSnapshot"]["id"] == committed - 1
    assert _job(report, "t")["lastSnapshot"]["id"] == committed
    assert _job(maintain(lake, policy), "t")["skipped"] == "Not due: 0 of 1 new snapshot(s) since the last run"


# -- lineage, not id arithmetic or clocks (core/lineage.py) -------------------------------------------

ROLLBACK_POLICY = {"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 100, "trigger": {"snapshots": 3}}}}


def test_commits_after_a_rollback_past_the_mark_make_our_job_due_though_ids_repeat(tmp_path):
    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "t"), snapshots=3)
    _append(table, 2)
    policy = Policy.from_mapping(ROLLBACK_POLICY)
    assert _job(maintain(lake, policy), "t")["lastSnapshot"]["id"] == 5
    table.rollback_to(snapshot_id=3)
    _append(Table.open(table.uri), 3, start=7000)  # ids 4, 5, 6 again: other commits than the marked 4 and 5
    # By ids, 6 - 5 = "1 of 3"; the marked commit 5 is not in the lineage: every commit since the rollback is new.
    ran = _job(maintain(lake, policy), "t")
    assert ran["dueBecause"] == "the table was rolled back past the last run's snapshot" and "skipped" not in ran
    assert _job(maintain(lake, policy), "t")["skipped"] == "Not due: 0 of 3 new snapshot(s) since the last run"


def test_a_table_re_created_at_our_tables_location_starts_fresh(tmp_path):
    import shutil

    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "t"), snapshots=2)
    policy = Policy.from_mapping(ROLLBACK_POLICY)
    maintain(lake, policy)
    for name in os.listdir(native_dir(lake, "t")):  # the table's files, not its maintenance status beside them
        if name != "maintenance":
            shutil.rmtree(os.path.join(native_dir(lake, "t"), name))
    write_native(native_dir(lake, "t"), snapshots=3)  # 3 - 2 = "1 of 3" by ids: but no commit of it was ever marked
    assert _job(lake_status(lake), "t")["status"] == "Not_Yet_Run"  # the old table's jobs are not this one's
    listed = {d.table.name: d for d in due_tables(list_tables(lake), policy)}  # the DAG's list task: due, and why
    assert listed["t"].due and listed["t"].reasons["snapshot-expiry"].startswith("a new table at this name")
    ran = _job(maintain(lake, policy), "t")
    assert ran["dueBecause"] == "no run with a trigger recorded yet" and "skipped" not in ran  # its status starts anew
    assert ran["lastSnapshot"]["id"] == 3
    assert json.load(open(os.path.join(native_dir(lake, "t"), "maintenance", "status.json")))["replacedTable"]


def test_a_snapshot_from_a_fast_clock_does_not_hide_our_later_commits(tmp_path):
    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "t"), snapshots=1, options={"commit.max-clock-skew": "2 d"})
    fast = Table.open(table.uri)
    fast.clock = lambda: table.latest_snapshot().time_millis + 86_400_000  # a writer whose clock runs a day ahead
    _append(fast, 1)
    policy = Policy.from_mapping(ROLLBACK_POLICY)
    maintain(lake, policy)  # marks the snapshot stamped a day ahead
    _append(Table.open(table.uri), 3)
    assert _job(maintain(lake, policy), "t")["dueBecause"] == "3 new snapshot(s) >= 3"


def test_a_paimon_table_rolled_back_past_the_mark_then_committed_by_pypaimon_is_due(mixed_lake):
    lake = mixed_lake.path
    policy = Policy.from_mapping({"tables": {"db.app": {"snapshot-expiry": {"min-snapshots-to-keep": 100,
                                                                            "trigger": {"snapshots": 3}}}}})
    uri = os.path.join(lake, "db.db", "app")
    latest = Table.open(uri).latest_snapshot().id
    assert _job(maintain(lake, policy), "db.app")["lastSnapshot"]["id"] == latest
    Table.open(uri).rollback_to(snapshot_id=latest - 1, force=True)
    run_client(mixed_lake.paimon.python, lake, [{"write": "db.app", "rows": [["a", 91 + i, "n"]]} for i in range(2)])
    assert Table.open(uri).latest_snapshot().id == latest + 1  # "1 of 3" by ids
    ran = _job(maintain(lake, policy), "db.app")
    assert ran["dueBecause"] == "the table was rolled back past the last run's snapshot"


def test_a_paimon_table_re_created_at_its_location_starts_fresh(mixed_lake):
    import shutil

    lake = mixed_lake.path
    policy = Policy.from_mapping({"tables": {"db.app": {"snapshot-expiry": {"min-snapshots-to-keep": 100,
                                                                            "trigger": {"snapshots": 5}}}}})
    uri = os.path.join(lake, "db.db", "app")
    marked = _job(maintain(lake, policy), "db.app")["lastSnapshot"]["id"]
    for name in os.listdir(uri):  # Paimon's files, not the maintenance status this package keeps beside them
        if name != "snaptable":
            shutil.rmtree(os.path.join(uri, name))
    steps = [{"create": "db.app", "columns": [["p", "string"], ["id", "int64"], ["v", "string"]], "partition": ["p"],
              "options": {"bucket": "-1"}}]
    steps += [{"write": "db.app", "rows": [["a", i, "n"]]} for i in range(marked + 1)]
    run_client(mixed_lake.paimon.python, lake, steps)
    assert _job(lake_status(lake), "db.app")["status"] == "Not_Yet_Run"  # the old table's jobs are not this one's
    ran = _job(maintain(lake, policy), "db.app")
    assert ran["dueBecause"] == "no run with a trigger recorded yet"  # its status starts anew


def _iceberg_policy(snapshots: int) -> Policy:
    return Policy.from_mapping({"tables": {"sales.orders": {"snapshot-expiry": {
        "min-snapshots-to-keep": 100, "trigger": {"snapshots": snapshots}}}}})


def test_an_iceberg_mark_from_a_writer_whose_clock_ran_a_day_ahead_hides_no_commit(iceberg_lake, monkeypatch):
    import time
    import types

    import pyiceberg.table.snapshots as pyiceberg_snapshots

    from tests.iceberg.conftest import rows as iceberg_rows

    props, policy = iceberg_lake.properties, _iceberg_policy(5)
    day_ahead = types.SimpleNamespace(time=lambda: time.time() + 86_400)
    with monkeypatch.context() as patched:
        patched.setattr(pyiceberg_snapshots, "time", day_ahead)
        iceberg_lake.catalog().load_table(("sales", "orders")).append(iceberg_rows(50))
    marked = _job(maintain("iceberg://sales", policy, catalog=props), "sales.orders")["lastSnapshot"]
    for i in range(5):
        iceberg_lake.catalog().load_table(("sales", "orders")).append(iceberg_rows(60 + i))
    # Every later commit is stamped before the mark's time: by clocks, 0 new.
    ran = _job(maintain("iceberg://sales", policy, catalog=props), "sales.orders")
    assert ran["dueBecause"] == "5 new snapshot(s) >= 5", (marked, ran)


def test_an_iceberg_table_dropped_and_re_created_under_its_name_starts_fresh(iceberg_lake):
    from tests.iceberg.conftest import rows as iceberg_rows

    props, policy = iceberg_lake.properties, _iceberg_policy(3)
    maintain("iceberg://sales", policy, catalog=props)
    catalog = iceberg_lake.catalog()
    old_uuid = str(catalog.load_table(("sales", "orders")).metadata.table_uuid)
    status_file = os.path.join(iceberg_lake.warehouse, "snaptable-maintenance", "sales.orders", "status.json")
    assert json.load(open(status_file))["tableId"] == old_uuid
    catalog.drop_table(("sales", "orders"))
    table = catalog.create_table(("sales", "orders"), schema=iceberg_rows(0).schema)
    table.append(iceberg_rows(1))
    table = catalog.load_table(("sales", "orders"))
    # Before any run on it, `snaptable status` shows none of the old table's jobs as the new one's.
    assert _job(lake_status("iceberg://sales", catalog=props), "sales.orders")["status"] == "Not_Yet_Run"
    ran = _job(maintain("iceberg://sales", policy, catalog=props), "sales.orders")
    assert ran["dueBecause"] == "no run with a trigger recorded yet", ran  # the run starts the new table's status anew
    assert ran["lastSnapshot"]["table"] == str(table.metadata.table_uuid)
    # The old table's status is not the new one's: its runs and jobs start anew.
    stored = json.load(open(status_file))
    assert (stored["tableId"], stored["replacedTable"]) == (str(table.metadata.table_uuid), old_uuid)
    assert len(stored["runs"]) == 1
    assert _job(maintain("iceberg://sales", policy, catalog=props), "sales.orders")["skipped"].startswith("Not due: 0 of 3")
