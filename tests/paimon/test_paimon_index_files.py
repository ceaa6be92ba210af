"""Paimon's index files (issue 35 item 1): primary-key tables in dynamic bucket mode, as pypaimon 2.1
writes them by default (no ``bucket`` option), and deletion vectors, as pypaimon writes a
data-evolution table's deletes by row id; judged by pypaimon.

Each snapshot of such a table carries an ``indexManifest`` (``manifest/index-manifest-<uuid>``)
listing the HASH index file of every bucket (``index/index-<uuid>-0``); a commit that adds keys to
a bucket writes a new index file for it and a new index manifest, one that only updates keys
keeps both. A delete on the deletion-vector table writes the bucket's new DELETION_VECTORS index
file (the deleted rows of each data file) in a new index manifest. Paimon's rule (``FileDeletionBase.cleanUnusedIndexManifests``, ``SnapshotDeletion``,
``TagDeletion``, ``RollbackHelper``): an index manifest or index file goes when no retained
snapshot or tag lists it, and only then.

After each action pypaimon reads every retained snapshot and tag with the rows and files it read
before (its files now include the index manifest and index files), the files left under the
table are exactly theirs (so no deletion vector outlives or predeceases the data file it applies
to), and a pypaimon write that updates a key and adds one still commits (it reads the latest
snapshot's hash index) and reads back as expected.

Ported from Paimon's ``IndexFileExpireTableTest`` (paimon-core/src/test/java/org/apache/paimon/
table/IndexFileExpireTableTest.java): testIndexFileExpiration, testIndexFileExpirationWithTag,
testIndexFileExpirationWhenDeletingTag, testIndexFileRollbackSnapshot, testIndexFileRollbackTag,
on a table pypaimon wrote instead of Java's test writer (commits 1-6 below play the roles of
Java's: every partition's bucket written, then one partition at a time, and a commit that
changes no index, Java's compaction).
"""

from __future__ import annotations

import io
import json
import os
import shutil

import fastavro
import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core.errors import UnsupportedMetadataError
from airflow_snaptable.core.formats.describe import describe
from airflow_snaptable.core.formats.paimon.files import metadata_path
from airflow_snaptable.core.timeline.model import build_timeline
from tests.conftest import FailAt, InjectedCrash
from tests.paimon.conftest import COLUMNS, FAR_FUTURE, Paimon, open_table, pypaimon_python, run_client, table_files, table_root

