"""Recoverable deletes from Airflow (issue 26): a deleting task's XCom carries its ``run_id``, and a later
task undoes that run from the template ``{{ ti.xcom_pull(...)['run_id'] }}`` (here: the value rendered)."""

from __future__ import annotations

import os

from airflow_snaptable import operators as ops
from airflow_snaptable.core import Table
from tests.airflow.test_operators import orders, root, run  # noqa: F401 - fixtures


def _files(uri: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), uri) for d, _s, names in os.walk(uri) for n in names if "data" in d or "manifest" in d}


def test_the_xcom_of_a_deleting_task_carries_the_run_id_the_undo_task_takes(orders):  # noqa: F811
    before = _files(orders.uri)
    expire = ops.SnapTableExpireSnapshotsOperator(task_id="expire", table=orders.uri, retain_min=1, time_retained="0 s", noncurrent_days="{{ params.days }}")
    pushed = run(expire, params={"days": 10})
    assert pushed["run_id"] and pushed["result"]["run_id"] == pushed["run_id"]
    assert _files(orders.uri) == before and [s.id for s in Table.open(orders.uri).snapshots()] == [6]
    undo = ops.SnapTableUndoOperator(task_id="undo", table=orders.uri, run_id="{{ params.expire_xcom['run_id'] }}")
    undone = run(undo, params={"expire_xcom": pushed})
    assert sorted(undone["result"]["restored_snapshot_ids"]) == [1, 2, 3, 4, 5]
    assert [s.id for s in Table.open(orders.uri).snapshots()] == [1, 2, 3, 4, 5, 6]
    purged = run(ops.SnapTablePurgeOperator(task_id="purge", table=orders.uri))
    assert purged["result"]["deleted_files"] == 0


def test_the_undo_and_purge_operators_document_every_parameter():
    from tests.airflow.test_operators import test_docstrings_name_every_parameter_and_templated_field as documented

    for cls in (ops.SnapTableUndoOperator, ops.SnapTablePurgeOperator):
        documented(cls)
        assert cls.__name__.startswith("SnapTable") and cls.__name__.endswith("Operator")


def test_the_undo_operator_abandons_an_interrupted_undo(orders):  # noqa: F811
    from airflow_snaptable.core.lifecycle.noncurrent.journal import UNDO_PREFIX, NoncurrentJournal

    table = Table.open(orders.uri)
    with table.retaining_noncurrent(10, "expire-snapshots") as retained:
        table.expire_snapshots(retain_min=1, time_retained="0 s")
    journal = NoncurrentJournal(table.storage)
    journal.mark(UNDO_PREFIX, retained.run_id)  # an undo killed before it wrote anything
    abandon = ops.SnapTableUndoOperator(task_id="abandon", table=orders.uri, run_id=retained.run_id, abandon=True)
    assert run(abandon)["result"]["abandoned"] is True
    assert not journal.marked(UNDO_PREFIX, retained.run_id)
    assert [s.run_id for s in Table.open(orders.uri).trash()] == [retained.run_id], "the run stays recorded"
