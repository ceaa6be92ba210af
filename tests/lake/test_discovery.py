"""Discovery: which tables a location holds, by layout, with dotted names (core/lake/discovery.py)."""

from __future__ import annotations

import os
import shutil

import pytest

from airflow_snaptable.core.errors import InvalidArgumentError, TableNotFoundError
from airflow_snaptable.core import Table
from airflow_snaptable.core.lake import LakeTable, Policy, discover, maintain
from airflow_snaptable.core.io.storage import Storage
from tests.lake.conftest import ICEBERG_TABLES, NATIVE_TABLES, PAIMON_TABLES, native_dir, write_native


def _found(location: str, **kwargs) -> dict[str, str]:
    return {t.name: t.format for t in discover(location, **kwargs)}


def test_a_mixed_lake_lists_our_tables_and_the_paimon_warehouse_by_dotted_name(mixed_lake):
    found = list(discover(mixed_lake.path))
    assert {t.name: t.format for t in found} == {
        **{name: "snaptable" for name in NATIVE_TABLES}, **{name: "paimon" for name in PAIMON_TABLES}
    }
    by_name = {t.name: t for t in found}
    # A Paimon table is <db>.<table> (its directory <db>.db/<table>); ours is its path with dots.
    assert by_name["db.app"].uri == os.path.join(mixed_lake.path, "db.db", "app")
    assert by_name["ops.metrics.daily"].uri == native_dir(mixed_lake.path, "ops.metrics.daily")
    assert by_name["ops.metrics.daily"].namespace == "ops.metrics"
    assert [t.name for t in found] == sorted(t.name for t in found)  # depth first, in name order


def test_discovery_reads_only_schema_files_and_lists_no_table_history(mixed_lake, monkeypatch):
    """Tables are recognised by their layout (``schema/schema-<n>``): the walk reads one schema file per
    table, never a snapshot, manifest, tag or data file, and never lists inside a table but its schema/."""
    reads, lists = [], []
    original_read, original_list = Storage.read_bytes, Storage.list_directory
    monkeypatch.setattr(Storage, "read_bytes", lambda self, rel: reads.append(self.full_path(rel)) or original_read(self, rel))
    monkeypatch.setattr(Storage, "list_directory", lambda self, rel, **kw: lists.append(self.full_path(rel)) or original_list(self, rel, **kw))
    tables = list(discover(mixed_lake.path))
    assert len(reads) == len(tables) and all("/schema/schema-" in path for path in reads)
    inside = [path for path in lists for t in tables if path.startswith(t.uri + "/") and not path.endswith("/schema")]
    assert inside == []


def test_hidden_and_foreign_directories_are_not_walked_and_depth_is_bounded(tmp_path):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "a.b.c.d"), snapshots=1)
    write_native(os.path.join(lake, ".trash", "t"), snapshots=1)
    write_native(os.path.join(lake, "_tmp", "t"), snapshots=1)
    # An Iceberg table's directory (metadata/ holding its metadata files) is another engine's: not a table here, not walked.
    write_native(os.path.join(lake, "iceberg_t", "data", "t"), snapshots=1)
    _iceberg_metadata(os.path.join(lake, "iceberg_t"))
    # A table is not walked into: nothing below it is another table.
    write_native(os.path.join(lake, "outer"), snapshots=1)
    write_native(os.path.join(lake, "outer", "data", "inner"), snapshots=1)
    assert _found(lake) == {"a.b.c.d": "snaptable", "outer": "snaptable"}
    assert _found(lake, max_depth=4) == {"a.b.c.d": "snaptable", "outer": "snaptable"}
    assert _found(lake, max_depth=3) == {"outer": "snaptable"}
    # A directory holding schema/ without a schema file is not a table.
    os.makedirs(os.path.join(lake, "half", "schema"))
    assert "half" not in _found(lake)
    with pytest.raises(InvalidArgumentError, match="max_depth"):
        list(discover(lake, max_depth=-1))


def test_a_location_that_is_a_table_is_that_table(tmp_path):
    path = native_dir(str(tmp_path), "orders")
    write_native(path, snapshots=1)
    assert _found(path) == {"orders": "snaptable"}


def test_catalog_properties_are_for_catalog_locations_only(tmp_path):
    with pytest.raises(InvalidArgumentError, match="catalog properties are for iceberg"):
        list(discover(str(tmp_path), catalog={"type": "sql"}))