#: Snapshot ids in comments; "shares" = the commit wrote no index file (only updated keys).
SCENARIO = [
    # Partitioned, one bucket per partition (Paimon's default target of 2M rows a bucket).
    {"create": "db.dynp", "columns": COLUMNS, "partition": ["p"], "pk": ["p", "id"], "options": {}},
    {"write": "db.dynp", "rows": [["a", 1, "x"], ["b", 2, "y"], ["c", 3, "z"]]},  # 1: an index file per partition
    {"write": "db.dynp", "rows": [["a", 2, "x"]]},  # 2: a's index replaced
    {"write": "db.dynp", "rows": [["b", 3, "y"]]},  # 3: b's
    {"write": "db.dynp", "rows": [["b", 4, "y"]]},  # 4: b's
    {"write": "db.dynp", "rows": [["a", 1, "x2"], ["b", 2, "y2"]]},  # 5: updates only: shares 4's index manifest
    {"write": "db.dynp", "rows": [["c", 5, "y"]]},  # 6: c's
    {"tag": "db.dynp", "name": "t3", "snapshot": 3},
    {"tag": "db.dynp", "name": "t5", "snapshot": 5},
    # Not partitioned, two rows a bucket: new keys open new buckets.
    {"create": "db.dyn", "columns": COLUMNS, "pk": ["id"], "options": {"dynamic-bucket.target-row-num": "2"}},
    {"write": "db.dyn", "rows": [["a", 1, "x"], ["b", 2, "y"], ["c", 3, "z"]]},  # 1
    {"write": "db.dyn", "rows": [["a", 1, "x2"], ["d", 4, "y"]]},  # 2
    {"write": "db.dyn", "rows": [["a", 2, "q"], ["e", 5, "y"]]},  # 3
    {"write": "db.dyn", "rows": [["a", 1, "x3"]]},  # 4: shares 3's index manifest
    {"write": "db.dyn", "rows": [["a", 6, "r"]]},  # 5
    {"tag": "db.dyn", "name": "t2", "snapshot": 2},
    # Deletion vectors: an append table with row tracking and data evolution, whose deletes by row id
    # pypaimon writes as deletion vectors (row ids count the rows in commit order from 0).
    {"create": "db.dv", "columns": COLUMNS,
     "options": {"row-tracking.enabled": "true", "data-evolution.enabled": "true", "deletion-vectors.enabled": "true"}},
    {"write": "db.dv", "rows": [["a", 1, "x"], ["a", 2, "y"], ["a", 3, "z"]]},  # 1: file f1, rows 0-2
    {"write": "db.dv", "rows": [["b", 4, "x"], ["b", 5, "y"]]},  # 2: f2, rows 3-4
    {"delete_rows": "db.dv", "row_ids": [1]},  # 3: DV file D1 {f1}
    {"delete_rows": "db.dv", "row_ids": [3]},  # 4: D2 {f1, f2} replaces D1
    {"write": "db.dv", "rows": [["c", 6, "x"]]},  # 5: f3, row 5; shares 4's index manifest
    {"delete_rows": "db.dv", "row_ids": [5]},  # 6: D3 {f1, f2, f3} replaces D2
    {"tag": "db.dv", "name": "t3", "snapshot": 3},
    {"read": "db.dynp"},
    {"read": "db.dyn"},
    {"read": "db.dv"},
]
KEYS = {"dynp": lambda row: (row[0], row[1]), "dyn": lambda row: row[1], "dv": lambda row: row[1]}
#: The write after each action: on the dynamic-bucket tables one key updated (its bucket's hash index
#: is read) and one added; on the deletion-vector table a row appended.
NEXT_WRITE = {"dynp": [["a", 1, "after"], ["b", 9, "new"]], "dyn": [["x", 1, "after"], ["x", 9, "new"]], "dv": [["x", 9, "new"]]}


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory) -> Paimon:
    python = pypaimon_python()
    template = str(tmp_path_factory.mktemp("paimon-dynamic") / "warehouse")
    return Paimon(python, template, run_client(python, template, SCENARIO))


def _index_files(root: str) -> set[str]:
    return {f for f in table_files(root) if f.startswith("index/") or f.startswith("manifest/index-manifest-")}


#: Tags this package creates in the tests, by the snapshot they tag (pypaimon read it before as a snapshot).
OUR_TAGS = {"ours4": 4}


def _tag_read(before: dict, tag: str) -> dict:
    return before["tags"][tag] if tag in before["tags"] else before["snapshots"][str(OUR_TAGS[tag])]


def expected_files(dynamic: Paimon, name: str, snapshots, tags) -> set[str]:
    """Paimon's rule from what pypaimon read before: the files of the retained snapshots and tags."""
    before = dynamic.before[name]
    found = {f for s in snapshots for f in before["snapshots"][str(s)]["files"]}
    for tag in tags:
        found |= set(_tag_read(before, tag)["files"])
    return found


def judged(dynamic: Paimon, warehouse: str, name: str, snapshots: list[int], tags: list[str]) -> None:
    """The files left are exactly those of ``snapshots`` and ``tags``; pypaimon reads each with its rows
    and files from before; then a pypaimon write commits on the latest and reads back merged."""
    root = table_root(warehouse, name)
    assert table_files(root) == expected_files(dynamic, name, snapshots, tags)
    table = f"db.{name}"
    answer = run_client(dynamic.python, warehouse, [
        {"read": table}, {"write": table, "rows": NEXT_WRITE[name]}, {"read": table, "as": "written"},
    ])
    after, before = answer[table], dynamic.before[name]
    assert sorted(map(int, after["snapshots"])) == snapshots and sorted(after["tags"]) == sorted(tags)
    for key, read in list(after["snapshots"].items()):
        assert "error" not in read, read
        assert read["rows"] == before["snapshots"][key]["rows"] and read["files"] == before["snapshots"][key]["files"], key
    for tag, read in after["tags"].items():
        assert "error" not in read, read
        assert read["rows"] == _tag_read(before, tag)["rows"] and read["files"] == _tag_read(before, tag)["files"], tag
    written = answer["written"]["snapshots"]
    new_id = str(max(snapshots) + 1)
    assert sorted(map(int, written)) == snapshots + [max(snapshots) + 1]
    assert "error" not in written[new_id], written[new_id]
    merged = {KEYS[name](row): row for row in before["snapshots"][str(max(snapshots))]["rows"] + NEXT_WRITE[name]}
    assert written[new_id]["rows"] == sorted(merged.values(), key=lambda r: json.dumps(r, sort_keys=True, default=str))
    assert all(os.path.exists(os.path.join(root, f)) for f in written[new_id]["files"])


