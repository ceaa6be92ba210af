"""One run per table at a time (core/lake/lease.py), across processes; and a run killed mid-way, then run again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from airflow_snaptable.core.errors import LeaseLostError
from airflow_snaptable.core.lake import SUCCESSFUL, Policy, maintain
from airflow_snaptable.core.lake import lease as leases
from airflow_snaptable.core.lake.status import NATIVE_STATUS_DIR
from airflow_snaptable.core.io.storage import Storage
from tests.lake.conftest import native_dir, storage_image, write_native, write_policy

LEASES = f"{NATIVE_STATUS_DIR}/lease"
EXPIRE_TO_TWO = {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}}


def _storage(tmp_path) -> Storage:
    path = tmp_path / "t"
    path.mkdir(exist_ok=True)
    return Storage.from_uri(str(path))


def _lease_files(storage: Storage) -> list[str]:
    return sorted(storage.list_names(LEASES))


def test_a_lease_is_held_until_released_and_only_two_generations_stay(tmp_path):
    storage = _storage(tmp_path)
    first = leases.acquire(storage, LEASES, "run-a")
    assert isinstance(first, leases.Lease)
    busy = leases.acquire(storage, LEASES, "run-b")
    assert isinstance(busy, leases.Busy) and busy.holder.run_id == "run-a" and f":{os.getpid()} " in busy.holder.owner
    assert leases.current_holder(storage, LEASES).run_id == "run-a"
    first.release()
    assert leases.current_holder(storage, LEASES) is None
    for run in ("run-b", "run-c", "run-d"):
        taken = leases.acquire(storage, LEASES, run)
        assert isinstance(taken, leases.Lease)
        taken.release()
    assert _lease_files(storage) == [f"lease-{g:020d}.json" for g in (3, 4)]


def test_an_expired_lease_or_one_of_a_dead_process_is_free_but_a_live_one_elsewhere_is_not(tmp_path):
    storage = _storage(tmp_path)
    held = leases.acquire(storage, LEASES, "run-a", ttl_seconds=0.001)
    time.sleep(0.01)
    with pytest.raises(LeaseLostError, match="expired"):
        held.check()
    assert isinstance(leases.acquire(storage, LEASES, "run-b"), leases.Lease)

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    holder = leases.LeaseHolder(leases.socket.gethostname(), int(dead), "crashed", 0, 2**62)
    storage.write_bytes(f"{LEASES}/lease-{99:020d}.json", holder.to_json())
    assert isinstance(leases.acquire(storage, LEASES, "run-c"), leases.Lease)  # its owner is gone: free at once

    elsewhere = leases.LeaseHolder("another-host", 1, "remote", 0, 2**62)
    storage.write_bytes(f"{LEASES}/lease-{200:020d}.json", elsewhere.to_json())
    busy = leases.acquire(storage, LEASES, "run-d")
    assert isinstance(busy, leases.Busy) and busy.holder.host == "another-host"


def test_a_taker_that_stalled_behind_newer_generations_withdraws(tmp_path, monkeypatch):
    storage = _storage(tmp_path)
    for run in ("a", "b", "c", "d", "e"):
        leases.acquire(storage, LEASES, run).release()  # generations 4 and 5 stay
    newest = leases.acquire(storage, LEASES, "f")  # generation 6, held
    real = leases._generations
    calls = []

    def stale_then_real(storage_, directory):
        calls.append(1)
        return [1] if len(calls) == 1 else real(storage_, directory)  # listed before generations 2..6 existed

    monkeypatch.setattr(leases, "_generations", stale_then_real)
    monkeypatch.setattr(leases, "_read", lambda *args: None)  # what it read then: nothing holds generation 1
    lost = leases.acquire(storage, LEASES, "stalled")
    assert isinstance(lost, leases.Busy)
    monkeypatch.undo()
    assert leases.current_holder(storage, LEASES).run_id == "f"
    newest.renew()
    newest.check()  # still held: the stalled taker withdrew


def test_a_lease_taken_over_is_lost_and_its_jobs_stop(tmp_path):
    storage = _storage(tmp_path)
    held = leases.acquire(storage, LEASES, "run-a")
    before = held.holder.expires_millis
    time.sleep(0.002)
    held.renew()
    assert held.holder.expires_millis > before and leases.current_holder(storage, LEASES).expires_millis == held.holder.expires_millis
    usurper = leases.LeaseHolder("another-host", 1, "run-b", 0, 2**62)
    storage.create_exclusive(f"{LEASES}/lease-{held.generation + 1:020d}.json", usurper.to_json())
    held.renew()
    with pytest.raises(LeaseLostError, match="took the table's lease over"):
        held.check()
    held.release()  # not ours any more: the new holder's file is left alone
    assert leases.current_holder(storage, LEASES).run_id == "run-b"


# -- across processes ------------------------------------------------------------------------------------

HOLDER = """
import sys, time, os
from airflow_snaptable.core.lake import lease
from airflow_snaptable.core.io.storage import Storage
storage = Storage.from_uri(sys.argv[1])
held = lease.acquire(storage, sys.argv[2], "holder-run")
assert isinstance(held, lease.Lease), held
print("held", flush=True)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
held.release()
print("released", flush=True)
"""


def _snaptable(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "airflow_snaptable.cli", *args], capture_output=True, text=True, timeout=300)


def test_a_table_another_process_holds_is_skipped_and_said_so_then_maintained_once_free(tmp_path):
    lake = str(tmp_path / "lake")
    for name in ("a.busy", "a.free"):
        write_native(native_dir(lake, name))
    policy = write_policy(tmp_path / "p.json", {"defaults": EXPIRE_TO_TWO})
    signal = tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, native_dir(lake, "a.busy"), LEASES, str(signal)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        busy_before = storage_image(native_dir(lake, "a.busy"))
        done = _snaptable("maintain", lake, "--policy", policy, "--json")
        assert done.returncode == 0, done.stderr  # a skipped table is not a failed job
        doc = json.loads(done.stdout)
        tables = {t["table"]: t for t in doc["tables"]}
        assert tables["a.free"]["jobs"]["snapshot-expiry"]["status"] == SUCCESSFUL
        skipped = tables["a.busy"]["skipped"]
        assert skipped["runId"] == "holder-run" and f":{holder.pid} " in skipped["owner"]
        assert "another maintenance run is working on the table" in skipped["reason"]
        assert tables["a.busy"]["jobs"]["snapshot-expiry"]["status"] == "Not_Yet_Run"
        assert storage_image(native_dir(lake, "a.busy")) == busy_before
        status = json.loads(_snaptable("status", lake, "--json").stdout)
        assert {t["table"]: t.get("lock", {}).get("runId") for t in status["tables"]} == {"a.busy": "holder-run", "a.free": None}
    finally:
        signal.touch()
        assert holder.wait(timeout=60) == 0
    again = json.loads(_snaptable("maintain", lake, "--policy", policy, "--json").stdout)
    busy = next(t for t in again["tables"] if t["table"] == "a.busy")
    assert "skipped" not in busy and busy["jobs"]["snapshot-expiry"]["snapshotsExpired"] == 3


def test_two_runs_racing_over_one_lake_never_work_on_a_table_at_once(tmp_path):
    from airflow_snaptable.core import Table

    lake = str(tmp_path / "lake")
    names = [f"n{i}.t" for i in range(6)]
    for name in names:
        write_native(native_dir(lake, name), snapshots=4)
    policy = write_policy(tmp_path / "p.json", {"defaults": {**EXPIRE_TO_TWO, "orphan-file-removal": {"older-than-days": 1}}})
    runs = [subprocess.Popen([sys.executable, "-m", "airflow_snaptable.cli", "maintain", lake, "--policy", policy, "--json",
                              "--parallel", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [json.loads(run.communicate(timeout=300)[0]) for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    for name in names:
        entries = [next(t for t in out["tables"] if t["table"] == name) for out in outputs]
        worked = [e for e in entries if "skipped" not in e]
        assert worked, name  # at least one run maintained it
        doc = json.load(open(os.path.join(native_dir(lake, name), NATIVE_STATUS_DIR, "status.json")))
        intervals = sorted((run["startedAt"], run["finishedAt"]) for run in doc["runs"])
        assert len(intervals) == len(worked)
        for (_start, end), (start, _end) in zip(intervals, intervals[1:]):
            assert end <= start, (name, intervals)  # never at once
        table = Table.open(native_dir(lake, name))
        assert len(table.snapshots()) == 2 and table.verify().ok, name


CRASHING_RUN = """
import os, sys
from airflow_snaptable.core.lake import Policy, maintain
from airflow_snaptable.core.io.storage import Storage

