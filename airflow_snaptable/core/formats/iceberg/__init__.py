"""Apache Iceberg tables in a pyiceberg catalog: ``iceberg://<namespace>.<table>`` (docs/iceberg.md).

Iceberg's history is a graph of random snapshot ids with per-ref retention, so its lifecycle
(table.py) follows Iceberg's own rules behind the same actions as this package's tables.
"""

from __future__ import annotations

from typing import Any, Callable


def open_iceberg_table(uri: str, catalog: dict[str, Any] | None, clock: Callable[[], int]):
    from airflow_snaptable.core.formats.iceberg.table import IcebergTable

    return IcebergTable(uri, catalog, clock)
