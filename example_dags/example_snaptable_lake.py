"""
Maintain a whole lake by policy: every table under a location, one mapped task per table.

``lake_maintenance_group`` lists the tables of ``SNAPTABLE_EXAMPLE_LAKE`` (a path under the
snaptable connection's root, or a full URI: this package's tables and Paimon warehouses side by
side; ``iceberg://`` with the connection's extra ``catalog``) when the DAG runs, then maintains
each by the policy below, at most ``SNAPTABLE_EXAMPLE_LAKE_PARALLEL`` at a time. Each table's
jobs and their status (``Successful``, ``Failed``, ``Disabled``, ``Not_Yet_Run``) are stored with
it (``snaptable status LOCATION`` shows them) and each table maintained gets an asset event.
With ``SNAPTABLE_EXAMPLE_LAKE_RUNNER=spark`` one spark-submit (the ``spark_default`` connection)
maintains every table in one Spark application instead of one task per table.
The policy, its precedence and the status: docs/maintenance.md.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG

from airflow_snaptable.operators.lake import lake_maintenance_group

LAKE = os.environ.get("SNAPTABLE_EXAMPLE_LAKE", "lake")
#: Every table keeps its 2 newest snapshots and everything younger than a day; the ops namespace keeps 4;
#: sales.returns is never expired; consumers and tags whose time ran out go; orphans older than 3 days too.
POLICY = {
    "defaults": {
        "snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 24},
        "consumer-expiry": {},
        "tag-expiry": {},
        "orphan-file-removal": {"older-than-days": 3},
    },
    "namespaces": {"ops": {"snapshot-expiry": {"min-snapshots-to-keep": 4}}},
    "tables": {"sales.returns": {"snapshot-expiry": {"enabled": False}}},
}
if os.environ.get("SNAPTABLE_EXAMPLE_LAKE_AGE_HOURS"):
    POLICY["defaults"]["snapshot-expiry"]["max-snapshot-age-hours"] = float(os.environ["SNAPTABLE_EXAMPLE_LAKE_AGE_HOURS"])

with DAG(
    dag_id="snaptable_lake_maintenance",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["snaptable", "example"],
    doc_md=__doc__,
) as dag:
    lake_maintenance_group(
        location=LAKE,
        policy=POLICY,
        max_active_tis_per_dagrun=int(os.environ.get("SNAPTABLE_EXAMPLE_LAKE_PARALLEL", "4")),
        # "spark": one spark-submit maintains the whole lake (one Spark application, not one per table).
        runner=os.environ.get("SNAPTABLE_EXAMPLE_LAKE_RUNNER", "local"),
    )
