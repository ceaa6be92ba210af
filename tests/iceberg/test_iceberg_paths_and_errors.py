"""Iceberg tables (issue 22 items 4 and 6): paths placed by their normal form, and typed errors.

- ``write.data.path = <location>/../shared`` starts with the location but is outside it: expiry and
  orphan removal fail closed and the files under ``shared/`` survive; ``<location>/sub/../data``
  is inside, and the same files as the listing's ``data/`` (orphan removal deleted live files).
- A bad SQL catalog URI or ``py-io-impl`` is CatalogPropertyError naming the property, in Python
  and through the CLI (exit 2, one line, no traceback), and creates nothing.
- ``create_tag``, ``replace_tag`` and ``rollback_to`` racing an expiry of their snapshot (the expiry
  runs between the call's check and its catalog commit) fail with SnapshotNotFoundError.
- ``update_consumer`` on a table without snapshots fails at once with a typed error (it was a
  CommitConflictError after five commit attempts).
"""

from __future__ import annotations

import json
import os
import posixpath
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import CommitConflictError, SnapshotNotFoundError, Table, TableNotFoundError
from airflow_snaptable.core.errors import CatalogPropertyError, PathOutsideTableError, StorageError, TagNotFoundError
from tests.iceberg.conftest import IcebergEnv, files_on_disk, read_everything, rows

FAR = 4_102_444_800_000
SNAPTABLE = str(Path(sys.executable).with_name("snaptable"))


def _open(env: IcebergEnv) -> Table:
    return Table.open("iceberg://db.orders", catalog=env.properties)


def _tree(root) -> dict[str, bytes]:
    found = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found


def _with_data_path(env: IcebergEnv, suffix: str):
    """A table whose data files go to ``<location><suffix>``: an append, then an overwrite (the
    append's file is what an expiry of the first snapshot deletes)."""
    table = env.create()
    location = table.location()
    table.transaction().set_properties({"write.data.path": location + suffix}).commit_transaction()
    table = table.refresh()
    table.append(rows(1))
    table.overwrite(rows(2))
    table.append(rows(3, "b"))
    return table.refresh()


# -- item 4: '..' in the metadata's paths ---------------------------------------------------------


@pytest.mark.parametrize("suffix", ["/../shared", "/data/../../shared", "//..//shared"])
def test_data_written_out_of_the_location_through_dotdot_is_never_deleted(iceberg_env, suffix):
    """Before: the expiry deleted the overwritten file under ``<warehouse>/db/shared/``."""
    table = _with_data_path(iceberg_env, suffix)
    shared = os.path.join(os.path.dirname(iceberg_env.location()), "shared")
    assert len(os.listdir(shared)) == 3
    before, reads = _tree(iceberg_env.warehouse), read_everything(table)
    ours = _open(iceberg_env)
    for call in (
        lambda: ours.expire_snapshots(retain_min=1, older_than=FAR),
        lambda: ours.expire_snapshots(retain_min=1, older_than=FAR, dry_run=True),
        lambda: ours.remove_orphan_files(older_than="0 s", dry_run=False),
    ):
        with pytest.raises(PathOutsideTableError, match="outside the table location"):
            call()
        assert _tree(iceberg_env.warehouse) == before
    assert read_everything(table) == reads  # no snapshot was removed either: the plan failed before the commit


def _normal_reachable(table) -> set[str]:
    """What pyiceberg's walk references, as normal paths relative to the location."""
    table = table.refresh()
    location = table.location()
    found = {table.metadata_location} | {e.metadata_file for e in table.metadata.metadata_log}
    for snapshot in table.metadata.snapshots:
        found.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            found.add(manifest.manifest_path)
            found.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True))
    return {posixpath.normpath(uri[len(location) + 1:]) for uri in found}


