"""Random Iceberg histories, expired by this package, judged by an oracle of Java's rules.

Each seed builds a small history with pyiceberg: appends, overwrites and deletes on ``main`` and
on branches, files put back with ``add_files`` after a delete, tags and branches on any snapshot,
rollbacks, retention settings on refs (``min-snapshots-to-keep``, ``max-snapshot-age-ms``,
``max-ref-age-ms``, some exactly at the boundary) and the table's ``history.expire.*`` properties.
Some runs change the table while the expiry runs: a tag or a branch (appended to) on an old
snapshot, a ref removed, a retention setting or property, an append; after the plan's journal is
written or inside the catalog commit.

The oracle below is written from Java's ``RemoveSnapshots`` and ``ReachableFileCleanup``, on the
metadata the expiry's commit applied to, read with pyiceberg's own reader:

- refs: ``main`` stays; another ref stays while ``now - its snapshot's time <= max-ref-age-ms``
  (its own, else the table's, else forever);
- snapshots: every retained ref's; each retained branch's ancestors while fewer than its
  ``min-snapshots-to-keep`` are kept or not older than its ``max-snapshot-age-ms`` (else the
  expiry's ``retain_min`` / ``older_than``, else the table's properties, 1 and 5 days); the
  snapshots no retained ref reaches that are not older than ``older_than``;
- files deleted: the expired snapshots' manifest lists; their manifests no retained snapshot
  lists; the files those name live that no retained manifest names live.

After the expiry: the snapshots and refs left are the oracle's, the files gone are exactly the
oracle's (metadata versions aside), pyiceberg reads every retained snapshot with the rows it had,
and every file a retained snapshot reads is there.
"""

from __future__ import annotations

import itertools
import os
import random
from dataclasses import dataclass, field

import pyarrow as pa
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.formats.iceberg.expire import IcebergExpiry
from tests.iceberg.conftest import SCHEMA, IcebergEnv, files_on_disk

#: Seeds run in CI; more locally with SNAPTABLE_ICEBERG_HISTORIES=600 (each history takes about a second).
pytestmark = pytest.mark.filterwarnings("ignore:Delete operation did not match any records")

HISTORIES = int(os.environ.get("SNAPTABLE_ICEBERG_HISTORIES", "24"))
DAY = 86_400_000
PARTS = ["a", "b", "c", "d"]


# -- the oracle: Java's RemoveSnapshots and ReachableFileCleanup -----------------------------------


def _ancestors(snapshots: dict, snapshot_id):
    while snapshot_id is not None and snapshot_id in snapshots:
        yield snapshots[snapshot_id]
        snapshot_id = snapshots[snapshot_id].parent_snapshot_id


def java_retention(metadata, now: int, older_than: int | None, retain_last: int | None) -> tuple[set[int], dict[str, int]]:
    """(retained snapshot ids, retained refs) by RemoveSnapshots.internalApply."""
    props = metadata.properties
    expire_older_than = older_than if older_than is not None else now - int(props.get("history.expire.max-snapshot-age-ms", 5 * DAY))
    min_snapshots = retain_last if retain_last is not None else int(props.get("history.expire.min-snapshots-to-keep", 1))
    max_ref_age = int(props.get("history.expire.max-ref-age-ms", 2**63 - 1))
    snapshots = {s.snapshot_id: s for s in metadata.snapshots}
    refs = {}
    for name, ref in metadata.refs.items():
        snapshot = snapshots.get(ref.snapshot_id)
        age_limit = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else max_ref_age
        if name == "main" or (snapshot is not None and now - snapshot.timestamp_ms <= age_limit):
            refs[name] = ref
    keep = {ref.snapshot_id for ref in refs.values()}
    referenced = set()
    for ref in refs.values():
        if ref.snapshot_ref_type.value != "branch":
            referenced.add(ref.snapshot_id)
            continue
        cutoff = now - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else expire_older_than
        minimum = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else min_snapshots
        kept = []
        for ancestor in _ancestors(snapshots, ref.snapshot_id):
            if len(kept) < minimum or ancestor.timestamp_ms >= cutoff:
                kept.append(ancestor.snapshot_id)
            else:
                break
        keep.update(kept)
        referenced.update(a.snapshot_id for a in _ancestors(snapshots, ref.snapshot_id))
    keep.update(s for s, snap in snapshots.items() if s not in referenced and snap.timestamp_ms >= expire_older_than)
    return keep, {name: ref.snapshot_id for name, ref in refs.items()}


