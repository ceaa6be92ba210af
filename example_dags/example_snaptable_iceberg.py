"""
Daily maintenance of an Apache Iceberg table in any pyiceberg catalog (SQL, REST, Glue, Hive).

pyiceberg's own ``expire_snapshots()`` only rewrites metadata and it has no orphan-file removal;
these operators run Iceberg's rules (``RemoveSnapshots``, ``DeleteOrphanFiles``) without a JVM and
delete the files no retained snapshot or ref reaches (docs/iceberg.md):

1. ``tag_day``: tag the day's end state (an Iceberg tag ref, kept 30 days by its max-ref-age);
2. ``expire_snapshots``: expire the snapshots committed before the interval's end, beyond the
   newest ``retain_min`` (Iceberg's ``retainLast``) and what tags and branches hold; commit through
   the catalog, then delete the manifest lists, manifests, data and delete files, statistics files
   and old metadata files nothing reaches any more;
3. ``expire_tags``: delete tags past their time to live;
4. ``remove_orphan_files``: delete files under the table location that no metadata version
   references and that are older than three days (Iceberg's default safety window).

The table is ``iceberg://<namespace>.<table>``; the catalog's properties (as pyiceberg's
``load_catalog`` takes them) are the connection's extra ``catalog``, e.g.
``AIRFLOW_CONN_SNAPTABLE_ICEBERG='{"conn_type": "snaptable", "extra": {"catalog":
{"type": "sql", "uri": "sqlite:////data/catalog.db", "warehouse": "file:///data/warehouse"}}}'``.
Secret-looking properties (credentials, tokens) are masked in logs.
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

#: The Iceberg table, and the connection holding its catalog's properties.
ICEBERG_TABLE = os.environ.get("SNAPTABLE_ICEBERG_TABLE", "iceberg://db.orders")
ICEBERG_CONN_ID = os.environ.get("SNAPTABLE_ICEBERG_CONN_ID", "snaptable_iceberg")

with DAG(
    dag_id="snaptable_iceberg_maintenance",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "table": Param(ICEBERG_TABLE, type="string", description="iceberg://<namespace>.<table>"),
        "retain_min": Param(5, type="integer", minimum=1, description="always keep this many newest snapshots (Iceberg: retain_last)"),
    },
    tags=["snaptable", "example", "iceberg"],
    doc_md=__doc__,
) as dag:
    tag_day = SnapTableCreateTagOperator(
        task_id="tag_day",
        table="{{ params.table }}",
        snaptable_conn_id=ICEBERG_CONN_ID,
        tag_name="day-{{ data_interval_start | ds }}",
        time_retained="30 d",
        if_exists="skip",
    )
    expire_snapshots = SnapTableExpireSnapshotsOperator(
        task_id="expire_snapshots",
        table="{{ params.table }}",
        snaptable_conn_id=ICEBERG_CONN_ID,
        older_than="{{ data_interval_end.isoformat() }}",
        retain_min="{{ params.retain_min }}",
    )
    expire_tags = SnapTableExpireTagsOperator(
        task_id="expire_tags", table="{{ params.table }}", snaptable_conn_id=ICEBERG_CONN_ID
    )
    remove_orphan_files = SnapTableRemoveOrphanFilesOperator(
        task_id="remove_orphan_files",
        table="{{ params.table }}",
        snaptable_conn_id=ICEBERG_CONN_ID,
        older_than="3 d",
        dry_run=False,
    )

    tag_day >> expire_snapshots >> expire_tags >> remove_orphan_files
