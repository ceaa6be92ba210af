"""Undo fenced against a concurrent deleting run (core/lifecycle/noncurrent/undo.py, plan_executor.py).

The interleavings are injected deterministically: a deleting run starts while an undo is between its
mark and its apply, and an undo starts while an expiry's plan is pending. Either way one of the two
backs out, deletes nothing, and every published snapshot stays readable.
"""

from __future__ import annotations

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import UndoInProgressError, UndoInvariantError
from airflow_snaptable.core.lifecycle.noncurrent import undo as undo_module
from airflow_snaptable.core.lifecycle import plan_executor
from tests.conftest import sorted_ids
from tests.core.test_noncurrent import EXPIRE, _noncurrent, rich  # noqa: F401 - fixture
from tests.core.test_lifecycle import FAR_FUTURE


def _all_readable(uri: str) -> dict[int, list[int]]:
    fresh = Table.open(uri)
    return {s.id: sorted_ids(fresh.scan(snapshot_id=s.id).to_arrow()) for s in fresh.snapshots()}


def test_an_expiry_starting_during_an_undo_backs_out(rich, monkeypatch):
    table = rich.table
    before = _all_readable(table.uri)
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**{**EXPIRE, "retain_min": 4}))
    raced: list[BaseException] = []
    checked = undo_module.NoncurrentUndo._checked

    def expiry_meanwhile(self, *args, **kwargs):
        try:
            Table.open(table.uri).expire_snapshots(retain_min=1, time_retained="0 s", now=FAR_FUTURE)
        except UndoInProgressError as exc:
            raced.append(exc)
        return checked(self, *args, **kwargs)

    monkeypatch.setattr(undo_module.NoncurrentUndo, "_checked", expiry_meanwhile)
    result = Table.open(table.uri).undo(run_id)
    assert raced, "the expiry started while the undo was marked and did not back out"
    assert sorted(result.restored_snapshot_ids) == sorted(set(before))[:-4]
    assert _all_readable(table.uri) == before


def test_an_undo_starting_while_an_expiry_plan_is_pending_refuses(rich, monkeypatch):
    table = rich.table
    before = _all_readable(table.uri)
    run_id = _noncurrent(table, 10, lambda: table.expire_snapshots(**{**EXPIRE, "retain_min": 4}))
    after_first = _all_readable(table.uri)
    refused: list[BaseException] = []
    read = plan_executor.ProtectionReader.read

    def undo_meanwhile(self, plan):
        if not refused:
            try:
                Table.open(table.uri).undo(run_id)
            except UndoInvariantError as exc:
                refused.append(exc)
        return read(self, plan)

    monkeypatch.setattr(plan_executor.ProtectionReader, "read", undo_meanwhile)
    Table.open(table.uri).expire_snapshots(retain_min=1, time_retained="0 s", now=FAR_FUTURE)
    monkeypatch.undo()
    assert refused, "undo ran while an expiry's plan was pending"
    # The expiry went through; every snapshot it left is readable, and no restored one was lost.
    after = _all_readable(table.uri)
    assert after and all(after[i] == after_first[i] for i in after)
