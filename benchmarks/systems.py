"""One small handle per system, so every workload drives the three the same way.

A handle owns one table under a directory it is given and offers:

- ``append(data)`` / ``overwrite(data)``: one commit each (the timed calls);
- ``read(columns=None)``: the latest state as a pyarrow Table (for validation);
- ``commit_count()``: how many commits the table's history holds;
- ``ops()`` / ``reset_ops()``: storage operations by kind (ours only; None elsewhere);
- ``native``: the system's own table object, for workload-specific calls
  (``Table.expire_snapshots``, ``DeltaTable.vacuum``, ``Table.maintenance`` ...).

The peers are driven the way their documentation shows: deltalake through
``write_deltalake(path, ...)`` (each call loads the log from storage, as a fresh
Airflow task would) and, as ``delta-open``, through one DeltaTable kept open;
pyiceberg through a SqlCatalog on SQLite and
``table.append`` / ``table.overwrite`` on a table object kept open.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa

from benchmarks.common import OP_KINDS, PARTITION_COLUMN, SCHEMA, BenchmarkError

_REQUIRED_MODULES = {
    "ours": ("airflow_snaptable.core",),
    "delta": ("deltalake",),
    "delta-open": ("deltalake",),
    "iceberg": ("pyiceberg.catalog.sql", "sqlalchemy"),
}


def unavailable_reason(system: str) -> str | None:
    """None if ``system`` can run here, else why not (e.g. an import error)."""
    for module in _REQUIRED_MODULES[system]:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure means "cannot run"
            return f"cannot import {module}: {type(exc).__name__}: {exc}"
    return None


def open_system(system: str, directory: Path, name: str = "t", partition_by: Sequence[str] = (PARTITION_COLUMN,)):
    """Create an empty table of ``system`` under ``directory`` and return its handle."""
    cls = {"ours": OursHandle, "delta": DeltaHandle, "delta-open": DeltaOpenHandle, "iceberg": IcebergHandle}[system]
    return cls(Path(directory), name=name, partition_by=partition_by)


# -- ours ----------------------------------------------------------------------------------


class OursHandle:
    system = "ours"

    def __init__(self, directory: Path, name: str = "t", partition_by: Sequence[str] = (PARTITION_COLUMN,), options: dict | None = None):
        from airflow_snaptable.core import Table

        self.uri = str(directory / name)
        opts = {"snapshot.num-retained.min": "10"}
        opts.update(options or {})
        self.native = Table.create(self.uri, SCHEMA, partition_by=list(partition_by), options=opts)
        self.last_snapshot = None

    def append(self, data: pa.Table):
        self.last_snapshot = self.native.append(data)
        return self.last_snapshot

    def overwrite(self, data: pa.Table):
        self.last_snapshot = self.native.overwrite(data)
        return self.last_snapshot

    def read(self, columns: Sequence[str] | None = None) -> pa.Table:
        table = self.native.scan().to_arrow()
        return table.select(list(columns)) if columns else table

    def commit_count(self) -> int:
        return self.last_snapshot.id if self.last_snapshot is not None else 0

    def last_commit_id(self) -> int | None:
        return self.last_snapshot.id if self.last_snapshot is not None else None

    def ops(self) -> dict[str, int]:
        counts = self.native.storage.counts
        return {kind: int(counts.get(kind, 0)) for kind in OP_KINDS}

    def reset_ops(self) -> None:
        self.native.storage.reset_counts()


# -- deltalake -----------------------------------------------------------------------------


class DeltaHandle:
    system = "delta"

    def __init__(self, directory: Path, name: str = "t", partition_by: Sequence[str] = (PARTITION_COLUMN,)):
        from deltalake import DeltaTable

        self.path = str(directory / name)
        self.partition_by = list(partition_by)
        # An empty table first (version 0), so every timed write is a plain append.
        DeltaTable.create(self.path, SCHEMA, partition_by=self.partition_by)

    @property
    def native(self):
        from deltalake import DeltaTable

        return DeltaTable(self.path)

    def append(self, data: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(self.path, data, mode="append", partition_by=self.partition_by)

    def overwrite(self, data: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(self.path, data, mode="overwrite", partition_by=self.partition_by)

    def read(self, columns: Sequence[str] | None = None) -> pa.Table:
        from deltalake import DeltaTable

        dataset = DeltaTable(self.path).to_pyarrow_dataset()
        return dataset.to_table(columns=list(columns) if columns else None)

    def commit_count(self) -> int:
        from deltalake import DeltaTable

        return DeltaTable(self.path).version()  # version 0 is the create

    def last_commit_id(self) -> int | None:
        return self.commit_count()

    def ops(self) -> None:
        return None

    def reset_ops(self) -> None:
        pass


class DeltaOpenHandle(DeltaHandle):
    """deltalake with one DeltaTable kept open and passed to ``write_deltalake``.

    The table object keeps the log state in memory and catches up incrementally,
    so a commit does not replay the log since the last checkpoint.
    """

    system = "delta-open"

    def __init__(self, directory: Path, name: str = "t", partition_by: Sequence[str] = (PARTITION_COLUMN,)):
        from deltalake import DeltaTable

        super().__init__(directory, name, partition_by)
        self._table = DeltaTable(self.path)

    @property
    def native(self):
        return self._table

    def append(self, data: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(self.native, data, mode="append", partition_by=self.partition_by)

    def overwrite(self, data: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(self.native, data, mode="overwrite", partition_by=self.partition_by)


# -- pyiceberg -----------------------------------------------------------------------------


def iceberg_catalog(directory: Path, catalog_name: str = "bench"):
    """A SqlCatalog on SQLite with its warehouse under ``directory``."""
    from pyiceberg.catalog.sql import SqlCatalog

    directory = Path(directory).resolve()
    warehouse = directory / "wh"
    warehouse.mkdir(parents=True, exist_ok=True)
    return SqlCatalog(catalog_name, uri=f"sqlite:///{directory / 'catalog.db'}", warehouse=f"file://{warehouse}")


def iceberg_schema_and_spec(partition_by: Sequence[str]):
    """SCHEMA as an Iceberg schema (field ids 1..n, all optional) and an identity partition spec."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType

    types = {pa.int64(): LongType(), pa.string(): StringType(), pa.float64(): DoubleType()}
    fields = [NestedField(i + 1, f.name, types[f.type], required=False) for i, f in enumerate(SCHEMA)]
    ids = {f.name: f.field_id for f in fields}
    spec = PartitionSpec(
        *(PartitionField(source_id=ids[c], field_id=1000 + i, transform=IdentityTransform(), name=c) for i, c in enumerate(partition_by))
    )
    return Schema(*fields), spec


