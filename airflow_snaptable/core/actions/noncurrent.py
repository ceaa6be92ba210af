"""Recoverable deletes as actions (core/lifecycle/noncurrent/): the ``noncurrent_days`` argument every
deleting action takes, and the undo, purge and trash actions. Registered in core/actions/maintenance.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from airflow_snaptable.core.actions.contract import Action, arg, check_time
from airflow_snaptable.core.errors import UnsupportedOperationError
from airflow_snaptable.core.lifecycle.noncurrent.journal import check_noncurrent_days
from airflow_snaptable.core.lifecycle.noncurrent.undo import check_run_id
from airflow_snaptable.core.table import Table

NONCURRENT_DAYS_HELP = (
    "Delete no file: record what the run removes (snapshots, tags, consumers, the files only they held) under "
    "the run_id in the result, undoable with 'snaptable undo' for this many days, then deleted by 'snaptable purge' "
    "(0: at the next purge). Default: the table option noncurrent-days; unset: delete at once."
)


def noncurrent_days_arg() -> Any:
    return arg(None, minimum=0, check=check_noncurrent_days, help=NONCURRENT_DAYS_HELP)


def run_retaining(action: Action, table: Table, call: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """Run ``call(arguments)`` (the action's arguments without ``noncurrent_days``) inside the table's
    noncurrent run, and put the run's id in the result (``run_id``: None when the run removed nothing)."""
    arguments = action.arguments()
    days = arguments.pop("noncurrent_days")
    retaining = getattr(table, "retaining_noncurrent", None)
    if retaining is None:
        if days is not None:
            raise UnsupportedOperationError(f"noncurrent_days is not supported on {table!r} yet")
        return action.result_document(call(arguments))
    with retaining(days, action.name) as run:
        result = call(arguments)
    run_id = None
    if run is not None and table.noncurrent_journal().entry_names(run.run_id):
        run_id = run.run_id
    document = action.result_document(result)
    if isinstance(document["result"], dict):
        document["result"]["run_id"] = run_id
    document["run_id"] = run_id  # also beside a result that is a list (deleted tags' paths)
    return document


@dataclass(frozen=True, kw_only=True)
class Undo(Action):
    """Bring back what a run with noncurrent_days removed: its snapshots (same rows), tags and consumers."""

    name: ClassVar[str] = "undo"

    run_id: str = arg(check=lambda value, name: check_run_id(value), positional=True, help="The run_id a deleting run printed.")
    abandon: bool = arg(
        False,
        help="Do not undo: abandon an interrupted undo of the run. Its mark goes, the table is left as the undo left it "
        "(all it brought back stays), the run stays in the trash: purged when due, or undone by a later undo.",
    )

    def run(self, table: Table) -> dict[str, Any]:
        if self.abandon:
            abandon = getattr(table, "abandon_undo", None)
            if abandon is None:
                raise UnsupportedOperationError(f"abandoning an undo is not supported on {table!r}")
            return self.result_document(abandon(self.run_id))
        return self.result_document(table.undo(self.run_id))


@dataclass(frozen=True, kw_only=True)
class Purge(Action):
    """Delete the noncurrent files whose retention has passed (never one the live metadata references)."""

    name: ClassVar[str] = "purge"

    now: str | int | None = arg(
        None, check=check_time, internal=True,
        help="Judge retention at this time; a time after the real clock counts as the real clock.",
    )

    def run(self, table: Table) -> dict[str, Any]:
        return self.result_document(table.purge(now=self.now))


@dataclass(frozen=True, kw_only=True)
class Trash(Action):
    """List the runs whose removals are noncurrent: when, what, files and bytes held, when purge is due."""

    name: ClassVar[str] = "trash"

    def run(self, table: Table) -> dict[str, Any]:
        return self.result_document(table.trash())
