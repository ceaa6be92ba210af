"""Discovery: which tables a location holds, by layout, with dotted names (core/lake/discovery.py)."""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.core.errors import InvalidArgumentError, TableNotFoundError
from airflow_snaptable.core.lake import discover
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
    monkeypatch.setattr(Storage, "list_directory", lambda self, rel: lists.append(self.full_path(rel)) or original_list(self, rel))
    tables = list(discover(mixed_lake.path))
    assert len(reads) == len(tables) and all("/schema/schema-" in path for path in reads)
    inside = [path for path in lists for t in tables if path.startswith(t.uri + "/") and not path.endswith("/schema")]
    assert inside == []


def test_hidden_and_foreign_directories_are_not_walked_and_depth_is_bounded(tmp_path):
    lake = str(tmp_path / "lake")
    write_native(native_dir(lake, "a.b.c.d"), snapshots=1)
    write_native(os.path.join(lake, ".trash", "t"), snapshots=1)
    write_native(os.path.join(lake, "_tmp", "t"), snapshots=1)
    # An Iceberg table's directory (metadata/) is another engine's: not a table here, not walked.
    write_native(os.path.join(lake, "iceberg_t", "data", "t"), snapshots=1)
    os.makedirs(os.path.join(lake, "iceberg_t", "metadata"))
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
