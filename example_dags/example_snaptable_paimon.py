"""
Daily maintenance of an Apache Paimon table that other engines write (Flink, Spark, pypaimon).

Point any snaptable operator at a Paimon table directory (``<warehouse>/<db>.db/<table>``,
local or ``s3://``): it is recognised by its files and runs the lifecycle Paimon's Java
maintenance would, without a JVM, leaving the same files (docs/paimon.md):

1. ``wait_for_commits``: the table has snapshots after the last one this DAG saw;
2. ``tag_day``: tag the day's end state (Paimon's own tag file, readable by every Paimon client);
3. ``expire_snapshots``: expire old snapshots, deleting the data files, manifests and manifest
   lists only they used (tags and Paimon consumer files protect what they hold);
4. ``expire_tags``: delete tags past their time to live;
5. ``remove_orphan_files``: delete files nothing references, older than a day.

Run Paimon's writers with snapshot expiry off (``write-only``), so that one engine decides
what is deleted.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, CronDataIntervalTimetable, Param

from airflow_snaptable.operators import (
    SnapTableCreateTagOperator,
    SnapTableExpireSnapshotsOperator,
    SnapTableExpireTagsOperator,
    SnapTableRemoveOrphanFilesOperator,
)
from airflow_snaptable.sensors import SnapTableNewSnapshotSensor

#: The Paimon table: a full path or URI of its directory (or a name under the connection's root).
PAIMON_TABLE = os.environ.get("SNAPTABLE_PAIMON_TABLE", "/data/paimon/db.db/orders")

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
        task_id="wait_for_commits", table="{{ params.table }}", after_snapshot_id=0, poke_interval=5, timeout=600
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

    wait_for_commits >> tag_day >> expire_snapshots >> expire_tags >> remove_orphan_files
