"""Shared pieces of the snaptable example DAGs: the table, the Spark jobs, demo rows.

The examples write the table with Spark: ``spark_jobs/ingest_orders.py`` writes through the
``snaptable`` data source (``df.write.format("snaptable")``) and ``spark_jobs/read_order_changes.py``
reads a snapshot range incrementally; the DAGs submit them with ``SparkSubmitOperator``
(Spark connection ``spark_default``, e.g. ``{"conn_type": "spark", "host": "local[2]"}``).
``ingest_day`` writes the same rows with core, for tests that need no Spark.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pyarrow as pa

#: The examples' table: a name under the snaptable connection's root, or a full URI.
EXAMPLE_TABLE = os.environ.get("SNAPTABLE_EXAMPLE_TABLE", "orders")

#: The Spark applications the examples submit (listed in .airflowignore: they are no DAG files).
SPARK_JOBS = Path(__file__).resolve().parent / "spark_jobs"
INGEST_JOB = str(SPARK_JOBS / "ingest_orders.py")
READ_CHANGES_JOB = str(SPARK_JOBS / "read_order_changes.py")
#: Spark conf for the examples' short jobs: no UI, and a JVM that starts fast (C1 JIT, serial GC).
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}

SCHEMA = pa.schema([("day", pa.string()), ("order_id", pa.int64()), ("amount", pa.float64())])


def demo_rows(day: str, count: int = 10, first_id: int = 0) -> pa.Table:
    """``count`` orders of ``day`` (``YYYY-MM-DD``)."""
    ids = list(range(first_id, first_id + count))
    return pa.table({"day": [day] * count, "order_id": ids, "amount": [round(5 + (i % 100) * 1.25, 2) for i in ids]}, schema=SCHEMA)


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


def table_uri(table: str, conn_id: str = "snaptable_default") -> str:
    """The full URI of ``table`` (a name under the snaptable connection's root, or a URI).

    Spark jobs take URIs; the DAGs expose this as the macro ``snaptable_uri``.
    """
    from airflow_snaptable.hooks.snaptable import SnapTableHook

    return SnapTableHook(snaptable_conn_id=conn_id).table_uri(table)


#: ``user_defined_macros`` of the examples: ``{{ snaptable_uri(params.table) }}``.
MACROS: dict[str, Any] = {"snaptable_uri": table_uri}


def spark_ingest(task_id: str, table: str, days: str, rows: Any = 10, **kwargs: Any):
    """A ``SparkSubmitOperator`` running ``spark_jobs/ingest_orders.py`` (one commit per day).

    ``table`` (the table's URI, e.g. ``"{{ snaptable_uri(params.table) }}"``), ``days``
    (comma-separated) and ``rows`` may be templates.
    """
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(
        task_id=task_id,
        application=INGEST_JOB,
        name="ingest-orders",
        conf=SPARK_CONF,
        application_args=["--table", table, "--days", days, "--rows", str(rows)],
        **kwargs,
    )
