"""What an Iceberg expiry must never delete, on tables pyiceberg writes and reads back.

- A file put back after a delete (pyiceberg's ``add_files`` of the same path, the usual way to
  undo a bad delete) has a new, higher sequence number: the current snapshot reads it, so it stays,
  whether the re-adding snapshot is retained or expired with its manifest carried on.
- Every retained manifest is read when a file may go: a missing or unreadable one fails the expiry
  with a typed error before the commit, and nothing on storage changes.
- A change to the table between the plan and the commit (a tag, a branch created on an old snapshot
  and appended to, a branch's retention, a ``history.expire.*`` property) is a conflict: the expiry
  plans again on the new metadata, as Java's does on any metadata change. Injected at the two
  places it can land: after the plan's journal is written, and inside the catalog commit.
- Partition statistics (and statistics) of removed snapshots leave the metadata in the same
  commit; their files go only when no retained entry lists them.
- Siblings: tag expiry decides on the refs it removes (a tag given a longer life meanwhile stays);
  orphan removal checks the metadata again before deleting (a file adopted meanwhile stays).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import CommitConflictError, CorruptMetadataError, MissingMetadataError
from airflow_snaptable.core.formats.iceberg.expire import IcebergExpiry
from tests.iceberg.conftest import assert_exactly_reachable_left, files_on_disk, reachable_files, read_everything, rows

FAR = 4_102_444_800_000  # 2100-01-01


def _open(env) -> Table:
    return Table.open("iceberg://db.orders", catalog=env.properties)


def _data_files(table, snapshot_id: int | None = None) -> list[str]:
    """The live data files of a snapshot (the current one by default), by pyiceberg's walk."""
    table = table.refresh()
    snapshot = table.metadata.snapshot_by_id(snapshot_id) if snapshot_id else table.current_snapshot()
    return [e.data_file.file_path for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io)]


