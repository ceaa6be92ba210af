"""A sub-range whose candidates exceed the bound, expired as a plan in parts (core/lifecycle/expiry/parts.py).

With tiny bounds (``MAX_DELETED_FILES``: a deleting snapshot's sub-range is planned in parts;
``PART_SIZE``: a few candidates per part) the parted run deletes exactly what one plan deletes,
tags keep what they hold across part boundaries, a crash at every storage operation leaves the
invariants true and a rerun finishes, and a dry run lists what the real run deletes.
"""

from __future__ import annotations

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.lifecycle.expiry import parts as expire_parts
from airflow_snaptable.core.lifecycle import path_hashes
from airflow_snaptable.core.native.manifest import DataFile, FileKind, ManifestEntry
from airflow_snaptable.core.lifecycle.path_hashes import LastAdded, PathHashSet
from airflow_snaptable.core.lifecycle.expiry.parts import candidates_among
from airflow_snaptable.core.lifecycle.deletion_plans import PlanManager
from tests.core.expiry_support import EXPIRE_ARGS, HUGE, appends_then_overwrite, data_files, without_plans
from tests.core.test_lifecycle import check_clean, check_readable, diff, tree
from tests.core.test_lifecycle_crash import _copy, _open, _state, sweep

@pytest.fixture
def parts(monkeypatch, expiry_bounds):
    """Set the deleted-files bound and the part size; record each part a plan records before deleting it."""
    recorded: list[tuple[str, int, int]] = []
    original = PlanManager.record_part

    def recording(self, plan, number, candidates, done=False):
        if not done:
            recorded.append((plan.id, number, len(candidates)))
        return original(self, plan, number, candidates, done)

    monkeypatch.setattr(PlanManager, "record_part", recording)

    def set_bounds(deleted_files: int, part_size: int) -> list[tuple[str, int, int]]:
        expiry_bounds(deleted_files=deleted_files, part_size=part_size)
        recorded.clear()
        return recorded

    return set_bounds


@pytest.mark.parametrize("deleted_files, part_size", [(1, 1), (1, 2), (2, 5)])
def test_parts_delete_exactly_what_one_plan_deletes(tmp_path, rich_template, parts, deleted_files, part_size):
    template, model = rich_template
    whole, parted = _copy(template, str(tmp_path / "whole")), _copy(template, str(tmp_path / "parted"))
    recorded = parts(HUGE, HUGE)
    one = _open(whole).expire_snapshots(**EXPIRE_ARGS)
    assert recorded == []  # one plan with its candidates listed
    recorded = parts(deleted_files, part_size)
    many = _open(parted).expire_snapshots(**EXPIRE_ARGS)
    assert len({plan for plan, _n, _size in recorded}) >= 2, recorded  # several plans in parts
    assert any(number > 0 for _plan, number, _size in recorded), "some plan has several parts"
    assert all(size <= part_size for _plan, _n, size in recorded)

    assert without_plans(tree(parted)) == without_plans(tree(whole))  # the same files deleted, the same kept
    assert _state(parted) == _state(whole)
    for name in ("expired_snapshot_ids", "deleted_data_files", "deleted_manifest_files", "deleted_snapshot_files",
                 "bytes_freed", "protected_data_files", "earliest_before", "earliest_after"):
        assert getattr(many, name) == getattr(one, name), name
    assert many.deleted_data_files > 0 and many.protected_data_files > 0
    check_clean(parted, model)


def test_a_tag_keeps_its_files_across_part_boundaries(tmp_path, parts):
    uri = str(tmp_path / "table")
    history = appends_then_overwrite(uri)  # 1-5 append (one file a partition each), 6 overwrites everything
    history.table.create_tag("mid", 3)
    before = data_files(uri)
    recorded = parts(4, 2)  # snapshot 6 deletes 15 files: planned in parts of 2
    result = _open(uri).expire_snapshots(**EXPIRE_ARGS)
    parted = [(number, size) for _plan, number, size in recorded]
    assert len(parted) >= 3, parted
    assert result.expired_snapshot_ids == list(range(1, 8))
    assert result.protected_data_files == 9  # snapshots 1-3's files: the tag holds them
    assert result.deleted_data_files == 6  # snapshots 4-5's
    assert sum(size for _number, size in parted) == 6
    kept = data_files(uri)
    fresh = check_clean(uri, history.model)  # the tag scans to snapshot 3's rows; nothing leaked
    assert [t.name for t in fresh.tags()] == ["mid"]
    tag_files = {f for f in before if f in set(fresh.store.files.state(fresh.tag("mid").snapshot))}
    assert len(tag_files) == 9 and tag_files <= kept


