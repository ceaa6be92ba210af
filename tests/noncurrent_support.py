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
