"""Ingestion job of the examples: write each day's orders through the ``snaptable`` data source.

    spark-submit ingest_orders.py --table URI --days 2026-01-10,2026-01-11 [--rows 10]

One commit per day: a dynamic partition overwrite of that day, so a re-run replaces the day
instead of duplicating it. The commit user is ``ingest`` and the commit identifier is the day
(``YYYYMMDD``): a retried job applies each day once. The first write creates the table
(partitioned by day). Storage options (S3 credentials) come from the environment variable
``SNAPTABLE_STORAGE_OPTIONS``, never from the command line.

The rows stand in for a real extract: ``--rows`` orders per day, ids and amounts derived from
the day (the same rows ``snaptable_example_data.demo_rows`` makes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ingest_orders", description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True, help="the table URI")
    parser.add_argument("--days", required=True, help="comma-separated days (YYYY-MM-DD), one commit each")
    parser.add_argument("--rows", type=int, default=10, help="orders per day")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    days = [dt.date.fromisoformat(d.strip()).isoformat() for d in args.days.split(",") if d.strip()]
    from pyspark.sql import SparkSession

    from airflow_snaptable.core import Table
    from airflow_snaptable.spark import register

    spark = SparkSession.builder.appName(f"ingest orders {args.table}").getOrCreate()
    try:
        register(spark)
        for day in days:
            identifier = int(day.replace("-", ""))
            first_id = (identifier % 10000) * 1000
            orders = spark.range(first_id, first_id + args.rows, numPartitions=1).selectExpr(
                f"'{day}' as day", "id as order_id", "cast(round(5 + (id % 100) * 1.25, 2) as double) as amount"
            )
            (
                orders.write.format("snaptable")
                .mode("overwrite")
                .option("overwrite-partitions", "true")
                .option("partition-by", "day")
                .option("commit-user", "ingest")
                .option("commit-identifier", str(identifier))
                .save(args.table)
            )
            latest = Table.open(args.table).latest_snapshot()
            print("ingested: " + json.dumps({"day": day, "rows": args.rows, "snapshot_id": latest.id}), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
