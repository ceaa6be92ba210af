"""A table skipped because another run holds its lease is not a failed job (issue 34 item 10): exit code 1 and a
failed Airflow task mean a job failed in *this* run, not that a skipped table's stored status holds an old failure."""

from __future__ import annotations

import os
import re

from airflow_snaptable.cli import main
from airflow_snaptable.core.lake import FAILED, Policy, maintain
from airflow_snaptable.core.lake import lease as leases
from airflow_snaptable.core.lake.report import failed_in_run
from airflow_snaptable.core.lake.status import NATIVE_STATUS_DIR
from airflow_snaptable.core.io.storage import Storage
from tests.lake.conftest import native_dir, write_native, write_policy

ISO_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _times(doc):
    """Every (key, time text) of a report document: the keys ending in At or Timestamp."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if isinstance(value, str) and (key.endswith("At") or key.endswith("Timestamp")):
                yield key, value
            yield from _times(value)
    elif isinstance(doc, list):
        for item in doc:
            yield from _times(item)


EXPIRE_TO_TWO = {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}}


def failed_then_held(lake: str, name: str) -> leases.Lease:
    """``name`` fails its expiry once (its stored status keeps the Failed job), is repaired, then another run holds it."""
    write_native(native_dir(lake, name))
    snapshot = os.path.join(native_dir(lake, name), "snapshot", "snapshot-2")
    with open(snapshot) as f:
        good = f.read()
    with open(snapshot, "w") as f:
        f.write("{not json")
    first = maintain(lake, Policy.from_mapping({"defaults": EXPIRE_TO_TWO}))
    assert first.failed and first.tables[0].jobs["snapshot-expiry"]["status"] == FAILED  # a failure of that run
    with open(snapshot, "w") as f:
        f.write(good)
    held = leases.acquire(Storage.from_uri(native_dir(lake, name)), f"{NATIVE_STATUS_DIR}/lease", "another-run")
    assert isinstance(held, leases.Lease)
    return held


def test_a_skipped_table_with_an_old_failure_is_not_a_failed_run(tmp_path, capsys):
    lake = str(tmp_path / "lake")
    held = failed_then_held(lake, "a.held")
    write_native(native_dir(lake, "a.free"))
    policy = write_policy(tmp_path / "p.json", {"defaults": EXPIRE_TO_TWO})
    try:
        report = maintain(lake, Policy.load(policy))
        held_report = next(t for t in report.tables if t.table == "a.held")
        assert held_report.skipped is not None and held_report.jobs["snapshot-expiry"]["status"] == FAILED  # shown as stored
        assert not held_report.failed and not report.failed and failed_in_run(held_report.to_dict(), report.run_id) == {}
        assert main(["maintain", lake, "--policy", policy]) == 0  # exit 1 would say a job failed in this run
        capsys.readouterr()
        # One time format (issue 34 item 16): the lease's expiry as every other time of a report, ISO-8601 UTC in Z.
        times = list(_times(report.to_dict()))
        assert ("expiresAt", held_report.skipped["expiresAt"]) in times
        assert all(ISO_Z.fullmatch(value) for _key, value in times), times
    finally:
        held.release()
    assert main(["maintain", lake, "--policy", policy]) == 0  # free again: it runs, and succeeds


def test_a_job_failing_in_this_run_still_fails_it(tmp_path, capsys):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "a.broken"))
    with open(os.path.join(native_dir(lake, "a.broken"), "snapshot", "snapshot-2"), "w") as f:
        f.write("{not json")
    policy = write_policy(tmp_path / "p.json", {"defaults": EXPIRE_TO_TWO})
    assert main(["maintain", lake, "--policy", policy]) == 1
    assert main(["maintain", lake, "--policy", policy]) == 1  # every run it fails in
    capsys.readouterr()
