"""The figures an expiry reports are the files that leave storage, on every format.

For this package's tables, Apache Paimon tables pypaimon wrote and Apache Iceberg tables pyiceberg
wrote: the files under the table are measured before and after a real expiry, and every figure
of the result (bytes freed, files deleted by kind, the earliest snapshot before and after) is
checked against the files that vanished. The dry run before it deletes nothing and reports the
same figures, and lists exactly the files that vanish. The table's own client reads what is left.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from airflow_snaptable.core import Table
from tests.conftest import SCHEMA, make_rows

FAR = 4_102_444_800_000  # 2100-01-01
KINDS = ("data", "manifest", "snapshot")


def sizes(root: str) -> dict[str, int]:
    """Every file under ``root``: relative path -> bytes."""
    found = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, root).replace(os.sep, "/")] = os.path.getsize(path)
    return found


@dataclass
class Case:
    table: Any
    #: The directory whose files are compared: the table's root (Iceberg: its location).
    root: str
    #: The kind a vanished file is counted under ("data", "manifest", "snapshot"), by its path.
    kind: Callable[[str], str | None]
    expire: dict
    #: After the expiry, the table's own client reads everything left (raises if it cannot).
    read_back: Callable[[], None]


def _native_kind(path: str) -> str | None:
    if path.startswith("data/"):
        return "data"
    if path.startswith("manifest/"):
        return "manifest"
    if path.startswith("snapshot/snapshot-"):
        return "snapshot"
    return None


def _native(tmp_path, _paimon) -> Case:
    table = Table.create(str(tmp_path / "native"), SCHEMA, partition_by=["p"])
    for i in range(4):
        table.append(make_rows(range(i * 10, i * 10 + 10)))
    table.overwrite(make_rows(range(100, 105)))
    table.append(make_rows(range(200, 203)))
    table.create_tag("keep", 2)  # some files stay, held by the tag

    def read_back() -> None:
        for snapshot in table.snapshots():
            table.scan(snapshot_id=snapshot.id).to_arrow()
        table.scan(tag="keep").to_arrow()

    return Case(table, table.uri, _native_kind, {"retain_min": 1, "retain_max": 1, "now": FAR}, read_back)


def _paimon_kind(path: str) -> str | None:
    if "/bucket-" in path:
        return "data"  # data files and the file indexes beside them (their _EXTRA_FILES)
    return _native_kind(path)


def _paimon(tmp_path, paimon) -> Case:
    warehouse = paimon.copy(tmp_path / "paimon")
    table = Table.open(os.path.join(warehouse, "db.db", "app"))
    # The tags go: the expiry frees data files of overwritten partitions, each with its file index.
    table.delete_tag("t2")
    table.delete_tag("t4")

    def read_back() -> None:
        read = paimon.read(warehouse, "app")["app"]
        assert read["snapshots"] and all("error" not in r for r in read["snapshots"].values()), read

    return Case(table, table.uri, _paimon_kind, {"retain_min": 1, "retain_max": 1, "now": FAR}, read_back)


def _iceberg_kind(path: str) -> str | None:
    if path.startswith("data/"):
        return "data"
    if path.endswith(".metadata.json") or path.endswith(".puffin"):
        return "snapshot"  # metadata versions and statistics files: what a snapshot's own files are here
    if path.startswith("metadata/") and path.endswith(".avro"):
        return "manifest"  # manifest lists (snap-*.avro) and manifests
    return None


def _iceberg(tmp_path, _paimon) -> Case:
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog

    from tests.iceberg.conftest import SCHEMA as ICEBERG_SCHEMA, read_everything, rows
    from tests.iceberg.test_iceberg_lifecycle import _statistics_file

    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    properties = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}
    catalog = load_catalog("default", **properties)
    catalog.create_namespace("db")
    iceberg = catalog.create_table("db.orders", schema=ICEBERG_SCHEMA, properties={"write.metadata.previous-versions-max": "2"})
    for i in range(4):
        iceberg.append(rows(i))
    iceberg.delete("id < 2")  # copy-on-write: the files holding rows 0 and 1 are rewritten
    iceberg.append(pa.table({"p": ["c"], "id": [7]}, schema=ICEBERG_SCHEMA))
    iceberg = iceberg.refresh()
    _statistics_file(iceberg, iceberg.metadata.snapshots[1].snapshot_id)  # goes with its snapshot
    _statistics_file(iceberg, iceberg.metadata.current_snapshot_id)  # stays
    table = Table.open("iceberg://db.orders", catalog=properties)

    def read_back() -> None:
        assert len(read_everything(iceberg)["snapshots"]) == 1

    location = iceberg.location()[len("file://"):]
    return Case(table, location, _iceberg_kind, {"retain_min": 1, "older_than": FAR}, read_back)


@pytest.mark.parametrize("make", [_native, _paimon, _iceberg], ids=["native", "paimon", "iceberg"])
def test_expiry_figures_are_the_files_that_leave_storage(make, tmp_path, request):
    paimon = request.getfixturevalue("paimon") if make is _paimon else None
    case = make(tmp_path, paimon)
    before = sizes(case.root)
    earliest_before = case.table.earliest_snapshot().id

    dry = case.table.expire_snapshots(dry_run=True, **case.expire)
    assert sizes(case.root) == before, "a dry run deletes nothing"
    real = case.table.expire_snapshots(**case.expire)
    after = sizes(case.root)
    case.read_back()

    gone = {path: size for path, size in before.items() if path not in after}
    by_kind: dict[str | None, set[str]] = {}
    for path in gone:
        by_kind.setdefault(case.kind(path), set()).add(path)
    assert set(by_kind) == set(KINDS), f"the scenario frees every kind of file, and only those: {by_kind}"
    earliest_after = case.table.earliest_snapshot().id
    assert earliest_after != earliest_before
    for result in (dry, real):
        assert result.expired_snapshot_ids == real.expired_snapshot_ids != []
        assert result.bytes_freed == sum(gone.values()), result.dry_run
        assert result.deleted_data_files == len(by_kind["data"]), result.dry_run
        assert result.deleted_manifest_files == len(by_kind["manifest"]), result.dry_run
        assert result.deleted_snapshot_files == len(by_kind["snapshot"]), result.dry_run
        assert (result.earliest_before, result.earliest_after) == (earliest_before, earliest_after), result.dry_run
    # The dry run names every file that went, each under its kind.
    assert set(dry.data_files) == by_kind["data"]
    assert set(dry.manifest_files) == by_kind["manifest"]
    assert set(dry.snapshot_files) == by_kind["snapshot"]


class _CrashAtFirstDataDelete(Exception):
    pass


@pytest.mark.parametrize("make", [_native, _iceberg], ids=["native", "iceberg"])
def test_a_dry_run_after_a_crash_reports_what_the_rerun_recovers(make, tmp_path):
    """An expiry killed before it deleted its data files leaves its plan; the rerun finishes it first.
    The dry run before the rerun reports the same recovered files and deletes nothing."""
    case = make(tmp_path, None)

    def crash(kind: str, path: str) -> None:
        if kind == "delete" and path.startswith("data/"):
            raise _CrashAtFirstDataDelete(path)

    case.table.storage.on_operation = crash
    with pytest.raises(_CrashAtFirstDataDelete):
        case.table.expire_snapshots(**case.expire)
    case.table.storage.on_operation = None
    before = sizes(case.root)
    dry = case.table.expire_snapshots(dry_run=True, **case.expire)
    assert sizes(case.root) == before
    real = case.table.expire_snapshots(**case.expire)
    assert dry.recovered_data_files == real.recovered_data_files > 0
    gone = {path for path in before if path not in sizes(case.root)}
    assert real.recovered_data_files == len([p for p in gone if case.kind(p) == "data"])
    case.read_back()