def test_snapshots_show_and_verify_know_the_index_files(dynamic, tmp_path, capsys):
    """What this package reads of each snapshot (data files, manifests, index manifest, index files)
    is exactly what pypaimon reads; verify finds the index files in use; show counts them."""
    warehouse = dynamic.copy(tmp_path / "w")
    for name in ("dynp", "dyn", "dv"):
        table = open_table(warehouse, name)
        for snapshot in table.snapshots():
            files = table.store.files
            ours = set(files.state(snapshot)) | {metadata_path(n) for n in files.metadata_files(snapshot)}
            assert ours == set(dynamic.before[name]["snapshots"][str(snapshot.id)]["files"]), (name, snapshot.id)
        result = table.verify()
        assert result.ok and not result.unreferenced_files, result.to_dict()
        latest = dynamic.before[name]["snapshots"][str(table.latest_snapshot().id)]["files"]
        assert describe(table).index_files == sum(f.startswith("index/") for f in latest) > 0
        # snapshots and the timeline: the index files each snapshot lists.
        listed = {int(k): sum(f.startswith("index/") for f in read["files"]) for k, read in dynamic.before[name]["snapshots"].items()}
        assert main(["snapshots", table_root(warehouse, name), "--json"]) == 0
        assert {s["id"]: s["index_files"] for s in json.loads(capsys.readouterr().out)} == listed
        assert {p.id: p.index_files for p in build_timeline(table, now=FAR_FUTURE).snapshots} == listed
    # A missing index file is a missing file of the snapshots that list it.
    root = table_root(warehouse, "dynp")
    lost = sorted(f for f in dynamic.before["dynp"]["snapshots"]["6"]["files"] if f.startswith("index/"))[0]
    os.remove(os.path.join(root, lost))
    assert lost in [m["path"] for m in open_table(warehouse, "dynp").verify().missing_files]


def test_index_file_expiration_step_by_step(dynamic, tmp_path):
    """Paimon's testIndexFileExpiration: expiring 1, then 2, then 3-4, then 5 frees each time the index
    manifests and index files only the expired snapshots list (a shared one stays with its sharer).
    First testIndexFileExpirationWhenDeletingTag's start: deleting the tags of retained snapshots frees nothing."""
    warehouse = dynamic.copy(tmp_path / "w")
    root = table_root(warehouse, "dynp")
    everything = table_files(root)
    for tag in ("t3", "t5"):
        open_table(warehouse, "dynp").delete_tag(tag)
    assert table_files(root) == everything
    for retain, earliest in ((5, 2), (4, 3), (2, 5), (1, 6)):
        open_table(warehouse, "dynp").expire_snapshots(retain_max=retain, retain_min=retain, now=FAR_FUTURE)
        assert table_files(root) == expected_files(dynamic, "dynp", range(earliest, 7), []), retain
    # Java's end state: one index manifest and the index file of each partition.
    assert len(_index_files(root)) == 1 + 3
    judged(dynamic, warehouse, "dynp", [6], [])


@pytest.mark.parametrize("name, tags", [("dynp", ["t3", "t5"]), ("dyn", ["t2"]), ("dv", ["t3"])])
def test_index_file_expiration_with_tags_then_deleting_a_tag(dynamic, tmp_path, name, tags):
    """Paimon's testIndexFileExpirationWithTag and testIndexFileExpirationWhenDeletingTag: a tag keeps
    its snapshot's index manifest and index files through expiry; deleting the tag of an expired
    snapshot frees exactly what only it listed."""
    warehouse = dynamic.copy(tmp_path / "w")
    table = open_table(warehouse, name)
    latest = table.latest_snapshot().id
    table.expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE)
    judged(dynamic, warehouse, name, [latest], tags)
    shutil.rmtree(warehouse)
    warehouse = dynamic.copy(tmp_path / "w2")
    open_table(warehouse, name).expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE)
    before = table_files(table_root(warehouse, name))
    open_table(warehouse, name).delete_tag(tags[0])
    left = table_files(table_root(warehouse, name))
    assert left == expected_files(dynamic, name, [latest], tags[1:])
    assert any(f.startswith("manifest/index-manifest-") for f in before - left)
    if name == "dynp":  # dyn's latest snapshot still lists t2's index files
        assert any(f.startswith("index/") for f in before - left)


