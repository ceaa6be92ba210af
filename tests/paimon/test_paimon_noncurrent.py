"""Recoverable deletes on Apache Paimon tables (issue 26), judged by pypaimon.

With ``noncurrent_days`` 10, expiry, tag deletion and rollback delete no file; after undo pypaimon
reads every snapshot and tag with the rows it read before, and the files left are exactly theirs.
With 0, purge deletes exactly the files the plain operation deletes.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from airflow_snaptable.core import Table
from tests.paimon.conftest import FAR_FUTURE, table_files
from tests.paimon.test_paimon_lifecycle import check

EXPIRE = dict(retain_min=1, time_retained="0 s", now=FAR_FUTURE)


def _open(warehouse: str, name: str) -> Table:
    return Table.open(os.path.join(warehouse, "db.db", name))


OPERATIONS = {
    # name -> (table, the deleting call, what pypaimon reads after it)
    "expire": ("app", lambda t: t.expire_snapshots(**EXPIRE)),
    "expire-pk": ("pk", lambda t: t.expire_snapshots(**EXPIRE)),
    "delete-tag": ("app", lambda t: t.delete_tag("t4")),
    "rollback": ("app", lambda t: t.rollback_to(3)),
    "clean": ("app", lambda t: t.clean("KEEP_LATEST_COMMITS", commits_retained=2)),
    "rollback-to-an-expired-tag": ("app", lambda t: t.rollback_to(tag="t2")),
}
#: Operations whose subject is a tag of an expired snapshot: the history is expired plainly first.
AFTER_EXPIRY = {"rollback-to-an-expired-tag"}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_with_a_retention_nothing_is_deleted_and_undo_brings_back_what_pypaimon_read(paimon, tmp_path, operation):
    name, call = OPERATIONS[operation]
    warehouse = paimon.copy(tmp_path / "w")
    table_dir = os.path.join(warehouse, "db.db", name)
    if operation in AFTER_EXPIRY:
        _open(warehouse, name).expire_snapshots(**EXPIRE)
    before = table_files(table_dir)
    table = _open(warehouse, name)
    snapshots = [s.id for s in table.snapshots()]
    tags = [t.name for t in table.tags()]
    with table.retaining_noncurrent(10, operation) as run:
        call(table)
    assert table_files(table_dir) == before, "a run with a retention deletes no file"
    assert _open(warehouse, name).verify().ok
    _open(warehouse, name).undo(run.run_id)
    check(paimon, warehouse, name, snapshots, tags)


@pytest.mark.parametrize("operation", ["expire", "delete-tag-of-an-expired-snapshot", "rollback"])
def test_with_zero_days_purge_deletes_exactly_what_the_plain_operation_deletes(paimon, tmp_path, operation):
    plain = paimon.copy(tmp_path / "plain")
    retained = paimon.copy(tmp_path / "retained")
    if operation == "delete-tag-of-an-expired-snapshot":
        name, call = "app", lambda t: t.delete_tag("t2")
        for warehouse in (plain, retained):
            _open(warehouse, name).expire_snapshots(**EXPIRE)  # plainly, on both copies
    else:
        name, call = OPERATIONS[operation]
    before = table_files(os.path.join(plain, "db.db", name))
    call(_open(plain, name))
    deleted_plainly = before - table_files(os.path.join(plain, "db.db", name))
    assert deleted_plainly
    table = _open(retained, name)
    with table.retaining_noncurrent(0, operation):
        call(table)
    _open(retained, name).purge()
    assert before - table_files(os.path.join(retained, "db.db", name)) == deleted_plainly
    assert _open(retained, name).verify().ok


def test_orphan_removal_with_a_retention_keeps_the_orphans_noncurrent_and_purge_deletes_them(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    table_dir = os.path.join(warehouse, "db.db", "app")
    data_dir = next(d for d, _s, names in os.walk(table_dir) if "bucket-" in os.path.basename(d) and names)
    stray = os.path.join(data_dir, "data-stray.parquet")
    with open(stray, "wb") as f:
        f.write(b"left by a crashed writer")
    os.utime(stray, (1_000_000, 1_000_000))
    table = _open(warehouse, "app")
    with table.retaining_noncurrent(0, "remove-orphan-files") as run:
        result = table.remove_orphan_files(older_than="1 h", dry_run=False)
    assert result.orphan_count == 1 and result.run_id == run.run_id and os.path.exists(stray)
    assert _open(warehouse, "app").remove_orphan_files(older_than="1 h").orphan_count == 0  # noncurrent: not an orphan
    assert _open(warehouse, "app").verify().ok
    assert _open(warehouse, "app").purge().deleted_files == 1 and not os.path.exists(stray)


def test_consumer_expiry_with_a_retention_is_undone_as_paimon_wrote_it(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    table = _open(warehouse, "app")
    table.update_consumer("reader", 4)
    path = os.path.join(warehouse, "db.db", "app", "consumer", "consumer-reader")
    written = open(path, "rb").read()
    with table.retaining_noncurrent(10, "expire-consumers") as run:
        assert table.expire_consumers(now=FAR_FUTURE, expiration_time="1 s") == ["reader"]
    assert not os.path.exists(path)
    result = _open(warehouse, "app").undo(run.run_id)
    assert result.restored_consumers == ["reader"]
    assert json.loads(open(path, "rb").read()) == json.loads(written)  # Paimon's consumer file, as it was
    # The consumer protects its snapshots again, as pypaimon reads them.
    _open(warehouse, "app").expire_snapshots(**EXPIRE)
    check(paimon, warehouse, "app", [3, 4, 5, 6], ["t2", "t4"])
