"""``snaptable snapshots``' +files is the data files each commit put on disk, on every format (issue 28
item 4: it showed 0 for every Paimon and Iceberg append). Each commit is made by the table's own
writer; the data files that appear on disk with it are counted and compared with the CLI's figure."""

from __future__ import annotations

import json
import os
from typing import Callable

from airflow_snaptable.cli import main
from tests.conftest import SCHEMA, make_rows


def data_files(root: str, is_data: Callable[[str], bool]) -> set[str]:
    found = set()
    for directory, _dirs, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(directory, name), root)
            if is_data(rel):
                found.add(rel)
    return found


def reported(uri: str, capsys, *extra: str) -> list[dict]:
    capsys.readouterr()
    assert main(["snapshots", uri, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def check(commits: list[Callable[[], None]], uri: str, root: str, is_data, capsys, *extra: str) -> None:
    appeared = []
    before = data_files(root, is_data)
    for commit in commits:
        commit()
        after = data_files(root, is_data)
        appeared.append(len(after - before))
        before = after
    figures = [s["added_files"] for s in reported(uri, capsys, *extra)]
    assert figures == appeared and all(appeared), (figures, appeared)


def test_native_table(table, table_uri, capsys):
    commits = [lambda i=i: table.append(make_rows(range(i * 10, i * 10 + 10))) for i in range(3)]
    commits.append(lambda: table.overwrite(make_rows([1, 4]), partitions=[{"p": 1}]))
    check(commits, table_uri, table_uri, lambda rel: rel.startswith("data" + os.sep), capsys)


def test_iceberg_table(tmp_path, capsys):
    from pyiceberg.catalog import load_catalog

    from tests.iceberg.conftest import SCHEMA as ICEBERG_SCHEMA, rows

    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    properties = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}
    catalog = load_catalog("default", **properties)
    catalog.create_namespace("db")
    iceberg = catalog.create_table("db.orders", schema=ICEBERG_SCHEMA)
    commits = [lambda i=i: iceberg.append(rows(i, "ab"[i % 2])) for i in range(3)]
    location = iceberg.location().removeprefix("file://")
    check(commits, "iceberg://db.orders", location, lambda rel: rel.startswith("data" + os.sep), capsys,
          "--catalog", json.dumps(properties))


def test_paimon_table(paimon, tmp_path, capsys):
    """pypaimon writes each commit; Paimon's data files are ``data-*`` in the bucket directories."""
    from tests.paimon.conftest import run_client

    warehouse = str(tmp_path / "paimon")
    run_client(paimon.python, warehouse, [{"create": "db.t", "columns": [["p", "string"], ["id", "int64"], ["v", "string"]],
                                           "partition": ["p"], "options": {"bucket": "-1"}}])
    root = os.path.join(warehouse, "db.db", "t")
    rows = [[["a", 1, "x"], ["b", 2, "y"]], [["a", 3, "z"]], [["b", 4, "w"], ["c", 5, "v"]]]
    commits = [lambda r=r: run_client(paimon.python, warehouse, [{"write": "db.t", "rows": r}]) for r in rows]
    check(commits, root, root, lambda rel: os.path.basename(rel).startswith("data-"), capsys)
