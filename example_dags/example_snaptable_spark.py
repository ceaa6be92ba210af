"""
Maintenance through Spark: the same actions, run by ``spark-submit`` with the packaged job.

``runner="spark"`` writes the action (JSON) to a private temp file, submits
``airflow_snaptable.spark.job_path()`` through the Spark provider's ``SparkSubmitHook``
(client mode) and reads the result JSON back: the XCom is the same as with ``runner="local"``.
Runs of at least ``spark.snaptable.delete.parallelThreshold`` deletes (default 10,000) go to
the executors; smaller ones stay on the driver, where core deletes on 16 threads (on one
machine that is faster: see docs/benchmarks.md, "spark_delete").

Credentials: the snaptable connection's storage options (S3 key/secret from login/password)
reach the job in a private file (mode 0600, read once by the job and deleted) that the
``SNAPTABLE_SECRETS_FILE`` environment variable of the spark-submit process names, never on
the command line (SparkSubmitHook logs the command, ``--conf`` values included); a
``spark_conf`` key that looks secret is handed over the same way and masked (docs/airflow.md,
"Secrets"). Spark connection: its host is the master, e.g.
``AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'`` (a missing Spark
connection is refused: SparkSubmitHook would silently submit to YARN).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from airflow_snaptable.operators import SnapTableRemoveOrphanFilesOperator, SnapTableExpireSnapshotsOperator
from snaptable_example_data import EXAMPLE_TABLE

SPARK = {
    "runner": "spark",
    "spark_conn_id": "spark_default",
    "spark_conf": {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    },
    "spark_submit_kwargs": {"driver_memory": "1g"},
}

with DAG(
    dag_id="snaptable_spark_maintenance",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "table": Param(EXAMPLE_TABLE, type="string"),
        "retain_max": Param(100, type="integer", minimum=1),
    },
    tags=["snaptable", "example", "spark"],
    doc_md=__doc__,
) as dag:
    expire_snapshots = SnapTableExpireSnapshotsOperator(
        task_id="expire_snapshots",
        table="{{ params.table }}",
        retain_min=1,
        retain_max="{{ params.retain_max }}",
        time_retained="1 d",
        **SPARK,
    )
    remove_orphan_files = SnapTableRemoveOrphanFilesOperator(
        task_id="remove_orphan_files",
        table="{{ params.table }}",
        older_than="1 d",
        dry_run=False,
        **SPARK,
    )

    expire_snapshots >> remove_orphan_files
