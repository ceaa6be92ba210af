"""The lifecycle on a real Paimon table on S3 (moto, SeaweedFS), GCS and Azure (fake-gcs-server, Azurite),
all on 127.0.0.1.

pypaimon writes the table locally (tests/paimon/conftest.py; pypaimon has no GCS or Azure file IO of its
own): it is uploaded as it is, the lifecycle runs against ``s3://...`` / ``gs://...`` / ``abfs://...``, and
the table is brought back for pypaimon to read every snapshot and tag that is left: the same rule as on
local disk, through the object store.
"""

from __future__ import annotations

import os
import time

from airflow_snaptable.core import Table
from tests.paimon.conftest import FAR_FUTURE, table_files
from tests.paimon.test_paimon_lifecycle import check


def test_expire_tags_rollback_and_orphans(paimon, object_store, object_store_uri, tmp_path):
    options = object_store.storage_options()
    fs = object_store.filesystem()
    source = os.path.join(paimon.template, "db.db", "app")
    uri = object_store_uri + "/db.db/app"
    remote = uri.split("://", 1)[1]
    fs.put(source + "/", remote + "/", recursive=True)

    table = Table.open(uri, options)
    assert table.format == "paimon" and [s.id for s in table.snapshots()] == [1, 2, 3, 4, 5, 6]
    table.create_tag("kept", 3)
    result = table.expire_snapshots(retain_max=2, retain_min=2, now=FAR_FUTURE)
    assert result.expired_snapshot_ids == [1, 2, 3, 4]
    table.delete_tag("t2")
    table.rollback_to(5)
    fs.pipe_file(remote + "/p=a/bucket-0/data-orphan-0.parquet", b"orphan")
    time.sleep(1.5)
    assert Table.open(uri, options).remove_orphan_files(older_than="1 s", dry_run=False).orphan_files == ["p=a/bucket-0/data-orphan-0.parquet"]
    assert Table.open(uri, options).verify().ok

    local = tmp_path / "back"
    fs.get(remote + "/", str(local / "db.db" / "app") + "/", recursive=True)
    check(paimon, str(local), "app", [5], ["t4", "kept"], renamed={"kept": 3})
    assert "p=a/bucket-0/data-orphan-0.parquet" not in table_files(str(local / "db.db" / "app"))
