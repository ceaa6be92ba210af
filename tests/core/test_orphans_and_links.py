"""A table's walk never follows a symbolic link below where it starts (issue 34, item 2's sibling):
a linked directory inside a table may hold another table's files, which orphan cleaning would take
for this table's orphans and delete. Ours, Paimon's (pypaimon judges) and Iceberg's (pyiceberg judges)."""

from __future__ import annotations

import os
import time

from airflow_snaptable.core import Table
from tests.iceberg.conftest import IcebergEnv, files_on_disk, read_everything, rows as iceberg_rows
from tests.lake.conftest import write_native

def _age(*directories) -> None:
    """Every file four days old: past orphan cleaning's default window (1 day, 3 on Iceberg), whatever the clock."""
    old = time.time() - 4 * 86400
    for directory in directories:
        for d, _dirs, names in os.walk(directory):
            for name in names:
                os.utime(os.path.join(d, name), (old, old))


def _files_under(directory: str) -> dict[str, int]:
    return {os.path.join(d, n): os.stat(os.path.join(d, n)).st_size for d, _dirs, names in os.walk(directory) for n in names}


def test_orphan_cleaning_of_our_table_leaves_a_linked_directory_alone(tmp_path):
    mine, other = write_native(str(tmp_path / "mine"), snapshots=2), write_native(str(tmp_path / "other"), snapshots=2)
    partition = sorted(os.listdir(tmp_path / "other" / "data"))[0]
    os.symlink(tmp_path / "other" / "data" / partition, tmp_path / "mine" / "data" / "zz_linked")
    _age(tmp_path / "mine", tmp_path / "other")
    before = _files_under(str(tmp_path / "other"))
    result = mine.remove_orphan_files(dry_run=False)
    assert not any("zz_linked" in path for path in result.orphan_files)
    assert _files_under(str(tmp_path / "other")) == before
    assert other.verify().ok


def test_orphan_cleaning_of_a_paimon_table_leaves_a_linked_directory_alone(tmp_path, paimon):
    warehouse = paimon.copy(tmp_path / "warehouse")
    app, pk = os.path.join(warehouse, "db.db", "app"), os.path.join(warehouse, "db.db", "pk")
    partition = next(name for name in sorted(os.listdir(app)) if name.startswith("p="))
    linked = next(name for name in sorted(os.listdir(pk)) if name.startswith(("p=", "bucket-")))
    os.symlink(os.path.join(pk, linked), os.path.join(app, partition, "zz_linked"))
    _age(app, pk)
    before = _files_under(pk)
    result = Table.open(app).remove_orphan_files(dry_run=False)
    assert not any("zz_linked" in path for path in result.orphan_files)
    assert _files_under(pk) == before
    assert paimon.read(warehouse, "pk")["pk"] == paimon.before["pk"]


def test_orphan_cleaning_of_an_iceberg_table_leaves_a_linked_directory_alone(tmp_path):
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}, str(warehouse))
    catalog = env.catalog()
    catalog.create_namespace(("ns",))
    for name in ("mine", "other"):
        table = catalog.create_table(("ns", name), schema=iceberg_rows(0).schema)
        for i in range(2):
            table.append(iceberg_rows(i))
    mine, other = catalog.load_table(("ns", "mine")), catalog.load_table(("ns", "other"))
    other_location = other.location()[len("file://"):]
    os.symlink(os.path.join(other_location, "data"), os.path.join(mine.location()[len("file://"):], "data", "zz_linked"))
    _age(mine.location()[len("file://"):], other_location)
    before, read_before = files_on_disk(other_location), read_everything(other)
    result = Table.open("iceberg://ns.mine", catalog=env.properties).remove_orphan_files(dry_run=False)
    assert not any("zz_linked" in path for path in result.orphan_files)
    assert files_on_disk(other_location) == before and read_everything(other) == read_before
