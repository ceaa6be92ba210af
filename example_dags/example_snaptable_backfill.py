"""
Backfill: roll the table back to a tag, then re-ingest the days after it.

Use when data after a known-good state was wrong (a bad upstream extract, a buggy job):

1. ``rollback_to_tag`` makes the tag's state the table's latest state. The snapshots and tags
   after it are discarded together with the files only they used. Consumers that already read
   past the tag make the rollback refuse, unless ``force`` is set (they must re-read).
2. ``reingest`` writes the corrected days again with the Spark ingestion job
   (``spark_jobs/ingest_orders.py``, one commit per day, as in ``snaptable_spark_ingest``).
3. ``tag_backfill`` tags the repaired state.

Trigger with ``{"tag": "2026-01-10", "days": ["2026-01-11", "2026-01-12"]}``.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from airflow_snaptable.operators import SnapTableCreateTagOperator, SnapTableRollbackOperator
from snaptable_example_data import EXAMPLE_TABLE, MACROS, spark_ingest

with DAG(
    dag_id="snaptable_backfill_from_tag",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={
        "table": Param(EXAMPLE_TABLE, type="string"),
        "tag": Param("", type="string", description="the known-good tag to roll back to"),
        "days": Param([], type="array", description="days (YYYY-MM-DD) to ingest again"),
        "force": Param(False, type="boolean", description="roll back even if consumers read past the tag"),
    },
    user_defined_macros=MACROS,
    tags=["snaptable", "example", "spark"],
    doc_md=__doc__,
) as dag:
    rollback_to_tag = SnapTableRollbackOperator(
        task_id="rollback_to_tag",
        table="{{ params.table }}",
        tag="{{ params.tag }}",
        force="{{ params.force }}",
    )

    reingest = spark_ingest(
        task_id="reingest",
        table="{{ snaptable_uri(params.table) }}",
        days="{{ params.days | join(',') }}",
    )

    tag_backfill = SnapTableCreateTagOperator(
        task_id="tag_backfill",
        table="{{ params.table }}",
        tag_name="backfill-{{ ts_nodash }}",
    )

    rollback_to_tag >> reingest >> tag_backfill
