"""The lifecycle on real Apache Paimon tables (pypaimon writes them, tests/paimon/conftest.py).

After each operation pypaimon reads every retained snapshot and tag: each gives exactly the rows
it gave before, and the data and manifest files left under the table are exactly the files
pypaimon reads for them. That is Paimon's rule (ExpireSnapshotsImpl, SnapshotDeletion,
TagDeletion, RollbackHelper: a file goes when no retained snapshot or tag uses it, and only
then), checked by Paimon's own client, not by this package's reader.
Ported from Paimon's ExpireSnapshotsTest / FileDeletionTest where they map onto append and
primary-key tables: retain max / min / time window / limit, tags holding expired files, deleting
a tag frees only its files, consumers, rollback to a snapshot and to a tag.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import UnsupportedOperationError
from airflow_snaptable.core.native.tags import MANUAL, PERIODIC
from tests.paimon.conftest import FAR_FUTURE, open_table, table_files


def check(paimon, warehouse: str, name: str, snapshots: list[int], tags: list[str], renamed: dict | None = None) -> dict:
    """pypaimon reads exactly ``snapshots`` and ``tags``, each with its rows from before; the files left are theirs.

    Paimon's rule, written down from what pypaimon read *before* the operation: the data and
    manifest files left are exactly those the retained snapshots and tags used then.
    """
    after = paimon.read(warehouse, name)[name]
    before = paimon.before[name]
    assert sorted(map(int, after["snapshots"])) == snapshots
    assert sorted(after["tags"]) == sorted(tags)
    for key, read in list(after["snapshots"].items()):
        assert "error" not in read, read
        assert read["rows"] == before["snapshots"][key]["rows"], f"snapshot {key}"
    for tag, read in after["tags"].items():
        assert "error" not in read, read
        expected = before["tags"][tag]["rows"] if tag in before["tags"] else before["snapshots"][str((renamed or {})[tag])]["rows"]
        assert read["rows"] == expected, f"tag {tag}"
    used = {f for read in list(after["snapshots"].values()) + list(after["tags"].values()) for f in read["files"]}
    left = table_files(os.path.join(warehouse, "db.db", name))
    assert left == used
    expected = {f for s in snapshots for f in before["snapshots"][str(s)]["files"]}
    for tag in tags:
        source = before["tags"][tag] if tag in before["tags"] else before["snapshots"][str((renamed or {})[tag])]
        expected.update(source["files"])
    assert left == expected
    return after


def test_open_reads_paimon_history_and_verifies(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    table = open_table(warehouse, "app")
    assert table.format == "paimon"
    assert [s.id for s in table.snapshots()] == [1, 2, 3, 4, 5, 6]
    assert [s.commit_kind.value for s in table.snapshots()] == ["APPEND", "APPEND", "OVERWRITE", "APPEND", "OVERWRITE", "APPEND"]
    tags = {t.name: t for t in table.tags()}
    assert tags["t2"].snapshot_id == 2 and tags["t2"].time_retained_millis is None and tags["t2"].source == MANUAL
    assert tags["t4"].time_retained_millis == 86_400_000
    assert abs(tags["t4"].create_time_millis - time.time() * 1000) < 3_600_000
    result = table.verify()
    assert result.ok, result.to_dict()
    # Every file pypaimon reads for snapshot 6 is in our state of it, and the other way round.
    ours = set(table.store.files.state(table.snapshot(6))) | {f"manifest/{n}" for n in table.store.files.metadata_files(table.snapshot(6))}
    assert ours == set(paimon.before["app"]["snapshots"]["6"]["files"])
    with pytest.raises(UnsupportedOperationError):
        table.scan()
    with pytest.raises(UnsupportedOperationError):
        table.rollback_to(3, keep_history=True)
    assert open_table(warehouse, "pk").verify().ok


def test_expire_retain_max_keeps_tagged_files(paimon, tmp_path):
    """ExpireSnapshotsTest.testExpireWithTag / FileDeletionTest: expired files a tag holds stay."""
    warehouse = paimon.copy(tmp_path / "w")
    table = open_table(warehouse, "app")
    result = table.expire_snapshots(retain_max=2, retain_min=2, now=FAR_FUTURE)
    assert result.expired_snapshot_ids == [1, 2, 3, 4]
    check(paimon, warehouse, "app", [5, 6], ["t2", "t4"])
    assert table.verify().ok
    # Deleting a tag frees only what it alone held: t4's files stay while t4 lives.
    table.delete_tag("t2")
    check(paimon, warehouse, "app", [5, 6], ["t4"])
    table.delete_tag("t4")
    check(paimon, warehouse, "app", [5, 6], [])
    assert table.verify().ok


def test_expire_retain_min_limit_and_time_window_on_a_primary_key_table(paimon, tmp_path):
    """ExpireSnapshotsTest: retain min, the expire limit, and the time window."""
    warehouse = paimon.copy(tmp_path / "w")
    table = open_table(warehouse, "pk")
    times = {s.id: s.time_millis for s in table.snapshots()}
    # The time window: only snapshots whose successor is older than now - 1 h expire.
    assert table.expire_snapshots(retain_min=1, time_retained="1 h", now=times[3] + 3_600_000).expired_snapshot_ids == [1, 2]
    # The limit: one at a time.
    assert table.expire_snapshots(retain_min=1, time_retained="0 s", limit=1, now=FAR_FUTURE).expired_snapshot_ids == [3]
    check(paimon, warehouse, "pk", [4, 5], ["t1"])
    # retain_min keeps the newest ones.
    assert table.expire_snapshots(retain_min=2, time_retained="0 s", now=FAR_FUTURE).expired_snapshot_ids == []
    assert table.expire_snapshots(retain_min=1, time_retained="0 s", now=FAR_FUTURE).expired_snapshot_ids == [4]
    check(paimon, warehouse, "pk", [5], ["t1"])
    table.delete_tag("t1")
    check(paimon, warehouse, "pk", [5], [])
    assert table.verify().ok


def test_expiry_across_compactions_keeps_what_the_levels_still_use(paimon, tmp_path):
    """FileDeletionTest.testExpireWithUpgradedFile / compaction: a rewrite compaction frees the
    files it replaced once the snapshots before it expire; an upgrade (the same file deleted at
    level 0 and added at level 5 in one commit) frees nothing."""
    warehouse = paimon.copy(tmp_path / "w")
    table = open_table(warehouse, "lsm")
    assert [s.commit_kind.value for s in table.snapshots()] == ["APPEND", "APPEND", "COMPACT", "COMPACT", "APPEND"]
    before = paimon.before["lsm"]["snapshots"]
    data = lambda i: {f for f in before[str(i)]["files"] if not f.startswith("manifest/")}
    upgraded = {f for f in data(1) if f.startswith("p=b/")}
    assert upgraded <= data(5)  # the upgrade moved them, nothing rewrote them
    compacted_away = (data(1) | data(2)) - data(3)
    assert compacted_away and all(f.startswith("p=a/") for f in compacted_away)
    result = table.expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE)
    assert result.expired_snapshot_ids == [1, 2, 3, 4]
    check(paimon, warehouse, "lsm", [5], ["compacted"])
    left = table_files(os.path.join(warehouse, "db.db", "lsm"))
    assert not compacted_away & left and upgraded <= left
    table.delete_tag("compacted")
    check(paimon, warehouse, "lsm", [5], [])
    assert table.verify().ok


def test_consumer_file_protects_its_snapshots(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    table = open_table(warehouse, "app")
    table.update_consumer("reader", 4)
    path = os.path.join(warehouse, "db.db", "app", "consumer", "consumer-reader")
    assert json.loads(open(path).read()) == {"nextSnapshot": 4}  # Paimon's consumer file
    assert table.consumer("reader").next_snapshot == 4
    table.expire_snapshots(retain_min=1, time_retained="0 s", now=FAR_FUTURE)
    # The consumer's next snapshot and the one before it (the base of its next change set) stay.
    check(paimon, warehouse, "app", [3, 4, 5, 6], ["t2", "t4"])
    table.delete_consumer("reader")
    table.expire_snapshots(retain_min=1, time_retained="0 s", now=FAR_FUTURE)
    check(paimon, warehouse, "app", [6], ["t2", "t4"])


def test_tags_we_write_are_paimon_tags(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    table = open_table(warehouse, "app")
    table.create_tag("plain", 3)
    table.create_tag("kept", 5, time_retained="2 d")
    tag_dir = os.path.join(warehouse, "db.db", "app", "tag")
    snapshot_doc = json.loads(open(os.path.join(warehouse, "db.db", "app", "snapshot", "snapshot-3")).read())
    assert json.loads(open(os.path.join(tag_dir, "tag-plain")).read()) == snapshot_doc  # no TTL: Paimon writes the snapshot
    kept = json.loads(open(os.path.join(tag_dir, "tag-kept")).read())
    assert kept["tagTimeRetained"] == 172800.0 and isinstance(kept["tagCreateTime"], list)
    assert table.tag("kept").time_retained_millis == 172_800_000
    # Periodic tags: a name in the table's own period pattern is periodic (Paimon records no source).
    day = 86_400_000
    last = table.snapshot(6).time_millis
    now = (last // day + 1) * day + 1000
    result = table.create_periodic_tags(period="daily", now=now)
    # Shown as periodic once its day is over by the table's clock (issue 22 item 9: a name of a period not over is manual).
    table.clock = lambda: now
    assert len(result.created) == 1 and table.tag(result.created[0]).source == PERIODIC
    table.expire_snapshots(retain_min=1, time_retained="0 s", now=FAR_FUTURE)
    check(paimon, warehouse, "app", [6], ["t2", "t4", "plain", "kept", result.created[0]],
          renamed={"plain": 3, "kept": 5, result.created[0]: 6})


def test_rollback_to_a_snapshot_and_to_an_expired_tag(paimon, tmp_path):
    """RollbackHelper: later snapshots and tags go with the files only they used; a tag's expired snapshot comes back."""
    warehouse = paimon.copy(tmp_path / "w")
    table = open_table(warehouse, "app")
    result = table.rollback_to(4)
    assert result.discarded_snapshot_ids == [5, 6]
    check(paimon, warehouse, "app", [1, 2, 3, 4], ["t2", "t4"])
    table.expire_snapshots(retain_min=1, time_retained="0 s", now=FAR_FUTURE)
    check(paimon, warehouse, "app", [4], ["t2", "t4"])
    table.rollback_to(tag="t2")
    snapshot_file = os.path.join(warehouse, "db.db", "app", "snapshot", "snapshot-2")
    tag_doc = json.loads(open(os.path.join(warehouse, "db.db", "app", "tag", "tag-t2")).read())
    assert json.loads(open(snapshot_file).read()) == tag_doc
    check(paimon, warehouse, "app", [2], ["t2"])
    assert table.verify().ok


