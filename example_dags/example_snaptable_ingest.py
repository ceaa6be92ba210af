"""
Ingestion with Spark: write days of orders through the ``snaptable`` data source.

``ingest`` submits ``spark_jobs/ingest_orders.py`` with ``SparkSubmitOperator``: one commit
per day, each a dynamic overwrite of that day's partition (a re-run replaces the day), with
the day as commit identifier (a retried job applies each day once). The first write creates
the table, partitioned by day.

By default a run ingests its own day (``{{ ds }}``); trigger with ``{"days": ["2026-01-10",
"2026-01-11"]}`` to load several days in one Spark job. The table is a name under the
snaptable connection's root (or a URI); the ``snaptable_uri`` macro turns it into the URI the
job writes to.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from snaptable_example_data import EXAMPLE_TABLE, MACROS, spark_ingest

with DAG(
    dag_id="snaptable_spark_ingest",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "table": Param(EXAMPLE_TABLE, type="string", description="table name under the connection root, or URI"),
        "days": Param([], type="array", description="days (YYYY-MM-DD) to ingest; empty: the run's day"),
        "rows": Param(10, type="integer", minimum=1, description="orders per day"),
    },
    user_defined_macros=MACROS,
    tags=["snaptable", "example", "spark"],
    doc_md=__doc__,
) as dag:
    ingest = spark_ingest(
        task_id="ingest",
        table="{{ snaptable_uri(params.table) }}",
        days="{{ params.days | join(',') if params.days else ds }}",
        rows="{{ params.rows }}",
    )