deletes = []
original = Storage._op

def crash_at_delete(self, kind, rel, n=1):
    if kind == "delete" and "/data/" in self.full_path(rel) and "n2" in self.root:
        deletes.append(rel)
        if len(deletes) == 2:
            os._exit(9)  # the process dies here, mid-expiry of table n2.t: no cleanup, no finally
    return original(self, kind, rel, n)

Storage._op = crash_at_delete
maintain(sys.argv[1], Policy.load(sys.argv[2]), parallel=1, run_id="nightly")
"""


def test_a_run_killed_mid_way_is_completed_by_running_it_again(tmp_path):
    from airflow_snaptable.core import Table

    lake = str(tmp_path / "lake")
    names = [f"n{i}.t" for i in range(4)]
    for name in names:
        write_native(native_dir(lake, name))
    policy = write_policy(tmp_path / "p.json", {"defaults": {**EXPIRE_TO_TWO, "consumer-expiry": {}}})
    crashed = subprocess.run([sys.executable, "-c", CRASHING_RUN, lake, policy], capture_output=True, text=True, timeout=300)
    assert crashed.returncode == 9, crashed.stderr
    # Before the crash: n0 and n1 were maintained and recorded; n2 died mid-expiry holding its lease; n3 was never reached.
    def stored(name):
        path = os.path.join(native_dir(lake, name), NATIVE_STATUS_DIR, "status.json")
        return json.load(open(path))["jobs"] if os.path.exists(path) else {}

    assert stored("n0.t")["snapshot-expiry"]["status"] == SUCCESSFUL
    assert stored("n2.t") == {}  # its consumer expiry changed nothing: recorded with the run's end, which never came
    assert stored("n3.t") == {}
    assert os.listdir(os.path.join(native_dir(lake, "n2.t"), "plan"))  # its expiry's deletion plan is unfinished

    report = maintain(lake, Policy.load(policy), run_id="nightly")  # the crashed process's lease does not block it
    assert not report.failed and all("skipped" not in t.to_dict() for t in report.tables)
    jobs = {t.table: t.jobs for t in report.tables}
    assert jobs["n0.t"]["snapshot-expiry"]["resumed"] and jobs["n1.t"]["snapshot-expiry"]["resumed"]
    assert jobs["n0.t"]["consumer-expiry"]["resumed"]
    assert all("resumed" not in jobs[name][job] for name in ("n2.t", "n3.t") for job in ("consumer-expiry", "snapshot-expiry"))
    for name in names:
        table = Table.open(native_dir(lake, name))
        assert len(table.snapshots()) == 2, name
        result = table.verify()
        assert result.ok, result.to_dict()  # the interrupted expiry's plan was finished: nothing missing, nothing left over
    assert jobs["n2.t"]["snapshot-expiry"]["filesDeleted"]["data"] > 0


def test_a_run_whose_lease_expired_stops_and_leaves_the_status_to_the_next_holder(tmp_path, monkeypatch):
    """A run paused longer than its lease lives (here: the clock jumps a day once it holds the lease) may
    have been overtaken: it runs no further job on the table and writes nothing there."""
    from airflow_snaptable.core.lake import run as runs

    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "a.t"))
    policy = Policy.from_mapping({"defaults": {**EXPIRE_TO_TWO, "consumer-expiry": {}}})
    first = maintain(lake, Policy.from_mapping({"defaults": {"consumer-expiry": {}}}))
    status_path = os.path.join(native_dir(lake, "a.t"), NATIVE_STATUS_DIR, "status.json")
    stored = open(status_path).read()
    jump = [0]
    real_now, real_open = leases._now_millis, runs.Table.open
    monkeypatch.setattr(leases, "_now_millis", lambda: real_now() + jump[0])

    def open_then_pause(*args, **kwargs):
        jump[0] = 86_400_000
        return real_open(*args, **kwargs)

    monkeypatch.setattr(runs.Table, "open", open_then_pause)
    report = maintain(lake, policy, lease_seconds=60)
    jobs = report.tables[0].jobs
    for job in ("consumer-expiry", "snapshot-expiry"):
        assert jobs[job]["status"] == "Failed" and jobs[job]["failureMessage"].startswith("LeaseLostError: "), jobs[job]
    assert open(status_path).read() == stored and first.run_id in stored
    monkeypatch.undo()
    from airflow_snaptable.core import Table

    assert len(Table.open(native_dir(lake, "a.t")).snapshots()) == 5  # no job ran after the lease was lost