def test_orphan_files_older_than_the_window_go(paimon, tmp_path):
    """OrphanFilesClean: unreferenced files older than the safety window are deleted, younger ones stay."""
    warehouse = paimon.copy(tmp_path / "w")
    root = os.path.join(warehouse, "db.db", "pk")
    old = time.time() - 3 * 86_400
    orphans = ["p=a/bucket-0/data-orphan-0.parquet", "manifest/manifest-orphan-0", "snapshot/.snapshot-9.x.tmp"]
    for rel in orphans + ["p=b/bucket-1/data-young-0.parquet"]:
        with open(os.path.join(root, rel), "wb") as f:
            f.write(b"orphan")
    for rel in orphans:
        os.utime(os.path.join(root, rel), (old, old))
    table = open_table(warehouse, "pk")
    assert sorted(table.verify().unreferenced_files) == sorted(orphans + ["p=b/bucket-1/data-young-0.parquet"])
    dry = table.remove_orphan_files(older_than="1 d")
    assert sorted(dry.orphan_files) == sorted(orphans)
    table.remove_orphan_files(older_than="1 d", dry_run=False)
    assert not any(os.path.exists(os.path.join(root, rel)) for rel in orphans)
    os.remove(os.path.join(root, "p=b/bucket-1/data-young-0.parquet"))
    check(paimon, warehouse, "pk", [1, 2, 3, 4, 5], ["t1"])


