"""
Incremental downstream processing with a consumer.

1. ``wait_for_snapshots`` (deferrable: it waits in the triggerer, not in a worker slot) is done
   once the table has snapshots the consumer has not read; it returns the range
   ``{from_snapshot_id, to_snapshot_id, snapshot_ids, commit_kinds, added_records, ...}``.
2. ``process_changes`` reads exactly those changes (``table.changes(from, to)``; with Spark:
   ``spark.read.format("snaptable").option("incremental-between", "from,to")``).
3. ``advance_consumer`` commits the position (``to_snapshot_id + 1``) only after processing
   succeeded. Until then the consumer protects the unread snapshots from expiry, and a
   failed run is simply retried from the same position.

A consumer that does not exist yet starts before snapshot 1 (the whole history).
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_snaptable.operators import AdvanceConsumerOperator
from airflow_snaptable.sensors import NewSnapshotSensor
from snaptable_example_data import EXAMPLE_TABLE

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
    tags=["snaptable", "example"],
    doc_md=__doc__,
) as dag:
    wait_for_snapshots = NewSnapshotSensor(
        task_id="wait_for_snapshots",
        table="{{ params.table }}",
        consumer_id="{{ params.consumer }}",
        commit_kinds=["APPEND", "OVERWRITE", "DELETE"],  # a compaction changes no rows
        deferrable=True,
        poke_interval=POKE_INTERVAL,
        timeout=6 * 3600,
    )

    @task
    def process_changes(new_snapshots: dict, table_name: str) -> dict:
        from airflow_snaptable.hooks.snaptable import SnapTableHook

        table = SnapTableHook().get_table(table_name)
        changes = table.changes(new_snapshots["from_snapshot_id"], new_snapshots["to_snapshot_id"])
        added, deleted = changes.added_rows(), changes.deleted_rows()
        # A real job writes `added` (and retracts `deleted`) downstream; the demo sums them up.
        summary = {
            "from_snapshot_id": changes.from_snapshot_id,
            "to_snapshot_id": changes.to_snapshot_id,
            "added_rows": added.num_rows,
            "deleted_rows": deleted.num_rows,
            "added_amount": float(sum(added.column("amount").to_pylist())) if added.num_rows else 0.0,
        }
        print(f"processed changes: {summary}")
        return summary

    processed = process_changes(wait_for_snapshots.output, "{{ params.table }}")

    advance_consumer = AdvanceConsumerOperator(
        task_id="advance_consumer",
        table="{{ params.table }}",
        consumer_id="{{ params.consumer }}",
        next_snapshot="{{ ti.xcom_pull(task_ids='wait_for_snapshots')['to_snapshot_id'] + 1 }}",
    )

    processed >> advance_consumer
