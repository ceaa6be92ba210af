"""Local writes are durable under their names: a rename counts only once its directory is synced.

A power loss cannot be staged here, so these tests record the fsyncs and the order they happen in:
every file a committed snapshot names must have its directory entry (and the entries of the
directories made for it) synced before the snapshot file is linked into place.
"""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.io import local_files
from airflow_snaptable.core.io.storage import Storage


@pytest.fixture
def synced(monkeypatch):
    """The directories fsynced, in order, with ("link", target) marking each exclusive create."""
    events: list[tuple[str, str]] = []
    real_fsync_dir, real_link = local_files.fsync_dir, os.link
    monkeypatch.setattr(local_files, "fsync_dir", lambda d: (events.append(("dir", os.path.realpath(d))), real_fsync_dir(d)))

    def link(src, dst, *args, **kwargs):
        real_link(src, dst, *args, **kwargs)
        events.append(("link", os.path.realpath(dst)))

    monkeypatch.setattr(local_files.os, "link", link)
    return events


def test_a_durable_write_syncs_its_directory_and_the_parents_of_directories_it_made(tmp_path, synced):
    storage = Storage.from_uri(str(tmp_path))
    storage.write_bytes("data/a=1/b=2/f.parquet", b"x")
    dirs = [d for kind, d in synced if kind == "dir"]
    root = os.path.realpath(tmp_path)
    assert set(dirs) == {f"{root}/data/a=1/b=2", f"{root}/data/a=1", f"{root}/data", root}

    synced.clear()
    storage.write_bytes("data/a=1/b=2/g.parquet", b"y")  # nothing made: only the file's own directory
    assert [d for kind, d in synced if kind == "dir"] == [f"{root}/data/a=1/b=2"]


def test_a_hint_is_not_synced(tmp_path, synced):
    Storage.from_uri(str(tmp_path)).write_bytes("snapshot/LATEST", b"3", durable=False)
    assert synced == []


def test_every_file_a_snapshot_names_is_durable_before_the_snapshot_is_linked(tmp_path, synced):
    schema = pa.schema([("day", pa.date32()), ("v", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema, partition_by=["day"])
    days = [dt.date(2026, 11, d) for d in (1, 2, 3)]
    synced.clear()
    snapshot = table.append(pa.table({"day": days, "v": [1, 2, 3]}, schema=schema))

    root = os.path.realpath(tmp_path / "t")
    links = [i for i, (kind, target) in enumerate(synced) if kind == "link" and target.endswith(f"snapshot-{snapshot.id}")]
    assert len(links) == 1, synced
    before = {d for kind, d in synced[: links[0]] if kind == "dir"}
    named = [f"{root}/{f.path}" for f in table.scan(snapshot_id=snapshot.id).files()]
    assert len(named) == 3
    for path in named:
        directory = os.path.dirname(path)
        assert directory in before, f"{directory} not synced before the commit"
        assert os.path.dirname(directory) in before, f"the new partition directory's entry in {os.path.dirname(directory)} was not synced"
    manifest_dirs = {d for d in before if d.endswith("/manifest")}
    assert manifest_dirs, "the manifests' directory was not synced before the commit"


def test_a_deleted_tag_or_consumer_is_durably_gone_before_the_call_returns(tmp_path, synced):
    """Expiry may free a deleted tag's files next: a power loss must not bring the tag back over them."""
    schema = pa.schema([("v", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema)
    snapshot = table.append(pa.table({"v": [1]}, schema=schema))
    table.create_tag("keep", snapshot.id)
    table.update_consumer("reader", snapshot.id)
    root = os.path.realpath(tmp_path / "t")

    synced.clear()
    table.delete_tag("keep")
    assert ("dir", f"{root}/tag") in synced
    synced.clear()
    table.delete_consumer("reader")
    assert ("dir", f"{root}/consumer") in synced


def test_expired_snapshots_are_durably_gone_before_any_file_they_name_is_deleted(tmp_path, synced, monkeypatch):
    """Unpublishing renames (or unlinks) snapshot files; a power loss must not bring one back over deleted files."""
    schema = pa.schema([("v", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema)
    for i in range(3):
        table.append(pa.table({"v": [i]}, schema=schema))
    table.overwrite(pa.table({"v": [9]}, schema=schema))
    root = os.path.realpath(tmp_path / "t")
    real_unlink = os.unlink
    monkeypatch.setattr(os, "unlink", lambda p, *a, **k: (synced.append(("unlink", os.path.realpath(p))), real_unlink(p, *a, **k))[1])

    synced.clear()
    result = table.expire_snapshots(retain_max=1, retain_min=1)
    assert result.deleted_data_files, "the overwrite's predecessors' files must go"
    first_data_unlink = next(i for i, (kind, p) in enumerate(synced) if kind == "unlink" and p.startswith(f"{root}/data/"))
    assert ("dir", f"{root}/snapshot") in synced[:first_data_unlink]
