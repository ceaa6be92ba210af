"""Expiry of a long range in sub-ranges (core/lifecycle/expiry/subranges.py), with tiny bounds.

Each sub-range is its own plan (pending -> protection -> active -> execute); together they delete
exactly what one plan over the whole range deletes, a crash anywhere leaves a valid table that a
rerun finishes, a dry run lists what the real run deletes, and a tag created between two sub-ranges
holds its files.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.lifecycle.expiry import run as expire_module
from airflow_snaptable.core.lifecycle.expiry import subranges as expire_subranges
from airflow_snaptable.core.lifecycle.expiry.plan import ExpireRule
from airflow_snaptable.core.lifecycle.expiry.subranges import subrange_end
from tests.core.expiry_support import EXPIRE_ARGS, HUGE, appends_then_overwrite, data_files, without_plans
from tests.core.test_lifecycle import check_clean, diff, tree
from tests.core.test_lifecycle_crash import _copy, _open, _state, sweep

@pytest.fixture
def bounds(monkeypatch, expiry_bounds):
    """Set the sub-range bounds (snapshots, deleted files) and count the sub-ranges planned."""
    planned = []
    original = expire_subranges.subrange_end

    def counting(rule, read, start):
        end = original(rule, read, start)
        if end is not None:
            planned.append((start, end))
        return end

    monkeypatch.setattr(expire_module, "subrange_end", counting)

    def set_bounds(snapshots: int, deleted_files: int) -> list[tuple[int, int]]:
        expiry_bounds(snapshots=snapshots, deleted_files=deleted_files)
        planned.clear()
        return planned

    return set_bounds


@pytest.mark.parametrize("snapshots, deleted_files", [(3, HUGE), (HUGE, 1), (2, 3), (1, HUGE)])
def test_subranges_delete_exactly_what_one_plan_deletes(tmp_path, rich_template, bounds, snapshots, deleted_files):
    template, model = rich_template
    whole, split = _copy(template, str(tmp_path / "whole")), _copy(template, str(tmp_path / "split"))
    planned = bounds(HUGE, HUGE)
    one = _open(whole).expire_snapshots(**EXPIRE_ARGS)
    assert planned == [(1, 12)]
    planned = bounds(snapshots, deleted_files)
    many = _open(split).expire_snapshots(**EXPIRE_ARGS)
    assert len(planned) > 2, planned
    assert planned[0][0] == 1 and planned[-1][1] == 12
    assert all(a[1] == b[0] for a, b in zip(planned, planned[1:])), "sub-ranges are consecutive"
    if snapshots < HUGE:
        assert all(end - start <= snapshots for start, end in planned)

    assert without_plans(tree(split)) == without_plans(tree(whole))  # the same files deleted, the same kept
    assert _state(split) == _state(whole)
    assert many.expired_snapshot_ids == one.expired_snapshot_ids == list(range(1, 12))
    for name in ("deleted_data_files", "deleted_manifest_files", "deleted_snapshot_files", "bytes_freed",
                 "protected_data_files", "earliest_before", "earliest_after"):
        assert getattr(many, name) == getattr(one, name), name
    assert many.deleted_data_files > 0 and many.protected_data_files > 0
    check_clean(split, model)


def test_limit_counts_over_all_subranges(tmp_path, rich_template, bounds):
    template, model = rich_template
    planned = bounds(2, HUGE)
    result = _open(template).expire_snapshots(limit=7, **EXPIRE_ARGS)
    assert result.expired_snapshot_ids == list(range(1, 8))
    assert planned == [(1, 3), (3, 5), (5, 7), (7, 8)]
    check_clean(template, model)


def test_a_crash_at_every_operation_of_a_multi_subrange_expiry_then_a_rerun_finishes(tmp_path, rich_template, bounds):
    template, model = rich_template
    planned = bounds(3, HUGE)
    expected = _state(_copy(template, str(tmp_path / "expected")))
    trace = sweep(
        template, model, str(tmp_path / "work"),
        operation=lambda table: table.expire_snapshots(**EXPIRE_ARGS),
        recover=lambda uri, n: _open(uri).expire_snapshots(**EXPIRE_ARGS),
    )
    assert planned[:4] == [(1, 4), (4, 7), (7, 10), (10, 12)]  # the clean run's sub-ranges
    assert len(trace) > 20
    assert expected[1]  # tags t2, t5, t10 are kept through every crash (sweep compares the final state)


def test_dry_run_lists_exactly_what_the_real_multi_subrange_run_deletes(tmp_path, rich_template, bounds):
    template, model = rich_template
    planned = bounds(3, HUGE)
    before = tree(template)
    dry = _open(template).expire_snapshots(dry_run=True, **EXPIRE_ARGS)
    assert tree(template) == before
    assert len(planned) == 4
    assert dry.expired_snapshot_ids == list(range(1, 12))
    real = _open(template).expire_snapshots(**EXPIRE_ARGS)
    removed, added, _changed = diff(before, tree(template))
    assert removed == set(dry.data_files) | set(dry.manifest_files) | set(dry.snapshot_files)
    assert added == set()
    assert real.expired_snapshot_ids == dry.expired_snapshot_ids
    for name in ("deleted_data_files", "deleted_manifest_files", "deleted_snapshot_files", "bytes_freed",
                 "protected_data_files", "earliest_after"):
        assert getattr(real, name) == getattr(dry, name), name
    check_clean(template, model)


def test_a_tag_created_between_subranges_keeps_its_files(tmp_path, bounds):
    template = str(tmp_path / "template")
    model = appends_then_overwrite(template).model
    kept = {}
    for tag_between in (False, True):
        uri = _copy(template, str(tmp_path / f"run-{tag_between}"))
        planned = bounds(3, HUGE)
        table = _open(uri)
        created = []

        def tag_after_first_subrange(kind: str, path: str, tag_between=tag_between, created=created, uri=uri) -> None:
            # The first sub-range [1, 4) removes its finished plan: only then is the tag on 5 created.
            if tag_between and not created and kind == "delete" and path.startswith("plan/plan-"):
                created.append(Table.open(uri).create_tag("late", 5))

        table.storage.on_operation = tag_after_first_subrange
        result = table.expire_snapshots(**EXPIRE_ARGS)
        table.storage.on_operation = None
        assert planned == [(1, 4), (4, 7), (7, 8)]
        assert result.expired_snapshot_ids == list(range(1, 8))
        assert bool(created) == tag_between
        fresh = check_clean(uri, model)  # the tag scans to snapshot 5's rows; nothing leaked
        assert [t.name for t in fresh.tags()] == (["late"] if tag_between else [])
        kept[tag_between] = data_files(uri)
    # Without the tag the overwrite freed snapshot 5's files; with it they stay.
    assert kept[False] < kept[True]
    assert len(kept[True] - kept[False]) == 5 * 3  # five appends, one file per partition each


def test_a_consumer_created_between_subranges_stops_the_next_one_below_it(tmp_path, rich_template, bounds):
    template, model = rich_template
    planned = bounds(3, HUGE)
    table = _open(template)
    created = []

    def consumer_after_first_subrange(kind: str, path: str) -> None:
        if not created and kind == "delete" and path.startswith("plan/plan-"):
            created.append(Table.open(template).update_consumer("late", 9))

    table.storage.on_operation = consumer_after_first_subrange
    result = table.expire_snapshots(**EXPIRE_ARGS)
    table.storage.on_operation = None
    assert created
    # [7, 10) would expire 8, the consumer's last read snapshot: it is planned again as [7, 8).
    assert planned == [(1, 4), (4, 7), (7, 10), (7, 8)]
    assert result.expired_snapshot_ids == list(range(1, 8))
    assert result.earliest_after == 8
    check_clean(template, model)


class _Snapshots:
    """A read for subrange_end: snapshot ``i`` with the given ``deleted_files`` record (None: no record)."""

    def __init__(self, deleted: dict[int, int | None]):
        self.deleted = deleted
        self.read: list[int] = []
        self.cache: set[int] = set()
        self.loaded: list[tuple[int, int]] = []  # read-ahead ranges (SnapshotCache.load)

    def load(self, first: int, last: int) -> None:
        self.loaded.append((first, last))
        self.cache.update(range(first, last + 1))

    def get(self, snapshot_id: int):
        self.read.append(snapshot_id)
        record = self.deleted.get(snapshot_id, 0)
        return SimpleNamespace(time_millis=0, summary=None if record is None else {"deleted_files": record})


def test_subrange_ends_at_the_bounds_and_counts_a_snapshot_without_a_record_by_the_snapshot_bound(bounds):
    bounds(4, 10)
    rule = ExpireRule(earliest=1, lowest=1, end_bound=20, threshold_millis=0)
    assert subrange_end(rule, _Snapshots({}), 1) == 5  # four snapshots
    assert subrange_end(rule, _Snapshots({3: 6, 4: 5}), 1) == 3  # [1, 3) reads deltas 2-3 (6 files); 4 would pass 10
    assert subrange_end(rule, _Snapshots({2: 50}), 1) == 2  # always at least one snapshot
    assert subrange_end(rule, _Snapshots({2: None, 3: None, 4: None, 5: None}), 1) == 5  # unknown (Paimon): the snapshot bound
    assert subrange_end(rule, _Snapshots({3: None, 4: 11}), 1) == 3  # an unknown one does not end it; 4 would pass 10
    assert subrange_end(rule, _Snapshots({}), 18) == 20  # the range ends first
    assert subrange_end(rule, _Snapshots({}), 20) is None
    late = _Snapshots({})
    assert subrange_end(ExpireRule(1, 1, 20, threshold_millis=-1), late, 1) is None  # the time rule keeps 1
    assert late.read == [2]
    assert late.loaded == [(2, 2)]  # nothing read past the first young successor
    long = _Snapshots({})
    bounds(2500, 10**9)
    assert subrange_end(ExpireRule(1, 1, 3000, threshold_millis=0), long, 1) == 2501
    # Read ahead in growing bulk reads of at most 1,000, never past the sub-range and the snapshot after it.
    assert long.loaded[0][0] == 2 and long.loaded[-1][1] == 2502
    assert all(a[1] + 1 == b[0] for a, b in zip(long.loaded, long.loaded[1:]))
    assert max(last - first + 1 for first, last in long.loaded) <= 1000 and len(long.loaded) < 30
