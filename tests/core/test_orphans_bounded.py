"""Orphan cleaning in bounded memory: the streamed listing, the hashed in-use set, the batches.

The in-use set (core/formats/native/in_use.py, core/io/path_set.py) must hold exactly what the reference
pass (``NativeFiles.referenced_by``, verify's) holds; the streamed listing (``Storage.iter_files``)
exactly what ``fs.find`` listed; and the result must not depend on where the batches fall.
"""

from __future__ import annotations

import os
import time

import pytest

import airflow_snaptable.core.formats.native.in_use as native_in_use
import airflow_snaptable.core.lifecycle.orphans as orphans
from airflow_snaptable.core import Table
from airflow_snaptable.core.lifecycle.orphans import OrphanFilesClean, files_in_use, paths_in_use
from airflow_snaptable.core.io.path_set import PathHashSet, path_hashes
from airflow_snaptable.core.io.storage import Storage
from tests.conftest import SCHEMA, InjectedCrash, make_rows, sorted_ids

DAY_MS = 86_400_000


def find_listing(storage: Storage, rel_dir: str) -> list[tuple[str, int, float | None]]:
    """The listing before streaming: one ``fs.find(detail=True)`` of the whole tree, sorted."""
    from airflow_snaptable.core.io.listing import modified_seconds

    try:
        found = storage.fs.find(storage.full_path(rel_dir), detail=True)
    except FileNotFoundError:
        return []
    prefix = storage.root.rstrip("/") + "/"
    return sorted(
        (path[len(prefix):] if path.startswith(prefix) else path, int(info.get("size") or 0), modified_seconds(info))
        for path, info in found.items()
        if info.get("type") != "directory"
    )


def plant(root: str, rel: str, mtime_ms: int, data: bytes = b"stray") -> str:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.utime(path, (mtime_ms / 1000, mtime_ms / 1000))
    return rel


def age_everything(root: str, mtime_ms: int) -> None:
    for directory, _dirs, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(directory, name), (mtime_ms / 1000, mtime_ms / 1000))


@pytest.fixture
def small_batches(monkeypatch):
    """Every batch boundary falls inside the test tables: 2 snapshots, 2 manifest rows, 3 listed files."""
    monkeypatch.setattr(native_in_use, "SNAPSHOT_CHUNK", 2)
    monkeypatch.setattr(native_in_use, "BATCH_ROWS", 2)
    monkeypatch.setattr(orphans, "ORPHAN_BATCH", 3)
    monkeypatch.setattr(orphans, "DELETE_BUFFER", 2)


def churned_table(uri: str) -> Table:
    """Appends, partition overwrites, deletes, a compaction, tags, and an expiry that leaves a first
    retained state whose manifests hold DELETE entries (the fold must drop their files). The files
    the expiry deleted are put back: unreferenced files whose entries the retained manifests still hold."""
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "3"})
    for start in range(0, 30, 3):
        table.append(make_rows(range(start, start + 3)))
    table.create_tag("early", 3)
    table.overwrite(make_rows([100, 103]), partitions=[{"p": 1}])
    table.delete(partitions=[{"p": 2}])
    table.create_tag("middle", table.latest_snapshot().id)
    table.append(make_rows(range(40, 46)))
    table.compact(min_file_num=2)
    table.append(make_rows(range(50, 53)))
    before = {found.path for found in table.store.files.listed_files()}
    table.expire_snapshots(retain_min=5, time_retained="0 s")
    after = {found.path for found in table.store.files.listed_files()}
    for rel in before - after:
        table.storage.write_bytes(rel, b"expired")
    return table


def test_path_set_answers_membership_for_every_added_path():
    paths = [f"data/p={i % 7}/data-{i}.parquet" for i in range(1000)]
    used = PathHashSet.of(paths + paths[:10])  # duplicates are one entry
    assert len(used) == 1000 and used.nbytes == 8000
    assert used.contains(paths).all()
    assert not used.contains([f"data/p=0/other-{i}.parquet" for i in range(1000)]).any()
    assert not PathHashSet.of([]).contains(paths).any()
    assert "data/p=0/data-0.parquet" in used and "data/p=0/data-0.parquet.x" not in used
    assert path_hashes(["a", "a", "b"]).tolist()[0] == path_hashes(["a"]).tolist()[0] != path_hashes(["b"]).tolist()[0]