@pytest.mark.parametrize("name, target, tags", [("dynp", 3, ["t3"]), ("dyn", 2, ["t2"]), ("dynp", "t3", ["t3"]), ("dv", 4, ["t3"])])
def test_index_file_rollback(dynamic, tmp_path, name, target, tags):
    """Paimon's testIndexFileRollbackSnapshot and testIndexFileRollbackTag: a rollback keeps the target's
    index manifest and index files and frees those only the discarded snapshots and tags list; the
    target's index is the one the next write reads."""
    warehouse = dynamic.copy(tmp_path / "w")
    table = open_table(warehouse, name)
    if isinstance(target, str):
        table.expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE)  # the tag's snapshot is expired: restored from it
        table.rollback_to(tag=target)
        judged(dynamic, warehouse, name, [3], tags)
    else:
        table.rollback_to(target)
        judged(dynamic, warehouse, name, list(range(1, target + 1)), tags)


TAGS = {"dynp": ["t3", "t5"], "dyn": ["t2"], "dv": ["t3"]}


@pytest.mark.parametrize("name, operation", [("dynp", "expire"), ("dynp", "rollback"), ("dv", "expire")])
def test_undo_brings_back_the_index_files(dynamic, tmp_path, name, operation):
    """With a retention the expiry or rollback deletes no index file; undo brings back every snapshot
    with its index (hash indexes, deletion vectors)."""
    warehouse = dynamic.copy(tmp_path / "w")
    root = table_root(warehouse, name)
    everything = table_files(root)
    call = {"expire": lambda t: t.expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE), "rollback": lambda t: t.rollback_to(2)}
    table = open_table(warehouse, name)
    with table.retaining_noncurrent(10, operation) as run:
        call[operation](table)
    assert table_files(root) == everything
    assert open_table(warehouse, name).verify().ok
    open_table(warehouse, name).undo(run.run_id)
    judged(dynamic, warehouse, name, [1, 2, 3, 4, 5, 6], TAGS[name])


@pytest.mark.parametrize("operation", ["expire", "delete-tag", "rollback"])
def test_with_zero_days_purge_deletes_exactly_the_index_files_the_plain_operation_deletes(dynamic, tmp_path, operation):
    call = {
        "expire": lambda t: t.expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE),
        "delete-tag": lambda t: t.delete_tag("t3"),  # of an expired snapshot (both copies expired plainly first)
        "rollback": lambda t: t.rollback_to(2),
    }[operation]
    plain, retained = dynamic.copy(tmp_path / "plain"), dynamic.copy(tmp_path / "retained")
    if operation == "delete-tag":
        for warehouse in (plain, retained):
            open_table(warehouse, "dynp").expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE)
    before = table_files(table_root(plain, "dynp"))
    call(open_table(plain, "dynp"))
    deleted_plainly = before - table_files(table_root(plain, "dynp"))
    assert any(f.startswith("index/") for f in deleted_plainly)
    table = open_table(retained, "dynp")
    with table.retaining_noncurrent(0, operation):
        call(table)
    assert table_files(table_root(retained, "dynp")) == before
    open_table(retained, "dynp").purge()
    assert before - table_files(table_root(retained, "dynp")) == deleted_plainly
    assert open_table(retained, "dynp").verify().ok


