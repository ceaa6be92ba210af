"""The lifecycle on real Apache Iceberg tables (pyiceberg writes them; tests/iceberg/conftest.py).

Expected snapshot sets are written from Iceberg's ``RemoveSnapshots`` rules; after each
operation pyiceberg reads every snapshot and ref that is left with the rows they had before,
and the files under the table location are exactly those pyiceberg's walk of the metadata
reaches: nothing reachable is gone, nothing unreachable is left. Ported from Iceberg's
``TestRemoveSnapshots`` / ``TestSnapshotManager`` where they map (method names in docstrings).
"""

from __future__ import annotations

import json
import os

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, ProtectedSnapshotError, TagNotFoundError
from tests.iceberg.conftest import assert_exactly_reachable_left, files_on_disk, read_everything, rows

FAR = 4_102_444_800_000  # 2100-01-01


def _history(env, n: int = 5, properties: dict | None = None):
    table = env.create(properties=properties)
    for i in range(n):
        table.append(rows(i))
    table = table.refresh()
    return table, [s.snapshot_id for s in table.metadata.snapshots]


def _open(env) -> Table:
    return Table.open("iceberg://db.orders", catalog=env.properties)


def _same_reads(before: dict, after: dict, moved: dict | None = None) -> None:
    """Every snapshot left reads its rows from before; every ref left points where it did (or was ``moved``)."""
    for snapshot_id, read in after["snapshots"].items():
        assert read == before["snapshots"][snapshot_id], snapshot_id
    assert after["refs"] == {k: (moved or {}).get(k, v) for k, v in before["refs"].items() if k in after["refs"]}