def test_data_written_inside_through_dotdot_is_the_listed_file(iceberg_env):
    """``<location>/sub/../data`` names the files listed under ``data/``. Before: orphan removal did not
    match them and deleted the files the current snapshot reads."""
    table = _with_data_path(iceberg_env, "/sub/../data")
    ours = _open(iceberg_env)
    assert ours.remove_orphan_files(older_than="0 s", dry_run=False).orphan_count == 0
    reads = read_everything(table)
    result = ours.expire_snapshots(retain_min=1, older_than=FAR)
    assert result.deleted_data_files == 1  # the overwritten file, by its listed name
    after = read_everything(table)
    assert after["snapshots"] == {i: reads["snapshots"][i] for i in after["snapshots"]} and len(after["snapshots"]) == 1
    assert ours.remove_orphan_files(older_than="0 s", dry_run=False).orphan_count == 0
    assert files_on_disk(iceberg_env.location()) == _normal_reachable(table)


def test_a_journal_naming_a_file_out_of_the_location_is_not_finished(iceberg_env):
    """A crashed expiry's journal is finished by the next run: what it names is deleted only inside the table."""
    table = iceberg_env.create()
    table.append(rows(1))
    shared = Path(iceberg_env.warehouse) / "db" / "shared"
    shared.mkdir()
    (shared / "victim.parquet").write_bytes(b"another table's file")
    plan_dir = Path(iceberg_env.location()) / "snaptable" / "plan"
    plan_dir.mkdir(parents=True)
    journal = {"table_uuid": str(table.refresh().metadata.table_uuid), "expired_ids": [42], "removed_refs": [],
               "content_files": ["../shared/victim.parquet"], "bytes": 0, "delete_files": True}
    (plan_dir / "expire-1.json").write_text(json.dumps(journal))
    before = _tree(iceberg_env.warehouse)
    with pytest.raises(PathOutsideTableError):
        _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
    assert _tree(iceberg_env.warehouse) == before


# -- item 6: catalog properties --------------------------------------------------------------------


BAD_URIS = ["not a url", "an unknown driver", "an unknown driver of a known database", "a sqlite file in a missing directory",
            "a directory", "a non-database file", "empty"]


def _bad_uris(tmp_path) -> dict[str, str]:
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "not-a-database").write_bytes(b"hello, this is no SQLite database " * 100)
    return {
        "not a url": "not a url",
        "an unknown driver": "nosuchdb://host/db",
        "an unknown driver of a known database": "postgresql+nosuchdriver://u:secret@host/db",
        "a sqlite file in a missing directory": f"sqlite:///{tmp_path}/missing/catalog.db",
        "a directory": f"sqlite:///{tmp_path}/a-directory",
        "a non-database file": f"sqlite:///{tmp_path}/not-a-database",
        "empty": "",
    }


@pytest.mark.parametrize("case", BAD_URIS)
def test_a_bad_sql_catalog_uri_is_a_typed_error_naming_the_property(iceberg_env, tmp_path, case):
    """Before: sqlalchemy's ArgumentError, NoSuchModuleError, OperationalError or DatabaseError, raw."""
    iceberg_env.create().append(rows(1))
    uri = _bad_uris(tmp_path)[case]
    before = _tree(tmp_path)
    with pytest.raises(CatalogPropertyError, match="'uri'") as raised:
        Table.open("iceberg://db.orders", catalog={**iceberg_env.properties, "uri": uri})
    assert "secret" not in str(raised.value)  # a database password is never shown
    assert _tree(tmp_path) == before  # nothing created: no database, no directory


def test_a_missing_sqlite_catalog_is_not_created(iceberg_env, tmp_path):
    """Before: opening a table in a catalog file that does not exist created the file and its tables."""
    missing = tmp_path / "typo.db"
    with pytest.raises(TableNotFoundError, match="'uri'"):
        Table.open("iceberg://db.orders", catalog={**iceberg_env.properties, "uri": f"sqlite:///{missing}"})
    assert not missing.exists()


