"""An Iceberg expiry planned before a whole undo does not remove or delete what the undo restored (issue 34,
item 4; our and Paimon's tables: tests/core/test_planned_on.py), judged by pyiceberg.

The undo runs right before the expiry writes its plan (the Storage ``on_operation`` hook): no undo is marked
any more when the expiry reads the marks. The expiry's catalog commit holds only on the metadata it planned
on (core/formats/iceberg/requirements.py) and the undo's commit changed it: the expiry plans again on the
restored history, and every snapshot and ref left reads as before, with exactly the files they reach left.
"""

from __future__ import annotations

import pytest

from tests.iceberg.conftest import assert_exactly_reachable_left, read_everything
from tests.iceberg.undo_support import FAR, expired_history
from tests.iceberg.undo_support import open_orders as _open


@pytest.mark.parametrize("days", [None, 10])
def test_an_expiry_planned_before_an_undo_plans_again_on_what_it_restored(iceberg_env, days):
    expired = expired_history(iceberg_env, retain_min=2)
    expiry = _open(iceberg_env)
    undone: list = []

    def undo_before_the_plan(kind: str, rel: str) -> None:
        if kind == "write" and "/plan/expire-" in f"/{rel}" and not undone:
            undone.append(_open(iceberg_env).undo(expired.run_id))

    expiry.storage.on_operation = undo_before_the_plan
    if days is None:
        expiry.expire_snapshots(retain_min=1, older_than=FAR)
    else:
        with expiry.retaining_noncurrent(days, "expire"):
            expiry.expire_snapshots(retain_min=1, older_than=FAR)
    assert undone and undone[0].restored_snapshot_ids, "the undo did not run inside the expiry"
    after = read_everything(expired.table)
    assert after["snapshots"], after
    for snapshot_id, read in after["snapshots"].items():
        assert read == expired.before["snapshots"][snapshot_id], f"snapshot {snapshot_id}"
    assert set(after["refs"]) == set(expired.before["refs"])
    if days is None:
        assert_exactly_reachable_left(expired.table, iceberg_env.location())