def test_a_crash_at_every_operation_of_a_parted_expiry_then_a_rerun_finishes(tmp_path, rich_template, parts):
    template, model = rich_template
    recorded = parts(1, 2)
    trace = sweep(
        template, model, str(tmp_path / "work"),
        operation=lambda table: table.expire_snapshots(**EXPIRE_ARGS),
        recover=lambda uri, n: _open(uri).expire_snapshots(**EXPIRE_ARGS),
    )
    assert any(kind == "write" and path.endswith(".part") for kind, path in trace), "the clean run recorded parts"
    assert recorded
    assert len(trace) > 30


def test_dry_run_lists_exactly_what_the_parted_run_deletes(tmp_path, rich_template, parts):
    template, model = rich_template
    recorded = parts(1, 2)
    before = tree(template)
    dry = _open(template).expire_snapshots(dry_run=True, **EXPIRE_ARGS)
    assert tree(template) == before
    assert recorded == []  # a dry run records nothing
    real = _open(template).expire_snapshots(**EXPIRE_ARGS)
    assert recorded
    removed, added, _changed = diff(before, tree(template))
    assert removed == set(dry.data_files) | set(dry.manifest_files) | set(dry.snapshot_files)
    assert added == set()
    for name in ("expired_snapshot_ids", "deleted_data_files", "deleted_manifest_files", "deleted_snapshot_files",
                 "bytes_freed", "protected_data_files", "earliest_after"):
        assert getattr(real, name) == getattr(dry, name), name
    check_clean(template, model)


def test_a_dry_run_after_a_crash_lists_what_the_rerun_deletes(tmp_path, parts):
    uri = str(tmp_path / "table")
    history = appends_then_overwrite(uri)
    parts(4, 2)
    table = _open(uri)
    writes = []

    def crash_after_second_part(kind: str, path: str) -> None:
        if kind == "write" and path.endswith(".part"):
            writes.append(path)
            if len(writes) == 3:
                raise RuntimeError("crash")

    table.storage.on_operation = crash_after_second_part
    with pytest.raises(RuntimeError):
        table.expire_snapshots(**EXPIRE_ARGS)
    before = tree(uri)
    dry = _open(uri).expire_snapshots(dry_run=True, **EXPIRE_ARGS)
    assert dry.recovered_data_files == 15 - 4  # two parts of two were deleted before the crash
    _open(uri).expire_snapshots(**EXPIRE_ARGS)
    removed, _added, _changed = diff(before, tree(uri))
    assert set(dry.data_files) <= removed and set(dry.data_files) == {p for p in removed if p.startswith("data/")}
    check_clean(uri, history.model)


def test_a_file_being_deleted_by_a_plan_in_parts_is_refused_by_commit_files(tmp_path, parts):
    uri = str(tmp_path / "table")
    appends_then_overwrite(uri)
    parts(4, 2)
    table = _open(uri)
    doomed = sorted(p for p in data_files(uri) if "overwrite" not in p)[0]
    seen = []

    def commit_the_doomed_path_again(kind: str, path: str) -> None:
        if kind == "write" and path.endswith(".part") and not seen:
            writer = Table.open(uri)
            with pytest.raises(Exception) as refused:
                writer.commit_files([DataFile(doomed, (0,), 1, 1)])
            seen.append(str(refused.value))

    table.storage.on_operation = commit_the_doomed_path_again
    table.expire_snapshots(**EXPIRE_ARGS)
    assert seen and "already known" in seen[0]


