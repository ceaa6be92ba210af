"""A tag, a replaced tag or a rollback racing an expiry of its snapshot (issue 22 item 6), deterministically.

Each test pauses one side at a chosen storage operation and runs the other side to completion
there (in another ``Table``, as another process would). The side that loses the race fails with
SnapshotNotFoundError saying the snapshot no longer exists, or backs off and plans again, and
changes nothing; the table stays whole: every snapshot and tag reads its rows, ``verify`` finds
nothing wrong. Before, a rollback whose target an expiry removed after the rollback's check
"succeeded" and left a table without snapshots, and one whose target went before its planning
failed with MissingMetadataError. The same races on Paimon tables: tests/paimon/test_paimon_paths_and_races.py.
"""

from __future__ import annotations

import pytest

from airflow_snaptable.core import SnapshotNotFoundError, Table
from tests.conftest import make_rows, sorted_ids

EXPIRE = dict(retain_min=1, retain_max=1)


def pause_at(table: Table, when, action) -> list:
    """Run ``action`` once, just before the first storage operation of ``table`` for which ``when(kind, path,
    seen)`` holds (``seen``: the operations before it). Returns the list that records the operation it ran at."""
    seen: list = []
    fired: list = []

    def hook(kind: str, path: str) -> None:
        if not fired and when(kind, path, seen):
            fired.append((kind, path))
            action()
        seen.append((kind, path))

    table.storage.on_operation = hook
    return fired


def writes_to(directory: str, nth: int = 1):
    """The ``nth`` write into ``directory`` (``intent/``, ``plan/pending-`` ...), wherever the table keeps it."""
    def when(kind, path, seen):
        return kind == "write" and directory in path and sum(1 for k, p in seen if k == "write" and directory in p) == nth - 1
    return when


def _history(tmp_path) -> tuple[str, dict[int, list[int]]]:
    """Snapshot 1 appends, 2 overwrites everything (1's files are expired with 1), 3 appends."""
    uri = str(tmp_path / "table")
    table = Table.create(uri, make_rows([]).schema, partition_by=["p"])
    table.append(make_rows(range(3)))
    table.overwrite(make_rows(range(3, 6)))
    table.append(make_rows(range(6, 9)))
    return uri, {1: [0, 1, 2], 2: [3, 4, 5], 3: [3, 4, 5, 6, 7, 8]}


def assert_whole(uri: str, model: dict[int, list[int]], tags: dict[str, int]) -> None:
    table = Table.open(uri)
    for snapshot in table.snapshots():
        assert sorted_ids(table.scan(snapshot_id=snapshot.id).to_arrow()) == model[snapshot.id]
    assert {t.name: t.snapshot_id for t in table.tags()} == tags
    for name in tags:
        assert sorted_ids(table.scan(tag=name).to_arrow()) == model[tags[name]]
    report = table.verify()
    assert report.ok, report.to_dict()


def _expire_now(uri: str):
    return lambda: Table.open(uri).expire_snapshots(**EXPIRE)


def test_create_tag_racing_the_expiry_of_its_snapshot(tmp_path):
    uri, model = _history(tmp_path)
    table = Table.open(uri)
    assert pause_at(table, writes_to("intent/"), _expire_now(uri)) is not None
    with pytest.raises(SnapshotNotFoundError, match="snapshot 1 was expired"):
        table.create_tag("audit", 1)
    assert_whole(uri, model, {})


def test_replace_tag_racing_the_expiry_of_its_new_snapshot(tmp_path):
    uri, model = _history(tmp_path)
    table = Table.open(uri)
    table.create_tag("x", 3)
    pause_at(table, writes_to("intent/"), _expire_now(uri))
    with pytest.raises(SnapshotNotFoundError, match="snapshot 1 was expired"):
        table.replace_tag("x", 1)
    assert_whole(uri, model, {"x": 3})


def _target_read(kind, path, seen):
    """The rollback has read its target (snapshot 1) and starts its own work: it lists the plans."""
    return kind == "list" and any(p.endswith("snapshot-1") for _k, p in seen)


@pytest.mark.parametrize("when", [_target_read, writes_to("plan/pending-")], ids=["before-planning", "after-its-fence"])
def test_a_rollback_whose_target_an_expiry_removes_fails_and_changes_nothing(tmp_path, when):
    """Before: "after-its-fence" returned success and left no snapshot at all (the expiry removed 1 and 2,
    the rollback then discarded 3); "before-planning" failed with MissingMetadataError."""
    uri, model = _history(tmp_path)
    table = Table.open(uri)
    fired = pause_at(table, when, _expire_now(uri))
    with pytest.raises(SnapshotNotFoundError, match="snapshot 1 no longer exists"):
        table.rollback_to(1)
    assert fired and Table.open(uri).latest_snapshot().id == 3
    assert_whole(uri, model, {})


def test_an_expiry_meeting_a_rollback_in_flight_to_below_its_fence_backs_off(tmp_path):
    """The rollback passed its check; the expiry that starts then sees its plan and leaves its target alone."""
    uri, model = _history(tmp_path)
    table = Table.open(uri)
    outcome = {}
    pause_at(table, writes_to("plan/plan-"), lambda: outcome.setdefault("expiry", Table.open(uri).expire_snapshots(**EXPIRE)))
    assert table.rollback_to(1).latest_snapshot_id == 1
    assert outcome["expiry"].expired_snapshot_ids == []
    assert [s.id for s in Table.open(uri).snapshots()] == [1]
    assert_whole(uri, model, {})


def test_an_expiry_planned_before_a_rollback_finished_plans_again(tmp_path):
    """Before: the expiry, planned on 1..3, unpublished 1 and 2 after the rollback had discarded 2 and 3: no snapshot was left."""
    uri, model = _history(tmp_path)
    expiry = Table.open(uri)
    pause_at(expiry, writes_to("plan/pending-"), lambda: Table.open(uri).rollback_to(1))
    assert expiry.expire_snapshots(**EXPIRE).expired_snapshot_ids == []
    assert [s.id for s in Table.open(uri).snapshots()] == [1]
    assert_whole(uri, model, {})
