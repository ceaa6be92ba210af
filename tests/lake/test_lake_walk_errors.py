"""One bad entry of a lake is one failed entry (issue 34, items 3 and 14): a name two tables hold, a
directory that cannot be read, a schema nested past the parser; ``maintain``, ``status``, ``health``
and a DAG's ``list_tables`` -> ``maintain_table`` report it and carry on with the rest of the lake."""

from __future__ import annotations

import errno
import json
import os
import shutil

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import StorageError
from airflow_snaptable.core.io import listing
from airflow_snaptable.core.lake import FAILED, SUCCESSFUL, LakeTable, Policy, lake_status, list_tables, maintain, maintain_table
from airflow_snaptable.core.lake.health import lake_health
from tests.lake.conftest import native_dir, storage_image, write_native, write_policy

EXPIRE_TO_ONE = {"snapshot-expiry": {"min-snapshots-to-keep": 1, "max-snapshot-age-hours": 0}}


def _by_name(report) -> dict:
    return {(t.table, t.location): t for t in report.tables}


@pytest.fixture
def unreadable(monkeypatch):
    """Make directories unreadable for real: chmod 000, and, as root (who reads any directory), the
    listing's own ``os.scandir`` raising the PermissionError the kernel gives everyone else."""
    made: list[str] = []
    scandir = os.scandir

    def guarded(path=".", *args):
        if os.fspath(path) in made:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return scandir(path, *args)

    if os.geteuid() == 0:
        monkeypatch.setattr(listing.os, "scandir", guarded)

    def make(path: str) -> str:
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0)
        made.append(path)
        return path

    yield make
    for path in made:
        os.chmod(path, 0o755)


def _conflicting_lake(tmp_path, paimon) -> str:
    lake = tmp_path / "lake"
    shutil.copytree(os.path.join(paimon.template, "db.db", "app"), lake / "pm.db" / "t")
    write_native(native_dir(str(lake), "pm.t"), snapshots=3)
    write_native(str(lake / "a.b" / "t"), snapshots=3)
    write_native(native_dir(str(lake), "a.b.t"), snapshots=3)
    write_native(native_dir(str(lake), "ok.t"), snapshots=3)
    return str(lake)


def test_a_name_two_tables_hold_maintains_neither_and_says_so_everywhere(tmp_path, paimon, capsys):
    lake = _conflicting_lake(tmp_path, paimon)
    conflicting = [os.path.join(lake, *parts) for parts in (("a.b", "t"), ("a", "b", "t"), ("pm.db", "t"), ("pm", "t"))]
    before = {path: storage_image(path) for path in conflicting}
    doc = {"defaults": {"snapshot-expiry": {}}, "tables": {"a.b.t": EXPIRE_TO_ONE, "pm.t": EXPIRE_TO_ONE, "ok.t": EXPIRE_TO_ONE}}
    report = maintain(lake, Policy.from_mapping(doc))
    assert {path: storage_image(path) for path in conflicting} == before  # nothing run, not even a status or a lease
    assert report.failed
    tables = _by_name(report)
    for path in conflicting:
        entry = next(t for t in report.tables if t.location == path)
        assert entry.error.startswith("TableNameConflictError: the name '" + entry.table + "' is not unique: 2 entries of the lake have it")
        assert entry.jobs["snapshot-expiry"]["status"] == FAILED
        assert entry.jobs["snapshot-expiry"]["failureMessage"] == entry.error
        assert entry.to_dict()["error"] == entry.error
    assert len(Table.open(native_dir(lake, "ok.t")).snapshots()) == 1
    assert tables[("ok.t", native_dir(lake, "ok.t"))].error is None

    # status and health show it; the CLI exits 1 and prints it with every other table.
    status = lake_status(lake)
    assert status.failed and sum(t.error is not None for t in status.tables) == 4
    health = lake_health(lake)
    assert [h.table for h in health[:4]] == ["a.b.t", "a.b.t", "pm.t", "pm.t"]
    assert all(h.failed and h.error.startswith("TableNameConflictError") for h in health[:4])
    assert main(["maintain", lake, "--policy", write_policy(tmp_path / "p.json", doc)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert sum("TableNameConflictError" in line for line in lines) == 4

    # A DAG's path: list_tables gives each with its problem, maintain_table refuses it alone.
    listed = [LakeTable.from_dict(json.loads(json.dumps(t.to_dict()))) for t in list_tables(lake)]
    refused = [maintain_table(t, Policy.from_mapping(doc)) for t in listed if t.problem]
    assert len(refused) == 4 and all(r.failed and r.error for r in refused)
    assert {path: storage_image(path) for path in conflicting} == before


def test_an_unreadable_directory_is_one_failed_entry_and_the_lake_is_still_maintained(tmp_path, unreadable, capsys):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "sales.orders"), snapshots=3)
    write_native(native_dir(lake, "zz.t"), snapshots=3)  # walked after the unreadable ones
    unreadable(os.path.join(lake, "lost+found"))
    unreadable(os.path.join(lake, "sales", "locked"))
    policy = Policy.from_mapping({"defaults": EXPIRE_TO_ONE})
    report = maintain(lake, policy)
    assert report.failed
    assert [t.table for t in report.tables] == ["lost+found", "sales.locked", "sales.orders", "zz.t"]
    for table in report.tables[:2]:
        assert table.format == "unknown" and table.error.startswith("PermissionError") and table.jobs == {}
    for table in report.tables[2:]:
        assert table.jobs["snapshot-expiry"]["status"] == SUCCESSFUL and table.error is None
    assert len(Table.open(native_dir(lake, "zz.t")).snapshots()) == 1

    status = lake_status(lake)
    assert [t.table for t in status.tables] == ["lost+found", "sales.locked", "sales.orders", "zz.t"]
    assert status.tables[0].error.startswith("PermissionError")
    health = lake_health(lake)
    assert [h.table for h in health] == ["lost+found", "sales.locked", "sales.orders", "zz.t"]
    assert health[0].failed and health[0].error.startswith("PermissionError") and not health[2].failed
    for command in ("maintain", "status", "health"):
        extra = ["--policy", write_policy(tmp_path / "p.json", {"defaults": EXPIRE_TO_ONE})] if command == "maintain" else []
        code = main([command, lake, "--json", *extra])
        printed = json.loads(capsys.readouterr().out)["tables"]
        assert code == (1 if command == "maintain" else 0)
        assert [t["table"] for t in printed] == ["lost+found", "sales.locked", "sales.orders", "zz.t"], command
    # A DAG lists it, and its task fails with the reason.
    listed = {t.name: t for t in list_tables(lake)}
    assert maintain_table(LakeTable.from_dict(listed["lost+found"].to_dict()), policy).failed


