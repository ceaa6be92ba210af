"""
The whole snapshot lifecycle of one table, in the providers' system-test style.

The DAG is self-contained: ``create_table`` (a setup task) makes a fresh table with a few
days of data under the connection's root (or a temporary directory when the connection has
no root), every operator of the provider then runs on it, and ``delete_table`` (the
teardown) removes it whatever happened. ``airflow dags test snaptable_lifecycle`` runs it
end to end; CI does exactly that (tests/airflow/test_example_dags.py).

The ``[START howto_...]`` / ``[END howto_...]`` markers delimit what docs/airflow.md shows
for each operator.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

from airflow_snaptable.operators import (
    SnapTableAdvanceConsumerOperator,
    SnapTableCleanOperator,
    SnapTableCompactOperator,
    SnapTableCreateSavepointOperator,
    SnapTableCreateTagOperator,
    SnapTableDeleteTagOperator,
    SnapTableExpireConsumersOperator,
    SnapTableExpireSnapshotsOperator,
    SnapTableExpireTagsOperator,
    SnapTablePeriodicTagOperator,
    SnapTableDeleteSavepointOperator,
    SnapTableRemoveOrphanFilesOperator,
    SnapTableRenameTagOperator,
    SnapTableRollbackOperator,
)
from airflow_snaptable.sensors import SnapTableNewSnapshotSensor

DAG_ID = "snaptable_lifecycle"
TABLE = "{{ ti.xcom_pull(task_ids='create_table') }}"

with DAG(
    dag_id=DAG_ID,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["snaptable", "example", "system"],
    doc_md=__doc__,
) as dag:

    @task
    def create_table() -> str:
        """A fresh table with three days of orders (three snapshots); returns its URI."""
        import tempfile
        import uuid

        from airflow_snaptable.hooks.snaptable import SnapTableHook

        from snaptable_example_data import ingest_day

        hook = SnapTableHook()
        name = f"lifecycle_{uuid.uuid4().hex[:12]}"
        root = hook.root or tempfile.mkdtemp(prefix="snaptable-lifecycle-")
        uri = f"{root.rstrip('/')}/{name}"
        for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
            ingest_day(uri, day, conn_id=hook.snaptable_conn_id)
        return uri

    @task(trigger_rule="all_done")
    def delete_table(uri: str) -> None:
        """Remove the table and everything under it."""
        from airflow_snaptable.core.io.storage import Storage
        from airflow_snaptable.hooks.snaptable import SnapTableHook

        storage = Storage.from_uri(uri, SnapTableHook().storage_options(uri))
        storage.fs.rm(storage.root, recursive=True)

    table_uri = create_table()

    # [START howto_sensor_snaptable_new_snapshot]
    wait_for_new_snapshots = SnapTableNewSnapshotSensor(
        task_id="wait_for_new_snapshots", table=TABLE, consumer_id="reporting", poke_interval=1, timeout=60
    )
    # [END howto_sensor_snaptable_new_snapshot]

    # [START howto_operator_snaptable_advance_consumer]
    advance_consumer = SnapTableAdvanceConsumerOperator(
        task_id="advance_consumer",
        table=TABLE,
        consumer_id="reporting",
        next_snapshot="{{ ti.xcom_pull(task_ids='wait_for_new_snapshots')['to_snapshot_id'] + 1 }}",
    )
    # [END howto_operator_snaptable_advance_consumer]

    # [START howto_operator_snaptable_create_tag]
    create_tag = SnapTableCreateTagOperator(
        task_id="create_tag", table=TABLE, tag_name="first_day", snapshot_id=1, time_retained="30 d", if_exists="skip"
    )
    # [END howto_operator_snaptable_create_tag]

    # [START howto_operator_snaptable_periodic_tag]
    periodic_tags = SnapTablePeriodicTagOperator(task_id="periodic_tags", table=TABLE, period="daily", num_retained_max=5)
    # [END howto_operator_snaptable_periodic_tag]

    # [START howto_operator_snaptable_compact]
    compact = SnapTableCompactOperator(task_id="compact", table=TABLE, min_file_num=2)
    # [END howto_operator_snaptable_compact]

    # [START howto_operator_snaptable_expire_snapshots]
    expire_snapshots = SnapTableExpireSnapshotsOperator(
        task_id="expire_snapshots", table=TABLE, retain_min=1, retain_max=2, time_retained="0 s"
    )
    # [END howto_operator_snaptable_expire_snapshots]

    # [START howto_operator_snaptable_create_savepoint]
    create_savepoint = SnapTableCreateSavepointOperator(task_id="create_savepoint", table=TABLE, snapshot_id=2)
    # [END howto_operator_snaptable_create_savepoint]

    # [START howto_operator_snaptable_clean]
    clean = SnapTableCleanOperator(task_id="clean", table=TABLE, policy="KEEP_LATEST_COMMITS", commits_retained=2)
    # [END howto_operator_snaptable_clean]

    # [START howto_operator_snaptable_delete_savepoint]
    delete_savepoint = SnapTableDeleteSavepointOperator(task_id="delete_savepoint", table=TABLE, snapshot_id=2)
    # [END howto_operator_snaptable_delete_savepoint]

    # [START howto_operator_snaptable_rename_tag]
    rename_tag = SnapTableRenameTagOperator(task_id="rename_tag", table=TABLE, tag_name="first_day", new_name="day_one")
    # [END howto_operator_snaptable_rename_tag]

    # [START howto_operator_snaptable_rollback]
    rollback = SnapTableRollbackOperator(task_id="rollback_to_tag", table=TABLE, tag="day_one", force=True)
    # [END howto_operator_snaptable_rollback]

    # [START howto_operator_snaptable_delete_tag]
    delete_tag = SnapTableDeleteTagOperator(task_id="delete_tag", table=TABLE, tag_name="day_one")
    # [END howto_operator_snaptable_delete_tag]

    # [START howto_operator_snaptable_expire_tags]
    expire_tags = SnapTableExpireTagsOperator(task_id="expire_tags", table=TABLE)
    # [END howto_operator_snaptable_expire_tags]

    # [START howto_operator_snaptable_expire_consumers]
    expire_consumers = SnapTableExpireConsumersOperator(task_id="expire_consumers", table=TABLE)
    # [END howto_operator_snaptable_expire_consumers]

    # [START howto_operator_snaptable_remove_orphan_files]
    remove_orphan_files = SnapTableRemoveOrphanFilesOperator(
        task_id="remove_orphan_files", table=TABLE, older_than="1 d", dry_run=False
    )
    # [END howto_operator_snaptable_remove_orphan_files]

    teardown = delete_table(table_uri).as_teardown(setups=table_uri)

    (
        table_uri
        >> wait_for_new_snapshots
        >> advance_consumer
        >> create_tag
        >> create_savepoint
        >> periodic_tags
        >> compact
        >> expire_snapshots
        >> clean
        >> delete_savepoint
        >> rename_tag
        >> rollback
        >> delete_tag
        >> expire_tags
        >> expire_consumers
        >> remove_orphan_files
        >> teardown
    )
