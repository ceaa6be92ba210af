"""Fixtures of the expiry tests (helpers: expiry_support.py)."""

from __future__ import annotations

import pytest

from airflow_snaptable.core.lifecycle.expiry import parts as expire_parts
from airflow_snaptable.core.lifecycle.expiry import subranges as expire_subranges
from tests.core.test_lifecycle import build_rich_history, make_table


@pytest.fixture
def rich_template(tmp_path):
    """Appends, partition and whole-table overwrites, a delete, a compaction, tags t2/t5/t10; 12 snapshots."""
    uri = str(tmp_path / "template")
    history = make_table(uri, **{"manifest.merge-min-count": "2"})
    build_rich_history(history)
    return uri, history.model


@pytest.fixture
def expiry_bounds(monkeypatch):
    """Set expiry's bounds small for one test: a sub-range's snapshots and deleted files, and the
    candidates per part of a parted plan (each left as it is when not given)."""

    def set_bounds(*, snapshots: int | None = None, deleted_files: int | None = None, part_size: int | None = None) -> None:
        for module, name, value in (
            (expire_subranges, "MAX_SNAPSHOTS", snapshots),
            (expire_subranges, "MAX_DELETED_FILES", deleted_files),
            (expire_parts, "PART_SIZE", part_size),
        ):
            if value is not None:
                monkeypatch.setattr(module, name, value)

    return set_bounds
