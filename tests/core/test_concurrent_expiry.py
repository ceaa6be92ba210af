"""Two expiry runs at once: the one overtaken while planning plans again, it never fails.

Found by the ported Paimon ExpireSnapshotsTest#testExpireEmptySnapshot (about 1 run in 4):
run B read the snapshots of its range, run A expired them, and B then failed with
MissingMetadataError on their manifest lists, which reads as corruption.
"""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import MissingMetadataError
from airflow_snaptable.core.native.manifest import manifest_path
from tests.core.test_lifecycle import check_clean, make_table


def _overtaken_at_first_manifest_read(table: Table, overtake) -> None:
    state = {"done": False}

    def hook(kind, path):
        if not state["done"] and kind == "read" and path.startswith("manifest/"):
            state["done"] = True
            table.storage.on_operation = None
            overtake()

    table.storage.on_operation = hook


def test_an_expiry_overtaken_by_another_plans_again_and_finishes(tmp_path):
    history = make_table(str(tmp_path / "t"))
    for _ in range(10):
        history.append(3)
    uri = history.table.uri
    slow = Table.open(uri)
    _overtaken_at_first_manifest_read(slow, lambda: Table.open(uri).expire_snapshots(retain_min=3, time_retained="0 s"))
    result = slow.expire_snapshots(retain_min=1, time_retained="0 s")
    assert [s.id for s in Table.open(uri).snapshots()] == [10]
    assert result.earliest_after == 10
    check_clean(uri, {10: history.model[10]})


def test_missing_metadata_nobody_expired_is_still_an_error(tmp_path):
    """Control: the retry is only for progress made by another run, never for real damage."""
    history = make_table(str(tmp_path / "t"))
    for _ in range(5):
        history.append(3)
    table = Table.open(history.table.uri)
    os.remove(os.path.join(table.uri, manifest_path(table.snapshot(1).base_manifest_list)))
    with pytest.raises(MissingMetadataError):
        Table.open(table.uri).expire_snapshots(retain_min=1, time_retained="0 s")
