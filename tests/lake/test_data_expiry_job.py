"""The lake policy's data-expiry job (issue 27 item 3): docs/maintenance.md."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.lake import SUCCESSFUL, Policy, maintain
from tests.conftest import sorted_ids
from tests.lake.conftest import native_dir


def _jobs(report, table: str) -> dict:
    return next(t for t in report.to_dict()["tables"] if t["table"] == table)["jobs"]


def test_the_data_expiry_job_deletes_old_rows_and_a_dry_run_changes_nothing(tmp_path):
    """The policy's data-expiry job (column and retention) runs the expire-data action: its dry run
    reports the rows that would go and changes no byte; the run commits their deletion."""
    lake = str(tmp_path / "lake")
    schema = pa.schema([("ts", pa.timestamp("us")), ("id", pa.int64())])
    table = Table.create(native_dir(lake, "a.events"), schema)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    table.append(pa.table({"ts": [now - dt.timedelta(days=40), now - dt.timedelta(days=1)], "id": [1, 2]}, schema=schema))
    policy = Policy.from_mapping({"defaults": {"data-expiry": {"column": "ts", "retention": "30 d"}}})
    files = {os.path.join(d, n) for d, _s, ns in os.walk(native_dir(lake, "a.events")) for n in ns if "maintenance" not in d}
    dry = _jobs(maintain(lake, policy, dry_run=True), "a.events")["data-expiry"]
    assert dry["rowsDeleted"] == 1 and dry["snapshotCommitted"] is None
    assert {os.path.join(d, n) for d, _s, ns in os.walk(native_dir(lake, "a.events")) for n in ns if "maintenance" not in d and "lease" not in d} >= files
    assert sorted_ids(Table.open(native_dir(lake, "a.events")).scan().to_arrow()) == [1, 2]
    done = _jobs(maintain(lake, policy), "a.events")["data-expiry"]
    assert done["status"] == SUCCESSFUL and done["rowsDeleted"] == 1 and done["filesDeleted"] == {"data": 1}
    assert done["arguments"] == {"column": "ts", "retention": "30 d"}
    assert sorted_ids(Table.open(native_dir(lake, "a.events")).scan().to_arrow()) == [2]
    with pytest.raises(InvalidArgumentError, match="data-expiry needs retention"):
        Policy.from_mapping({"defaults": {"data-expiry": {"column": "ts"}}})
