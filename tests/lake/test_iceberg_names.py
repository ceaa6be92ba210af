"""Iceberg tables whose names hold a space or letters beyond ASCII are maintained like any other
(issue 34, item 15): the catalog's identifiers, the ``iceberg://`` URI, the status directory and the
table's location (pyiceberg writes it unquoted: ``.../sales/my table``) all carry the name as it is;
pyiceberg judges the tables afterwards."""

from __future__ import annotations

import json

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.formats.iceberg.catalog import parse_identifier
from airflow_snaptable.core.lake import SUCCESSFUL, Policy, lake_status, list_tables, maintain
from airflow_snaptable.core.lake.health import lake_health
from tests.iceberg.conftest import IcebergEnv, assert_exactly_reachable_left, read_everything, rows as iceberg_rows

#: (namespace, table) identifiers: a space, Latin letters with accents, another script.
NAMES = (("sales", "my table"), ("sales", "tëst"), ("raw data", "événements"), ("日本", "注文"))
SNAPSHOTS = 3
#: Every job Iceberg tables take, each with something to do.
POLICY = {"defaults": {
    "consumer-expiry": {}, "tag-expiry": {}, "periodic-tags": {"period": "daily"},
    "data-compaction": {"min-input-files": 2}, "manifest-rewrite": {},
    "snapshot-expiry": {"min-snapshots-to-keep": 1, "max-snapshot-age-hours": 0},
    "orphan-file-removal": {"older-than-days": 3}, "purge": {},
}}


@pytest.fixture
def named_lake(tmp_path) -> IcebergEnv:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}, str(warehouse))
    catalog = env.catalog()
    for namespace in sorted({namespace for namespace, _table in NAMES}):
        catalog.create_namespace((namespace,))
    for identifier in NAMES:
        table = catalog.create_table(identifier, schema=iceberg_rows(0).schema)
        for i in range(SNAPSHOTS):
            table.append(iceberg_rows(i))
    return env


def test_tables_named_with_spaces_and_any_letters_are_maintained_and_pyiceberg_reads_them(named_lake, capsys):
    catalog = named_lake.catalog()
    names = sorted(".".join(identifier) for identifier in NAMES)
    tables = {name: catalog.load_table(tuple(name.split("."))) for name in names}
    current = {name: read_everything(table)["snapshots"][table.metadata.current_snapshot_id] for name, table in tables.items()}
    report = maintain("iceberg://", Policy.from_mapping(POLICY), catalog=named_lake.properties)
    assert [t.table for t in report.tables] == names
    for table in report.tables:
        ran = {job: record for job, record in table.jobs.items() if record["status"] != "Disabled"}
        assert set(ran) == set(POLICY["defaults"]), table.table
        assert {record["status"] for record in ran.values()} == {SUCCESSFUL}, (table.table, ran)
        assert ran["snapshot-expiry"]["snapshotsExpired"] >= SNAPSHOTS - 1
    for name in names:
        pyiceberg_table = catalog.load_table(tuple(name.split(".")))
        after = read_everything(pyiceberg_table)
        assert len(after["snapshots"]) == 1
        assert list(after["snapshots"].values())[0] == current[name]  # compaction and expiry kept every row
        assert_exactly_reachable_left(pyiceberg_table, pyiceberg_table.location()[len("file://"):])
        assert Table.open(f"iceberg://{name}", catalog=named_lake.properties).latest_snapshot() is not None

    # Status, health and one namespace by its name read the same tables.
    stored = lake_status("iceberg://", catalog=named_lake.properties)
    assert {t.table: t.jobs["snapshot-expiry"]["status"] for t in stored.tables} == {name: SUCCESSFUL for name in names}
    assert not any(h.failed for h in lake_health("iceberg://", catalog=named_lake.properties))
    assert [t.name for t in list_tables("iceberg://raw data", catalog=named_lake.properties)] == ["raw data.événements"]
    assert main(["status", "iceberg://日本", "--catalog", json.dumps(named_lake.properties), "--json"]) == 0
    assert [t["table"] for t in json.loads(capsys.readouterr().out)["tables"]] == ["日本.注文"]


def test_an_identifier_part_is_anything_but_a_separator_or_a_path_character():
    assert parse_identifier("iceberg://raw data.événements") == ("raw data", "événements")
    for bad in ("iceberg://a..t", "iceberg://a/b.t", "iceberg://a.b\\c", "iceberg://a.t\n", "iceberg://t"):
        with pytest.raises(InvalidArgumentError, match="iceberg://<namespace>.<table>"):
            parse_identifier(bad)


def test_a_catalog_identifier_with_a_dot_inside_a_part_is_refused_not_confused(named_lake, monkeypatch):
    """A catalog whose parts may hold a '.' (a REST catalog's ``("sales", "x.y")``; the SQL catalog is made to
    answer so here): its dotted name would address another table (``("sales", "x", "y")``), so the table is
    one failed entry, and every other table is maintained."""
    from pyiceberg.catalog.sql import SqlCatalog

    list_tables_of = SqlCatalog.list_tables
    monkeypatch.setattr(SqlCatalog, "list_tables", lambda self, namespace: list_tables_of(self, namespace) + (
        [("sales", "x.y")] if tuple(namespace) == ("sales",) else []))
    report = maintain("iceberg://", Policy.from_mapping({"defaults": {"snapshot-expiry": {}}}), catalog=named_lake.properties)
    refused = [t for t in report.tables if t.error is not None]
    assert [t.table for t in refused] == ["sales.x.y"] and "has a '.' inside a part" in refused[0].error
    assert refused[0].jobs["snapshot-expiry"]["status"] == "Failed"
    assert {t.jobs["snapshot-expiry"]["status"] for t in report.tables if t.error is None} == {SUCCESSFUL}