def test_an_unreadable_location_is_a_typed_error(tmp_path, unreadable):
    lake = unreadable(str(tmp_path / "lake"))
    with pytest.raises(StorageError, match="cannot list it"):
        list_tables(lake)


@pytest.mark.parametrize("depth", [100_000])
def test_a_schema_nested_past_the_parser_fails_its_table_alone(tmp_path, depth):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "a.t"), snapshots=3)
    write_native(native_dir(lake, "z.t"), snapshots=3)
    os.makedirs(os.path.join(lake, "m", "deep", "schema"))
    with open(os.path.join(lake, "m", "deep", "schema", "schema-0"), "w") as f:
        f.write("[" * depth + "]" * depth)
    report = maintain(lake, Policy.from_mapping({"defaults": EXPIRE_TO_ONE}))
    assert [t.table for t in report.tables] == ["a.t", "m.deep", "z.t"]
    deep = report.tables[1].jobs["snapshot-expiry"]
    assert deep["status"] == FAILED and deep["failureMessage"].startswith("CorruptMetadataError")
    assert report.tables[2].jobs["snapshot-expiry"]["status"] == SUCCESSFUL
    assert [t.table for t in lake_status(lake).tables] == ["a.t", "m.deep", "z.t"]
    assert lake_health(lake)[0].table == "m.deep"


def test_a_catalog_namespace_that_cannot_be_listed_is_one_failed_entry(iceberg_lake, monkeypatch):
    """The catalog's side of the rule: a namespace whose tables the catalog refuses to list (a grant
    missing on it; the SQL catalog made to refuse it here, as a REST catalog answers 403)."""
    from pyiceberg.catalog.sql import SqlCatalog

    list_tables_of = SqlCatalog.list_tables

    def refusing(self, namespace):
        if tuple(namespace) == ("ops",):
            raise PermissionError(errno.EACCES, "not authorized to list namespace ops")
        return list_tables_of(self, namespace)

    monkeypatch.setattr(SqlCatalog, "list_tables", refusing)
    report = maintain("iceberg://", Policy.from_mapping({"defaults": EXPIRE_TO_ONE}), catalog=iceberg_lake.properties)
    assert [t.table for t in report.tables] == ["ops", "ops.archive.events", "sales.orders", "sales.returns"]
    assert report.failed and report.tables[0].error.startswith("StorageError") and "not authorized" in report.tables[0].error
    assert {t.jobs["snapshot-expiry"]["status"] for t in report.tables[1:]} == {SUCCESSFUL}
    assert [t.table for t in lake_status("iceberg://", catalog=iceberg_lake.properties).tables][0] == "ops"
    with pytest.raises(StorageError, match="not authorized"):
        list_tables("iceberg://ops", catalog=iceberg_lake.properties)  # the location's own namespace
