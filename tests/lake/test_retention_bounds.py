"""A table's explicit retention bounds every lake job (issue 34 items 1 and 13; docs/maintenance.md, "Floors and
ceilings"): its minimum, age and noncurrent days are floors no policy goes below, its maximum a ceiling the policy's
counts stay under, and the job's status says in ``notes`` when the table won. Ours and Paimon's (judged by pypaimon).
"""

from __future__ import annotations

import json
import os

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.lake import SUCCESSFUL, Policy, maintain
from tests.lake.conftest import native_dir, write_native
from tests.paimon.test_paimon_lifecycle import check as check_paimon

CLEAN_TO_ONE = {"clean": {"policy": "KEEP_LATEST_COMMITS", "commits-retained": 1}}


def _jobs(report, table: str) -> dict:
    return next(t for t in report.to_dict()["tables"] if t["table"] == table)["jobs"]


def _ids(lake: str, name: str) -> list[int]:
    return [s.id for s in Table.open(native_dir(lake, name)).snapshots()]


def _set_paimon_options(warehouse: str, name: str, options: dict) -> None:
    """The table's creator set ``options`` (Paimon keeps a table's options in its schema file)."""
    path = os.path.join(warehouse, "db.db", name, "schema", "schema-0")
    with open(path) as f:
        doc = json.load(f)
    doc["options"].update(options)
    with open(path, "w") as f:
        json.dump(doc, f)


def test_clean_keeps_the_table_s_own_minimum_and_age_and_says_so(tmp_path):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "t.plain"), snapshots=6)
    write_native(native_dir(lake, "t.min5"), snapshots=6, options={"snapshot.num-retained.min": "5"})
    write_native(native_dir(lake, "t.hour"), snapshots=6, options={"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 h"})
    policy = Policy.from_mapping({"defaults": CLEAN_TO_ONE})
    dry = maintain(lake, policy, dry_run=True)
    report = maintain(lake, policy)
    assert not report.failed
    # Hudi keeps the commit retained and the one before it: 2. The table's floor keeps more.
    assert {name: _ids(lake, name) for name in ("t.plain", "t.min5", "t.hour")} == {
        "t.plain": [5, 6], "t.min5": [2, 3, 4, 5, 6], "t.hour": [1, 2, 3, 4, 5, 6],
    }
    for run in (dry, report):
        notes = {name: _jobs(run, name)["clean"].get("notes", []) for name in ("t.plain", "t.min5", "t.hour")}
        assert notes["t.plain"] == []
        assert notes["t.min5"] == [
            "the table's snapshot.num-retained.min=5 keeps more than the policy's clean (policy=KEEP_LATEST_COMMITS, "
            "commits-retained=1): the table's setting wins (kept from snapshot 2)"
        ]
        assert notes["t.hour"] == [
            "the table's snapshot.time-retained=1 h keeps more than the policy's clean (policy=KEEP_LATEST_COMMITS, "
            "commits-retained=1): the table's setting wins (kept from snapshot 1)"
        ]
    assert _jobs(report, "t.min5")["clean"]["arguments"] == {"policy": "KEEP_LATEST_COMMITS", "commits_retained": 1, "retain_min": 5}
    for name in ("t.plain", "t.min5", "t.hour"):
        assert Table.open(native_dir(lake, name)).verify().ok


