"""
Incremental downstream processing with a consumer.

1. ``wait_for_snapshots`` (deferrable: it waits in the triggerer, not in a worker slot) is done
   once the table has snapshots the consumer has not read; it returns the range
   ``{from_snapshot_id, to_snapshot_id, snapshot_ids, commit_kinds, added_records, ...}``.
2. ``process_changes`` reads exactly those changes with Spark (``spark_jobs/read_order_changes.py``:
   ``spark.read.format("snaptable").option("incremental-between", "from,to")``; in Python:
   ``table.changes(from, to)``).
3. ``advance_consumer`` commits the position (``to_snapshot_id + 1``) only after processing
   succeeded. Until then the consumer protects the unread snapshots from expiry, and a
   failed run is simply retried from the same position.

A consumer that does not exist yet starts before snapshot 1 (the whole history).
"""

from __future__ import annotations

import os

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param

from airflow_snaptable.operators import SnapTableAdvanceConsumerOperator
from airflow_snaptable.sensors import SnapTableNewSnapshotSensor
from snaptable_example_data import EXAMPLE_TABLE, READ_CHANGES_JOB, SPARK_CONF

POKE_INTERVAL = float(os.environ.get("SNAPTABLE_EXAMPLE_POKE_INTERVAL", "60"))

with DAG(
    dag_id="snaptable_incremental",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,  # one reader per consumer at a time
    params={
        "table": Param(EXAMPLE_TABLE, type="string"),
        "consumer": Param("orders_downstream", type="string"),
    },
    tags=["snaptable", "example", "spark"],
    doc_md=__doc__,
) as dag:
    wait_for_snapshots = SnapTableNewSnapshotSensor(
        task_id="wait_for_snapshots",
        table="{{ params.table }}",
        consumer_id="{{ params.consumer }}",
        commit_kinds=["APPEND", "OVERWRITE", "DELETE"],  # a compaction changes no rows
        deferrable=True,
        poke_interval=POKE_INTERVAL,
        timeout=6 * 3600,
    )

    # A real job writes the added rows downstream; this one sums them up.
    process_changes = SparkSubmitOperator(
        task_id="process_changes",
        application=READ_CHANGES_JOB,
        name="read-order-changes",
        conf=SPARK_CONF,
        application_args=[
            "--table",
            "{{ ti.xcom_pull(task_ids='wait_for_snapshots')['table'] }}",
            "--between",
            "{{ ti.xcom_pull(task_ids='wait_for_snapshots')['from_snapshot_id'] }},"
            "{{ ti.xcom_pull(task_ids='wait_for_snapshots')['to_snapshot_id'] }}",
        ],
    )

    advance_consumer = SnapTableAdvanceConsumerOperator(
        task_id="advance_consumer",
        table="{{ params.table }}",
        consumer_id="{{ params.consumer }}",
        next_snapshot="{{ ti.xcom_pull(task_ids='wait_for_snapshots')['to_snapshot_id'] + 1 }}",
    )

    wait_for_snapshots >> process_changes >> advance_consumer
