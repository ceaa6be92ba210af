"""Helpers shared by the tests (and benchmarks/noncurrent_expiry.py) of recoverable deletes (issue 26)."""

from __future__ import annotations

import os
from typing import Any, Callable

from airflow_snaptable.core import Table


def maybe_retained(table: Table, days: int | None, call: Callable[[], Any]) -> Any:
    """``call``, inside a run with a retention of ``days`` when given (None: a plain, deleting call)."""
    if days is None:
        return call()
    with table.retaining_noncurrent(days, "race"):
        return call()


def data_and_manifest_files(uri: str) -> set[str]:
    """The paths, relative to the table, of its files under ``data`` and ``manifest``: what a run with a
    retention must not delete and what a purge deletes."""
    out = set()
    for directory, _dirs, names in os.walk(uri):
        for name in names:
            rel = os.path.relpath(os.path.join(directory, name), uri)
            if rel.startswith(("data", "manifest")):
                out.add(rel)
    return out


def refusals_inside_undo(monkeypatch, owner: type, step: str, call: Callable[[], Any]) -> list[BaseException]:
    """Runs ``call`` right after the undo's ``owner.step`` (what it brings back is written, the undo not
    finished, its mark up) each time the step runs; returns the ``UndoInProgressError`` each such call
    backed out with (a call that went through adds nothing)."""
    from airflow_snaptable.core.errors import UndoInProgressError

    refused: list[BaseException] = []
    original = getattr(owner, step)

    def step_then_call(self, *args, **kwargs):
        done = original(self, *args, **kwargs)
        try:
            call()
        except UndoInProgressError as exc:
            refused.append(exc)
        return done

    monkeypatch.setattr(owner, step, step_then_call)
    return refused