def test_a_paimon_table_s_own_floor_holds_under_clean_and_pypaimon_reads_every_snapshot_left(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    _set_paimon_options(warehouse, "app", {"snapshot.num-retained.min": "4"})
    _set_paimon_options(warehouse, "lsm", {"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 h"})
    report = maintain(warehouse, Policy.from_mapping({"defaults": CLEAN_TO_ONE}))
    assert _jobs(report, "db.app")["clean"]["status"] == SUCCESSFUL
    assert _jobs(report, "db.app")["clean"]["notes"][0].startswith("the table's snapshot.num-retained.min=4 keeps more")
    assert _jobs(report, "db.lsm")["clean"]["notes"][0].startswith("the table's snapshot.time-retained=1 h keeps more")
    assert _jobs(report, "db.pk")["clean"]["snapshotsExpired"] == 3 and "notes" not in _jobs(report, "db.pk")["clean"]
    check_paimon(paimon, warehouse, "app", [3, 4, 5, 6], ["t2", "t4"])
    check_paimon(paimon, warehouse, "lsm", [1, 2, 3, 4, 5], ["compacted"])


def test_a_policy_minimum_above_the_table_s_maximum_keeps_the_maximum_and_never_fails(tmp_path):
    """Issue 34 item 13: it failed every run with "retain_max (3) must be >= retain_min (5)"."""
    lake = str(tmp_path / "lake")
    bounded = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "3", "snapshot.time-retained": "0 s"}
    write_native(native_dir(lake, "t.min"), snapshots=6, options=bounded)
    write_native(native_dir(lake, "t.both"), snapshots=6, options=bounded)
    policy = Policy.from_mapping({
        "defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 5}},
        "tables": {"t.both": {"snapshot-expiry": {"max-snapshots": 10}}},
    })
    for _ in range(2):  # and the next run too
        report = maintain(lake, policy)
        assert not report.failed
        assert _ids(lake, "t.min") == _ids(lake, "t.both") == [4, 5, 6]
    assert _jobs(report, "t.min")["snapshot-expiry"]["notes"] == [
        "the policy's min-snapshots-to-keep=5 is above the table's snapshot.num-retained.max=3: the table's setting wins",
    ]
    assert _jobs(report, "t.both")["snapshot-expiry"]["notes"] == [
        "the policy's max-snapshots=10 is above the table's snapshot.num-retained.max=3: the table's setting wins",
        "the policy's min-snapshots-to-keep=5 is above the table's snapshot.num-retained.max=3: the table's setting wins",
    ]
    assert _jobs(report, "t.min")["snapshot-expiry"]["arguments"] == {"retain_min": 3}


def test_a_paimon_table_s_maximum_is_the_ceiling_of_the_policy_s_minimum(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    _set_paimon_options(warehouse, "app", {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "3",
                                           "snapshot.time-retained": "0 s"})
    policy = Policy.from_mapping({"tables": {"db.app": {"snapshot-expiry": {"min-snapshots-to-keep": 5}}}})
    done = _jobs(maintain(warehouse, policy), "db.app")["snapshot-expiry"]
    assert done["status"] == SUCCESSFUL and done["snapshotsExpired"] == 3, done
    check_paimon(paimon, warehouse, "app", [4, 5, 6], ["t2", "t4"])


@pytest.mark.parametrize("job, settings", [
    ("snapshot-expiry", {"min-snapshots-to-keep": 1, "max-snapshot-age-hours": 0}),
    ("clean", CLEAN_TO_ONE["clean"]),
    ("consumer-expiry", {"expiration-time": "1 ms"}),
])
def test_the_table_s_own_noncurrent_days_is_a_floor_of_the_policy_s(tmp_path, job, settings):
    """A table that keeps what deleting runs remove 30 days keeps it 30 days, whatever a policy says (and the policy's
    noncurrent-days reaches every deleting job: consumer expiry dropped it)."""
    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "t.own"), snapshots=3, options={"noncurrent-days": "30"})
    plain = write_native(native_dir(lake, "t.plain"), snapshots=3)
    if job == "consumer-expiry":  # a consumer holds snapshots back: only where the job removes it
        for each in (table, plain):
            each.update_consumer("idle", 1)
    report = maintain(lake, Policy.from_mapping({"defaults": {job: {**settings, "noncurrent-days": 2}}}))
    own, other = _jobs(report, "t.own")[job], _jobs(report, "t.plain")[job]
    assert own["status"] == other["status"] == SUCCESSFUL
    assert own["arguments"]["noncurrent_days"] == 30 and other["arguments"]["noncurrent_days"] == 2
    assert own["notes"] == ["the table's noncurrent-days=30 keeps more than the policy's noncurrent-days=2: the table's setting wins"]
    days = {name: [run.days for run in Table.open(native_dir(lake, name)).trash()] for name in ("t.own", "t.plain")}
    assert days == {"t.own": [30], "t.plain": [2]}
