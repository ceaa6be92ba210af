"""Bin-pack compaction and manifest rewriting of real Iceberg tables, judged by pyiceberg.

pyiceberg writes small appends into a partitioned table (two partition specs). ``compact`` leaves
one file per partition and spec, ``rewrite-manifests`` leaves few manifests; pyiceberg reads the
same rows after each, the files keep their partition values and column statistics, and an expiry
afterwards frees the small files. A pyiceberg append and a pyiceberg delete in another process
land between the plan and the commit; a crash at every storage operation leaves a table pyiceberg
reads, and a rerun finishes.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import CommitConflictError, InvalidArgumentError, UnsupportedMetadataError
from tests.conftest import FailAt, InjectedCrash
from tests.iceberg.conftest import IcebergEnv, SCHEMA, assert_exactly_reachable_left, files_on_disk

FAR = 4_102_444_800_000
URI = "iceberg://db.orders"


def _rows(table) -> list:
    return sorted(map(tuple, (r.values() for r in table.refresh().scan().to_arrow().to_pylist())), key=repr)


def _small_appends(env: IcebergEnv, per_partition: int = 6, sort_desc: bool = False, spec_change: bool = True):
    """Small appends in partitions a and b (spec 0: identity p); with ``spec_change``, the spec then
    drops p (spec 1, unpartitioned) and more small appends follow."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform

    catalog = env.catalog()
    catalog.create_namespace("db")
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    schema = Schema(NestedField(1, "p", StringType(), required=False), NestedField(2, "id", LongType(), required=False))

    table = catalog.create_table(
        "db.orders", schema=schema, partition_spec=PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "p")),
        sort_order=SortOrder(SortField(2, IdentityTransform(), SortDirection.DESC, NullOrder.NULLS_LAST)) if sort_desc else SortOrder(),
    )
    for i in range(per_partition):
        table.append(pa.table({"p": ["a", "a", "b"], "id": [i, 50 + i, 100 + i]}, schema=SCHEMA))
    if spec_change:
        with table.update_spec() as update:
            update.remove_field("p")
        for i in range(per_partition):
            table.refresh().append(pa.table({"p": ["c"], "id": [200 + i]}, schema=SCHEMA))
    return table.refresh()


def _live_files(table) -> list:
    return [task.file for task in table.refresh().scan().plan_files()]


def test_compact_leaves_one_file_per_partition_and_spec_keeping_rows_statistics_and_partitions(iceberg_env):
    table = _small_appends(iceberg_env, sort_desc=True)
    before_rows, before_files = _rows(table), _live_files(table)
    assert len(before_files) == 18
    result = Table.open(URI, catalog=iceberg_env.properties).compact()
    table = table.refresh()
    assert _rows(table) == before_rows
    assert table.metadata.current_snapshot().summary.operation.value == "replace"
    assert table.metadata.current_snapshot().summary["total-records"] == str(len(before_rows))
    assert table.metadata.current_snapshot().summary["total-data-files"] == "3"
    files = _live_files(table)
    assert sorted((f.spec_id, tuple(f.partition)) for f in files) == [(0, ("a",)), (0, ("b",)), (1, ())]
    assert result.rewritten_files == 18 and result.added_files == 3 and len(result.groups) == 3
    assert result.target_file_size == 512 * 1024**2 and result.min_input_files == 5
    for data_file in files:
        content = pq.read_table(io.BytesIO(open(data_file.file_path[len("file://"):], "rb").read()))
        ids = content.column("id").to_pylist()
        assert ids == sorted(ids, reverse=True), "the table's sort order (id desc) is carried"
        assert data_file.sort_order_id == table.metadata.default_sort_order_id
        assert data_file.record_count == content.num_rows
        assert data_file.value_counts[2] == content.num_rows and data_file.null_value_counts[2] == 0
        assert int.from_bytes(data_file.lower_bounds[2], "little") == min(ids)
        assert int.from_bytes(data_file.upper_bounds[2], "little") == max(ids)
        assert len(data_file.partition) == len(table.metadata.specs()[data_file.spec_id].fields)
        assert set(content.column("p").to_pylist()) == ({data_file.partition[0]} if data_file.spec_id == 0 else {"c"})
    # pyiceberg prunes by the kept partition values
    assert sorted(r["id"] for r in table.scan(row_filter="p == 'b'").to_arrow().to_pylist()) == list(range(100, 106))

    # An expiry afterwards frees the small files, and exactly what the metadata reaches is left.
    expired = Table.open(URI, catalog=iceberg_env.properties).expire_snapshots(retain_min=1, older_than=FAR)
    assert expired.deleted_data_files == 18
    assert _rows(table) == before_rows
    assert_exactly_reachable_left(iceberg_env.table(), iceberg_env.location())