def test_hashed_in_use_set_equals_the_reference_pass_across_batch_boundaries(table_uri, small_batches):
    table = churned_table(table_uri)
    reference = files_in_use(table.store).all_paths()
    used = paths_in_use(table.store)
    listed = [found.path for found in table.store.files.listed_files()]
    assert reference <= set(listed) and len(listed) > len(reference)  # some files are unreferenced
    assert [path in reference for path in listed] == used.contains(listed).tolist()
    assert len(used) == len(reference)


def test_orphan_clean_keeps_every_referenced_file_across_batch_boundaries(table_uri, small_batches):
    table = churned_table(table_uri)
    now = int(time.time() * 1000)
    age_everything(table_uri, now - 2 * DAY_MS)
    strays = {plant(table_uri, f"data/p={i % 3}/stray-{i}.parquet", now - 2 * DAY_MS) for i in range(7)}
    strays.add(plant(table_uri, "manifest/manifest-stray", now - 2 * DAY_MS))
    reference = files_in_use(table.store).all_paths()
    unreferenced = {found.path for found in table.store.files.listed_files()} - reference
    assert strays <= unreferenced

    dry = table.remove_orphan_files(older_than="1 d")
    assert set(dry.orphan_files) == unreferenced and dry.orphan_count == len(unreferenced)
    real = OrphanFilesClean(table.store, table.clock, batch=2).clean("1 d", dry_run=False)
    assert set(real.orphan_files) == unreferenced and real.bytes == dry.bytes
    assert all(os.path.exists(os.path.join(table_uri, p)) for p in reference)
    reopened = Table.open(table_uri)
    assert reopened.verify().ok
    assert sorted_ids(reopened.scan(tag="early").to_arrow()) == list(range(9))


def test_result_lists_at_most_the_cap_and_counts_every_orphan(table_uri, monkeypatch):
    monkeypatch.setattr(orphans, "MAX_LISTED_ORPHANS", 2)
    table = Table.create(table_uri, SCHEMA, partition_by=["p"])
    table.append(make_rows(range(6)))
    now = int(time.time() * 1000)
    strays = [plant(table_uri, f"data/p=0/stray-{i}.parquet", now - 2 * DAY_MS) for i in range(5)]
    dry = table.remove_orphan_files(older_than="1 d")
    assert dry.orphan_count == 5 and dry.bytes == 5 * len(b"stray")
    assert len(dry.orphan_files) == 2 and set(dry.orphan_files) <= set(strays) and dry.orphan_files_truncated
    real = table.remove_orphan_files(older_than="1 d", dry_run=False)
    assert real.orphan_count == 5 and real.orphan_files_truncated
    assert not any(os.path.exists(os.path.join(table_uri, p)) for p in strays)
    assert table.verify().ok and sorted_ids(table.scan().to_arrow()) == list(range(6))


def test_a_file_committed_after_the_listing_is_kept(table_uri):
    """Candidates are listed before the in-use set is built (Paimon #3074): a commit in between protects its files."""
    from airflow_snaptable.core.native.manifest import DataFile

    table = Table.create(table_uri, SCHEMA, partition_by=["p"])
    table.append(make_rows(range(3)))
    now = int(time.time() * 1000)
    written_earlier = plant(table_uri, "data/p=0/written-by-spark.parquet", now - 2 * DAY_MS)
    files = table.store.files
    original = files.paths_in_use

    def commit_then_build(snapshots, tags):
        table.commit_files([DataFile(written_earlier, (0,), 1, len(b"stray"))])
        return original(list(snapshots) + [table.latest_snapshot()], tags)

    files.paths_in_use = commit_then_build
    result = table.remove_orphan_files(older_than="1 d", dry_run=False)
    assert written_earlier not in result.orphan_files and os.path.exists(os.path.join(table_uri, written_earlier))