@pytest.mark.parametrize("format_version", ["1", "2"])
def test_retain_last_keeps_the_newest_ancestors_and_deletes_what_only_the_others_reach(iceberg_env, format_version):
    """TestRemoveSnapshots.testRetainLastWithExpireOlderThan, on both manifest formats (version 1 has no
    sequence numbers; version 2 ADDED entries inherit their manifest's)."""
    table, ids = _history(iceberg_env, properties={"format-version": format_version})
    assert table.metadata.format_version == int(format_version)
    table.overwrite(rows(99, "b"))  # pyiceberg commits it as a delete snapshot, then an append
    before = read_everything(table)
    ids = [s.snapshot_id for s in table.refresh().metadata.snapshots]
    result = _open(iceberg_env).expire_snapshots(retain_min=2, older_than=FAR)
    after = read_everything(table)
    assert sorted(after["snapshots"]) == sorted(ids[-2:])
    assert result.expired_snapshot_ids == ids[:-2]
    assert result.deleted_data_files == 5  # the kept delete and append snapshots reach none of the appended files
    _same_reads(before, after)
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_older_than_keeps_the_minimum_and_the_default_age_keeps_everything_young(iceberg_env):
    """TestRemoveSnapshots.testExpireOlderThan / testRetainLastKeepsExpiringSnapshot: default
    history.expire.max-snapshot-age-ms (5 days) keeps fresh snapshots; min-snapshots-to-keep wins."""
    table, ids = _history(iceberg_env)
    table_files = files_on_disk(iceberg_env.location())
    assert _open(iceberg_env).expire_snapshots().expired_snapshot_ids == []
    assert files_on_disk(iceberg_env.location()) == table_files
    times = {s.snapshot_id: s.timestamp_ms for s in table.metadata.snapshots}
    # Older than the third snapshot's time: the first two go (an append reuses earlier manifests: no data file is freed).
    result = _open(iceberg_env).expire_snapshots(older_than=times[ids[2]])
    assert result.expired_snapshot_ids == ids[:2] and result.deleted_data_files == 0
    # The table's min-snapshots-to-keep holds against any age.
    table.transaction().set_properties({"history.expire.min-snapshots-to-keep": "2"}).commit_transaction()
    assert _open(iceberg_env).expire_snapshots(older_than=FAR).expired_snapshot_ids == ids[2:3]
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_tags_and_branches_keep_their_snapshots_and_files(iceberg_env):
    """TestRemoveSnapshots.testRetainNAvailableSnapshotsWithTransaction / testBranchExpiration /
    testTagExpiration: a tag keeps its snapshot; a branch keeps its own retention; an expired ref goes."""
    table, ids = _history(iceberg_env)
    table.manage_snapshots().create_tag(ids[1], "t1").create_branch(ids[2], "audit").commit()
    table = table.refresh()
    table.append(rows(50, "b"), branch="audit")
    table.overwrite(rows(99, "c"))
    before = read_everything(table)
    ours = _open(iceberg_env)
    assert ours.tag("t1").snapshot_id == ids[1]
    result = ours.expire_snapshots(retain_min=1, older_than=FAR)
    after = read_everything(table)
    audit_head = before["refs"]["audit"]
    # Kept: main's head, the tag's snapshot, the branch's head (min 1); the rest of both lineages goes.
    assert set(after["snapshots"]) == {before["refs"]["main"], ids[1], audit_head}
    assert set(result.expired_snapshot_ids) == set(before["snapshots"]) - set(after["snapshots"])
    _same_reads(before, after)
    assert_exactly_reachable_left(table, iceberg_env.location())
    # The tag deleted, the next expiry frees its snapshot's files.
    ours.delete_tag("t1")
    with pytest.raises(TagNotFoundError):
        ours.tag("t1")
    ours.expire_snapshots(retain_min=1, older_than=FAR)
    assert set(read_everything(table)["snapshots"]) == {before["refs"]["main"], audit_head}
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_a_ref_older_than_its_max_ref_age_is_removed_with_its_snapshot(iceberg_env):
    """TestRemoveSnapshots.testRetainFilesOnRetainedBranches / max-ref-age-ms: a tag with a time to live."""
    table, ids = _history(iceberg_env, 3)
    ours = _open(iceberg_env)
    tag = ours.create_tag("week", ids[0], time_retained="7 d")
    assert tag.time_retained_millis == 7 * 86_400_000
    assert iceberg_env.table().metadata.refs["week"].max_ref_age_ms == 7 * 86_400_000
    now = table.metadata.snapshot_by_id(ids[0]).timestamp_ms + 8 * 86_400_000
    result = ours.expire_snapshots(retain_min=1, older_than=FAR, now=now)
    assert ids[0] in result.expired_snapshot_ids
    assert "week" not in iceberg_env.table().metadata.refs
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_rollback_then_expiry_removes_the_abandoned_snapshots_and_their_files(iceberg_env):
    """TestSnapshotManager.testRollbackTo + TestRemoveSnapshots.testWithExpiringDanglingStageCommit:
    a rollback keeps the later snapshots (Iceberg's rule); expiry then removes them, unreferenced."""
    table, ids = _history(iceberg_env, 4)
    before = read_everything(table)
    ours = _open(iceberg_env)
    result = ours.rollback_to(ids[1])
    assert result.target_snapshot_id == ids[1] and result.discarded_snapshot_ids == []
    assert iceberg_env.table().metadata.current_snapshot_id == ids[1]
    assert set(read_everything(table)["snapshots"]) == set(ids)  # nothing removed yet
    with pytest.raises(InvalidArgumentError, match="ancestor"):
        ours.rollback_to(ids[3])  # no longer an ancestor of main
    ours.create_tag("later", ids[3])
    ours.rollback_to(tag="later")  # a tag may point anywhere
    ours.rollback_to(ids[1])
    ours.delete_tag("later")
    ours.expire_snapshots(retain_min=1, older_than=FAR)
    after = read_everything(table)
    assert set(after["snapshots"]) == {ids[1]}
    _same_reads(before, after, moved={"main": ids[1]})
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_expire_given_ids_and_the_protected_ones(iceberg_env):
    """TestRemoveSnapshots.testExpireSnapshotsWithSnapshotId / testFailRemovingSnapshotWhenStillReferencedByBranch."""
    table, ids = _history(iceberg_env, 4)
    ours = _open(iceberg_env)
    ours.create_tag("keep", ids[0])
    before = {p: open(os.path.join(iceberg_env.location(), p), "rb").read() for p in files_on_disk(iceberg_env.location())}
    with pytest.raises(ProtectedSnapshotError, match="keep"):
        ours.expire_snapshots(snapshot_ids=[ids[0]])
    with pytest.raises(ProtectedSnapshotError, match="main"):
        ours.expire_snapshots(snapshot_ids=[ids[3]])
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        ours.expire_snapshots(snapshot_ids=[12345])
    assert {p: open(os.path.join(iceberg_env.location(), p), "rb").read() for p in files_on_disk(iceberg_env.location())} == before
    assert ours.expire_snapshots(snapshot_ids=[ids[1]]).expired_snapshot_ids == [ids[1]]
    assert set(read_everything(table)["snapshots"]) == {ids[0], ids[2], ids[3]}
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_metadata_only_expiry_then_orphan_removal(iceberg_env):
    """TestRemoveSnapshots.testNoCleanupWhenDeleteFilesFalse (cleanExpiredFiles(false)), then DeleteOrphanFiles."""
    table, ids = _history(iceberg_env, 3)
    table.overwrite(rows(9, "z"))
    left_before = files_on_disk(iceberg_env.location())
    ours = _open(iceberg_env)
    result = ours.expire_snapshots(retain_min=1, older_than=FAR, delete_files=False)
    assert len(result.expired_snapshot_ids) == 4 and result.deleted_data_files == 0  # 3 appends and the overwrite's delete
    on_disk = files_on_disk(iceberg_env.location())
    assert on_disk >= left_before - {p for p in left_before if p.endswith(".metadata.json")}
    unreachable = on_disk - __import__("tests.iceberg.conftest", fromlist=["x"]).reachable_files(table)
    assert any(p.startswith("data/") for p in unreachable)
    young = ours.remove_orphan_files(dry_run=True)  # the 3-day window: everything is young
    assert young.orphan_files == []
    dry = ours.remove_orphan_files(older_than="0 s", dry_run=True)
    assert set(dry.orphan_files) == unreachable
    assert set(ours.remove_orphan_files(older_than="0 s", dry_run=False).orphan_files) == unreachable
    assert_exactly_reachable_left(table, iceberg_env.location())
    assert read_everything(table)["snapshots"]  # pyiceberg still reads what is left