def test_target_size_min_input_files_partitions_and_dry_run(iceberg_env):
    table = _small_appends(iceberg_env, per_partition=5, spec_change=False)
    ours = Table.open(URI, catalog=iceberg_env.properties)
    location = table.metadata_location
    planned = ours.compact(dry_run=True, partitions=[{"p": "a"}])
    assert planned.snapshot_id is None and [g.partition for g in planned.groups] == [{"p": "a"}]
    assert planned.rewritten_files == 5 and planned.added_files == 1
    assert ours.compact(min_input_files=6) .snapshot_id is None  # 5 small files in each partition: below the minimum
    assert table.refresh().metadata_location == location
    small = min(f.file_size_in_bytes for f in _live_files(table))
    # A target that makes every file big enough: nothing is small.
    assert ours.compact(target_file_size=int(small / 0.75)).groups == []
    # The table's write.target-file-size-bytes is the default target.
    table.transaction().set_properties({"write.target-file-size-bytes": str(2 * small)}).commit_transaction()
    result = ours.compact(partitions=[{"p": "b"}])
    assert result.target_file_size == 2 * small
    assert [g.partition for g in result.groups] == [{"p": "b"}] and result.groups[0].output_files == 2
    partitions = sorted(tuple(f.partition) for f in _live_files(table))
    assert partitions == [("a",)] * 5 + [("b",)] * 2


