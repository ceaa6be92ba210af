"""The data-expiry action (core/lifecycle/data_expiry.py), registered in core/actions/maintenance.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from airflow_snaptable.core.actions.contract import Action, arg, check_duration, check_time
from airflow_snaptable.core.lifecycle.data_expiry import check_column
from airflow_snaptable.core.table import Table


def _column(value: Any, name: str) -> None:
    check_column(value)


@dataclass(frozen=True, kw_only=True)
class ExpireData(Action):
    """Delete the rows (whole files and partitions where all are old) whose time column is older
    than a retention, in one commit: Paimon's partition.expiration-time, Amoro's data-expire."""

    name: ClassVar[str] = "expire-data"

    column: str = arg(check=_column, help="The timestamp or date column that dates a row (a partition column drops whole partitions).")
    retention: str = arg(check=check_duration, help="How long rows are kept, e.g. '30 d': older ones go (a null time stays).")
    dry_run: bool = arg(False, help="Plan only: report the rows and files that would go, change nothing.")
    now: str | int | None = arg(None, check=check_time, internal=True, help="The time the action runs at (default: the table's clock), for tests and replays.")

    def run(self, table: Table) -> dict[str, Any]:
        return self.result_document(table.expire_data(**self.arguments()).to_dict())
