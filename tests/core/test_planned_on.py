"""A deleting run proves, once its plan is published, that the table is still the one it planned on
(core/lifecycle/plan_executor.py ``PlannedOn``; issue 34, item 4).

The interleaving is injected deterministically: a whole undo runs between a deleting run's planning
and the publication of its plan (the Storage ``on_operation`` hook runs it right before the plan's
pending file is written). Then no undo is marked any more, so the old check let the stale plan run:
an expiry planned on the earliest snapshot before the undo brought older ones back unpublished its
range and moved EARLIEST above the restored snapshots, deleting files they read; a tag deletion freed
files the restored snapshots read. Now the run sees the undo generation (or the earliest snapshot)
changed and plans again on the table as it is.
"""

from __future__ import annotations

from typing import Callable

import pytest

from airflow_snaptable.core import Table
from tests.core.test_lifecycle import FAR_FUTURE, check_clean
from tests.core.test_noncurrent import EXPIRE, _noncurrent, rich  # noqa: F401 - fixture


def undo_before_publishing(table: Table, undo: Callable[[], object]) -> list[object]:
    """Runs ``undo`` once, right before ``table`` writes its first plan file (it has planned, nothing is
    published); returns what the undo returned (empty until then)."""
    done: list[object] = []

    def hook(kind: str, rel: str) -> None:
        # The plan's first file (pending; active at once in a tag replacement before issue 34). Paimon: under snaptable/.
        if kind == "write" and ("/plan/pending-" in f"/{rel}" or "/plan/plan-" in f"/{rel}") and not done:
            done.append(undo())

    table.storage.on_operation = hook
    return done


@pytest.mark.parametrize("days", [None, 10])
def test_an_expiry_planned_before_an_undo_plans_again_on_what_the_undo_restored(rich, days):
    table = rich.table
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**{**EXPIRE, "retain_min": 5}))  # expires 1..7
    assert Table.open(table.uri).earliest_snapshot().id == 8
    expiry = Table.open(table.uri)
    undone = undo_before_publishing(expiry, lambda: Table.open(table.uri).undo(run_id))

    def expire():
        return expiry.expire_snapshots(retain_min=2, time_retained="0 s", now=FAR_FUTURE)

    if days is None:
        result = expire()
    else:
        with expiry.retaining_noncurrent(days, "expire-snapshots"):
            result = expire()
    assert undone and undone[0].restored_snapshot_ids == list(range(7, 0, -1)), "the undo did not run inside the expiry"
    # Planned again on the restored history: the restored snapshots expire through a plan that read them.
    assert result.expired_snapshot_ids == list(range(1, 11))
    assert Table.open(table.uri).snapshot_manager.list_ids() == [11, 12]
    check_clean(table.uri, rich.model)


def test_an_undo_in_another_process_between_an_expirys_planning_and_its_plan(rich):
    """The two real processes of the report (``snaptable undo``, then an expiry that had read the earliest
    snapshot before it), the undo process run at the exact point: the fence lives on storage only."""
    import subprocess
    import sys
    from pathlib import Path

    table = rich.table
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**{**EXPIRE, "retain_min": 5}))
    snaptable = str(Path(sys.executable).with_name("snaptable"))
    expiry = Table.open(table.uri)
    undone = undo_before_publishing(
        expiry, lambda: subprocess.run([snaptable, "undo", table.uri, run_id, "--json"], capture_output=True, text=True, timeout=300)
    )
    result = expiry.expire_snapshots(retain_min=2, retain_max=2, time_retained="0 s", now=FAR_FUTURE)
    assert undone and undone[0].returncode == 0, undone
    assert result.expired_snapshot_ids == list(range(1, 11))
    check_clean(table.uri, rich.model)


def test_a_tag_deletion_planned_before_an_undo_plans_again_on_what_the_undo_restored(rich):
    table = rich.table
    table.expire_snapshots(**{**EXPIRE, "retain_min": 7})  # plainly: 1..5 go, the tag t5 holds snapshot 5
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**{**EXPIRE, "retain_min": 5}))  # 6..7
    deleting = Table.open(table.uri)
    undone = undo_before_publishing(deleting, lambda: Table.open(table.uri).undo(run_id))
    deleting.delete_tag("t5")
    assert undone and undone[0].restored_snapshot_ids == [7, 6]
    assert [t.name for t in Table.open(table.uri).tags()] == ["t2", "t10"]
    assert Table.open(table.uri).snapshot_manager.list_ids() == list(range(6, 13))
    check_clean(table.uri, rich.model)


