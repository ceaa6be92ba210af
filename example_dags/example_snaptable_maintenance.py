"""
Daily maintenance of a snapshot table.

1. ``tag_day``: tag the state at the end of the day (``as_of`` the data interval's end, so a
   late or backfilled run still tags the state at the period boundary); the tag keeps that
   state readable after its snapshots expire, for ``tag_ttl``.
2. ``expire_snapshots``: expire old snapshots (tags and consumers protect what they hold).
3. ``expire_tags``: delete tags whose time to live has passed.
4. ``remove_orphan_files``: delete files nothing references (left behind by crashed writers).

The table is a name under the snaptable connection's root, or a full URI::

    AIRFLOW_CONN_SNAPTABLE_DEFAULT='{"conn_type": "snaptable", "extra": {"root": "s3://bucket/warehouse"}}'

``runner="local"`` runs each action in the task's process; ``runner="spark"`` runs it with
``spark-submit`` (see example_snaptable_spark.py).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, CronDataIntervalTimetable, Param

from airflow_snaptable.operators import (
    SnapTableCreateTagOperator,
    SnapTableExpireTagsOperator,
    SnapTableRemoveOrphanFilesOperator,
    SnapTableExpireSnapshotsOperator,
)
from snaptable_example_data import EXAMPLE_TABLE

with DAG(
    dag_id="snaptable_daily_maintenance",
    # One run per day, after the day ended: data_interval_end is the day's boundary.
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "table": Param(EXAMPLE_TABLE, type="string", description="table name under the connection root, or URI"),
        "retain_max": Param(100, type="integer", minimum=1, description="keep at most this many snapshots"),
        "time_retained": Param("3 d", type="string", description="keep snapshots younger than this"),
        "tag_ttl": Param("30 d", type="string", description="time to live of the daily tags"),
    },
    tags=["snaptable", "example"],
    doc_md=__doc__,
) as dag:
    tag_day = SnapTableCreateTagOperator(
        task_id="tag_day",
        table="{{ params.table }}",
        # The day whose end state is tagged (equals {{ ds }} in scheduled runs, also right in manual ones).
        tag_name="{{ data_interval_start | ds }}",
        as_of="{{ data_interval_end }}",
        time_retained="{{ params.tag_ttl }}",
        if_exists="skip",  # a re-run or retry keeps the tag made the first time
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
        task_id="remove_orphan_files",
        table="{{ params.table }}",
        older_than="1 d",  # never touch files a running writer may still commit
        dry_run=False,
    )

    tag_day >> expire_snapshots >> expire_tags >> remove_orphan_files
