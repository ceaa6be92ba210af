"""The lifecycle on a real Paimon table on S3 (moto and SeaweedFS on 127.0.0.1).

pypaimon writes the table locally (tests/paimon/conftest.py); it is uploaded as it is, the
lifecycle runs against ``s3://...``, and the table is brought back for pypaimon to read every
snapshot and tag that is left: the same rule as on local disk, through the object store.
"""

from __future__ import annotations

import os
import time

import fsspec
import pytest

from airflow_snaptable.core import Table
from tests.paimon.conftest import FAR_FUTURE, table_files
from tests.paimon.test_paimon_lifecycle import check

pytestmark = pytest.mark.s3


def test_expire_tags_rollback_and_orphans_on_s3(paimon, s3_server, s3_table_uri, tmp_path):
    options = s3_server.storage_options()
    fs = fsspec.filesystem("s3", **options)
    source = os.path.join(paimon.template, "db.db", "app")
    uri = s3_table_uri + "/db.db/app"
    fs.put(source + "/", uri[len("s3://"):] + "/", recursive=True)

    table = Table.open(uri, options)
    assert table.format == "paimon" and [s.id for s in table.snapshots()] == [1, 2, 3, 4, 5, 6]
    table.create_tag("kept", 3)
    result = table.expire_snapshots(retain_max=2, retain_min=2, now=FAR_FUTURE)
    assert result.expired_snapshot_ids == [1, 2, 3, 4]
    table.delete_tag("t2")
    table.rollback_to(5)
    orphan = uri[len("s3://"):] + "/p=a/bucket-0/data-orphan-0.parquet"
    fs.pipe_file(orphan, b"orphan")
    time.sleep(1.5)
    assert Table.open(uri, options).remove_orphan_files(older_than="1 s", dry_run=False).orphan_files == ["p=a/bucket-0/data-orphan-0.parquet"]
    assert Table.open(uri, options).verify().ok

    local = tmp_path / "back"
    fs.get(uri[len("s3://"):] + "/", str(local / "db.db" / "app") + "/", recursive=True)
    check(paimon, str(local), "app", [5], ["t4", "kept"], renamed={"kept": 3})
    assert "p=a/bucket-0/data-orphan-0.parquet" not in table_files(str(local / "db.db" / "app"))