def test_a_catalog_lists_every_namespace_or_one_namespace_and_those_below_it(iceberg_lake):
    catalog = iceberg_lake.properties
    assert _found("iceberg://", catalog=catalog) == {name: "iceberg" for name in ICEBERG_TABLES}
    assert _found("iceberg://ops", catalog=catalog) == {"ops.metrics": "iceberg", "ops.archive.events": "iceberg"}
    assert _found("iceberg://ops.archive", catalog=catalog) == {"ops.archive.events": "iceberg"}
    table = next(t for t in discover("iceberg://sales", catalog=catalog) if t.name == "sales.orders")
    assert table.uri == "iceberg://sales.orders" and table.namespace == "sales"
    with pytest.raises(TableNotFoundError):
        list(discover("iceberg://nope", catalog=catalog))
    with pytest.raises(InvalidArgumentError):
        list(discover("iceberg://a/b", catalog=catalog))
    with pytest.raises(InvalidArgumentError, match="catalog's properties"):
        list(discover("iceberg://"))


def _iceberg_metadata(table_dir: str, name: str = "00001-2e5a1bd0-6b0b-4f3c-a9a4-6a1f3c3d7a3e.metadata.json") -> None:
    """What marks a directory as an Iceberg table: a metadata file in its metadata/ (not the directory's name)."""
    os.makedirs(os.path.join(table_dir, "metadata"), exist_ok=True)
    with open(os.path.join(table_dir, "metadata", name), "w") as f:
        f.write('{"format-version": 2}')


def _mapped(found) -> dict[str, tuple[str, str | None]]:
    return {t.name: (t.uri, t.problem) for t in found}


# -- a table is what holds a table's files, not a directory's name (issue 34, item 11) ---------------------


def test_a_directory_named_metadata_hides_neither_its_siblings_nor_the_lake(tmp_path):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "sales.orders"), snapshots=1)
    write_native(native_dir(lake, "metadata.t"), snapshots=1)  # a namespace named metadata, at the top of the location
    write_native(native_dir(lake, "ops.t"), snapshots=1)
    os.makedirs(os.path.join(lake, "ops", "metadata", "notes"))  # a plain directory named metadata beside a table
    write_native(native_dir(lake, "raw.events"), snapshots=1)
    os.makedirs(os.path.join(lake, "raw", "metadata"))  # an empty one in a namespace
    assert _found(lake) == {name: "snaptable" for name in ("metadata.t", "ops.t", "raw.events", "sales.orders")}
    # Iceberg's table is its metadata files: v<n>.metadata.json, <n>-<uuid>.metadata.json (gzipped too), version-hint.text.
    for i, marker in enumerate(("v3.metadata.json", "00002-x.gz.metadata.json", "00002-x.metadata.json.gz", "version-hint.text")):
        table_dir = os.path.join(lake, f"ice{i}")
        write_native(os.path.join(table_dir, "data", "t"), snapshots=1)
        _iceberg_metadata(table_dir, marker)
    assert set(_found(lake)) == {"metadata.t", "ops.t", "raw.events", "sales.orders"}
    # A location that is an Iceberg table is no empty lake: it is maintained through the catalog.
    with pytest.raises(InvalidArgumentError, match="Iceberg table's directory"):
        list(discover(os.path.join(lake, "ice0")))


def test_a_schema_directory_of_other_json_is_not_a_table_and_hides_nothing(tmp_path):
    """Ours and Paimon's: a table is a schema file holding this package's (or Paimon's) schema, not a directory named schema."""
    lake = str(tmp_path / "lake")
    os.makedirs(os.path.join(lake, "docs", "schema"))
    with open(os.path.join(lake, "docs", "schema", "schema-1"), "w") as f:
        f.write('{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}')
    write_native(native_dir(lake, "docs.t"), snapshots=1)
    assert _found(lake) == {"docs.t": "snaptable"}


# -- symlinks: each real directory once, a table by one path (issue 34, item 2) ---------------------------


def test_a_symlinked_directory_is_walked_once_by_its_own_path_and_a_loop_ends(tmp_path):
    lake = tmp_path / "lake"
    write_native(native_dir(str(lake), "ops.t"), snapshots=1)
    write_native(native_dir(str(lake), "sales.orders"), snapshots=1)
    os.symlink("../ops", lake / "sales" / "ops_alias")  # another name for ops/ inside the location
    os.symlink("../../ops/t", lake / "sales" / "t_alias")  # another name for a table
    os.symlink("..", lake / "sales" / "loop")  # a loop
    os.symlink(lake / "sales", lake / "a_sales")  # sorts before sales/: still named by sales/
    outside = tmp_path / "disk2"
    write_native(native_dir(str(outside), "x"), snapshots=1)
    os.symlink(lake, outside / "back")  # a loop through the outside directory
    os.symlink(outside, outside / "again")  # a loop out there
    os.symlink(outside, lake / "mounted")  # outside the location: followed, named by the link
    os.symlink(outside, lake / "mounted_again")  # the same directory once more: not walked again
    found = list(discover(str(lake)))
    assert _mapped(found) == {
        "mounted.x": (str(lake / "mounted" / "x"), None),
        "ops.t": (str(lake / "ops" / "t"), None),
        "sales.orders": (str(lake / "sales" / "orders"), None),
    }
    assert [t.name for t in found] == sorted(t.name for t in found)


