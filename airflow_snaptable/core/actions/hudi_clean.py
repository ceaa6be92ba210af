"""The actions of Hudi's cleaning policies and savepoints (core/lifecycle/hudi_clean.py), registered in core/actions/maintenance.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from airflow_snaptable.core.actions.contract import Action, allowed, arg, check_duration
from airflow_snaptable.core.actions.noncurrent import noncurrent_days_arg, run_retaining
from airflow_snaptable.core.lifecycle.hudi_clean import POLICIES, check_policy
from airflow_snaptable.core.table import Table


@dataclass(frozen=True, kw_only=True)
class Clean(Action):
    """Run a Hudi cleaning policy: keep the latest commits, the commits of the last hours, or each
    partition's latest file versions (core/lifecycle/hudi_clean.py)."""

    name: ClassVar[str] = "clean"

    policy: str = arg(check=allowed(tuple(POLICIES)), help="KEEP_LATEST_COMMITS, KEEP_LATEST_BY_HOURS or KEEP_LATEST_FILE_VERSIONS.")
    commits_retained: int | None = arg(
        None, minimum=1,
        help="KEEP_LATEST_COMMITS: the newest commits retained, and the state before them (default 10).",
    )
    hours_retained: int | None = arg(
        None, minimum=1,
        help="KEEP_LATEST_BY_HOURS: keep every state of the last this many hours (no commit in them: clean nothing).",
    )
    file_versions_retained: int | None = arg(
        None, minimum=1,
        help="KEEP_LATEST_FILE_VERSIONS: the newest versions kept per live partition (default 3); dropped ones keep none.",
    )
    dry_run: bool = arg(False, help="Plan only: report what would be deleted, delete nothing.")
    retain_min: int | None = arg(
        None, minimum=1,
        help="A floor whatever the policy: always keep at least this many newest snapshots (the lake's clean job "
        "passes a table's own snapshot.num-retained.min).",
    )
    time_retained: str | None = arg(
        None, check=check_duration,
        help="A floor whatever the policy: keep every state of this last duration, e.g. '7 d' (the lake's clean job "
        "passes a table's own snapshot.time-retained).",
    )
    noncurrent_days: int | None = noncurrent_days_arg()

    def __post_init__(self) -> None:
        super().__post_init__()
        check_policy(self.policy, self.commits_retained, self.hours_retained, self.file_versions_retained)

    def run(self, table: Table) -> dict[str, Any]:
        return run_retaining(self, table, lambda arguments: table.clean(**arguments))


@dataclass(frozen=True, kw_only=True)
class CreateSavepoint(Action):
    """Savepoint a snapshot (Hudi): no clean or expiry removes its files until the savepoint is deleted."""

    name: ClassVar[str] = "create-savepoint"

    snapshot_id: int | None = arg(None, minimum=1, positional=True, help="The snapshot (default: the latest).")

    def run(self, table: Table) -> dict[str, Any]:
        return self.result_document(table.create_savepoint(self.snapshot_id))


@dataclass(frozen=True, kw_only=True)
class DeleteSavepoint(Action):
    """Delete a savepoint, and the files only it still held."""

    name: ClassVar[str] = "delete-savepoint"

    snapshot_id: int = arg(minimum=1, positional=True, help="The savepointed snapshot.")

    noncurrent_days: int | None = noncurrent_days_arg()

    def run(self, table: Table) -> dict[str, Any]:
        return run_retaining(self, table, lambda arguments: table.delete_savepoint(self.snapshot_id))


@dataclass(frozen=True, kw_only=True)
class RestoreSavepoint(Action):
    """Restore the table to a savepoint (Hudi's restore): later snapshots and tags are discarded."""

    name: ClassVar[str] = "restore-savepoint"

    snapshot_id: int = arg(minimum=1, positional=True, help="The savepointed snapshot.")
    force: bool = arg(False, help="Restore even if consumers have read past it (they move back).")

    def run(self, table: Table) -> dict[str, Any]:
        return self.result_document(table.restore_savepoint(self.snapshot_id, force=self.force))