class IcebergHandle:
    system = "iceberg"

    def __init__(self, directory: Path, name: str = "t", partition_by: Sequence[str] = (PARTITION_COLUMN,), namespace: str = "bench"):
        self.directory = Path(directory)
        self.catalog = iceberg_catalog(self.directory)
        if (namespace,) not in self.catalog.list_namespaces():
            self.catalog.create_namespace(namespace)
        schema, spec = iceberg_schema_and_spec(partition_by)
        self.identifier = f"{namespace}.{name}"
        self.native = self.catalog.create_table(self.identifier, schema=schema, partition_spec=spec)

    def append(self, data: pa.Table) -> None:
        self.native.append(data)

    def overwrite(self, data: pa.Table) -> None:
        self.native.overwrite(data)

    def read(self, columns: Sequence[str] | None = None) -> pa.Table:
        table = self.catalog.load_table(self.identifier)
        scan = table.scan(selected_fields=tuple(columns)) if columns else table.scan()
        return scan.to_arrow()

    def commit_count(self) -> int:
        # One catalog commit per append; pyiceberg's overwrite commits a delete and an
        # append snapshot in one catalog commit, so count metadata-log entries instead.
        table = self.catalog.load_table(self.identifier)
        return len(table.metadata.metadata_log)

    def last_commit_id(self) -> int | None:
        snapshot = self.native.current_snapshot()
        return snapshot.snapshot_id if snapshot is not None else None

    def ops(self) -> None:
        return None

    def reset_ops(self) -> None:
        pass


# -- validation ---------------------------------------------------------------------------


def validate_state(handle: Any, expected: pa.Table | None = None, expected_rows: int | None = None, where: str = "") -> dict[str, Any]:
    """Read the table back and check it; raise BenchmarkError on any mismatch.

    With ``expected``: same row count, the same ids, and the same partition and
    value sums. With only ``expected_rows``: the row count.
    """
    label = f"{handle.system}{' ' + where if where else ''}"
    if expected is None:
        got = handle.read(columns=["id"])
        if got.num_rows != expected_rows:
            raise BenchmarkError(f"{label}: read {got.num_rows} rows, expected {expected_rows}")
        return {"rows": got.num_rows}
    got = handle.read()
    if got.num_rows != expected.num_rows:
        raise BenchmarkError(f"{label}: read {got.num_rows} rows, expected {expected.num_rows}")
    got_ids = sorted(got.column("id").to_pylist())
    want_ids = sorted(expected.column("id").to_pylist())
    if got_ids != want_ids:
        raise BenchmarkError(f"{label}: the ids read back differ from the ids written")
    for column in ("p", "value"):
        a = sum(x for x in got.column(column).to_pylist() if x is not None)
        b = sum(x for x in expected.column(column).to_pylist() if x is not None)
        if abs(a - b) > 1e-6 * max(1.0, abs(b)):
            raise BenchmarkError(f"{label}: sum of {column} is {a}, expected {b}")
    return {"rows": got.num_rows}