def test_a_tag_replaced_while_an_undo_ran_frees_nothing_the_undo_restored(rich):
    table = rich.table
    table.expire_snapshots(**{**EXPIRE, "retain_min": 7})  # plainly: 1..5 go, the tag t5 holds snapshot 5
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**{**EXPIRE, "retain_min": 5}))  # 6..7
    replacing = Table.open(table.uri)
    undone = undo_before_publishing(replacing, lambda: Table.open(table.uri).undo(run_id))
    replacing.replace_tag("t5", 12)
    assert undone and undone[0].restored_snapshot_ids == [7, 6]
    assert {t.name: t.snapshot_id for t in Table.open(table.uri).tags()} == {"t2": 2, "t5": 12, "t10": 10}
    check_clean(table.uri, rich.model)


# -- Apache Paimon tables, judged by pypaimon ----------------------------------------------------------


def test_on_paimon_an_expiry_planned_before_an_undo_plans_again(paimon, tmp_path):
    from tests.paimon.test_paimon_lifecycle import check
    from tests.paimon.test_paimon_noncurrent import EXPIRE as PAIMON_EXPIRE, _open

    warehouse = paimon.copy(tmp_path / "w")
    table = _open(warehouse, "app")
    with table.retaining_noncurrent(10, "expire-snapshots") as run:
        table.expire_snapshots(**{**PAIMON_EXPIRE, "retain_min": 3})  # 1..3
    expiry = _open(warehouse, "app")
    undone = undo_before_publishing(expiry, lambda: _open(warehouse, "app").undo(run.run_id))
    result = expiry.expire_snapshots(**{**PAIMON_EXPIRE, "retain_min": 2})
    assert undone and undone[0].restored_snapshot_ids == [3, 2, 1]
    assert result.expired_snapshot_ids == [1, 2, 3, 4]
    check(paimon, warehouse, "app", [5, 6], ["t2", "t4"])


def test_on_paimon_a_tag_deletion_planned_before_an_undo_plans_again(paimon, tmp_path):
    from tests.paimon.test_paimon_lifecycle import check
    from tests.paimon.test_paimon_noncurrent import EXPIRE as PAIMON_EXPIRE, _open

    warehouse = paimon.copy(tmp_path / "w")
    _open(warehouse, "app").expire_snapshots(**{**PAIMON_EXPIRE, "retain_min": 4})  # plainly: 1, 2 (t2 holds 2)
    _open(warehouse, "app").delete_tag("t4")  # no other tag holds what 3 and 4 read of 2
    table = _open(warehouse, "app")
    with table.retaining_noncurrent(10, "expire-snapshots") as run:
        table.expire_snapshots(**{**PAIMON_EXPIRE, "retain_min": 2})  # 3, 4
    deleting = _open(warehouse, "app")
    undone = undo_before_publishing(deleting, lambda: _open(warehouse, "app").undo(run.run_id))
    deleting.delete_tag("t2")
    assert undone and undone[0].restored_snapshot_ids == [4, 3]
    check(paimon, warehouse, "app", [3, 4, 5, 6], [])


# -- the runs no plan fences: their deleting mark proves the undo generation -----------------------------


def test_orphan_removal_begun_during_an_undo_that_finishes_before_it_deletes_backs_out(rich, monkeypatch):
    """The undo is past its check of the deleting marks (it runs on a thread, held in its checks) when the
    orphan removal puts its mark up; it finishes after the orphan removal's first listing, before its
    delete. No undo is marked any more then: the orphan removal's reads predate what the undo brought
    back, and the changed undo generation makes it back out."""
    import threading

    from airflow_snaptable.core.errors import UndoInProgressError
    from airflow_snaptable.core.lifecycle.noncurrent import undo as undo_module

    table = rich.table
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**{**EXPIRE, "retain_min": 4}))
    in_checks, go, done = threading.Event(), threading.Event(), threading.Event()
    checked = undo_module.NoncurrentUndo._checked

    def held_in_checks(self, *args, **kwargs):
        in_checks.set()
        assert go.wait(60)
        return checked(self, *args, **kwargs)

    monkeypatch.setattr(undo_module.NoncurrentUndo, "_checked", held_in_checks)
    undone: list[object] = []
    thread = threading.Thread(target=lambda: (undone.append(Table.open(table.uri).undo(run_id)), done.set()))
    thread.start()
    try:
        assert in_checks.wait(60)
        cleaner = Table.open(table.uri)

        def finish_the_undo_at_the_first_listing(kind: str, rel: str) -> None:
            if kind == "list" and rel.startswith("data") and not go.is_set():
                go.set()
                assert done.wait(60)

        cleaner.storage.on_operation = finish_the_undo_at_the_first_listing
        with pytest.raises(UndoInProgressError, match="an undo ran"):
            cleaner.remove_orphan_files(older_than="0 s", dry_run=False, now=FAR_FUTURE)
    finally:
        go.set()
        thread.join(60)
    assert undone and undone[0].restored_snapshot_ids
    check_clean(table.uri, rich.model)
