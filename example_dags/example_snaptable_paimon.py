"""
Daily maintenance of an Apache Paimon table that other engines write (Flink, Spark, pypaimon).

Point any snaptable operator at a Paimon table directory (``<warehouse>/<db>.db/<table>``,
local or ``s3://``): it is recognised by its files and runs the lifecycle Paimon's Java
maintenance would, without a JVM, leaving the same files (docs/paimon.md):

1. ``wait_for_commits``: the table has snapshots this DAG has not seen: those after its consumer's
   position (a Paimon consumer file, ``consumer/consumer-snaptable-maintenance``);
2. ``tag_day``: tag the day's end state (Paimon's own tag file, readable by every Paimon client);
3. ``expire_snapshots``: expire old snapshots, deleting the data files, manifests and manifest
   lists only they used (tags and Paimon consumer files protect what they hold);
4. ``expire_tags``: delete tags past their time to live;
5. ``remove_orphan_files``: delete files nothing references, older than a day;
6. ``advance_consumer``: the range is done: the next run waits for snapshots after it.

The sensor waits on a consumer, never on a fixed ``after_snapshot_id``: a fixed id is a
position in a history that expiry shortens (a real table has long lost snapshot 1, and this
DAG's own expiry removes what the next run would start from: ``SnapshotNotFoundError``), and
every run would find the same snapshots again. The consumer moves with the DAG and protects
from expiry only what the DAG has not seen yet. On a table whose first snapshots have expired,
start the consumer once where the DAG should begin (``snaptable consumer update DIR
snaptable-maintenance N``); the sensor's error says so.

Run Paimon's writers with snapshot expiry off (``write-only``), so that one engine decides
what is deleted.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, CronDataIntervalTimetable, Param

from airflow_snaptable.operators import (
    SnapTableAdvanceConsumerOperator,
    SnapTableCreateTagOperator,
    SnapTableExpireSnapshotsOperator,
    SnapTableExpireTagsOperator,
    SnapTableRemoveOrphanFilesOperator,
)
from airflow_snaptable.sensors import SnapTableNewSnapshotSensor

#: The Paimon table: a full path or URI of its directory (or a name under the connection's root).
PAIMON_TABLE = os.environ.get("SNAPTABLE_PAIMON_TABLE", "/data/paimon/db.db/orders")
#: This DAG's position in the table's history (a Paimon consumer: Flink readers' consumers sit beside it).
CONSUMER = "snaptable-maintenance"

with DAG(
    dag_id="snaptable_paimon_maintenance",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "table": Param(PAIMON_TABLE, type="string", description="the Paimon table directory"),
        "retain_max": Param(50, type="integer", minimum=1, description="keep at most this many snapshots"),
        "time_retained": Param("1 d", type="string", description="keep snapshots younger than this"),
    },
    tags=["snaptable", "example", "paimon"],
    doc_md=__doc__,
) as dag:
    wait_for_commits = SnapTableNewSnapshotSensor(
        task_id="wait_for_commits", table="{{ params.table }}", consumer_id=CONSUMER, poke_interval=5, timeout=600
    )
    tag_day = SnapTableCreateTagOperator(
        task_id="tag_day",
        table="{{ params.table }}",
        tag_name="{{ data_interval_start | ds }}",
        time_retained="30 d",
        if_exists="skip",
    )
    expire_snapshots = SnapTableExpireSnapshotsOperator(
        task_id="expire_snapshots",
        table="{{ params.table }}",
        retain_min=1,
        retain_max="{{ params.retain_max }}",
        time_retained="{{ params.time_retained }}",
    )
    expire_tags = SnapTableExpireTagsOperator(task_id="expire_tags", table="{{ params.table }}")
    remove_orphan_files = SnapTableRemoveOrphanFilesOperator(
        task_id="remove_orphan_files", table="{{ params.table }}", older_than="1 d", dry_run=False
    )

    advance_consumer = SnapTableAdvanceConsumerOperator(
        task_id="advance_consumer",
        table="{{ params.table }}",
        consumer_id=CONSUMER,
        next_snapshot="{{ ti.xcom_pull(task_ids='wait_for_commits')['to_snapshot_id'] + 1 }}",
    )

    wait_for_commits >> tag_day >> expire_snapshots >> expire_tags >> remove_orphan_files >> advance_consumer
