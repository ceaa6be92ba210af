"""Crash injection into expiry and tag deletion on a real Paimon table, and bad input.

Crashes: for every storage operation n of a clean run, a fresh copy crashes at operation n
(``Storage.on_operation``; the engine's own directory counts on the table's storage). Right
after the crash every snapshot and tag still present has every file pypaimon read for it; the
rerun then leaves exactly the clean run's files and no plan, and verify() finds nothing wrong.
Bad input fails closed with a typed error and changes nothing.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import (
    CorruptMetadataError,
    SnapTableError,
    TableNotFoundError,
    TagNotFoundError,
    UnsupportedMetadataError,
)
from tests.conftest import FailAt, InjectedCrash
from tests.paimon.conftest import FAR_FUTURE, table_files

EXPIRE = dict(retain_max=2, retain_min=2, now=FAR_FUTURE)


def _root(warehouse: str, name: str = "app") -> str:
    return os.path.join(warehouse, "db.db", name)


def _everything(root: str) -> dict[str, bytes]:
    found = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, root)] = f.read()
    return found


def _state(root: str) -> tuple:
    names = lambda d: sorted(n for n in os.listdir(os.path.join(root, d)) if not n.startswith(".")) if os.path.isdir(os.path.join(root, d)) else []
    # A pending plan a crash left behind deleted nothing; it is dropped once stale (PlanExecutor.finish_all).
    plans = [n for n in names("snaptable/plan") if not n.startswith("pending-")]
    return table_files(root), names("snapshot"), names("tag"), plans


def _check_present_intact(paimon, root: str) -> None:
    """Every snapshot and tag still present has every file pypaimon read for it before."""
    before = paimon.before["app"]
    for name in os.listdir(os.path.join(root, "snapshot")):
        if name.startswith("snapshot-"):
            for rel in before["snapshots"][name[len("snapshot-"):]]["files"]:
                assert os.path.exists(os.path.join(root, rel)), (name, rel)
    for name in os.listdir(os.path.join(root, "tag")):
        if name.startswith("tag-"):
            for rel in before["tags"][name[len("tag-"):]]["files"]:
                assert os.path.exists(os.path.join(root, rel)), (name, rel)


def _expire(table: Table) -> None:
    table.expire_snapshots(**EXPIRE)


def _delete_tag(table: Table) -> None:
    try:
        table.delete_tag("t2")
    except TagNotFoundError:
        table.expire_snapshots(**EXPIRE)  # the tag went before the crash: any expiry finishes the plan


@pytest.mark.parametrize("operation", ["expire", "delete_tag"])
def test_crash_at_every_storage_operation_then_rerun(paimon, tmp_path, operation):
    template = paimon.copy(tmp_path / "template")
    if operation == "delete_tag":
        _expire(Table.open(_root(template)))  # t2 now holds files no snapshot uses
    run = {"expire": _expire, "delete_tag": _delete_tag}[operation]

    clean = str(tmp_path / "clean")
    shutil.copytree(template, clean)
    table = Table.open(_root(clean))
    counter = FailAt(10**9)
    table.storage.on_operation = counter
    run(table)
    operations, expected = counter.seen, _state(_root(clean))
    assert operations > 5 and expected[3] == []
    assert Table.open(_root(clean)).verify().ok

    for n in range(1, operations + 1):
        copy = str(tmp_path / f"crash-{n}")
        shutil.copytree(template, copy)
        table = Table.open(_root(copy))
        table.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            run(table)
        _check_present_intact(paimon, _root(copy))
        rerun = Table.open(_root(copy))
        run(rerun)
        assert _state(_root(copy)) == expected, f"crash at operation {n}"
        assert rerun.verify().ok, (n, rerun.verify().to_dict())
        shutil.rmtree(copy)
    # The clean run's table as Paimon reads it.
    after = paimon.read(clean, "app")["app"]
    assert all("error" not in read for read in list(after["snapshots"].values()) + list(after["tags"].values()))


def test_a_directory_that_is_not_a_paimon_table(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TableNotFoundError):
        Table.open(str(empty))


def _refused(table_dir: str, call, error: type[SnapTableError]) -> None:
    before = _everything(table_dir)
    with pytest.raises(error) as raised:
        call()
    assert _everything(table_dir) == before
    return raised.value


def test_corrupt_snapshot_fails_closed_and_changes_nothing(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    root = _root(warehouse)
    with open(os.path.join(root, "snapshot", "snapshot-3"), "wb") as f:
        f.write(b"{not json")
    table = Table.open(root)
    _refused(root, lambda: table.expire_snapshots(**EXPIRE), CorruptMetadataError)
    _refused(root, lambda: table.remove_orphan_files(older_than="0 s", dry_run=False), CorruptMetadataError)
    assert not table.verify().ok


@pytest.mark.parametrize(
    "field, value, feature",
    [
        # Changelog is supported (tests/paimon/test_paimon_changelog.py); a list a plan would put in index/ is not.
        ("changelogManifestList", "index-list-x", "named like an index file"),
        ("statistics", "stat-1", "statistics"),
        ("version", 4, "version"),
    ],
)
def test_unsupported_snapshot_features_fail_closed(paimon, tmp_path, field, value, feature):
    warehouse = paimon.copy(tmp_path / "w")
    root = _root(warehouse)
    path = os.path.join(root, "snapshot", "snapshot-2")
    doc = json.loads(open(path).read())
    doc[field] = value
    with open(path, "w") as f:
        json.dump(doc, f)
    table = Table.open(root)
    error = _refused(root, lambda: table.expire_snapshots(**EXPIRE), UnsupportedMetadataError)
    assert feature in str(error)
    _refused(root, lambda: table.remove_orphan_files(older_than="0 s", dry_run=False), UnsupportedMetadataError)


def test_branches_and_external_paths_fail_closed_on_open(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    root = _root(warehouse)
    os.makedirs(os.path.join(root, "branch", "branch-b1"))
    with pytest.raises(UnsupportedMetadataError, match="branch"):
        Table.open(root)
    shutil.rmtree(os.path.join(root, "branch"))
    schema_path = os.path.join(root, "schema", "schema-0")
    doc = json.loads(open(schema_path).read())
    doc["options"]["data-file.external-paths"] = "s3://elsewhere/"
    with open(schema_path, "w") as f:
        json.dump(doc, f)
    with pytest.raises(UnsupportedMetadataError, match="external"):
        Table.open(root)