def test_a_symlinked_namespace_gets_no_other_namespace_policy(tmp_path):
    lake = tmp_path / "lake"
    write_native(native_dir(str(lake), "ops.t"), snapshots=6)
    write_native(native_dir(str(lake), "sales.orders"), snapshots=3)
    os.symlink("../ops", lake / "sales" / "ops_alias")
    policy = Policy.from_mapping({"namespaces": {"sales": {"snapshot-expiry": {"min-snapshots-to-keep": 1, "max-snapshot-age-hours": 0}}}})
    report = maintain(str(lake), policy)
    assert len(Table.open(native_dir(str(lake), "ops.t")).snapshots()) == 6  # no section names ops
    assert not report.failed and [t.table for t in report.tables] == ["ops.t", "sales.orders"]
    assert len(Table.open(native_dir(str(lake), "sales.orders")).snapshots()) == 1


# -- two tables, one name (issue 34, item 3) --------------------------------------------------------------


def test_two_tables_of_one_name_are_both_refused_in_name_order(tmp_path, paimon):
    lake = tmp_path / "lake"
    shutil.copytree(os.path.join(paimon.template, "db.db", "app"), lake / "pm.db" / "t")  # Paimon's pm.t
    write_native(native_dir(str(lake), "pm.t"), snapshots=1)  # ours, pm/t: pm.t too
    write_native(str(lake / "a.b" / "t"), snapshots=1)
    write_native(native_dir(str(lake), "a.b.t"), snapshots=1)
    write_native(native_dir(str(lake), "a.z"), snapshots=1)
    write_native(str(lake / "a.c" / "t"), snapshots=1)  # dotted, but the only a.c.t: fine
    found = list(discover(str(lake)))
    assert [t.name for t in found] == ["a.b.t", "a.b.t", "a.c.t", "a.z", "pm.t", "pm.t"]  # one name's tables together
    by_uri = {t.uri: t for t in found}
    for name, first, second in (("a.b.t", lake / "a.b" / "t", lake / "a" / "b" / "t"), ("pm.t", lake / "pm.db" / "t", lake / "pm" / "t")):
        for uri in (str(first), str(second)):
            assert by_uri[uri].problem.startswith(f"TableNameConflictError: the name '{name}' is not unique: 2 entries of the lake have it")
            assert str(first) in by_uri[uri].problem and str(second) in by_uri[uri].problem
    assert by_uri[str(lake / "pm.db" / "t")].format == "paimon"
    assert by_uri[str(lake / "a.c" / "t")].problem is None and by_uri[str(lake / "a" / "z")].problem is None
    # The refusal travels with the table (a DAG's list_tables -> maintain_table, an XCom).
    assert LakeTable.from_dict(by_uri[str(lake / "pm" / "t")].to_dict()) == by_uri[str(lake / "pm" / "t")]
    assert "problem" not in by_uri[str(lake / "a" / "z")].to_dict()  # a table without one: the XCom as before
    for bad in ({"name": "x", "format": "unknown", "uri": "/x"}, {"name": "x", "format": "snaptable", "uri": "/x", "problem": ""},
                {"name": "x", "format": "snaptable", "uri": "/x", "problem": 1}):
        with pytest.raises(InvalidArgumentError):
            LakeTable.from_dict(bad)


def test_the_walk_yields_every_table_in_name_order_and_flags_exactly_the_shared_names(tmp_path):
    """Random trees of directory names that read alike (``a.b`` / ``a/b``, ``<db>.db``, names sorting around
    ``.``): discovery yields each table once, in name order, and a problem exactly on names two tables hold."""
    import json
    import random

    parts_pool = ["a", "b", "a.b", "b.db", "a.db", "x.y", "a-b", "a_b", "ab", "db"]
    for trial in range(40):
        rnd = random.Random(trial)
        lake = tmp_path / f"lake{trial}"
        tables: dict[tuple[str, ...], bool] = {}
        for _ in range(rnd.randint(1, 8)):
            parts = tuple(rnd.choice(parts_pool) for _ in range(rnd.randint(1, 3)))
            if any(other[:len(parts)] == parts or parts[:len(other)] == other for other in tables):
                continue  # no table inside another
            tables[parts] = paimon = rnd.random() < 0.4
            (lake / os.path.join(*parts) / "schema").mkdir(parents=True)
            schema = {"highestFieldId": 1, "fields": []} if paimon else {"arrowSchema": ""}
            (lake / os.path.join(*parts) / "schema" / "schema-0").write_text(json.dumps(schema))
        expected = sorted(".".join(p[:-2] + (p[-2].removesuffix(".db"),) + p[-1:]) if paimon and len(p) >= 2 else ".".join(p)
                          for p, paimon in tables.items())
        found = list(discover(str(lake)))
        assert [t.name for t in found] == expected, trial
        assert [t.problem is not None for t in found] == [expected.count(t.name) > 1 for t in found], trial