def test_orphan_cleaning_knows_the_index_directory(dynamic, tmp_path):
    """Index files and index manifests in use are not orphans; an old unused index file and index
    manifest (a failed writer's, or left by an expiry that crashed outside this package) are."""
    warehouse = dynamic.copy(tmp_path / "w")
    root = table_root(warehouse, "dynp")
    strays = ["index/index-00000000-0000-0000-0000-000000000000-0", "manifest/index-manifest-00000000-0000-0000-0000-000000000000"]
    for stray in strays:
        with open(os.path.join(root, stray), "wb") as f:
            f.write(b"stray")
        os.utime(os.path.join(root, stray), (1_000_000, 1_000_000))
    dry = open_table(warehouse, "dynp").remove_orphan_files(older_than="1 d", dry_run=True)
    assert sorted(dry.orphan_files) == strays
    open_table(warehouse, "dynp").remove_orphan_files(older_than="0 s", dry_run=False)
    judged(dynamic, warehouse, "dynp", [1, 2, 3, 4, 5, 6], ["t3", "t5"])


def test_the_lake_snapshot_expiry_job_frees_index_files(dynamic, tmp_path):
    from airflow_snaptable.core.lake import SUCCESSFUL, Policy, maintain

    warehouse = dynamic.copy(tmp_path / "w")
    open_table(warehouse, "dynp").create_tag("ours4", 4)  # a tag this package writes holds the snapshot's index too
    policy = Policy.from_mapping({"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}}})
    report = maintain(warehouse, policy)
    for table in report.to_dict()["tables"]:
        assert table["jobs"]["snapshot-expiry"]["status"] == SUCCESSFUL, table
    judged(dynamic, warehouse, "dynp", [5, 6], ["ours4", "t3", "t5"])
    judged(dynamic, warehouse, "dyn", [4, 5], ["t2"])
    judged(dynamic, warehouse, "dv", [5, 6], ["t3"])


class Recording(FailAt):
    """FailAt that remembers the path of each operation."""

    def __init__(self, n: int):
        super().__init__(n)
        self.paths: list[tuple[str, str]] = []

    def __call__(self, kind: str, path: str) -> None:
        self.paths.append((kind, path))
        super().__call__(kind, path)


@pytest.mark.parametrize("name, tags", [("dynp", ["t3", "t5"]), ("dv", ["t3"])])
def test_crash_at_every_storage_operation_of_an_expiry_that_frees_index_files(dynamic, tmp_path, name, tags):
    """A crash at any storage operation of an expiry freeing index files (hash indexes, deletion vectors)
    and index manifests (the tags hold some), then a rerun: exactly the clean run's files, no plan left, verify clean; after
    the crash every snapshot and tag still present has all its files."""
    template = dynamic.copy(tmp_path / "template")
    expire = lambda t: t.expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE)
    clean = str(tmp_path / "clean")
    shutil.copytree(template, clean)
    table = open_table(clean, name)
    counter = Recording(10**9)
    table.storage.on_operation = counter
    expire(table)
    expected = table_files(table_root(clean, name))
    deleted = [p for kind, p in counter.paths if "delete" in kind]
    assert any(p.startswith("index/") for p in deleted) and any(p.startswith("manifest/index-manifest-") for p in deleted), counter.paths
    before = dynamic.before[name]
    for n in range(1, counter.seen + 1):
        copy = str(tmp_path / f"crash-{n}")
        shutil.copytree(template, copy)
        table = open_table(copy, name)
        table.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            expire(table)
        root = table_root(copy, name)
        present = [n[len("snapshot-"):] for n in os.listdir(os.path.join(root, "snapshot")) if n.startswith("snapshot-")]
        for key in present:
            assert all(os.path.exists(os.path.join(root, f)) for f in before["snapshots"][key]["files"]), (n, key)
        for tag in tags:
            assert all(os.path.exists(os.path.join(root, f)) for f in before["tags"][tag]["files"]), (n, tag)
        rerun = open_table(copy, name)
        expire(rerun)
        assert table_files(root) == expected, f"crash at operation {n}"
        plans = os.path.join(root, "snaptable", "plan")
        assert not [p for p in os.listdir(plans) if not p.startswith((".", "pending-"))], n  # a stale pending plan deleted nothing
        assert rerun.verify().ok, (n, rerun.verify().to_dict())
        shutil.rmtree(copy)
    judged(dynamic, clean, name, [6], tags)


# -- what still fails closed ----------------------------------------------------------------------

_DV_RANGE = {"type": "record", "name": "DeletionVectorMeta", "fields": [
    {"name": "f0", "type": "string"}, {"name": "f1", "type": "int"}, {"name": "f2", "type": "int"},
    {"name": "_CARDINALITY", "type": ["null", "long"], "default": None}]}
#: Paimon's IndexManifestEntry (with IndexManifestEntrySerializer's _VERSION), as Paimon writes it.
_INDEX_ENTRY = {"type": "record", "name": "IndexManifestEntry", "fields": [
    {"name": "_VERSION", "type": "int"}, {"name": "_KIND", "type": "int"}, {"name": "_PARTITION", "type": "bytes"},
    {"name": "_BUCKET", "type": "int"}, {"name": "_INDEX_TYPE", "type": "string"}, {"name": "_FILE_NAME", "type": "string"},
    {"name": "_FILE_SIZE", "type": "long"}, {"name": "_ROW_COUNT", "type": "long"},
    {"name": "_DELETIONS_VECTORS_RANGES", "type": ["null", {"type": "array", "items": _DV_RANGE}], "default": None},
    {"name": "_EXTERNAL_PATH", "type": ["null", "string"], "default": None}]}


def _everything(root: str) -> dict[str, bytes]:
    found = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(directory, name), "rb") as f:
                found[os.path.relpath(os.path.join(directory, name), root)] = f.read()
    return found


