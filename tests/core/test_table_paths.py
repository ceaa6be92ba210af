"""Nothing outside a table is deleted (issue 22 item 4): paths are placed by their normal form.

The shared rule (core/io/table_paths.py) first, on its own; then this package's tables whose metadata
names a file out of the table (a manifest entry, a manifest list, a snapshot's record of what it
wrote, a deletion plan left behind): every deleting operation fails with a typed error before
anything changes, and the file outside survives. A spelling of an inside path that is not the
listed one (``data/p=0/../p=0/x``) would make orphan cleaning delete a live file: it fails closed too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from datetime import timedelta

import pyarrow as pa
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import CorruptMetadataError, PathOutsideTableError, UnsupportedMetadataError
from airflow_snaptable.core.native.manifest import (
    ManifestEntry,
    ManifestFileMeta,
    decode_manifest,
    decode_manifest_list,
    encode_manifest,
    encode_manifest_list,
    manifest_path,
)
from airflow_snaptable.core.lifecycle.deletion_plans import DataCandidate, DeletionPlan, EXPIRE
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.io.table_paths import (
    check_relative_column,
    checked_file_name,
    checked_relative_path,
    normal_path,
    relative_to_location,
    split_uri,
)
from tests.conftest import SCHEMA, make_rows
from tests.core.test_lifecycle import tree

VICTIM = b"a file of another table"


# -- the rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path, normal", [
    ("/a/b/../c", "/a/c"), ("/a/./b//c/", "/a/b/c"), ("//a///b", "/a/b"), ("/../a", "/a"), ("/a/..", "/"),
    ("a/../../b", "../b"), ("./a", "a"), ("a/..", ""), ("a/b/../../..", ".."), ("", ""), ("/", "/"),
    ("a/%2e%2e/b", "a/%2e%2e/b"), ("a/.../b", "a/.../b"), ("a/..b/c", "a/..b/c"),
])
def test_normal_path(path, normal):
    assert normal_path(path) == normal


LOCATION = "s3://bucket/wh/db/tbl"


@pytest.mark.parametrize("uri, relative", [
    ("s3://bucket/wh/db/tbl/data/x.parquet", "data/x.parquet"),
    ("s3a://bucket/wh/db/tbl/data/x.parquet", "data/x.parquet"),  # equivalent schemes
    ("S3N://bucket/wh/db/tbl/data/x.parquet", "data/x.parquet"),
    ("s3://bucket/wh/db/tbl//data/./x.parquet", "data/x.parquet"),  # doubled slash, '.'
    ("s3://bucket/wh/db/tbl/sub/../data/x.parquet", "data/x.parquet"),  # '..' that stays inside
    ("s3://bucket/wh/db/tbl/../shared/x.parquet", None),  # '..' out: the bug of issue 22 item 4
    ("s3://bucket/wh/db/tbl/data/../../tbl2/x", None),
    ("s3://bucket/wh/db/tbl2/x.parquet", None),  # a sibling sharing the prefix
    ("s3://bucket/wh/db/tbl", None),  # the location itself is no file in it
    ("s3://bucket/wh/db/tbl/", None),
    ("s3://other/wh/db/tbl/x.parquet", None),  # another bucket
    ("gs://bucket/wh/db/tbl/x.parquet", None),  # another store
    ("/wh/db/tbl/x.parquet", None),  # a local path is not in a bucket
    ("s3://bucket/wh/db/tbl/%2e%2e/x", "%2e%2e/x"),  # a name, as every FileIO opens it: not a '..'
    ("s3://bucket/wh/db/tbl/data/a#b?c", "data/a#b?c"),  # characters of the name, not a fragment or query
])
def test_relative_to_an_object_store_location(uri, relative):
    assert relative_to_location(uri, LOCATION) == relative
    assert relative_to_location(uri, LOCATION + "/") == relative


@pytest.mark.parametrize("uri", ["file:/wh/tbl/d/x", "file:///wh/tbl/d/x", "/wh/tbl/d/x", "file://localhost/wh/tbl/d/x",
                                 "/wh/tbl/d/../d/x", "file:/wh//tbl/./d/x"])
def test_local_spellings_are_one_path(uri):
    for location in ("/wh/tbl", "file:/wh/tbl", "file:///wh/tbl", "/wh/x/../tbl/"):
        assert relative_to_location(uri, location) == "d/x"


def test_split_uri():
    assert split_uri("S3A://Bucket/a/../b/") == ("s3", "Bucket", "/b")
    assert split_uri("s3://bucket") == ("s3", "bucket", "/")
    assert split_uri("C:/data/t") == ("file", "", "C:/data/t")  # a drive letter is no scheme
    assert relative_to_location("/x/y", "/") == "x/y"  # a location at the root


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "..", "data/p=1/../../../x"])
def test_a_relative_path_out_of_the_root_is_path_outside_table_error(path):
    with pytest.raises(PathOutsideTableError, match="outside the table"):
        checked_relative_path(path, "data file", "manifest-1")


@pytest.mark.parametrize("path", ["", ".", "a/./b", "a//b", "a/", "a/../b", None, 3])
def test_a_relative_path_not_in_normal_form_is_corrupt(path):
    with pytest.raises(CorruptMetadataError) as raised:
        checked_relative_path(path, "data file", "manifest-1")
    assert not isinstance(raised.value, PathOutsideTableError)


def test_normal_relative_paths_pass_unchanged():
    for path in ["data/p=1/x.parquet", "data/.hidden/x", "a/..b", "manifest/manifest-1", "snaptable/plan/.x.tmp", "%2e%2e/x"]:
        assert checked_relative_path(path, "data file") == path


def test_file_names():
    assert checked_file_name("manifest-1", "manifest") == "manifest-1"
    for bad in ("..", "../x", "a/../../x", "/x"):
        with pytest.raises(PathOutsideTableError):
            checked_file_name(bad, "manifest")
    with pytest.raises(UnsupportedMetadataError):
        checked_file_name("a/b", "manifest")
    for bad in ("", ".", None):
        with pytest.raises(CorruptMetadataError):
            checked_file_name(bad, "manifest")


def test_a_column_of_paths_is_screened_at_once():
    good = pa.array(["data/a", "data/.b", "data/c..d"] * 1000)
    assert check_relative_column(good, "path", "m") is good
    with pytest.raises(PathOutsideTableError, match="'../x'"):
        check_relative_column(pa.chunked_array([good, pa.array(["data/a", "../x"])]), "path", "m")
    with pytest.raises(CorruptMetadataError, match="normal form"):
        check_relative_column(pa.array(["data/a", "data//b"]), "path", "m")
    with pytest.raises(CorruptMetadataError, match="null"):
        check_relative_column(pa.array(["data/a", None]), "path", "m")


# -- Storage: the last guard ------------------------------------------------------------------------


def _shared_victim(tmp_path) -> str:
    shared = tmp_path / "shared"
    shared.mkdir(exist_ok=True)
    (shared / "victim.parquet").write_bytes(VICTIM)
    return str(shared / "victim.parquet")


@pytest.mark.parametrize("delete", [
    lambda s, rel: s.delete(rel),
    lambda s, rel: s.delete_files(["data/inside", rel]),  # the inside one is not deleted either
    lambda s, rel: s.move_aside(rel, "data/aside"),
    lambda s, rel: s.move_aside("data/inside", rel),
], ids=["delete", "delete_files", "move_aside-from", "move_aside-to"])
@pytest.mark.parametrize("rel", ["../shared/victim.parquet", "data/../../shared/victim.parquet", "/x"])
def test_storage_never_deletes_outside_its_root(tmp_path, delete, rel):
    _shared_victim(tmp_path)
    root = tmp_path / "table"
    (root / "data").mkdir(parents=True)
    (root / "data" / "inside").write_bytes(b"inside")
    storage = Storage.from_uri(str(root))
    before = tree(tmp_path)
    with pytest.raises(PathOutsideTableError):
        delete(storage, rel)
    assert tree(tmp_path) == before


# -- this package's tables ---------------------------------------------------------------------------


def _manifests(uri: str):
    """(name, entries) of every manifest of the table (lists are skipped: they do not decode as manifests)."""
    table = Table.open(uri)
    for name in sorted(os.listdir(os.path.join(uri, "manifest"))):
        data = open(os.path.join(uri, "manifest", name), "rb").read()
        try:
            yield name, decode_manifest(data, table.manifest_io.partition_types, name)
        except CorruptMetadataError:
            continue


def _rename_in_manifests(uri: str, old: str, new: str) -> None:
    """Every manifest entry naming ``old`` names ``new`` instead (what a hostile or broken writer leaves)."""
    found = False
    for name, entries in _manifests(uri):
        if any(e.file.path == old for e in entries):
            found = True
            renamed = [ManifestEntry(e.kind, dataclasses.replace(e.file, path=new)) if e.file.path == old else e for e in entries]
            with open(os.path.join(uri, manifest_path(name)), "wb") as f:
                f.write(encode_manifest(renamed))
    assert found, old


def _first_added(table: Table, snapshot_id: int) -> str:
    return sorted(e.file.path for e in table.native_files.delta(table.snapshot(snapshot_id)))[0]


def _overwritten_history(tmp_path) -> tuple[Table, str]:
    """Snapshot 1 appends, 2 overwrites everything (deleting 1's files), 3 appends; a tag holds snapshot 1."""
    uri = str(tmp_path / "table")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.append(make_rows(range(3)))
    table.overwrite(make_rows(range(10, 13)))
    table.append(make_rows(range(20, 23)))
    return table, uri


OUT = "../shared/victim.parquet"


@pytest.mark.parametrize("operation", [
    lambda t: t.expire_snapshots(retain_min=1, retain_max=1),
    lambda t: t.expire_snapshots(retain_min=1, retain_max=1, dry_run=True),
    lambda t: t.clean("KEEP_LATEST_COMMITS", commits_retained=1),
    lambda t: t.clean("KEEP_LATEST_FILE_VERSIONS", file_versions_retained=1),
], ids=["expire", "expire-dry-run", "clean-commits", "clean-file-versions"])
def test_a_manifest_entry_out_of_the_table_fails_closed(tmp_path, operation):
    """Before: the expiry deleted ``<root>/../shared/victim.parquet`` (a file of no table of ours)."""
    table, uri = _overwritten_history(tmp_path)
    _shared_victim(tmp_path)
    _rename_in_manifests(uri, _first_added(table, 1), OUT)
    before = tree(tmp_path)
    with pytest.raises(PathOutsideTableError, match="outside the table"):
        operation(Table.open(uri))
    assert tree(tmp_path) == before


def test_deleting_a_tag_whose_files_include_one_out_of_the_table_fails_closed(tmp_path):
    table, uri = _overwritten_history(tmp_path)
    table.create_tag("first", 1)
    table.expire_snapshots(retain_min=1, retain_max=1)  # snapshot 1 now lives only in the tag
    _shared_victim(tmp_path)
    _rename_in_manifests(uri, sorted(table.native_files.state(table.tag("first").snapshot))[0], OUT)
    before = tree(tmp_path)
    with pytest.raises(PathOutsideTableError):
        Table.open(uri).delete_tag("first")
    assert tree(tmp_path) == before


def test_a_rollback_discarding_a_file_out_of_the_table_fails_closed(tmp_path):
    uri = str(tmp_path / "table")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.append(make_rows(range(3)))
    table.append(make_rows(range(3, 6)))
    _shared_victim(tmp_path)
    _rename_in_manifests(uri, _first_added(table, 2), OUT)
    before = tree(tmp_path)
    with pytest.raises(PathOutsideTableError):
        Table.open(uri).rollback_to(1)
    assert tree(tmp_path) == before


def _list_naming(uri: str, list_name: str, extra: str) -> None:
    path = os.path.join(uri, manifest_path(list_name))
    metas = decode_manifest_list(open(path, "rb").read(), list_name)
    metas.append(ManifestFileMeta(extra, len(VICTIM), 0, 0, 0))
    with open(path, "wb") as f:
        f.write(encode_manifest_list(metas))


def _snapshot_doc(uri: str, snapshot_id: int) -> tuple[str, dict]:
    path = os.path.join(uri, "snapshot", f"snapshot-{snapshot_id}")
    return path, json.loads(open(path).read())


def _plant_in_list(uri, table):
    _list_naming(uri, table.snapshot(1).delta_manifest_list, "../../shared/victim.parquet")


def _plant_in_written_metadata(uri, table):
    path, doc = _snapshot_doc(uri, 2)
    doc["written_metadata"]["merged_manifests"]["../../shared/victim.parquet"] = len(VICTIM)
    open(path, "w").write(json.dumps(doc))


def _plant_in_list_name(uri, table):
    path, doc = _snapshot_doc(uri, 1)
    doc["delta_manifest_list"] = "../../shared/victim.parquet"
    open(path, "w").write(json.dumps(doc))


def _plant_a_plan(uri, table):
    """A plan as a crashed run leaves it (anyone finishes it), naming a file out of the table."""
    plan = DeletionPlan(EXPIRE, 0, [], [DataCandidate(OUT, len(VICTIM), 1)], [("../../shared/victim.parquet", 1)])
    os.makedirs(os.path.join(uri, "plan"), exist_ok=True)
    open(os.path.join(uri, plan.path), "wb").write(plan.to_json())


@pytest.mark.parametrize("plant", [_plant_in_list, _plant_in_written_metadata, _plant_in_list_name, _plant_a_plan],
                         ids=["manifest-list-entry", "written-metadata", "snapshot-list-name", "plan-left-behind"])
def test_metadata_naming_a_manifest_out_of_the_table_fails_closed(tmp_path, plant):
    """Before: the expiry deleted ``manifest/../../shared/victim.parquet`` as a manifest of the expired snapshot."""
    table, uri = _overwritten_history(tmp_path)
    _shared_victim(tmp_path)
    plant(uri, table)
    before = tree(tmp_path)
    with pytest.raises(PathOutsideTableError):
        Table.open(uri).expire_snapshots(retain_min=1, retain_max=1)
    assert tree(tmp_path) == before
    report = Table.open(uri).verify()  # verify reports it, never raises
    assert not report.ok and "shared/victim.parquet" in json.dumps(report.corrupt_metadata + report.missing_files)


def _age_every_file(root) -> None:
    old = time.time() - 86_400 * 3
    for directory, _dirs, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(directory, name), (old, old))


def test_orphan_cleaning_refuses_a_second_spelling_of_a_live_file(tmp_path):
    """Before: a manifest naming ``data/p=0/../p=0/x`` left the listed ``data/p=0/x`` unreferenced, and the
    orphan clean deleted a file the latest snapshot reads."""
    table, uri = _overwritten_history(tmp_path)
    live = _first_added(table, 3)
    directory, name = live.rsplit("/", 1)
    _rename_in_manifests(uri, live, f"{directory}/../{directory.rsplit('/', 1)[1]}/{name}")
    _age_every_file(uri)
    before = tree(tmp_path)
    with pytest.raises(CorruptMetadataError, match="normal form"):
        Table.open(uri).remove_orphan_files(older_than=timedelta(hours=1), dry_run=False)
    assert tree(tmp_path) == before
    assert os.path.exists(os.path.join(uri, live))
