"""
Event-driven processing: an AssetWatcher runs the DAG when new snapshots land.

``SnapTableSnapshotEventTrigger`` polls the table in the triggerer (O(1) storage reads per poll when
nothing is new) and emits one asset event per new snapshot range; its position lives in the
asset's state store, so a triggerer restart continues where it stopped. Each event's
``extra["payload"]`` is the range ``{from_snapshot_id, to_snapshot_id, snapshot_ids,
commit_kinds, added_records, deleted_records}``.

The DAG itself reads from its consumer's position, not from the event payloads: events that
arrive while a run is going, or an event repeated after a triggerer crash, are then harmless.
Watchers only run for unpaused DAGs. The table is fixed when the DAG is parsed (trigger
arguments are stored with the asset).
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_snaptable.operators import SnapTableAdvanceConsumerOperator
from airflow_snaptable.sensors import SnapTableNewSnapshotSensor
from airflow_snaptable.triggers import SnapTableSnapshotEventTrigger
from snaptable_example_data import EXAMPLE_TABLE

POKE_INTERVAL = float(os.environ.get("SNAPTABLE_EXAMPLE_POKE_INTERVAL", "30"))
CONSUMER = "orders_event_driven"

orders_snapshots = Asset(
    name="snaptable_orders_snapshots",
    watchers=[
        AssetWatcher(
            name="snaptable_orders_watcher",
            trigger=SnapTableSnapshotEventTrigger(
                table=EXAMPLE_TABLE,
                commit_kinds=["APPEND", "OVERWRITE", "DELETE"],
                poke_interval=POKE_INTERVAL,
            ),
        )
    ],
)

with DAG(
    dag_id="snaptable_event_driven",
    schedule=[orders_snapshots],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["snaptable", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def log_events(triggering_asset_events=None) -> list:
        """The ranges the watcher reported (empty when run by hand)."""
        ranges = []
        for event in (triggering_asset_events or {}).get(orders_snapshots, []):
            payload = (event.extra or {}).get("payload") or {}
            ranges.append([payload.get("from_snapshot_id"), payload.get("to_snapshot_id")])
        print(f"snapshot ranges reported: {ranges}")
        return ranges

    new_snapshots = SnapTableNewSnapshotSensor(
        task_id="new_snapshots",
        table=EXAMPLE_TABLE,
        consumer_id=CONSUMER,
        poke_interval=5,
        timeout=60,
        soft_fail=True,  # a repeated event finds nothing new: skip the rest of the run
    )

    @task
    def process(new: dict) -> dict:
        from airflow_snaptable.hooks.snaptable import SnapTableHook

        changes = SnapTableHook().get_table(EXAMPLE_TABLE).changes(new["from_snapshot_id"], new["to_snapshot_id"])
        rows = changes.added_rows()
        print(f"snapshots {new['snapshot_ids']}: {rows.num_rows} new rows")
        return {"to_snapshot_id": new["to_snapshot_id"], "rows": rows.num_rows}

    advance = SnapTableAdvanceConsumerOperator(
        task_id="advance_consumer",
        table=EXAMPLE_TABLE,
        consumer_id=CONSUMER,
        next_snapshot="{{ ti.xcom_pull(task_ids='new_snapshots')['to_snapshot_id'] + 1 }}",
    )

    log_events() >> new_snapshots
    process(new_snapshots.output) >> advance
