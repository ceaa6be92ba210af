"""``snaptable maintain`` and ``snaptable status``: the JSON contract of issue 24, as written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from airflow_snaptable.cli import main
from tests.lake.conftest import NATIVE_TABLES, PAIMON_TABLES, native_dir, storage_image, write_native, write_policy

SNAPTABLE = str(Path(sys.executable).with_name("snaptable"))
#: The issue's example policy.
EXAMPLE = {
    "defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0},
                 "orphan-file-removal": {"enabled": False}},
    "namespaces": {"ops": {"snapshot-expiry": {"min-snapshots-to-keep": 4}}},
    "tables": {"sales.returns": {"snapshot-expiry": {"enabled": False}}},
}
JOB_FIELDS = {"status", "lastRunTimestamp", "failureMessage"}


def _run(*args: str) -> tuple[int, dict]:
    done = subprocess.run([SNAPTABLE, *args], capture_output=True, text=True, timeout=300)
    assert done.stderr == "", done.stderr
    return done.returncode, json.loads(done.stdout)


def _by_name(doc: dict) -> dict:
    return {t["table"]: t for t in doc["tables"]}


def test_maintain_and_status_print_the_contract(mixed_lake, tmp_path):
    policy = write_policy(tmp_path / "policy.json", EXAMPLE)
    code, never = _run("status", mixed_lake.path, "--json")
    assert code == 0
    for table in never["tables"]:
        assert {"table", "format", "jobs"} <= set(table)
        assert table["jobs"]["snapshot-expiry"] == {"status": "Not_Yet_Run", "lastRunTimestamp": None, "failureMessage": None}

    code, doc = _run("maintain", mixed_lake.path, "--policy", policy, "--json", "--parallel", "2")
    assert code == 0
    tables = _by_name(doc)
    assert sorted(tables) == sorted([*NATIVE_TABLES, *PAIMON_TABLES])
    assert tables["sales.orders"]["format"] == "snaptable" and tables["db.app"]["format"] == "paimon"
    for table in doc["tables"]:
        for job, record in table["jobs"].items():
            assert JOB_FIELDS <= set(record), (table["table"], job)
            assert record["status"] in ("Successful", "Failed", "Disabled", "Not_Yet_Run")
    orders = tables["sales.orders"]["jobs"]["snapshot-expiry"]
    assert orders["status"] == "Successful" and orders["failureMessage"] is None and orders["snapshotsExpired"] == 3
    assert tables["ops.audit"]["jobs"]["snapshot-expiry"]["snapshotsExpired"] == 1  # the ops namespace keeps 4
    assert tables["sales.returns"]["jobs"]["snapshot-expiry"]["status"] == "Disabled"
    assert tables["sales.orders"]["jobs"]["orphan-file-removal"]["status"] == "Disabled"

    code, status = _run("status", mixed_lake.path, "--json")
    assert code == 0
    assert _by_name(status)["sales.returns"]["jobs"]["snapshot-expiry"]["status"] == "Disabled"
    assert _by_name(status)["sales.orders"]["jobs"]["snapshot-expiry"] == orders


def test_maintain_exits_1_when_a_job_failed_and_still_prints_every_table(tmp_path, capsys):
    lake = str(tmp_path / "lake")
    for name in ("a.good", "a.broken", "b.good"):
        write_native(native_dir(lake, name))
    with open(os.path.join(native_dir(lake, "a.broken"), "snapshot", "snapshot-3"), "w") as f:
        f.write("[]")
    policy = write_policy(tmp_path / "p.json", EXAMPLE)
    assert main(["maintain", lake, "--policy", policy, "--json"]) == 1
    tables = _by_name(json.loads(capsys.readouterr().out))
    assert tables["a.broken"]["jobs"]["snapshot-expiry"]["status"] == "Failed"
    assert "snapshot-3" in tables["a.broken"]["jobs"]["snapshot-expiry"]["failureMessage"]
    assert tables["a.good"]["jobs"]["snapshot-expiry"]["status"] == tables["b.good"]["jobs"]["snapshot-expiry"]["status"] == "Successful"
    # The table for people: failures first, then the rest.
    assert main(["maintain", lake, "--policy", policy]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("a.broken") and "Failed" in lines[2] and "CorruptMetadataError" in lines[2]
    assert any(line.startswith("b.good") and "Successful" in line for line in lines[3:])


def test_a_dry_run_changes_no_byte(mixed_lake, tmp_path):
    policy = write_policy(tmp_path / "policy.json", {**EXAMPLE, "defaults": {**EXAMPLE["defaults"], "tag-expiry": {}}})
    before = storage_image(mixed_lake.path)
    code, doc = _run("maintain", mixed_lake.path, "--policy", policy, "--dry-run", "--json")
    assert code == 0 and doc["dryRun"] is True
    assert storage_image(mixed_lake.path) == before
    assert _by_name(doc)["sales.orders"]["jobs"]["snapshot-expiry"]["snapshotsExpired"] == 3


def test_a_bad_policy_exits_2_naming_the_problem_and_changes_nothing(mixed_lake, tmp_path, capsys):
    before = storage_image(mixed_lake.path)
    bad = write_policy(tmp_path / "bad.json", {"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": "2"}}})
    assert main(["maintain", mixed_lake.path, "--policy", bad, "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: InvalidPolicyError: policy: defaults.snapshot-expiry.min-snapshots-to-keep must be an integer")
    (tmp_path / "p.yaml").write_text("defaults:\n  snapshot-expire: {}\n")
    assert main(["maintain", mixed_lake.path, "--policy", str(tmp_path / "p.yaml")]) == 2
    assert "unknown job 'snapshot-expire'" in capsys.readouterr().err
    good = write_policy(tmp_path / "good.json", EXAMPLE)
    assert main(["maintain", mixed_lake.path, "--policy", good, "--parallel", "0"]) == 2
    assert "parallel must be an integer >= 1" in capsys.readouterr().err
    assert storage_image(mixed_lake.path) == before


def test_an_iceberg_catalog_from_the_command_line(iceberg_lake, tmp_path):
    policy = write_policy(tmp_path / "policy.json", EXAMPLE)
    code, doc = _run("maintain", "iceberg://", "--catalog", iceberg_lake.catalog_json, "--policy", policy, "--json")
    assert code == 0
    tables = _by_name(doc)
    assert tables["ops.metrics"]["format"] == "iceberg"
    assert tables["ops.metrics"]["jobs"]["snapshot-expiry"]["snapshotsExpired"] == 0  # ops keeps 4 of 4
    assert tables["sales.orders"]["jobs"]["snapshot-expiry"]["snapshotsExpired"] == 2
    code, status = _run("status", "iceberg://sales", "--catalog", iceberg_lake.catalog_json, "--json")
    assert sorted(_by_name(status)) == ["sales.orders", "sales.returns"]
    assert _by_name(status)["sales.returns"]["jobs"]["snapshot-expiry"]["status"] == "Disabled"