def test_a_crash_while_deleting_orphans_leaves_referenced_files_and_a_rerun_finishes(table_uri, small_batches):
    table = churned_table(table_uri)
    now = int(time.time() * 1000)
    age_everything(table_uri, now - 2 * DAY_MS)
    strays = {plant(table_uri, f"data/p=0/stray-{i}.parquet", now - 2 * DAY_MS) for i in range(9)}
    reference = files_in_use(table.store).all_paths()
    deletes = []

    def crash_at_third_delete(kind: str, path: str) -> None:
        if kind == "delete":
            deletes.append(path)
            if len(deletes) == 3:
                raise InjectedCrash(path)

    table.storage.on_operation = crash_at_third_delete
    with pytest.raises(InjectedCrash):
        table.remove_orphan_files(older_than="1 d", dry_run=False)
    table.storage.on_operation = None
    assert all(os.path.exists(os.path.join(table_uri, p)) for p in reference)
    assert any(os.path.exists(os.path.join(table_uri, p)) for p in strays)  # interrupted
    rerun = Table.open(table_uri).remove_orphan_files(older_than="1 d", dry_run=False)
    assert strays - set(deletes[:2]) <= set(rerun.orphan_files)
    assert not any(os.path.exists(os.path.join(table_uri, p)) for p in strays)
    assert Table.open(table_uri).verify().ok


def nested_tree(storage: Storage) -> None:
    for rel in ("data/p=0/a.parquet", "data/p=0/b.parquet", "data/p=1/deep/x/c.parquet", "data/p=10/d.parquet",
                "data/p=1.e.parquet", "manifest/manifest-1", "manifest/.manifest-2.tmp"):
        storage.write_bytes(rel, rel.encode())


@pytest.mark.parametrize("rel_dir", ["data", "manifest", "data/p=1", "missing", "data/p=0/a.parquet", ""])
def test_streamed_listing_equals_the_find_listing_on_local_files(tmp_path, rel_dir):
    storage = Storage.from_uri(str(tmp_path / "t"))
    nested_tree(storage)
    os.makedirs(tmp_path / "t" / "data" / "empty-dir" / "deeper")
    assert sorted(storage.iter_files(rel_dir)) == find_listing(storage, rel_dir) == storage.list_files(rel_dir)
    assert len(storage.list_files("data")) == 5 and storage.list_files("missing") == []


@pytest.mark.s3
def test_streamed_listing_equals_the_find_listing_on_s3(s3_server, s3_table_uri):
    storage = Storage.from_uri(s3_table_uri, s3_server.storage_options())
    nested_tree(storage)
    storage.delete("data/p=10/d.parquet")  # an emptied prefix (SeaweedFS lists it as itself)
    for rel_dir in ("data", "manifest", "data/p=1", "data/p=10", "missing", "data/p=0/a.parquet"):
        streamed = sorted(storage.iter_files(rel_dir))
        assert streamed == find_listing(storage, rel_dir) == storage.list_files(rel_dir), rel_dir
        assert all(mtime is not None for _rel, _size, mtime in streamed)
    assert [rel for rel, _size, _mtime in storage.list_files("data")] == [
        "data/p=0/a.parquet", "data/p=0/b.parquet", "data/p=1.e.parquet", "data/p=1/deep/x/c.parquet",
    ]


@pytest.mark.s3
def test_orphan_clean_on_s3_in_small_batches(s3_server, s3_table_uri, small_batches):
    options = s3_server.storage_options()
    table = Table.create(s3_table_uri, SCHEMA, partition_by=["p"], storage_options=options)
    for start in range(0, 12, 3):
        table.append(make_rows(range(start, start + 3)))
    table.overwrite(make_rows([30]), partitions=[{"p": 0}])
    strays = [f"data/p={i}/stray-{i}.parquet" for i in range(4)]
    for rel in strays:
        table.storage.write_bytes(rel, b"stray")
    reference = files_in_use(table.store).all_paths()
    unreferenced = {found.path for found in table.store.files.listed_files()} - reference
    later = int(time.time() * 1000) + 1000
    time.sleep(1.1)
    dry = table.remove_orphan_files(older_than=later)
    assert set(dry.orphan_files) == unreferenced and set(strays) <= unreferenced
    table.remove_orphan_files(older_than=later, dry_run=False)
    reopened = Table.open(s3_table_uri, options)
    assert reopened.verify().ok and sorted_ids(reopened.scan().to_arrow()) == [1, 2, 4, 5, 7, 8, 10, 11, 30]
