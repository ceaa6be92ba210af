"""Real Apache Iceberg tables for the tests: pyiceberg writes them in an SQL catalog on SQLite.

Each test gets its own catalog and warehouse (``iceberg_env``). After an operation, pyiceberg (not
this package) says what is left: :func:`read_everything` reads every snapshot and ref, and
:func:`reachable_files` walks the metadata for every file a snapshot, ref or metadata version
still references, which must be exactly the files under the table location.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass

import pyarrow as pa
import pytest

SCHEMA = pa.schema([("p", pa.string()), ("id", pa.int64())])


@dataclass
class IcebergEnv:
    properties: dict
    warehouse: str

    @property
    def catalog_json(self) -> str:
        return json.dumps(self.properties)

    def catalog(self):
        from pyiceberg.catalog import load_catalog

        return load_catalog("default", **self.properties)

    def table(self, name: str = "db.orders"):
        return self.catalog().load_table(name)

    def create(self, name: str = "db.orders", properties: dict | None = None):
        catalog = self.catalog()
        namespace = name.rsplit(".", 1)[0]
        if (namespace,) not in catalog.list_namespaces():
            catalog.create_namespace(namespace)
        return catalog.create_table(name, schema=SCHEMA, properties=properties or {})

    def location(self, name: str = "db.orders") -> str:
        return self.table(name).location()[len("file://"):]


@pytest.fixture
def iceberg_env(tmp_path) -> IcebergEnv:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    return IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}, str(warehouse))


def rows(n: int, partition: str = "a") -> pa.Table:
    return pa.table({"p": [partition] * 2, "id": [n, n + 1000]}, schema=SCHEMA)


def _sorted(table: pa.Table) -> list:
    return sorted(zip(*[table.column(i).to_pylist() for i in range(table.num_columns)]), key=repr)


def read_everything(table) -> dict:
    """Every snapshot in the metadata and every ref, each as its sorted rows (pyiceberg reads them)."""
    table = table.refresh()
    return {
        "snapshots": {s.snapshot_id: _sorted(table.scan(snapshot_id=s.snapshot_id).to_arrow()) for s in table.metadata.snapshots},
        "refs": {name: ref.snapshot_id for name, ref in table.metadata.refs.items()},
    }


def _relative(table, uri: str) -> str:
    location = table.location()
    assert uri.startswith(location + "/"), uri
    return uri[len(location) + 1:]


def reachable_files(table) -> set[str]:
    """What the metadata references, by pyiceberg's walk (paths relative to the location)."""
    table = table.refresh()
    metadata, io = table.metadata, table.io
    found = {_relative(table, table.metadata_location)} | {_relative(table, e.metadata_file) for e in metadata.metadata_log}
    for snapshot in metadata.snapshots:
        found.add(_relative(table, snapshot.manifest_list))
        for manifest in snapshot.manifests(io):
            found.add(_relative(table, manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                found.add(_relative(table, entry.data_file.file_path))
    for statistics in metadata.statistics:
        found.add(_relative(table, statistics.statistics_path))
    return found


def files_on_disk(location: str) -> set[str]:
    found = set()
    for directory, _dirs, names in os.walk(location):
        for name in names:
            rel = os.path.relpath(os.path.join(directory, name), location)
            if not rel.startswith("snaptable" + os.sep):
                found.add(rel)
    return found


def assert_exactly_reachable_left(table, location: str) -> None:
    assert files_on_disk(location) == reachable_files(table)


def _extension_file(package) -> str:
    found = glob.glob(os.path.join(os.path.dirname(package.__file__), "extensions", "*", "*.duckdb_extension"))
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def duckdb_iceberg():
    """A DuckDB connection with the ``iceberg`` extension loaded from its PyPI package (test_iceberg_duckdb.py's module doc)."""
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_iceberg

    connection = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    # iceberg loads avro on start-up: avro first, from its package.
    for package in (duckdb_extension_avro, duckdb_extension_iceberg):
        connection.execute(f"LOAD '{_extension_file(package)}'")
    yield connection
    connection.close()
