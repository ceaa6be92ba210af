"""Lakes for the tests of whole-lake maintenance (airflow_snaptable/core/lake/).

- :func:`mixed_lake`: this package's tables at several depths and, side by side, the Paimon
  warehouse pypaimon wrote for the session (tests/paimon/conftest.py) as ``db.db/{app,pk,lsm}``;
- ``iceberg_lake``: a pyiceberg SQL catalog (SQLite) with tables in several namespaces, nested ones too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_snaptable.core import Table
from tests.conftest import SCHEMA, make_rows
from tests.iceberg.conftest import IcebergEnv, rows as iceberg_rows

#: This package's tables of the mixed lake, by dotted name (their directories: the dots as slashes).
NATIVE_TABLES = ("sales.orders", "sales.returns", "ops.metrics.daily", "ops.audit")
PAIMON_TABLES = ("db.app", "db.pk", "db.lsm")
#: Snapshots written to each native table.
NATIVE_SNAPSHOTS = 5


def native_dir(lake: str, name: str) -> str:
    return os.path.join(lake, *name.split("."))


def write_native(path: str, snapshots: int = NATIVE_SNAPSHOTS, options: dict | None = None) -> Table:
    table = Table.create(path, SCHEMA, partition_by=["p"], options=options)
    for i in range(snapshots):
        table.overwrite(make_rows(range(i * 10, i * 10 + 6)))  # every snapshot replaces the last: expiry frees files
    return table


@dataclass
class MixedLake:
    path: str
    paimon: object  # tests.paimon.conftest.Paimon

    def native(self, name: str) -> Table:
        return Table.open(native_dir(self.path, name))

    def read_paimon(self, *names: str) -> dict:
        return self.paimon.read(self.path, *names)


def make_mixed_lake(paimon, root: Path) -> MixedLake:
    lake = root / "lake"
    lake.mkdir()
    shutil.copytree(os.path.join(paimon.template, "db.db"), lake / "db.db")  # copy2: bytes and modification times
    for name in NATIVE_TABLES:
        write_native(native_dir(str(lake), name))
    return MixedLake(str(lake), paimon)


@pytest.fixture
def mixed_lake(paimon, tmp_path) -> MixedLake:
    return make_mixed_lake(paimon, tmp_path)


def storage_image(root: str) -> dict[str, tuple[str, int]]:
    """Every file under ``root``: its content's hash and its modification time (a byte-for-byte image)."""
    image = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                image[os.path.relpath(path, root)] = (hashlib.sha256(f.read()).hexdigest(), os.stat(path).st_mtime_ns)
    return image


def write_policy(path: Path, doc: dict) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


# -- Iceberg -----------------------------------------------------------------------------------------

#: Tables of the Iceberg lake: namespaces ``sales``, ``ops`` and the nested ``ops.archive``.
ICEBERG_TABLES = ("sales.orders", "sales.returns", "ops.metrics", "ops.archive.events")
ICEBERG_SNAPSHOTS = 4


@pytest.fixture
def iceberg_lake(tmp_path) -> IcebergEnv:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}, str(warehouse))
    catalog = env.catalog()
    for namespace in ("sales", "ops", "ops.archive"):
        catalog.create_namespace(tuple(namespace.split(".")))
    for name in ICEBERG_TABLES:
        table = catalog.create_table(tuple(name.split(".")), schema=iceberg_rows(0).schema)
        for i in range(ICEBERG_SNAPSHOTS):
            table.append(iceberg_rows(i))
    return env


def iceberg_reads(env: IcebergEnv) -> dict[str, dict]:
    """Every Iceberg table of the lake as pyiceberg reads it: each snapshot's rows and the refs."""
    from tests.iceberg.conftest import read_everything

    catalog = env.catalog()
    return {name: read_everything(catalog.load_table(tuple(name.split(".")))) for name in ICEBERG_TABLES}
