"""Which tables of a lake have a job to do now: a lake DAG maps tasks only onto those (core/lake/triggers.py).

A table is due when it has no enabled job (the run records their ``Disabled`` status), when one of its enabled jobs has no ``trigger`` (it runs on every run), or a
triggered job is due by its stored status and the table's lineage since the job's mark (core/lineage.py:
never by id arithmetic or clocks; a re-created table's marks are not its own). Reading that costs the
table's status file, its latest snapshot id and the mark's snapshot (for ``small-files``, the new
snapshots' file counts), never its history. A table whose status or metadata cannot be read is due: the run reports why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from airflow_snaptable.core.lake.discovery import LakeTable
from airflow_snaptable.core.lake.policy import JOBS, Policy, ResolvedJob
from airflow_snaptable.core.lake.status import StatusLocator
from airflow_snaptable.core.lake.triggers import Due, TableProgress


@dataclass(frozen=True)
class TableDue:
    table: LakeTable
    due: bool
    #: job -> why it is due or not (only the jobs that would run).
    reasons: dict[str, str]
    #: job -> its count against its trigger (empty unless every enabled job has a trigger).
    counted: dict[str, Due] = field(default_factory=dict)


def table_due(table: LakeTable, policy: Policy, *, storage_options: dict[str, Any] | None = None,
              catalog: dict[str, Any] | None = None, locator: StatusLocator | None = None) -> TableDue:
    """Whether ``table`` has a job to do now under ``policy`` (see the module)."""
    from airflow_snaptable.core.table import Table

    where = locator or StatusLocator(storage_options, catalog)
    return jobs_due(table, policy.resolve(table.name),
                    read_status=lambda: where.for_table(table).read() or {"jobs": {}},
                    open_table=lambda: Table.open(table.uri, storage_options, catalog=catalog))


def jobs_due(table: LakeTable, resolved: dict[str, ResolvedJob], *, read_status: Callable[[], dict],
             open_table: Callable[[], Any]) -> TableDue:
    """Whether ``table`` has a job to do now, given its jobs ``resolved`` from the policy: the one rule the
    DAG's list task and a run (core/lake/run.py, before it takes the table's lease) decide by. The status
    and the table are read only when every enabled job has a trigger."""
    if table.problem is not None:  # discovery's refusal: the run reports it failed
        return TableDue(table, True, {"*": table.problem})
    jobs = {name: job for name, job in resolved.items() if job.enabled and table.format in JOBS[name].formats}
    if not jobs:  # the run still records each job's Disabled status: only a trigger makes a table wait
        return TableDue(table, True, {"*": "no job enabled: the run records them Disabled"})
    untriggered = [name for name, job in jobs.items() if job.trigger is None]
    if untriggered:
        return TableDue(table, True, {name: "no trigger: runs on every run" for name in untriggered})
    try:
        stored = read_status()
        progress = TableProgress(open_table())
        found = {name: progress.due(job.trigger, _record(stored, name)) for name, job in jobs.items()}
    except Exception as exc:  # noqa: BLE001 - the run reports the table's problem; the list must not hide it
        return TableDue(table, True, {"*": f"cannot tell ({type(exc).__name__}: {exc}): maintained to report it"})
    return TableDue(table, any(d.due for d in found.values()), {name: d.reason for name, d in found.items()}, found)


def due_tables(tables: Iterable[LakeTable], policy: Policy, *, storage_options: dict[str, Any] | None = None,
               catalog: dict[str, Any] | None = None) -> list[TableDue]:
    """:func:`table_due` of each table, in order."""
    locator = StatusLocator(storage_options, catalog)
    return [table_due(t, policy, storage_options=storage_options, catalog=catalog, locator=locator) for t in tables]


def _record(doc: dict, job: str) -> dict | None:
    record = (doc.get("jobs") or {}).get(job)
    return record if isinstance(record, dict) else None
