"""Orphan paths: a few in the result (an XCom, the CLI's output), every one in the file the run writes
(issue 28 item 4). Checked against the files on disk, on this package's tables and Paimon's."""

from __future__ import annotations

import json
import os

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import ACTIONS, run_action
from airflow_snaptable.core.actions.maintenance import MAX_RESULT_ORPHANS
from tests.conftest import SCHEMA, make_rows

ORPHANS = 250
OLD = 1_000_000_000  # 2001: older than any window


def plant_orphans(root: str, directory: str) -> set[str]:
    """``ORPHANS`` old files nothing references under ``root/directory``: their paths relative to ``root``."""
    planted = set()
    for i in range(ORPHANS):
        rel = f"{directory}/orphan-{i:04d}.parquet"
        path = os.path.join(root, rel)
        with open(path, "wb") as handle:
            handle.write(b"x" * (i % 7 + 1))
        os.utime(path, (OLD, OLD))
        planted.add(rel)
    return planted


def _native(tmp_path, _paimon) -> tuple[str, str]:
    table = Table.create(str(tmp_path / "native"), SCHEMA, partition_by=["p"])
    table.append(make_rows(range(6)))
    return table.uri, "data/p=0"


def _paimon_table(tmp_path, paimon) -> tuple[str, str]:
    warehouse = paimon.copy(tmp_path / "paimon")
    root = os.path.join(warehouse, "db.db", "app")
    return root, "p=b/bucket-0"


@pytest.mark.parametrize("make", [_native, _paimon_table], ids=["native", "paimon"])
def test_the_result_lists_a_few_paths_and_the_file_every_one(make, tmp_path, request):
    paimon = request.getfixturevalue("paimon") if make is _paimon_table else None
    uri, directory = make(tmp_path, paimon)
    planted = plant_orphans(uri, directory)
    listing = tmp_path / "orphans.txt"

    dry = run_action(ACTIONS["remove-orphan-files"].from_values(uri, {"orphan_list": str(listing)}))["result"]
    assert dry["orphan_count"] == ORPHANS and dry["orphan_files_truncated"] is True
    assert dry["bytes"] == sum(os.path.getsize(os.path.join(uri, rel)) for rel in planted)
    assert len(dry["orphan_files"]) == MAX_RESULT_ORPHANS and set(dry["orphan_files"]) <= planted
    assert set(listing.read_text().splitlines()) == planted and len(listing.read_text().splitlines()) == ORPHANS
    assert dry["orphan_list"] == str(listing)
    assert len(json.dumps(dry)) < 20_000  # an XCom of counts and a hundred paths, whatever the orphan count
    assert all(os.path.exists(os.path.join(uri, rel)) for rel in planted)  # the default is a dry run

    deleting = {"orphan_list": str(listing), "dry_run": False}
    real = run_action(ACTIONS["remove-orphan-files"].from_values(uri, deleting))["result"]
    assert real["orphan_count"] == ORPHANS and real["orphan_files"] == [] and real["orphan_files_truncated"] is False
    assert set(listing.read_text().splitlines()) == planted  # what left storage, every path
    assert not any(os.path.exists(os.path.join(uri, rel)) for rel in planted)
    assert Table.open(uri).verify().ok


def test_a_few_orphans_are_all_listed_and_not_truncated(table, table_uri, tmp_path):
    table.append(make_rows(range(3)))
    path = os.path.join(table_uri, "data", "p=0", "stray.parquet")
    with open(path, "wb") as handle:
        handle.write(b"x")
    os.utime(path, (OLD, OLD))
    result = run_action(ACTIONS["remove-orphan-files"].from_values(table_uri, {}))["result"]
    assert result["orphan_files"] == ["data/p=0/stray.parquet"] and result["orphan_files_truncated"] is False
    assert "orphan_list" not in result


def test_the_operator_writes_the_list_its_xcom_names(tmp_path, monkeypatch):
    from airflow_snaptable.operators import SnapTableRemoveOrphanFilesOperator
    from tests.airflow.conftest import snaptable_conn

    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(str(tmp_path)))
    table = Table.create(str(tmp_path / "orders"), SCHEMA, partition_by=["p"])
    table.append(make_rows(range(6)))
    planted = plant_orphans(table.uri, "data/p=1")
    op = SnapTableRemoveOrphanFilesOperator(task_id="orphans", table="orders", orphan_list=str(tmp_path / "{{ ds }}.txt"))
    context = {"ds": "2026-11-26"}
    op.render_template_fields(context)
    xcom = op.execute(context)["result"]
    assert xcom["orphan_list"] == str(tmp_path / "2026-11-26.txt")
    assert set((tmp_path / "2026-11-26.txt").read_text().splitlines()) == planted
    assert len(xcom["orphan_files"]) == MAX_RESULT_ORPHANS