def test_a_null_partition_and_blank_or_null_named_strings_are_partitions_of_their_own(paimon, tmp_path):
    """Issue 34, item 8, on Paimon tables: a partition is its typed values (pypaimon's BinaryRow), not its directory.

    NULL and the blank string share Paimon's ``p=__DEFAULT_PARTITION__`` directory with the string
    '__DEFAULT_PARTITION__'; 'null' has its own. KEEP_LATEST_FILE_VERSIONS (N = 2) counts each one's
    versions apart: NULL's begin at 1, 2 and 3 (it needs snapshot 2 on), 'null''s at 1 and 4 (3 on), the
    others' at 1 only; so only snapshot 1 goes (one partition of them all would have begun a version at
    every commit, and snapshot 2 would have gone too). Then pypaimon reads every partition's rows."""
    from tests.paimon.conftest import run_client

    warehouse = str(tmp_path / "w")
    everyone = [None, "null", "", "__DEFAULT_PARTITION__"]
    steps = [{"create": "db.nulls", "columns": [["p", "string"], ["id", "int64"]], "partition": ["p"]}]
    steps.append({"write": "db.nulls", "rows": [[p, k] for k, p in enumerate(everyone)]})
    steps += [{"write": "db.nulls", "rows": [[p, 10 * n + k]]} for n, (k, p) in enumerate([(0, None), (0, None), (1, "null")], start=1)]
    before = run_client(paimon.python, warehouse, steps + [{"read": "db.nulls"}])["db.nulls"]
    table = open_table(warehouse, "nulls")
    assert table.verify().ok, table.verify().to_dict()
    assert table.remove_orphan_files(older_than="0 s", dry_run=True).orphan_count == 0
    result = table.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=2)
    assert result.earliest_commit_retained == 2 and result.expire.expired_snapshot_ids == [1]
    after = run_client(paimon.python, warehouse, [{"read": "db.nulls"}])["db.nulls"]
    assert sorted(map(int, after["snapshots"])) == [2, 3, 4]
    for key, read in after["snapshots"].items():
        assert "error" not in read and read["rows"] == before["snapshots"][key]["rows"], key
    latest = sorted(after["snapshots"]["4"]["rows"], key=repr)
    assert latest == sorted([[None, 0], ["null", 1], ["", 2], ["__DEFAULT_PARTITION__", 3], [None, 10], [None, 20], ["null", 31]], key=repr)
    assert Table.open(os.path.join(warehouse, "db.db", "nulls")).verify().ok
