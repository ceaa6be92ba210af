"""A DAG author's connection to tables on GCS (Cloud Composer) and Azure: the root and the storage options
in the connection's extra, nothing else (docs/storage.md), against the emulators on 127.0.0.1."""

from __future__ import annotations

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.hooks import SnapTableHook
from tests.airflow.conftest import snaptable_conn
from tests.conftest import SCHEMA, make_rows, sorted_ids

pytestmark = pytest.mark.cloud


def test_a_connection_to_a_root_on_gcs_or_azure_runs_the_lifecycle(monkeypatch, cloud_server, cloud_table_uri):
    options = cloud_server.storage_options()
    root = cloud_table_uri.rsplit("/", 1)[0]
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", snaptable_conn(root, extra={"storage_options": options}))
    hook = SnapTableHook("lake")
    ok, message = hook.test_connection()
    assert not ok and "does not exist" in message  # nothing stored under the root yet

    table = Table.create(f"{root}/orders", SCHEMA, partition_by=["p"], storage_options=options)
    for start in range(0, 9, 3):
        table.append(make_rows(range(start, start + 3)))
    ok, message = hook.test_connection()
    assert ok, message
    assert hook.storage_options("orders") == options  # the S3 fields never reach gcsfs or adlfs

    result = hook.run_action(hook.build_action("expire-snapshots", "orders", retain_min=1, retain_max=1, time_retained="0 s"))
    assert result["result"]["expired_snapshot_ids"] == [1, 2]
    hook.run_action(hook.build_action("create-tag", "orders", tag_name="kept", snapshot_id=3))
    reopened = Table.open(f"{root}/orders", options)
    assert sorted_ids(reopened.scan(tag="kept").to_arrow()) == list(range(9)) and reopened.verify().ok