@pytest.mark.parametrize("change", ["global-index", "external-path", "index-in-data-dir", "list-named-like-an-index-file"])
def test_index_files_not_understood_fail_closed_and_change_nothing(dynamic, tmp_path, change):
    """Global indexes, index files at external paths or in the data directories: UnsupportedMetadataError,
    nothing changed."""
    warehouse = dynamic.copy(tmp_path / "w")
    root = table_root(warehouse, "dyn")
    if change == "list-named-like-an-index-file":
        # A deletion plan tells an index file (index/) from a manifest (manifest/) by Paimon's name prefixes.
        path = os.path.join(root, "snapshot", "snapshot-2")
        doc = json.loads(open(path).read())
        os.rename(os.path.join(root, "manifest", doc["deltaManifestList"]), os.path.join(root, "manifest", "index-list-0"))
        doc["deltaManifestList"] = "index-list-0"
        with open(path, "w") as f:
            json.dump(doc, f)
        before = _everything(root)
        with pytest.raises(UnsupportedMetadataError, match="named like an index file"):
            open_table(warehouse, "dyn").expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE)
        assert _everything(root) == before
        return
    if change == "index-in-data-dir":
        schema_path = os.path.join(root, "schema", "schema-0")
        doc = json.loads(open(schema_path).read())
        doc["options"]["index-file-in-data-file-dir"] = "true"
        with open(schema_path, "w") as f:
            json.dump(doc, f)
        before = _everything(root)
        with pytest.raises(UnsupportedMetadataError, match="index-file-in-data-file-dir"):
            open_table(warehouse, "dyn").expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE)
        assert _everything(root) == before
        return
    record = {"_VERSION": 1, "_KIND": 0, "_PARTITION": b"\x00\x00\x00\x00" + b"\x00" * 8, "_BUCKET": 0,
              "_INDEX_TYPE": "HASH", "_FILE_NAME": "index-dv-0", "_FILE_SIZE": 10, "_ROW_COUNT": 1}
    if change == "global-index":
        record.update(_INDEX_TYPE="BTREE")
    else:
        record.update(_EXTERNAL_PATH="s3://elsewhere/index-dv-0")
    buffer = io.BytesIO()
    fastavro.writer(buffer, _INDEX_ENTRY, [record])
    with open(os.path.join(root, "manifest", "index-manifest-hand-made"), "wb") as f:
        f.write(buffer.getvalue())
    path = os.path.join(root, "snapshot", "snapshot-2")
    doc = json.loads(open(path).read())
    doc["indexManifest"] = "index-manifest-hand-made"
    with open(path, "w") as f:
        json.dump(doc, f)
    before = _everything(root)
    table = open_table(warehouse, "dyn")
    with pytest.raises(UnsupportedMetadataError, match="global indexes" if change == "global-index" else "external"):
        table.expire_snapshots(retain_max=1, retain_min=1, now=FAR_FUTURE)
    with pytest.raises(UnsupportedMetadataError):
        table.remove_orphan_files(older_than="0 s", dry_run=False)
    assert _everything(root) == before