def java_deleted_files(table, retained: set[int]) -> set[str]:
    """Paths (relative to the location) ReachableFileCleanup deletes when ``retained`` stay."""
    io, location = table.io, table.location()
    rel = lambda uri: uri[len(location) + 1:]  # noqa: E731
    expired = [s for s in table.metadata.snapshots if s.snapshot_id not in retained]
    kept = [s for s in table.metadata.snapshots if s.snapshot_id in retained]
    lists = {rel(s.manifest_list) for s in expired}
    current = {m.manifest_path: m for s in kept for m in s.manifests(io)}
    to_delete = {m.manifest_path: m for s in expired for m in s.manifests(io) if m.manifest_path not in current}
    live = lambda manifests: {e.data_file.file_path for m in manifests for e in m.fetch_manifest_entry(io, discard_deleted=True)}  # noqa: E731
    files = live(to_delete.values()) - live(current.values()) if to_delete else set()
    return lists | {rel(p) for p in to_delete} | {rel(p) for p in files}


# -- histories --------------------------------------------------------------------------------------


@dataclass
class History:
    env: IcebergEnv
    rng: random.Random
    names: itertools.count = field(default_factory=lambda: itertools.count())
    branches: list[str] = field(default_factory=list)

    def table(self):
        return self.env.table()

    def rows(self) -> pa.Table:
        n = next(self.names)
        parts = self.rng.sample(PARTS, self.rng.choice([1, 1, 2]))  # two parts: a delete of one rewrites the file
        return pa.table({"p": parts, "id": [n * 10 + i for i in range(len(parts))]}, schema=SCHEMA)

    def target(self) -> str:
        return self.rng.choice(["main", "main"] + self.branches)

    def any_snapshot(self) -> int:
        return self.rng.choice(self.table().metadata.snapshots).snapshot_id

    def step(self) -> None:
        kind = self.rng.choices(
            ["append", "overwrite", "delete", "put-back", "tag", "branch", "remove-ref", "rollback"],
            weights=[6, 2, 3, 4, 2, 2, 1, 1],
        )[0]
        table, target = self.table(), self.target()
        part = self.rng.choice(PARTS)
        if kind == "append":
            table.append(self.rows(), branch=target)
        elif kind == "overwrite":
            table.overwrite(self.rows(), overwrite_filter=f"p == '{part}'", branch=target)
        elif kind == "delete":
            table.delete(f"p == '{part}'", branch=target)
        elif kind == "put-back":
            self.put_back(table, target)
        elif kind == "tag":
            age = self.rng.choice([None, None, self.rng.randint(1, 3000)])
            table.manage_snapshots().create_tag(self.any_snapshot(), f"tag{next(self.names)}", max_ref_age_ms=age).commit()
        elif kind == "branch":
            name = f"branch{next(self.names)}"
            table.manage_snapshots().create_branch(self.any_snapshot(), name).commit()
            self.branches.append(name)
            self.table().append(self.rows(), branch=name)
        elif kind == "remove-ref":
            names = [n for n in table.metadata.refs if n != "main"]
            if names:
                name = self.rng.choice(names)
                manage = table.manage_snapshots()
                if table.metadata.refs[name].snapshot_ref_type.value == "branch":
                    manage.remove_branch(name).commit()
                    self.branches.remove(name)
                else:
                    manage.remove_tag(name).commit()
        elif kind == "rollback":
            lineage = list(_ancestors({s.snapshot_id: s for s in table.metadata.snapshots}, table.metadata.current_snapshot_id))
            if len(lineage) > 1:
                table.manage_snapshots().rollback_to_snapshot(self.rng.choice(lineage[1:]).snapshot_id).commit()

    def put_back(self, table, target: str) -> None:
        """add_files of a file the target's head no longer reads (deleted or rewritten before)."""
        io = table.io
        head = table.metadata.refs[target].snapshot_id
        live = {e.data_file.file_path for m in table.metadata.snapshot_by_id(head).manifests(io) for e in m.fetch_manifest_entry(io)}
        ever = {
            e.data_file.file_path for s in table.metadata.snapshots for m in s.manifests(io)
            for e in m.fetch_manifest_entry(io, discard_deleted=False)
        }
        gone = sorted(p for p in ever - live if os.path.exists(p[len("file://"):]))
        if gone:
            table.add_files([self.rng.choice(gone)], branch=target, check_duplicate_files=False)

    def retention_settings(self, now: int) -> None:
        """Retention on refs and the table's history.expire.* properties, in one commit, some exactly at
        the boundary of the ages ``now`` gives."""
        from pyiceberg.table.update import SetPropertiesUpdate, SetSnapshotRefUpdate

        table = self.table()
        metadata, rng = table.metadata, self.rng
        times = sorted(s.timestamp_ms for s in metadata.snapshots)
        age = lambda: now - rng.choice(times) + rng.choice([-1, 0, 0, 1, 50])  # noqa: E731
        updates = []
        for name, ref in metadata.refs.items():
            if rng.random() < 0.5:
                continue
            branch = ref.snapshot_ref_type.value == "branch"
            updates.append(SetSnapshotRefUpdate(
                ref_name=name, type=ref.snapshot_ref_type, snapshot_id=ref.snapshot_id,
                max_ref_age_ms=None if name == "main" or rng.random() < 0.4 else max(1, age()),
                max_snapshot_age_ms=max(1, age()) if branch and rng.random() < 0.5 else None,
                min_snapshots_to_keep=rng.randint(1, 3) if branch and rng.random() < 0.5 else None,
            ))
        properties = {}
        if rng.random() < 0.3:
            properties["history.expire.min-snapshots-to-keep"] = str(rng.randint(1, 3))
        if rng.random() < 0.3:
            properties["history.expire.max-snapshot-age-ms"] = str(max(0, age()))
        if rng.random() < 0.3:
            properties["history.expire.max-ref-age-ms"] = str(max(1, age()))
        if properties:
            updates.append(SetPropertiesUpdate(updates=properties))
        if updates:
            table.catalog.commit_table(table, (), tuple(updates))

    def concurrent_change(self) -> None:
        """What another writer does while the expiry runs."""
        from pyiceberg.table.update import SetPropertiesUpdate, SetSnapshotRefUpdate

        table, rng = self.table(), self.rng
        kind = rng.choice(["our-tag", "pyiceberg-tag", "branch-appended-to", "remove-ref", "retention", "property", "append"])
        if kind == "our-tag":
            Table.open("iceberg://db.orders", catalog=self.env.properties).create_tag(f"late{next(self.names)}", self.any_snapshot())
        elif kind == "pyiceberg-tag":
            table.manage_snapshots().create_tag(self.any_snapshot(), f"late{next(self.names)}").commit()
        elif kind == "branch-appended-to":
            name = f"late{next(self.names)}"
            table.manage_snapshots().create_branch(self.any_snapshot(), name).commit()
            self.table().append(self.rows(), branch=name)
        elif kind == "remove-ref" and len(table.metadata.refs) > 1:
            name = rng.choice([n for n in table.metadata.refs if n != "main"])
            manage = table.manage_snapshots()
            (manage.remove_branch(name) if table.metadata.refs[name].snapshot_ref_type.value == "branch" else manage.remove_tag(name)).commit()
        elif kind == "retention":
            name, ref = rng.choice([(n, r) for n, r in table.metadata.refs.items() if r.snapshot_ref_type.value == "branch"])
            update = SetSnapshotRefUpdate(ref_name=name, type=ref.snapshot_ref_type, snapshot_id=ref.snapshot_id, min_snapshots_to_keep=rng.randint(2, 4))
            table.catalog.commit_table(table, (), (update,))
        elif kind == "property":
            table.catalog.commit_table(table, (), (SetPropertiesUpdate(updates={"history.expire.min-snapshots-to-keep": str(rng.randint(2, 4))}),))
        else:
            table.append(self.rows())


