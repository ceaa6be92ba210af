"""Apache Iceberg tables in a pyiceberg catalog through the store seam: see docs/format.md."""

from __future__ import annotations

from typing import Any, Callable

from airflow_snaptable.core.errors import UnsupportedOperationError
from airflow_snaptable.core.store import FormatTable


def open_iceberg_table(uri: str, catalog: dict[str, Any] | None, clock: Callable[[], int]) -> FormatTable:
    raise UnsupportedOperationError(f"{uri}: Apache Iceberg tables are not supported yet")