@pytest.mark.parametrize("case", ["not a url", "a directory", "a sqlite file in a missing directory"])
def test_the_cli_reports_a_bad_catalog_uri_in_one_line(iceberg_env, tmp_path, case):
    catalog = json.dumps({**iceberg_env.properties, "uri": _bad_uris(tmp_path)[case]})
    done = subprocess.run([SNAPTABLE, "show", "iceberg://db.orders", "--catalog", catalog], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("snaptable: CatalogPropertyError: ") and "'uri'" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("impl", ["builtins.dict", "os.path.join", "pyiceberg.io.NoSuchFileIO", "no_such_module.FileIO", "FileIO"])
def test_py_io_impl_that_names_no_file_io_is_a_typed_error(iceberg_env, impl, capsys):
    """Before: AttributeError or TypeError from pyiceberg."""
    iceberg_env.create().append(rows(1))
    catalog = {**iceberg_env.properties, "py-io-impl": impl}
    with pytest.raises(CatalogPropertyError, match="py-io-impl"):
        Table.open("iceberg://db.orders", catalog=catalog)
    assert main(["snapshots", "iceberg://db.orders", "--catalog", json.dumps(catalog)]) == 2
    assert "CatalogPropertyError" in capsys.readouterr().err


@pytest.mark.parametrize("impl", ["builtins.dict", "os.path.join"])
def test_py_io_impl_as_a_table_property_that_names_no_file_io_is_a_typed_error(iceberg_env, impl):
    """A table property overrides the catalog's (pyiceberg refuses to write one, another engine may)."""
    table = iceberg_env.create()
    table.append(rows(1))
    metadata = table.refresh().metadata_location[len("file://"):]
    doc = json.loads(Path(metadata).read_text())
    doc["properties"]["py-io-impl"] = impl
    Path(metadata).write_text(json.dumps(doc))
    with pytest.raises(CatalogPropertyError, match="py-io-impl"):
        _open(iceberg_env)


def test_py_catalog_impl_that_names_no_catalog_is_a_typed_error(iceberg_env):
    catalog = {k: v for k, v in iceberg_env.properties.items() if k != "type"}
    with pytest.raises(CatalogPropertyError, match="py-catalog-impl"):
        Table.open("iceberg://db.orders", catalog={**catalog, "py-catalog-impl": "builtins.dict"})


# -- item 6: ref changes racing an expiry ----------------------------------------------------------


def _history(env: IcebergEnv) -> list[int]:
    """main's snapshots, oldest first: an append, an overwrite (pyiceberg: a delete and an append), an append."""
    table = env.create()
    table.append(rows(1))
    table.overwrite(rows(2))
    table.append(rows(3, "b"))
    return [s.snapshot_id for s in table.refresh().metadata.snapshots]


def _expire_before_the_first_commit(ours: Table, env: IcebergEnv) -> list:
    """The first catalog commit ``ours`` makes runs after another process expired every snapshot but the current one."""
    catalog, commits = ours.catalog, []
    original = catalog.commit_table

    def commit_table(table, requirements, updates):
        if not commits:
            _open(env).expire_snapshots(retain_min=1, older_than=FAR)
        commits.append(updates)
        return original(table, requirements, updates)

    catalog.commit_table = commit_table
    return commits


@pytest.mark.parametrize("call", [
    lambda ours, ids: ours.create_tag("audit", ids[0]),
    lambda ours, ids: ours.create_or_keep("audit", ids[0], if_exists="skip"),
    lambda ours, ids: ours.replace_tag("moving", ids[0]),
    lambda ours, ids: ours.rollback_to(ids[0]),
], ids=["create_tag", "create_or_keep", "replace_tag", "rollback_to"])
def test_a_ref_change_racing_the_expiry_of_its_snapshot_says_the_snapshot_no_longer_exists(iceberg_env, call):
    """Before: pyiceberg's bare ValueError ("cannot set ... to unknown snapshot")."""
    ids = _history(iceberg_env)
    table = iceberg_env.table()
    table.manage_snapshots().create_tag(ids[-1], "moving").commit()
    ours = _open(iceberg_env)
    commits = _expire_before_the_first_commit(ours, iceberg_env)
    with pytest.raises(SnapshotNotFoundError, match=f"snapshot {ids[0]} no longer exists"):
        call(ours, ids)
    assert len(commits) == 1  # the second attempt saw the snapshot gone and committed nothing
    after = read_everything(table)
    assert after["refs"] == {"main": ids[-1], "moving": ids[-1]} and list(after["snapshots"]) == [ids[-1]]


def test_a_tag_deleted_while_it_is_replaced_stays_deleted(iceberg_env):
    """Before: replace_tag had no requirement and created the tag again."""
    ids = _history(iceberg_env)
    table = iceberg_env.table()
    table.manage_snapshots().create_tag(ids[-1], "moving").commit()
    ours = _open(iceberg_env)
    original = ours.catalog.commit_table

    def commit_table(table, requirements, updates):
        if ours.catalog.commit_table is commit_table:
            ours.catalog.commit_table = original
            iceberg_env.table().manage_snapshots().remove_tag("moving").commit()
        return original(table, requirements, updates)

    ours.catalog.commit_table = commit_table
    with pytest.raises(TagNotFoundError):
        ours.replace_tag("moving", ids[1])
    assert "moving" not in iceberg_env.table().metadata.refs


# -- item 6: a consumer on a table without snapshots -------------------------------------------------


def test_update_consumer_on_a_table_without_snapshots_fails_at_once(iceberg_env):
    """Before: CommitConflictError after five commit attempts (pyiceberg asserts no ref but main's there)."""
    iceberg_env.create()
    ours = _open(iceberg_env)
    attempts = []
    original = ours.catalog.commit_table
    ours.catalog.commit_table = lambda *args: attempts.append(args) or original(*args)
    with pytest.raises(SnapshotNotFoundError, match="no snapshot") as raised:
        ours.update_consumer("reader", 1)
    assert not isinstance(raised.value, CommitConflictError) and attempts == []
    assert iceberg_env.table().metadata.properties.get("snaptable.consumer.reader") is None


def test_update_consumer_on_a_native_table_without_snapshots_records_it(tmp_path):
    """This package's tables (and Paimon's, tests/paimon/test_paimon_paths_and_races.py) let a reader register
    before the first commit, as Paimon's ConsumerManager does: no error, no retry."""
    from tests.conftest import SCHEMA

    native = Table.create(str(tmp_path / "native"), SCHEMA)
    assert native.update_consumer("reader", 1).next_snapshot == 1
    assert [c.id for c in Table.open(str(tmp_path / "native")).consumers()] == ["reader"]


def test_a_consumer_on_a_table_without_snapshots_can_be_deleted(iceberg_env):
    """One recorded while the table had no snapshot (by hand, or by another version): deleting it committed
    nothing and failed with CommitConflictError."""
    table = iceberg_env.create()
    table.transaction().set_properties({"snaptable.consumer.reader": json.dumps({"nextSnapshot": 1, "updateTime": 1})}).commit_transaction()
    ours = _open(iceberg_env)
    assert [c.id for c in ours.consumers()] == ["reader"]
    ours.delete_consumer("reader")
    assert ours.consumers() == []


def test_a_table_dropped_or_a_catalog_database_broken_after_opening_is_a_typed_error(iceberg_env):
    """Every refresh of an open table reads the catalog again: before, pyiceberg's NoSuchTableError and
    sqlalchemy's DatabaseError came out raw."""
    iceberg_env.create().append(rows(1))
    ours = _open(iceberg_env)
    iceberg_env.catalog().drop_table("db.orders")
    with pytest.raises(TableNotFoundError):
        ours.snapshots()
    Path(iceberg_env.properties["uri"][len("sqlite:///"):]).write_bytes(b"no database " * 1000)
    with pytest.raises(StorageError, match="catalog"):
        ours.latest_snapshot()