def test_rewrite_manifests_clusters_by_partition_into_few_manifests(iceberg_env):
    table = _small_appends(iceberg_env, per_partition=10)
    before = _rows(table)
    assert len(table.metadata.current_snapshot().manifests(table.io)) == 20
    ours = Table.open(URI, catalog=iceberg_env.properties)
    assert ours.rewrite_manifests(dry_run=True).snapshot_id is None
    result = ours.rewrite_manifests()
    table = table.refresh()
    manifests = table.metadata.current_snapshot().manifests(table.io)
    assert len(manifests) == result.manifests_after == 2  # one per spec, each under the 8 MB target
    assert _rows(table) == before
    assert table.metadata.current_snapshot().summary.operation.value == "replace"
    # A small target cuts a spec's entries in partition order: no partition of spec 0 spans two manifests.
    table.transaction().set_properties({"commit.manifest.target-size-bytes": str(manifests[0].manifest_length // 3)}).commit_transaction()
    ours.rewrite_manifests()
    table = table.refresh()
    manifests = table.metadata.current_snapshot().manifests(table.io)
    assert 3 <= len(manifests) <= 8
    spans = {}
    for manifest in manifests:
        for entry in manifest.fetch_manifest_entry(table.io):
            spans.setdefault((manifest.partition_spec_id, tuple(entry.data_file.partition)), set()).add(manifest.manifest_path)
    assert max(len(paths) for key, paths in spans.items() if key[0] == 0) <= 2
    assert _rows(table) == before
    Table.open(URI, catalog=iceberg_env.properties).expire_snapshots(retain_min=1, older_than=FAR)
    assert _rows(table) == before
    assert_exactly_reachable_left(iceberg_env.table(), iceberg_env.location())


WRITER = """
import json, sys
import pyarrow as pa
from pyiceberg.catalog import load_catalog
props, what = json.loads(sys.argv[1]), sys.argv[2]
table = load_catalog("default", **props).load_table("db.orders")
if what == "append":
    table.append(pa.table({"p": ["a"], "id": [9999]}, schema=table.schema().as_arrow()))
else:
    table.delete(what)
"""


def _other_process(env: IcebergEnv, what: str) -> None:
    done = subprocess.run([sys.executable, "-c", WRITER, json.dumps(env.properties), what], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def _racing(env: IcebergEnv, whats: list[str]):
    """Rewrites groups in turn after another process committed the next of ``whats`` (between plan and commit)."""
    queue = list(whats)

    def rewrite_groups(groups, rewrite):
        if queue:
            _other_process(env, queue.pop(0))
        return [rewrite(group) for group in groups]

    return rewrite_groups


def test_an_append_in_another_process_during_the_compaction_survives(iceberg_env):
    table = _small_appends(iceberg_env, spec_change=False)
    before = _rows(table)
    result = Table.open(URI, catalog=iceberg_env.properties).compact(rewrite_groups=_racing(iceberg_env, ["append"]))
    table = table.refresh()
    assert _rows(table) == sorted(before + [("a", 9999)], key=repr)
    assert table.metadata.current_snapshot().snapshot_id == result.snapshot_id
    assert sorted(tuple(f.partition) for f in _live_files(table)) == [("a",), ("a",), ("b",)]  # the compacted two and the append


def test_a_delete_in_another_process_fails_the_rewrite_which_is_planned_again_once(iceberg_env):
    table = _small_appends(iceberg_env, spec_change=False)
    before = _rows(table)
    result = Table.open(URI, catalog=iceberg_env.properties).compact(rewrite_groups=_racing(iceberg_env, ["id == 3"]))
    table = table.refresh()
    assert _rows(table) == [r for r in before if r != ("a", 3)]  # the delete stays: its file was not resurrected
    assert result.snapshot_id == table.metadata.current_snapshot_id
    assert len(_live_files(table)) == 2
    Table.open(URI, catalog=iceberg_env.properties).expire_snapshots(retain_min=1, older_than=FAR)
    assert_exactly_reachable_left(iceberg_env.table(), iceberg_env.location())


def test_deletes_during_both_plans_are_a_commit_conflict_and_leave_no_file(iceberg_env):
    table = _small_appends(iceberg_env, spec_change=False)
    before = _rows(table)
    with pytest.raises(CommitConflictError):
        Table.open(URI, catalog=iceberg_env.properties).compact(rewrite_groups=_racing(iceberg_env, ["id == 3", "id == 4"]))
    table = table.refresh()
    assert _rows(table) == [r for r in before if r not in {("a", 3), ("a", 4)}]
    assert table.metadata.current_snapshot().summary.operation.value != "replace"
    Table.open(URI, catalog=iceberg_env.properties).expire_snapshots(retain_min=1, older_than=FAR)
    assert_exactly_reachable_left(iceberg_env.table(), iceberg_env.location())


def _build_for_crashes(tmp_path) -> IcebergEnv:
    warehouse = tmp_path / "crash" / "warehouse"
    warehouse.mkdir(parents=True)
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path / 'crash'}/catalog.db", "warehouse": f"file://{warehouse}"}, str(warehouse))
    _small_appends(env, per_partition=5, spec_change=False)
    return env


@pytest.mark.parametrize("operation", ["compact", "rewrite-manifests"])
def test_a_crash_at_every_storage_operation_leaves_a_readable_table_and_the_rerun_finishes(tmp_path, operation):
    run = {"compact": lambda t: t.compact(), "rewrite-manifests": lambda t: t.rewrite_manifests()}[operation]
    env = _build_for_crashes(tmp_path)
    pristine = tmp_path / "pristine"
    shutil.copytree(tmp_path / "crash", pristine)  # each crash starts from the same table (its metadata names absolute paths)
    before = _rows(env.table())
    ours = Table.open(URI, catalog=env.properties)
    counter = FailAt(10**9)
    ours.storage.on_operation = counter
    run(ours)
    operations = counter.seen
    assert operations > 5
    for n in range(1, operations + 1):
        shutil.rmtree(tmp_path / "crash")
        shutil.copytree(pristine, tmp_path / "crash")
        ours = Table.open(URI, catalog=env.properties)
        ours.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            run(ours)
        assert _rows(env.table()) == before, n
        assert env.table().metadata.current_snapshot().summary.operation.value == "append", n
        run(Table.open(URI, catalog=env.properties))
        assert _rows(env.table()) == before, n
        ours = Table.open(URI, catalog=env.properties)
        ours.remove_orphan_files(older_than="0 s", dry_run=False)  # what the crashed run wrote
        ours.expire_snapshots(retain_min=1, older_than=FAR)
        assert_exactly_reachable_left(env.table(), env.location())


def _register_v3(env: IcebergEnv, table) -> None:
    """A format v3 table (row lineage: first-row-id, next-row-id): pyiceberg writes no v3 metadata, so the
    v2 table's metadata is registered again as v3, as a v3 writer would have left it."""
    metadata = json.loads(open(table.metadata_location[len("file://"):]).read())
    metadata["format-version"], row = 3, 0
    for snapshot in metadata["snapshots"]:
        snapshot["first-row-id"], snapshot["added-rows"] = row, 3
        row += 3
    metadata["next-row-id"] = row
    path = table.metadata_location.replace(".metadata.json", "-v3.metadata.json")
    with open(path[len("file://"):], "w") as out:
        out.write(json.dumps(metadata))
    env.catalog().register_table("db.v3", path)
    assert env.table("db.v3").metadata.format_version == 3


def test_v3_tables_and_bad_input_fail_closed_and_change_nothing(iceberg_env):
    table = _small_appends(iceberg_env, per_partition=5, spec_change=False)
    _register_v3(iceberg_env, table)
    on_disk = files_on_disk(iceberg_env.location())
    ours = Table.open(URI, catalog=iceberg_env.properties)
    for call, error in [
        (lambda: Table.open("iceberg://db.v3", catalog=iceberg_env.properties).compact(), UnsupportedMetadataError),
        (lambda: Table.open("iceberg://db.v3", catalog=iceberg_env.properties).rewrite_manifests(), UnsupportedMetadataError),
        (lambda: ours.compact(target_file_size="lots"), InvalidArgumentError),
        (lambda: ours.compact(target_file_size=0), InvalidArgumentError),
        (lambda: ours.compact(min_input_files=0), InvalidArgumentError),
        (lambda: ours.compact(partitions=[{"nope": 1}]), InvalidArgumentError),
        (lambda: ours.compact(min_file_num=5, min_input_files=6), InvalidArgumentError),
        (lambda: ours.rewrite_manifests(target_manifest_size="huge"), InvalidArgumentError),
    ]:
        location = table.refresh().metadata_location
        with pytest.raises(error) as raised:
            call()
        assert table.refresh().metadata_location == location
        assert files_on_disk(iceberg_env.location()) == on_disk
        if error is UnsupportedMetadataError:
            assert "row lineage" in str(raised.value)


def test_the_lake_policy_compacts_rewrites_manifests_then_expires_iceberg_tables(iceberg_env):
    from airflow_snaptable.core.lake import SUCCESSFUL, Policy, maintain

    table = _small_appends(iceberg_env, per_partition=6)
    before = _rows(table)
    policy = Policy.from_mapping({"defaults": {
        "data-compaction": {"min-input-files": 6}, "manifest-rewrite": {},
        "snapshot-expiry": {"min-snapshots-to-keep": 1, "max-snapshot-age-hours": 0},
    }})
    report = maintain("iceberg://db", policy, catalog=iceberg_env.properties)
    assert not report.failed
    jobs = report.to_dict()["tables"][0]["jobs"]
    assert jobs["data-compaction"]["status"] == jobs["manifest-rewrite"]["status"] == SUCCESSFUL
    assert jobs["data-compaction"]["arguments"] == {"min_input_files": 6}
    table = table.refresh()
    assert jobs["manifest-rewrite"]["snapshotCommitted"] == table.metadata.current_snapshot_id
    assert jobs["snapshot-expiry"]["snapshotsExpired"] == 13  # the 12 appends and the compaction (the spec change makes no snapshot)
    assert _rows(table) == before
    assert len(_live_files(table)) == 3 and len(table.metadata.current_snapshot().manifests(table.io)) == 2
    assert_exactly_reachable_left(iceberg_env.table(), iceberg_env.location())


def test_the_cli_compacts_and_rewrites_manifests(iceberg_env, capsys):
    from airflow_snaptable.cli import main

    table = _small_appends(iceberg_env, per_partition=5, spec_change=False)
    before = _rows(table)
    catalog = iceberg_env.catalog_json
    assert main(["compact", URI, "--catalog", catalog, "--dry-run", "--min-input-files", "5", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)["result"]
    assert planned["dry_run"] and planned["snapshot_id"] is None and planned["rewritten_files"] == 10
    assert len(_live_files(table)) == 10
    assert main(["compact", URI, "--catalog", catalog, "--partitions", '[{"p": "a"}]', "--target-file-size", "1 mb", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)["result"]
    assert done["snapshot_id"] == table.refresh().metadata.current_snapshot_id and done["target_file_size"] == 1024**2
    assert sorted(tuple(f.partition) for f in _live_files(table)) == [("a",)] + [("b",)] * 5
    assert main(["rewrite-manifests", URI, "--catalog", catalog, "--json"]) == 0
    rewritten = json.loads(capsys.readouterr().out)["result"]
    assert rewritten["manifests_after"] == len(table.refresh().metadata.current_snapshot().manifests(table.io)) == 1
    assert _rows(table) == before
    assert main(["compact", URI, "--catalog", catalog, "--min-input-files", "0"]) == 2  # a typed error, nothing changed


def _with_position_deletes(env: IcebergEnv, table, deleted_id: int):
    """A snapshot with a position delete file, as a merge-on-read writer (Spark) leaves it: pyiceberg
    reads such tables but writes none, so the delete file and its manifest are written here."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestWriterV2
    from pyiceberg.table.snapshots import Operation, Summary

    from airflow_snaptable.core.formats.iceberg.counted_io import CountedFileIO
    from airflow_snaptable.core.formats.iceberg.files import storage_for
    from airflow_snaptable.core.formats.iceberg.replace_commit import commit_replace

    class DeleteManifestWriter(ManifestWriterV2):
        def content(self):
            return ManifestContent.DELETES

    target = next(t.file for t in table.scan(row_filter=f"id == {deleted_id}").plan_files())
    position = pq.read_table(target.file_path[len("file://"):]).column("id").to_pylist().index(deleted_id)
    delete_path = f"{table.location()}/data/deletes-{deleted_id}.parquet"
    pq.write_table(pa.table({"file_path": [target.file_path], "pos": pa.array([position], pa.int64())}), delete_path[len("file://"):])
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=delete_path, file_format=FileFormat.PARQUET, partition=target.partition,
        record_count=1, file_size_in_bytes=os.path.getsize(delete_path[len("file://"):]),
    )
    delete_file.spec_id = target.spec_id
    file_io = CountedFileIO(storage_for(table), table.location(), table.io.properties)

    def build(writer, head):
        writer_path = table.location_provider().new_metadata_location("deletes-m0.avro")
        with DeleteManifestWriter(table.metadata.specs()[target.spec_id], table.schema(), file_io.new_output(writer_path), writer.snapshot_id, "deflate") as out:
            out.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=writer.snapshot_id, data_file=delete_file))
        return [out.to_manifest_file()] + head.manifests(file_io), Summary(Operation.DELETE)

    metadata = table.refresh().metadata
    commit_replace(env.table, file_io, metadata.new_snapshot_id(), metadata.current_schema_id, build, URI)
    return table.refresh()


def test_delete_files_fail_compaction_closed_and_manifest_rewriting_keeps_them(iceberg_env):
    table = _small_appends(iceberg_env, per_partition=5, spec_change=False)
    table = _with_position_deletes(iceberg_env, table, deleted_id=2)
    rows = _rows(table)
    assert ("a", 2) not in rows and len(rows) == 14  # pyiceberg applies the delete file
    location = table.metadata_location
    on_disk = files_on_disk(iceberg_env.location())
    with pytest.raises(UnsupportedMetadataError, match="delete files .* position and equality deletes applied"):
        Table.open(URI, catalog=iceberg_env.properties).compact()
    assert table.refresh().metadata_location == location and files_on_disk(iceberg_env.location()) == on_disk
    Table.open(URI, catalog=iceberg_env.properties).rewrite_manifests()
    table = table.refresh()
    assert _rows(table) == rows
    contents = sorted(m.content.name for m in table.metadata.current_snapshot().manifests(table.io))
    assert contents == ["DATA", "DELETES"]


def test_partitions_are_named_by_their_values_as_iceberg_writes_them(iceberg_env):
    import datetime

    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform, TruncateTransform
    from pyiceberg.types import DateType, LongType, NestedField

    catalog = iceberg_env.catalog()
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.orders", schema=Schema(NestedField(1, "d", DateType(), required=False), NestedField(2, "id", LongType(), required=False)),
        partition_spec=PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "d")),
        sort_order=SortOrder(SortField(2, TruncateTransform(10))),
    )
    for i in range(5):
        table.append(pa.table({"d": [datetime.date(2026, 1, 1), datetime.date(2026, 1, 2)], "id": [30 - i, 60 - i]}))
    before = _rows(table)
    result = Table.open(URI, catalog=iceberg_env.properties).compact(partitions=[{"d": "2026-01-02"}])
    assert [g.partition for g in result.groups] == [{"d": "2026-01-02"}] and result.added_files == 1
    assert _rows(table) == before
    compacted = [f for f in _live_files(table) if f.record_count == 5]
    assert len(compacted) == 1 and len(_live_files(table)) == 6
    ids = pq.read_table(compacted[0].file_path[len("file://"):]).column("id").to_pylist()
    assert ids == sorted(ids)  # truncate keeps the order: the rows are sorted by id


def test_format_v1_tables_compact_and_rewrite_manifests(iceberg_env):
    table = iceberg_env.create(properties={"format-version": "1"})
    for i in range(6):
        table.append(pa.table({"p": ["a"], "id": [i]}, schema=SCHEMA))
    before = _rows(table)
    ours = Table.open(URI, catalog=iceberg_env.properties)
    assert ours.compact().added_files == 1
    for i in range(3):
        table.refresh().append(pa.table({"p": ["b"], "id": [10 + i]}, schema=SCHEMA))
    assert ours.rewrite_manifests().manifests_after == 1
    table = table.refresh()
    assert table.metadata.format_version == 1 and len(_live_files(table)) == 4
    assert _rows(table) == sorted(before + [("b", 10 + i) for i in range(3)], key=repr)
    assert ours.expire_snapshots(retain_min=1, older_than=FAR).deleted_data_files == 6
    assert_exactly_reachable_left(iceberg_env.table(), iceberg_env.location())


def test_files_of_an_older_schema_are_projected_onto_the_current_one(iceberg_env):
    from pyiceberg.types import StringType

    table = iceberg_env.create()
    for i in range(3):
        table.append(pa.table({"p": ["a"], "id": [i]}, schema=SCHEMA))
    with table.update_schema() as update:
        update.rename_column("id", "key")
        update.add_column("note", StringType())
    table = table.refresh()
    for i in range(3):
        table.append(pa.table({"p": ["a"], "key": [10 + i], "note": [f"n{i}"]}, schema=table.schema().as_arrow()))
    before = _rows(table)
    assert Table.open(URI, catalog=iceberg_env.properties).compact(min_input_files=2).added_files == 1
    table = table.refresh()
    assert _rows(table) == before and len(_live_files(table)) == 1
    assert sorted(table.scan().to_arrow().column("note").to_pylist(), key=repr) == sorted([None] * 3 + ["n0", "n1", "n2"], key=repr)


@pytest.mark.parametrize("operation", ["compact", "rewrite-manifests"])
def test_a_commit_whose_outcome_is_unknown_keeps_every_file_it_wrote(iceberg_env, monkeypatch, operation):
    """The catalog swapped, then the answer was lost: the compaction landed, so the files it wrote are in use."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import CommitStateUnknownException

    from airflow_snaptable.core.errors import CommitFailedError

    table = _small_appends(iceberg_env, per_partition=5, spec_change=False)
    before = _rows(table)
    swap = SqlCatalog.commit_table

    def landed_but_unanswered(self, *args, **kwargs):
        swap(self, *args, **kwargs)
        raise CommitStateUnknownException("the connection dropped after the swap")

    monkeypatch.setattr(SqlCatalog, "commit_table", landed_but_unanswered)
    ours = Table.open(URI, catalog=iceberg_env.properties)
    with pytest.raises(CommitFailedError, match="did not say whether"):
        ours.compact() if operation == "compact" else ours.rewrite_manifests()
    monkeypatch.setattr(SqlCatalog, "commit_table", swap)
    table = table.refresh()
    assert table.metadata.current_snapshot().summary.operation.value == "replace"
    assert _rows(table) == before  # every file it references is there
    assert len(_live_files(table)) == (2 if operation == "compact" else 10)
    Table.open(URI, catalog=iceberg_env.properties).expire_snapshots(retain_min=1, older_than=FAR)
    assert_exactly_reachable_left(iceberg_env.table(), iceberg_env.location())


def test_new_files_are_near_the_target_size(iceberg_env):
    """Incompressible rows (random bytes), so a file's size follows its rows: with a 70 KB target, a
    partition of 12 small files (about 277 KB) becomes four files of about 70 KB, one of 5 (about 115 KB)
    two of about 57 KB: each within a quarter of the target."""
    import random

    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import BinaryType, LongType, NestedField, StringType

    catalog = iceberg_env.catalog()
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "p", StringType(), required=False), NestedField(2, "id", LongType(), required=False),
        NestedField(3, "blob", BinaryType(), required=False),
    )
    table = catalog.create_table("db.orders", schema=schema, partition_spec=PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "p")))
    noise = random.Random(27)
    arrow_schema = table.schema().as_arrow()
    for partition, files in (("a", 12), ("b", 5)):
        for i in range(files):
            ids = range(i * 200, (i + 1) * 200)
            table.append(pa.table({"p": [partition] * 200, "id": list(ids), "blob": [noise.randbytes(100) for _ in ids]}, schema=arrow_schema))
    before = sorted(map(tuple, (r.values() for r in table.refresh().scan().to_arrow().to_pylist())), key=repr)
    small = {f.file_size_in_bytes for f in _live_files(table)}
    target = 70_000
    assert max(small) < 0.75 * target  # every file is small
    result = Table.open(URI, catalog=iceberg_env.properties).compact(target_file_size=target)
    assert [(g.partition, g.output_files) for g in result.groups] == [({"p": "a"}, 4), ({"p": "b"}, 2)]
    table = table.refresh()
    assert sorted(map(tuple, (r.values() for r in table.scan().to_arrow().to_pylist())), key=repr) == before
    sizes = {p: sorted(f.file_size_in_bytes for f in _live_files(table) if f.partition[0] == p) for p in "ab"}
    assert len(sizes["a"]) == 4 and len(sizes["b"]) == 2, sizes
    for size in sizes["a"] + sizes["b"]:
        assert 0.75 * target <= size <= 1.25 * target, sizes



def _null_and_null_string(env: IcebergEnv, appends: int = 5):
    """An identity(p) partition spec with NULL, the string 'null' and the string 'None' (three partitions),
    ``appends`` small files in each."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    catalog = env.catalog()
    catalog.create_namespace("db")
    schema = Schema(NestedField(1, "p", StringType(), required=False), NestedField(2, "id", LongType(), required=False))
    table = catalog.create_table("db.orders", schema=schema, partition_spec=PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "p")))
    for i in range(appends):
        table.append(pa.table({"p": [None, "null", "None"], "id": [i, 100 + i, 200 + i]}, schema=SCHEMA))
    return table.refresh()


def test_a_null_partition_is_never_merged_with_the_string_null(iceberg_env, duckdb_iceberg):
    """Files are grouped by their typed partition values: NULL, 'null' and 'None' stay three partitions, and
    after the compaction pyiceberg and DuckDB find each one's rows by ``IS NULL`` and ``=``."""
    table = _null_and_null_string(iceberg_env)
    before = _rows(table)
    result = Table.open(URI, catalog=iceberg_env.properties).compact()
    table = table.refresh()
    assert result.added_files == 3 and result.rewritten_files == 15
    assert sorted((g.partition for g in result.groups), key=repr) == sorted([{"p": None}, {"p": "null"}, {"p": "None"}], key=repr)
    assert sorted((tuple(f.partition) for f in _live_files(table)), key=repr) == sorted([(None,), ("null",), ("None",)], key=repr)
    assert _rows(table) == before
    nulls, strings, nones = list(range(5)), [100 + i for i in range(5)], [200 + i for i in range(5)]
    assert sorted(r["id"] for r in table.scan(row_filter="p IS NULL").to_arrow().to_pylist()) == nulls
    assert sorted(r["id"] for r in table.scan(row_filter="p == 'null'").to_arrow().to_pylist()) == strings
    metadata = table.metadata_location
    duck = lambda where: sorted(r[0] for r in duckdb_iceberg.execute(f"SELECT id FROM iceberg_scan(?) WHERE {where}", [metadata]).fetchall())  # noqa: E731
    assert duck("p IS NULL") == nulls
    assert duck("p = 'null'") == strings
    assert duck("p = 'None'") == nones


def test_a_partition_named_null_or_none_selects_only_itself(iceberg_env, capsys):
    from airflow_snaptable.cli import main

    table = _null_and_null_string(iceberg_env)
    ours = Table.open(URI, catalog=iceberg_env.properties)
    for wanted in (None, "null", "None"):
        assert [g.partition for g in ours.compact(dry_run=True, partitions=[{"p": wanted}]).groups] == [{"p": wanted}]
        partitions = json.dumps([{"p": wanted}])
        assert main(["compact", URI, "--catalog", iceberg_env.catalog_json, "--dry-run", "--partitions", partitions, "--json"]) == 0
        assert [g["partition"] for g in json.loads(capsys.readouterr().out)["result"]["groups"]] == [{"p": wanted}]
    before = _rows(table)
    assert [g.partition for g in ours.compact(partitions=[{"p": None}]).groups] == [{"p": None}]
    assert _rows(table) == before
    table = table.refresh()
    assert sorted(r["id"] for r in table.scan(row_filter="p IS NULL").to_arrow().to_pylist()) == list(range(5))
    assert len(_live_files(table)) == 11


def test_zero_and_negative_zero_partitions_stay_apart(iceberg_env):
    """Equal in Python, two partition values in Iceberg (pyiceberg writes them apart): grouped by their bits."""
    import math

    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField

    catalog = iceberg_env.catalog()
    catalog.create_namespace("db")
    schema = Schema(NestedField(1, "x", DoubleType(), required=False), NestedField(2, "id", LongType(), required=False))
    table = catalog.create_table("db.orders", schema=schema, partition_spec=PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "x")))
    arrow = pa.schema([("x", pa.float64()), ("id", pa.int64())])
    for i in range(10):
        table.append(pa.table({"x": [0.0 if i % 2 else -0.0], "id": [i]}, schema=arrow))
    result = Table.open(URI, catalog=iceberg_env.properties).compact()
    assert result.added_files == 2 and len(result.groups) == 2
    for data_file in _live_files(table):
        sign = math.copysign(1, data_file.partition[0])
        xs = pq.read_table(data_file.file_path[len("file://"):]).column("x").to_pylist()
        assert len(xs) == 5 and {math.copysign(1, x) for x in xs} == {sign}