# -- the compact path sets ---------------------------------------------------------------------


def _entry(kind: FileKind, path: str) -> ManifestEntry:
    return ManifestEntry(kind, DataFile(path, (0,), 1, 1))


def test_live_path_set_folds_adds_and_deletes():
    add, delete = FileKind.ADD, FileKind.DELETE
    live = PathHashSet.of_live([
        _entry(add, "a"), _entry(add, "b"), _entry(delete, "a"), _entry(add, "c"), _entry(add, "a"), _entry(delete, "c"),
    ])
    assert "a" in live and "b" in live  # a: deleted and added back
    assert "c" not in live and "never" not in live
    assert len(live) == 2


def test_a_hash_collision_only_keeps(monkeypatch):
    monkeypatch.setattr(path_hashes, "path_hash", lambda path: 7)  # every path collides
    live = PathHashSet.of_live([_entry(FileKind.ADD, "held"), _entry(FileKind.ADD, "gone"), _entry(FileKind.DELETE, "gone")])
    assert "held" in live and "gone" in live  # the dead path answers "held": kept, never the reverse
    assert PathHashSet.of_live([_entry(FileKind.ADD, "x"), _entry(FileKind.DELETE, "x")]).__contains__("x") is False
    last = LastAdded()
    last.add("a", 3)
    last.add("b", 9)
    assert last.seal().get("a") == 9  # the newer add-back answers: the deletion at 3..8 is skipped (kept)


def test_a_parted_expiry_with_every_path_colliding_deletes_nothing_a_tag_holds(tmp_path, parts, monkeypatch):
    uri = str(tmp_path / "table")
    history = appends_then_overwrite(uri)
    history.table.create_tag("mid", 3)
    monkeypatch.setattr(path_hashes, "path_hash", lambda path: 7)
    parts(4, 2)
    result = _open(uri).expire_snapshots(**EXPIRE_ARGS)
    assert result.deleted_data_files == 0  # every deletion looks followed by an add-back: all kept
    fresh = check_readable(uri, history.model)
    assert fresh.verify().missing_files == []


def test_an_unfinished_plan_in_parts_names_what_it_deletes_to_commit_files_and_rollback(tmp_path, parts):
    """commit_files and a keep_history rollback ask each unfinished plan which of their paths it
    deletes (expire_parts.candidates_among): a plan in parts answers from its recorded deltas."""
    uri = str(tmp_path / "table")
    history = appends_then_overwrite(uri)
    history.table.create_tag("mid", 3)
    tag_files = set(history.table.store.files.state(history.table.tag("mid").snapshot))
    parts(4, 2)
    table = _open(uri)
    answers = []

    def ask_the_plan(kind: str, path: str) -> None:
        # Before each part is recorded, and as its metadata goes (after "all parts done").
        if (kind == "write" and path.endswith(".part")) or (kind == "delete" and path.startswith("manifest/")):
            store = Table.open(uri).store
            (plan,) = PlanManager(store).plans()
            if plan.parted is not None:
                answers.append(candidates_among(store, plan, tag_files | {"data/p=0/never.parquet"}))

    table.storage.on_operation = ask_the_plan
    table.expire_snapshots(**EXPIRE_ARGS)
    table.storage.on_operation = None
    assert answers[0] == tag_files  # deleted by the overwrite: candidates (the tag protects them)
    assert answers[-1] == set()  # "all parts done": it deletes no data file any more
    check_clean(uri, history.model)


@pytest.mark.parametrize("small", [0, 65_536])
def test_last_added_answers_the_newest_add_as_arrays_and_as_a_dict(monkeypatch, small):
    monkeypatch.setattr(path_hashes, "_SMALL", small)
    last = LastAdded()
    for snapshot_id, path in [(2, "a"), (5, "b"), (7, "a"), (3, "c")]:
        last.add(path, snapshot_id)
    last.seal()
    assert (last.get("a"), last.get("b"), last.get("c"), last.get("never")) == (7, 5, 3, None)
    assert len(last) == 3
    assert LastAdded().seal().get("a") is None