@dataclass
class Expected:
    """What the oracle says of one version of the table, and what pyiceberg read of it before the expiry."""

    retained: set[int]
    refs: dict[str, int]
    deleted: set[str]
    on_disk: set[str]
    reads: dict[int, list]


def _expect(env: IcebergEnv, now: int, older_than, retain_last) -> Expected:
    table = env.table()
    retained, refs = java_retention(table.metadata, now, older_than, retain_last)
    reads = {i: sorted(map(repr, table.scan(snapshot_id=i).to_arrow().to_pylist())) for i in retained}
    return Expected(retained, refs, java_deleted_files(table, retained), files_on_disk(env.location()), reads)


@pytest.mark.parametrize("seed", range(HISTORIES))
def test_random_history_against_javas_rules(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}, str(warehouse))
    env.create()
    history = History(env, rng)
    history.table().append(history.rows())
    for _ in range(rng.randint(5, 11)):
        history.step()
    times = sorted(s.timestamp_ms for s in history.table().metadata.snapshots)
    now = times[-1] + rng.randint(0, 30)
    history.retention_settings(now)
    older_than = rng.choice([None, rng.choice(times) + rng.choice([-1, 0, 1]), now + 1])
    retain_last = rng.choice([None, None, 1, 2, 3])

    expected = {"version": _expect(env, now, older_than, retain_last)}
    where = rng.choice([None, None, "after-the-journal", "inside-the-commit"])

    def change_once():
        if "changed" not in expected:
            expected["changed"] = True
            history.concurrent_change()
            expected["version"] = _expect(env, now, older_than, retain_last)

    ours = Table.open("iceberg://db.orders", catalog=env.properties)
    if where == "after-the-journal":
        ours.storage.on_operation = lambda kind, path: change_once() if kind == "write" and path.startswith("snaptable/plan/") else None
    elif where == "inside-the-commit":
        real_commit = IcebergExpiry._commit
        monkeypatch.setattr(IcebergExpiry, "_commit", lambda self, iceberg, plan: (change_once(), real_commit(self, iceberg, plan))[1])
    ours.expire_snapshots(older_than=older_than, retain_last=retain_last, now=now)
    ours.storage.on_operation = None
    monkeypatch.undo()

    oracle: Expected = expected["version"]
    after = env.table()
    context = f"seed {seed}, change {where if 'changed' in expected else None}"
    assert {s.snapshot_id for s in after.metadata.snapshots} == oracle.retained, context
    assert {n: r.snapshot_id for n, r in after.metadata.refs.items()} == oracle.refs, context
    left = files_on_disk(env.location())
    gone = {p for p in oracle.on_disk - left if not p.endswith(".metadata.json")}
    assert gone == oracle.deleted, (context, sorted(gone ^ oracle.deleted))
    for snapshot_id, read in oracle.reads.items():  # pyiceberg reads every retained snapshot as before
        assert sorted(map(repr, after.scan(snapshot_id=snapshot_id).to_arrow().to_pylist())) == read, (context, snapshot_id)
    for entry in after.metadata.metadata_log:  # the metadata versions the log keeps are there
        assert os.path.exists(entry.metadata_file[len("file://"):]), context
