"""Paimon tables (issue 22 items 4 and 6): nothing outside the table is deleted; races of a tag or a
rollback with an expiry of its snapshot; a consumer on a table without snapshots.

pypaimon wrote the tables (tests/paimon/conftest.py) and reads them back after each race: every
retained snapshot and tag gives its rows, and the files left are exactly theirs.
"""

from __future__ import annotations

import io
import json
import os

import fastavro
import pytest

from airflow_snaptable.core import SnapshotNotFoundError, Table
from airflow_snaptable.core.errors import PathOutsideTableError
from tests.core.test_expiry_races import pause_at, writes_to
from tests.paimon.conftest import COLUMNS, run_client
from tests.paimon.test_paimon_crash_and_bad_input import EXPIRE, _everything, _root
from tests.paimon.test_paimon_lifecycle import check

VICTIM = b"a file of another table"


def _plant_victim(warehouse: str) -> str:
    """A file beside the table (``<warehouse>/db.db/shared``): what ``manifest/../../shared/...`` names."""
    shared = os.path.join(warehouse, "db.db", "shared")
    os.makedirs(shared)
    path = os.path.join(shared, "victim.parquet")
    with open(path, "wb") as f:
        f.write(VICTIM)
    return path


def _snapshot_doc(root: str, snapshot_id: int) -> tuple[str, dict]:
    path = os.path.join(root, "snapshot", f"snapshot-{snapshot_id}")
    with open(path) as f:
        return path, json.load(f)


def _list_naming(root: str, list_name: str, manifest_name: str) -> None:
    """Paimon's manifest list ``list_name`` names one manifest more, ``manifest_name`` (same schema and codec)."""
    path = os.path.join(root, "manifest", list_name)
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        schema, codec, records = reader.writer_schema, reader.metadata.get("avro.codec", "null"), list(reader)
    records.append({**records[0], "_FILE_NAME": manifest_name, "_FILE_SIZE": len(VICTIM)})
    out = io.BytesIO()
    fastavro.writer(out, schema, records, codec=codec)
    with open(path, "wb") as f:
        f.write(out.getvalue())


def test_a_manifest_list_naming_a_file_out_of_the_table_fails_closed(paimon, tmp_path):
    """Before: the expiry deleted ``manifest/../../shared/victim.parquet`` as a manifest of expired snapshot 1."""
    warehouse = paimon.copy(tmp_path / "w")
    root = _root(warehouse)
    victim = _plant_victim(warehouse)
    _list_naming(root, _snapshot_doc(root, 1)[1]["deltaManifestList"], "../../shared/victim.parquet")
    before = _everything(warehouse)
    with pytest.raises(PathOutsideTableError, match="victim.parquet"):
        Table.open(root).expire_snapshots(**EXPIRE)
    assert _everything(warehouse) == before and os.path.exists(victim)
    report = Table.open(root).verify()
    assert not report.ok and "victim.parquet" in json.dumps(report.to_dict())


def test_a_snapshot_naming_a_list_out_of_the_table_fails_closed(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    root = _root(warehouse)
    _plant_victim(warehouse)
    path, doc = _snapshot_doc(root, 1)
    doc["deltaManifestList"] = "../../shared/victim.parquet"
    with open(path, "w") as f:
        json.dump(doc, f)
    before = _everything(warehouse)
    with pytest.raises(PathOutsideTableError):
        Table.open(root).expire_snapshots(**EXPIRE)
    assert _everything(warehouse) == before


# -- races with an expiry of snapshots 1..4 (tags t2 and t4 hold theirs) ------------------------------


def _expire_now(root: str):
    return lambda: Table.open(root).expire_snapshots(**EXPIRE)


def _target_read(kind, path, seen):
    return kind == "list" and any(p.endswith("snapshot-3") for _k, p in seen)


@pytest.mark.parametrize("race", ["create_tag", "replace_tag", "rollback-before-planning", "rollback-after-its-fence"])
def test_a_tag_or_rollback_racing_the_expiry_of_its_snapshot(paimon, tmp_path, race):
    warehouse = paimon.copy(tmp_path / "w")
    root = _root(warehouse)
    table = Table.open(root)
    call, when = {
        "create_tag": (lambda: table.create_tag("audit", 3), writes_to("intent/")),
        "replace_tag": (lambda: table.replace_tag("t4", 3), writes_to("intent/")),
        "rollback-before-planning": (lambda: table.rollback_to(3), _target_read),
        "rollback-after-its-fence": (lambda: table.rollback_to(3), writes_to("plan/pending-")),
    }[race]
    fired = pause_at(table, when, _expire_now(root))
    with pytest.raises(SnapshotNotFoundError, match="snapshot 3"):
        call()
    assert fired
    check(paimon, warehouse, "app", [5, 6], ["t2", "t4"])
    assert Table.open(root).verify().ok


# -- a consumer on a table without snapshots ------------------------------------------------------------


def test_update_consumer_on_a_table_without_snapshots_records_it(paimon, tmp_path):
    """As Paimon's ConsumerManager: a reader may register before the first commit (an Iceberg table
    refuses: its consumer is a ref on a snapshot, tests/iceberg/test_iceberg_paths_and_errors.py)."""
    warehouse = str(tmp_path / "w")
    run_client(paimon.python, warehouse, [{"create": "db.empty", "columns": COLUMNS, "partition": ["p"], "options": {"bucket": "-1"}}])
    table = Table.open(_root(warehouse, "empty"))
    assert table.latest_snapshot() is None
    assert table.update_consumer("reader", 1).next_snapshot == 1
    answer = run_client(paimon.python, warehouse, [{"consumers": "db.empty"}])
    assert answer["db.empty"]["consumers"] == {"reader": 1}