def _local(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else uri


def _disk_state(location: str) -> dict[str, bytes]:
    return {p: open(os.path.join(location, p), "rb").read() for p in files_on_disk(location)}


def _put_back_history(env, carry_on: bool):
    """append A (file X); append B; delete X's rows; add_files([X]); with ``carry_on`` one more append,
    so the re-adding snapshot is expired too and only its manifest, carried on, names X."""
    table = env.create()
    table.append(rows(1, "x"))
    [readded] = _data_files(table)
    table.append(rows(2, "y"))
    table.delete("p == 'x'")
    table = table.refresh()
    assert readded not in _data_files(table)
    table.add_files([readded])
    if carry_on:
        table.append(rows(3, "z"))
    return table.refresh(), readded


@pytest.mark.parametrize("carry_on", [False, True], ids=["readding-snapshot-current", "readding-snapshot-expired"])
def test_a_file_put_back_after_a_delete_survives_expiry(iceberg_env, carry_on):
    table, readded = _put_back_history(iceberg_env, carry_on)
    before = read_everything(table)
    current = table.metadata.current_snapshot_id
    result = _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
    assert current not in result.expired_snapshot_ids and len(result.expired_snapshot_ids) == (4 if carry_on else 3)
    assert os.path.exists(_local(readded)), "the current snapshot reads the file put back"
    after = read_everything(table)
    assert after["snapshots"] == {current: before["snapshots"][current]}
    assert ("x", 1) in after["snapshots"][current]
    # What only the expired snapshots reached is gone: the expiry still frees files.
    assert_exactly_reachable_left(table, iceberg_env.location())


def _retained_manifest_naming(table, path: str) -> str:
    """The current snapshot's manifest that names ``path`` live: for a file put back, the manifest
    the sequence-number shortcut skipped (its smallest sequence number is above every candidate's)."""
    [found] = [
        m for m in table.current_snapshot().manifests(table.io)
        if any(e.data_file.file_path == path for e in m.fetch_manifest_entry(table.io))
    ]
    return _local(found.manifest_path)


@pytest.mark.parametrize("history", ["put-back-then-overwrite", "appends-only"])
@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated"])
def test_a_missing_or_corrupt_retained_manifest_fails_closed(iceberg_env, damage, history):
    """A retained manifest is read before anything is deleted, whether or not a data file may go
    (appends only: the expired snapshots free their manifest lists alone)."""
    if history == "appends-only":
        table = iceberg_env.create()
        for i in range(4):
            table.append(rows(i))
        table = table.refresh()
        [manifest] = [_local(m.manifest_path) for m in table.current_snapshot().manifests(table.io)
                      if m.added_snapshot_id == table.metadata.current_snapshot_id]
    else:
        table, readded = _put_back_history(iceberg_env, carry_on=False)
        # One more rewrite, so that the expired snapshots free a data file: deleting is at stake.
        table.overwrite(rows(7, "y"), overwrite_filter="p == 'y'")
        table = table.refresh()
        manifest = _retained_manifest_naming(table, readded)
    original = open(manifest, "rb").read()
    if damage == "missing":
        os.remove(manifest)
    else:
        with open(manifest, "wb") as handle:
            handle.write(b"not avro at all" if damage == "garbage" else original[: len(original) // 2])
    location = iceberg_env.location()
    on_disk = _disk_state(location)
    metadata_location = table.metadata_location
    error = MissingMetadataError if damage == "missing" else CorruptMetadataError
    with pytest.raises(error):
        _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
    assert _disk_state(location) == on_disk, "nothing on storage changed"
    assert iceberg_env.table().metadata_location == metadata_location, "nothing was committed"
    with pytest.raises(error):
        _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR, dry_run=True)


# -- changes between the plan and the commit -------------------------------------------------------


def _history(env, n: int = 5):
    table = env.create()
    for i in range(n):
        table.append(rows(i, f"p{i}"))
    table.overwrite(rows(99, "p0"), overwrite_filter="p == 'p0'")  # frees a data file once its snapshots go
    table = table.refresh()
    main = [s.snapshot_id for s in reversed(_ancestry(table.metadata, table.metadata.current_snapshot_id))]
    return table, main


def _ancestry(metadata, snapshot_id):
    found = []
    while snapshot_id is not None and metadata.snapshot_by_id(snapshot_id) is not None:
        found.append(metadata.snapshot_by_id(snapshot_id))
        snapshot_id = found[-1].parent_snapshot_id
    return found


def _set_ref(env, name: str, kind: str, snapshot_id: int, **retention) -> None:
    """A ref written by pyiceberg's own update (what another engine would commit)."""
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.update import SetSnapshotRefUpdate

    table = env.table()
    kind = SnapshotRefType.BRANCH if kind == "branch" else SnapshotRefType.TAG
    table.catalog.commit_table(table, (), (SetSnapshotRefUpdate(ref_name=name, type=kind, snapshot_id=snapshot_id, **retention),))


def _concurrent_change(kind: str, env, main: list[int]):
    """One change another writer makes while the expiry runs; returns the check of its outcome."""
    if kind == "our-tag-on-an-old-snapshot":
        _open(env).create_tag("audit", main[1])
        return lambda after: after["refs"]["audit"] == main[1] and main[1] in after["snapshots"]
    if kind == "pyiceberg-branch-on-an-old-snapshot-appended-to":
        table = env.table()
        table.manage_snapshots().create_branch(main[1], "dev").commit()
        table.refresh().append(rows(50, "dev"), branch="dev")
        return lambda after: ("dev", 50) in after["snapshots"][after["refs"]["dev"]] and ("p1", 1) in after["snapshots"][after["refs"]["dev"]]
    if kind == "branch-retention":
        _set_ref(env, "keep", "branch", main[-1], min_snapshots_to_keep=4)
        return lambda after: set(main[-4:]) <= set(after["snapshots"])
    if kind == "history-expire-property":
        env.table().transaction().set_properties({"history.expire.min-snapshots-to-keep": "3"}).commit_transaction()
        return lambda after: set(main[-3:]) <= set(after["snapshots"])
    raise AssertionError(kind)


CHANGES = ["our-tag-on-an-old-snapshot", "pyiceberg-branch-on-an-old-snapshot-appended-to", "branch-retention", "history-expire-property"]


@pytest.mark.parametrize("where", ["after-the-journal", "inside-the-commit"])
@pytest.mark.parametrize("change", CHANGES)
def test_a_change_between_plan_and_commit_is_planned_again(iceberg_env, monkeypatch, change, where):
    table, main = _history(iceberg_env)
    _set_ref(iceberg_env, "keep", "branch", main[-1])  # a branch with the table's retention (1)
    expirer = _open(iceberg_env)
    state: dict = {}

    def change_once():
        if "check" not in state:
            state["check"] = _concurrent_change(change, iceberg_env, main)
            state["before"] = read_everything(iceberg_env.table())

    if where == "after-the-journal":
        def on_operation(kind, path):
            if kind == "write" and path.startswith("snaptable/plan/"):
                change_once()

        expirer.storage.on_operation = on_operation
    else:
        real_commit = IcebergExpiry._commit

        def commit_after_a_change(self, iceberg, plan):
            change_once()
            return real_commit(self, iceberg, plan)

        monkeypatch.setattr(IcebergExpiry, "_commit", commit_after_a_change)
    result = expirer.expire_snapshots(older_than=FAR)
    expirer.storage.on_operation = None
    assert "check" in state and result.expired_snapshot_ids
    after = read_everything(iceberg_env.table())  # pyiceberg reads every snapshot and ref that is left
    assert state["check"](after), (change, after["refs"], sorted(after["snapshots"]))
    assert all(after["snapshots"][k] == state["before"]["snapshots"][k] for k in after["snapshots"])
    assert {k: v for k, v in state["before"]["refs"].items()} == after["refs"]
    assert_exactly_reachable_left(iceberg_env.table(), iceberg_env.location())


TAGGER = """
import json, random, sys, time
import pyarrow as pa
from airflow_snaptable.core import Table
props, seconds = json.loads(sys.argv[1]), float(sys.argv[2])
rng = random.Random(7)
created, failed, i = {}, 0, 0
started = time.time()
# A few seconds, and at least 5 tags created (a loaded machine), but never more than 30 seconds.
while (time.time() < started + seconds or len(created) < 5) and time.time() < started + 30:
    ours = Table.open("iceberg://db.orders", catalog=props)
    table = ours.iceberg
    table.append(pa.table({"p": [f"w{i}"], "id": [i]}, schema=table.schema().as_arrow()))
    for j in range(3):  # tags on old snapshots: what a concurrent expiry (retain 1) is removing
        metadata = table.refresh().metadata
        old = [s for s in metadata.snapshots if s.snapshot_id != metadata.current_snapshot_id]
        if not old:
            break
        parent = metadata.snapshot_by_id(metadata.current_snapshot().parent_snapshot_id or -1)
        snapshot = parent if j == 0 and parent is not None else rng.choice(old)  # the parent: just superseded
        name = f"t{i}-{j}"
        try:
            ours.create_tag(name, snapshot.snapshot_id)
            created[name] = [snapshot.snapshot_id, int(snapshot.summary["total-records"])]
        except Exception:  # a typed conflict or the snapshot already gone: not created
            failed += 1
    i += 1
print(json.dumps({"created": created, "failed": failed}))
"""


def test_two_processes_no_created_tag_vanishes_and_no_file_of_one_is_deleted(iceberg_env):
    """A real race: another process appends and tags old snapshots while this one expires everything
    it can, over and over. Every tag whose creation returned is there afterwards, and pyiceberg
    reads its snapshot with the rows it had."""
    table = iceberg_env.create()
    table.append(rows(0, "base"))
    tagger = subprocess.Popen(
        [sys.executable, "-c", TAGGER, json.dumps(iceberg_env.properties), "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    runs = 0
    while tagger.poll() is None:
        try:
            _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
        except CommitConflictError:  # the only way a run may end early: a typed conflict
            pass
        runs += 1
    out, err = tagger.communicate()
    assert tagger.returncode == 0, err[-3000:]
    report = json.loads(out)
    assert report["created"] and runs >= 3, (report, runs)
    latest = iceberg_env.table()
    refs = {name: ref.snapshot_id for name, ref in latest.metadata.refs.items()}
    vanished = sorted(name for name, (snapshot_id, _n) in report["created"].items() if refs.get(name) != snapshot_id)
    assert not vanished, f"{len(vanished)} of {len(report['created'])} created tags vanished: {vanished}"
    for name, (snapshot_id, records) in report["created"].items():
        assert len(latest.scan(snapshot_id=snapshot_id).to_arrow()) == records, name  # every file of it is there
    assert reachable_files(latest) <= files_on_disk(iceberg_env.location())


# -- statistics --------------------------------------------------------------------------------------


def _partition_statistics(table, snapshot_id: int, name: str) -> str:
    """A partition-statistics file for ``snapshot_id``, registered with pyiceberg's update."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.table.statistics import PartitionStatisticsFile
    from pyiceberg.table.update import SetPartitionStatisticsUpdate

    path = f"{table.location()}/metadata/{name}"
    pq.write_table(pa.table({"partition": ["a"], "data_record_count": [2]}), _local(path))
    entry = PartitionStatisticsFile(snapshot_id=snapshot_id, statistics_path=path, file_size_in_bytes=os.path.getsize(_local(path)))
    table.catalog.commit_table(table, (), (SetPartitionStatisticsUpdate(partition_statistics=entry),))
    return path[len(table.location()) + 1:]


def test_partition_statistics_of_removed_snapshots_leave_the_metadata_in_the_same_commit(iceberg_env):
    """Java's RemoveSnapshots drops the statistics and partition-statistics entries of the snapshots it
    removes; a file goes only when no retained entry lists it."""
    table, main = _history(iceberg_env)
    expired_only = _partition_statistics(table.refresh(), main[0], "part-stats-0.parquet")
    shared = _partition_statistics(table.refresh(), main[1], "part-stats-shared.parquet")
    table = table.refresh()
    _partition_statistics(table, main[-1], "part-stats-shared.parquet")  # the current snapshot lists the same file
    kept = _partition_statistics(table.refresh(), main[-2], "part-stats-kept.parquet")
    table.refresh().manage_snapshots().create_tag(main[-2], "hold").commit()
    result = _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
    assert main[0] in result.expired_snapshot_ids and main[1] in result.expired_snapshot_ids
    table = iceberg_env.table()  # pyiceberg reads the committed metadata back
    listed = {(s.snapshot_id, s.statistics_path.rsplit("/", 1)[-1]) for s in table.metadata.partition_statistics}
    assert listed == {(main[-1], "part-stats-shared.parquet"), (main[-2], "part-stats-kept.parquet")}
    on_disk = files_on_disk(iceberg_env.location())
    assert expired_only not in on_disk and shared in on_disk and kept in on_disk
    for entry in table.metadata.partition_statistics:
        assert os.path.exists(_local(entry.statistics_path))
    assert_exactly_reachable_left_with(table, iceberg_env.location(), {shared, kept})


def assert_exactly_reachable_left_with(table, location: str, extra: set[str]) -> None:
    assert files_on_disk(location) == reachable_files(table) | extra


# -- siblings ----------------------------------------------------------------------------------------


def test_tag_expiry_decides_on_the_tag_it_removes(iceberg_env, monkeypatch):
    """A tag past its age, given a longer life between the decision and the removal, stays; one that is
    still past its age goes."""
    table, main = _history(iceberg_env, 3)
    ours = _open(iceberg_env)
    ours.create_tag("short", main[0], time_retained="1 d")
    ours.create_tag("also-short", main[0], time_retained="1 d")
    now = table.metadata.snapshot_by_id(main[0]).timestamp_ms + 2 * 86_400_000
    catalog = ours.catalog
    real = type(catalog).commit_table
    state = {"done": False}

    def commit_table(self, iceberg, requirements, updates):
        if not state["done"]:
            state["done"] = True
            _open(iceberg_env).replace_tag("short", main[0], time_retained="100 d")
        return real(self, iceberg, requirements, updates)

    monkeypatch.setattr(type(catalog), "commit_table", commit_table)
    removed = ours.expire_tags(now=now)
    monkeypatch.undo()
    refs = iceberg_env.table().metadata.refs
    assert removed == ["also-short"] and "also-short" not in refs
    assert refs["short"].snapshot_id == main[0] and refs["short"].max_ref_age_ms == 100 * 86_400_000


def test_orphan_removal_keeps_a_file_adopted_while_it_runs(iceberg_env):
    """add_files of an unreferenced old file between the listing and the deletion: the file is valid again."""
    table = iceberg_env.create()
    table.append(rows(1, "x"))
    [adopted] = _data_files(table)
    table.append(rows(2, "y"))
    table.delete("p == 'x'")
    ours = _open(iceberg_env)
    ours.expire_snapshots(retain_min=1, older_than=FAR, delete_files=False)  # the file is now an orphan
    old = time.time() - 10 * 86_400
    for path in files_on_disk(iceberg_env.location()):
        os.utime(os.path.join(iceberg_env.location(), path), (old, old))
    state = {"done": False}

    def adopt_at_the_first_read(kind, path):
        if kind == "read" and not state["done"]:
            state["done"] = True
            iceberg_env.table().add_files([adopted])

    ours.storage.on_operation = adopt_at_the_first_read
    result = ours.remove_orphan_files(older_than="1 d", dry_run=False)
    ours.storage.on_operation = None
    assert state["done"]
    assert adopted[len(iceberg_env.table().location()) + 1:] not in result.orphan_files
    assert os.path.exists(_local(adopted))
    assert ("x", 1) in read_everything(iceberg_env.table())["snapshots"][iceberg_env.table().metadata.current_snapshot_id]


def test_a_catalog_checking_on_a_server_gets_standard_requirements_and_a_commit_over_another_version_deletes_nothing(
    iceberg_env, monkeypatch
):
    """A REST catalog checks requirements on its server: it gets only Iceberg's standard ones (a custom
    one would not serialise). If it applies the removal over a version the plan never saw (a branch
    created meanwhile on an old snapshot and appended to passes every standard check), nothing is
    deleted and the run says so with a typed error; pyiceberg still reads every snapshot left, the
    branch's with the manifests it carried over."""
    from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID

    from airflow_snaptable.core.formats.iceberg import requirements

    table, main = _history(iceberg_env)
    monkeypatch.setattr(requirements, "checks_requirements_here", lambda catalog: False)
    sent = requirements.unchanged_since(iceberg_env.table())
    assert {type(r) for r in sent} == {AssertTableUUID, AssertRefSnapshotId}
    assert all(r.model_dump_json() for r in sent)  # what a REST catalog sends

    real_commit = IcebergExpiry._commit

    def commit_after_a_branch(self, iceberg, plan):
        if "late" not in iceberg_env.table().metadata.refs:
            iceberg_env.table().manage_snapshots().create_branch(main[1], "late").commit()
            iceberg_env.table().append(rows(50, "late"), branch="late")
        return real_commit(self, iceberg, plan)

    monkeypatch.setattr(IcebergExpiry, "_commit", commit_after_a_branch)
    location = iceberg_env.location()
    data_before = {p for p in files_on_disk(location) if not p.endswith(".metadata.json")}
    from airflow_snaptable.core.errors import CommitConflictError as Conflict

    with pytest.raises(Conflict, match="no file was deleted"):
        _open(iceberg_env).expire_snapshots(retain_min=1, older_than=FAR)
    after = iceberg_env.table()
    assert "late" in after.metadata.refs and main[0] not in {s.snapshot_id for s in after.metadata.snapshots}
    assert data_before <= files_on_disk(location), "nothing was deleted"
    assert not os.listdir(os.path.join(location, "snaptable", "plan"))
    late = read_everything(after)["snapshots"][after.metadata.refs["late"].snapshot_id]
    assert ("late", 50) in late and ("p1", 1) in late
