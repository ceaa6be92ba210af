"""Demo data for the snaptable example DAGs (stands in for a real ingestion job).

In production the table is written by Spark (``df.write.format("snaptable")``, see
``airflow_snaptable.spark``) or any core writer; the examples append a few rows with core
so that they run anywhere.
"""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa

#: The examples' table: a name under the snaptable connection's root, or a full URI.
EXAMPLE_TABLE = os.environ.get("SNAPTABLE_EXAMPLE_TABLE", "orders")

SCHEMA = pa.schema([("day", pa.string()), ("order_id", pa.int64()), ("amount", pa.float64())])


def demo_rows(day: str, count: int = 10, first_id: int = 0) -> pa.Table:
    """``count`` orders of ``day`` (``YYYY-MM-DD``)."""
    ids = list(range(first_id, first_id + count))
    return pa.table({"day": [day] * count, "order_id": ids, "amount": [round(i * 1.25, 2) for i in ids]}, schema=SCHEMA)


def ingest_day(table_name: str, day: str, count: int = 10, conn_id: str = "snaptable_default", commit_user: str = "ingest"):
    """Replace ``day``'s partition with demo rows, creating the table if needed.

    The commit identifier is the day (``YYYYMMDD``), so a retried task commits once.
    Returns the new snapshot id.
    """
    from airflow_snaptable.core import Table
    from airflow_snaptable.hooks.snaptable import SnapTableHook

    hook = SnapTableHook(snaptable_conn_id=conn_id)
    uri = hook.table_uri(table_name)
    options = hook.storage_options(uri)
    if not Table.exists(uri, options):
        try:
            Table.create(uri, SCHEMA, partition_by=["day"], storage_options=options)
        except Exception:  # noqa: BLE001 - created concurrently: fine
            if not Table.exists(uri, options):
                raise
    table = Table.open(uri, options)
    identifier = int(dt.date.fromisoformat(day).strftime("%Y%m%d"))
    snapshot = table.overwrite(
        demo_rows(day, count, first_id=(identifier % 10000) * 1000),
        partitions=[{"day": day}],
        commit_user=commit_user,
        commit_identifier=identifier,
    )
    return snapshot.id