def test_previous_metadata_versions_beyond_the_maximum_are_deleted(iceberg_env):
    """write.metadata.previous-versions-max: the commit drops the oldest metadata files from the log; expiry deletes them."""
    table, ids = _history(iceberg_env, 6, properties={"write.metadata.previous-versions-max": "2"})
    location = iceberg_env.location()
    assert len([p for p in files_on_disk(location) if p.endswith(".metadata.json")]) == 7
    _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
    table = table.refresh()
    assert len(table.metadata.metadata_log) == 2
    assert_exactly_reachable_left(table, location)


def test_cli_contract_and_json(iceberg_env, capsys):
    table, ids = _history(iceberg_env, 3)
    argv = ["expire", "iceberg://db.orders", "--catalog", iceberg_env.catalog_json,
            "--older-than", "2100-01-01T00:00:00Z", "--retain-min", "1", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["action"] == "expire-snapshots" and doc["result"]["expired_snapshot_ids"] == ids[:2]
    assert main(["tag", "create", "iceberg://db.orders", "nightly", "--catalog", iceberg_env.catalog_json, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["snapshot_id"] == ids[2]
    assert iceberg_env.table().metadata.refs["nightly"].snapshot_id == ids[2]
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_periodic_tags_on_iceberg_refs(iceberg_env, capsys):
    """Paimon's automatic tags on an Iceberg table (nobody else offers them for Iceberg): the period and the
    retention come from the table's properties; each tag is an Iceberg tag ref on ``main``'s state at the
    period's end; a ref whose name is the table's own pattern counts as periodic and is pruned first."""
    table, ids = _history(iceberg_env, 3, properties={"tag.creation-period": "hourly", "tag.num-retained-max": "2"})
    table.manage_snapshots().create_tag(ids[0], "2020-01-01 00").create_tag(ids[0], "release").commit()
    last = table.refresh().metadata.snapshot_by_id(ids[-1]).timestamp_ms
    hour = 3_600_000
    end = (last // hour + 1) * hour  # the end of the hour of the last commit
    before = read_everything(table)
    ours = _open(iceberg_env)
    result = ours.create_periodic_tags(now=end + 1000)
    import datetime as dt

    name = dt.datetime.fromtimestamp((end - hour) / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H")
    assert (result.created, result.deleted) == ([name], [])
    ours.clock = lambda: end + 1000  # a tag shows as periodic once its period is over by the table's clock
    assert {t.name: t.source for t in ours.tags()} == {"2020-01-01 00": "periodic", "release": "manual", name: "periodic"}
    # The next hour: nothing committed since, so the tag holds the same state; retention (2) prunes 2020.
    again = _open(iceberg_env).create_periodic_tags(now=end + hour + 1000)
    next_name = dt.datetime.fromtimestamp(end / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H")
    assert (again.created, again.deleted) == ([next_name], ["2020-01-01 00"])
    after = read_everything(table)
    assert after["refs"] == {"main": ids[-1], "release": ids[0], name: ids[-1], next_name: ids[-1]}
    assert after["snapshots"] == before["snapshots"]
    # Before any snapshot of the table: nothing to tag, nothing reported skipped; watermarks are not Iceberg's.
    early = ours.create_periodic_tags(now=table.metadata.snapshot_by_id(ids[0]).timestamp_ms - hour)
    assert (early.created, early.skipped) == ([], [])
    # The CLI (real time, daily): yesterday ended before the first commit, so again nothing to tag.
    argv = ["tag", "periodic", "iceberg://db.orders", "--catalog", iceberg_env.catalog_json, "--period", "daily", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["action"] == "periodic-tags" and (doc["result"]["created"], doc["result"]["skipped"]) == ([], [])
    from airflow_snaptable.core.errors import UnsupportedOperationError

    with pytest.raises(UnsupportedOperationError):
        ours.create_periodic_tags(time_source="watermark", now=end + 1000)


def test_new_snapshots_are_counted_by_sequence_number_along_main(iceberg_env):
    """NewSnapshotSensor's logic (find_new_snapshots) on an Iceberg table: positions are data sequence numbers,
    the new snapshots are main's ancestors above the position, a range whose snapshots expired is an error,
    and what has no position (format version 1, a missing consumer) is a typed error."""
    from airflow_snaptable.core.errors import SnapshotNotFoundError, UnsupportedOperationError
    from airflow_snaptable.core.incremental import find_new_snapshots

    table, ids = _history(iceberg_env, 3)
    ours = _open(iceberg_env)
    assert (ours.snapshot_manager.earliest_id(), ours.snapshot_manager.latest_id()) == (1, 3)
    new = find_new_snapshots(ours, after_snapshot_id=1)
    assert (new.from_snapshot_id, new.to_snapshot_id, new.snapshot_ids) == (1, 3, [2, 3])
    assert new.commit_kinds == ["APPEND", "APPEND"] and new.added_records == 4 and new.deleted_records == 0
    assert not find_new_snapshots(ours, after_snapshot_id=3).found
    table.overwrite(rows(99, "b"))  # pyiceberg: a DELETE snapshot (4), then an APPEND (5)
    new = find_new_snapshots(ours, after_snapshot_id=3, commit_kinds=["DELETE"])
    assert (new.snapshot_ids, new.commit_kinds, new.matching_snapshot_ids) == ([4, 5], ["DELETE", "APPEND"], [4])
    assert (new.added_records, new.deleted_records) == (2, 6)
    ours.expire_snapshots(retain_min=2, older_than=FAR)  # main keeps 4 and 5
    for expired in (0, 2, 3):  # the state at the position is gone: the changes after it cannot be read
        with pytest.raises(SnapshotNotFoundError):
            find_new_snapshots(ours, after_snapshot_id=expired)
    assert find_new_snapshots(ours, after_snapshot_id=4).snapshot_ids == [5]
    with pytest.raises(InvalidArgumentError):  # no such consumer, and the history before it is gone
        find_new_snapshots(ours, consumer_id="reader")
    iceberg_env.create("db.v1", properties={"format-version": "1"}).append(rows(1))
    with pytest.raises(UnsupportedOperationError):
        find_new_snapshots(Table.open("iceberg://db.v1", catalog=iceberg_env.properties), after_snapshot_id=0)


def test_expiry_across_a_schema_change_keeps_both_schemas_readable(iceberg_env):
    """A column added between commits (pyiceberg's update_schema): a tag on the old schema and main on the new
    one both read as before after expiry and orphan removal; the files of the expired snapshots go."""
    import pyarrow as pa
    from pyiceberg.types import StringType

    table, ids = _history(iceberg_env, 3)
    table.manage_snapshots().create_tag(ids[1], "old-schema").commit()
    with table.update_schema() as update:
        update.add_column("note", StringType())
    table = table.refresh()
    wide = pa.schema([("p", pa.string()), ("id", pa.int64()), ("note", pa.string())])
    table.append(pa.table({"p": ["z"], "id": [7], "note": ["new column"]}, schema=wide))
    table.overwrite(pa.table({"p": ["y"], "id": [8], "note": ["only this"]}, schema=wide))
    before = read_everything(table)
    ours = _open(iceberg_env)
    ours.expire_snapshots(retain_min=1, older_than=FAR)
    after = read_everything(table)
    assert set(after["snapshots"]) == {ids[1], before["refs"]["main"]}
    _same_reads(before, after)
    assert len(table.refresh().metadata.schemas) == 2
    assert_exactly_reachable_left(table, iceberg_env.location())


def test_new_snapshots_along_a_branch(iceberg_env, tmp_path):
    """NewSnapshotSensor(ref=...): positions along an Iceberg branch; an unknown ref, a ref with a consumer and a
    ref on a table that has none are typed errors."""
    from airflow_snaptable.core.incremental import find_new_snapshots
    from tests.conftest import SCHEMA as OUR_SCHEMA, make_rows

    table, ids = _history(iceberg_env, 2)  # main: 1, 2
    table.manage_snapshots().create_branch(ids[1], "audit").commit()
    table = table.refresh()
    table.append(rows(10, "x"), branch="audit")  # 3, on audit only
    table.append(rows(11, "y"))  # 4, on main
    table.append(rows(12, "z"), branch="audit")  # 5, on audit only
    ours = _open(iceberg_env)
    assert find_new_snapshots(ours, after_snapshot_id=2, ref="audit").snapshot_ids == [3, 5]
    assert find_new_snapshots(ours, after_snapshot_id=2).snapshot_ids == [4]
    assert find_new_snapshots(ours, after_snapshot_id=0, ref="audit").snapshot_ids == [1, 2, 3, 5]
    with pytest.raises(InvalidArgumentError, match="no ref"):
        find_new_snapshots(ours, after_snapshot_id=0, ref="nope")
    ours.update_consumer("r", 1)
    with pytest.raises(InvalidArgumentError):
        find_new_snapshots(ours, consumer_id="r", ref="audit")
    native = Table.create(str(tmp_path / "native"), OUR_SCHEMA, partition_by=["p"])
    native.append(make_rows(range(3)))
    with pytest.raises(InvalidArgumentError, match="only Iceberg"):
        find_new_snapshots(native, after_snapshot_id=0, ref="audit")


def _statistics_file(table, snapshot_id: int) -> str:
    """A Puffin file for ``snapshot_id`` under metadata/, registered with pyiceberg's ``update_statistics``."""
    from pyiceberg.table.statistics import StatisticsFile

    path = f"{table.location()}/metadata/{snapshot_id}-stats.puffin"
    with open(path[len("file://"):], "wb") as handle:
        handle.write(b"PFA1" + bytes(16) + b"PFA1")
    with table.update_statistics() as update:
        update.set_statistics(
            StatisticsFile(snapshot_id=snapshot_id, statistics_path=path, file_size_in_bytes=24, file_footer_size_in_bytes=12, blob_metadata=[])
        )
    return path[len(table.location()) + 1:]


def test_a_copy_on_write_delete_and_statistics_files(iceberg_env):
    """TestRemoveSnapshots.testRemoveFromTableWithStatisticsFiles / testExpireWithDeleteFiles' data side:
    pyiceberg's row delete rewrites the data files that hold the deleted rows (copy-on-write; it writes no
    delete files), and a statistics file belongs to one snapshot. Expiring everything but the latest
    snapshot frees the rewritten files and the expired snapshot's statistics; the latest one's stay."""
    table, ids = _history(iceberg_env, n=4)
    table.delete("id < 2")  # rows 0 and 1: their files (of the first two appends) are rewritten without them
    table = table.refresh()
    latest = table.metadata.current_snapshot_id
    assert table.metadata.snapshot_by_id(latest).summary["deleted-data-files"] == "2"
    expired_stats = _statistics_file(table, ids[1])
    kept_stats = _statistics_file(table, latest)
    table = table.refresh()
    before = read_everything(table)
    rewritten = {f for f in files_on_disk(iceberg_env.location()) if f.startswith("data/")}
    result = _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
    table = table.refresh()
    after = read_everything(table)
    assert sorted(after["snapshots"]) == [latest] and result.expired_snapshot_ids == ids
    assert result.deleted_data_files == 2  # the first two appends' files: only the expired snapshots reach them
    assert len(rewritten - files_on_disk(iceberg_env.location())) == 2
    assert [s.snapshot_id for s in table.metadata.statistics] == [latest]
    on_disk = files_on_disk(iceberg_env.location())
    assert expired_stats not in on_disk and kept_stats in on_disk
    assert after["snapshots"][latest] == before["snapshots"][latest] == sorted([("a", 1000), ("a", 1001), ("a", 2), ("a", 1002), ("a", 3), ("a", 1003)], key=repr)
    assert_exactly_reachable_left(table, iceberg_env.location())
