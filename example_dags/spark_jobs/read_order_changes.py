"""Incremental read job of the examples: the orders added in a snapshot range, read with Spark.

    spark-submit read_order_changes.py --table URI --between FROM,TO

Reads ``spark.read.format("snaptable").option("incremental-between", "FROM,TO")``: the rows
added after snapshot FROM up to and including TO (compactions excluded), the range a
``SnapTableNewSnapshotSensor`` returns. A real job would write them downstream; this one sums them up
and prints one line ``order changes: {...}``.
"""

from __future__ import annotations

import argparse
import json


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="read_order_changes", description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True, help="the table URI")
    parser.add_argument("--between", required=True, help="FROM,TO snapshot ids: rows added in (FROM, TO]")
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from airflow_snaptable.spark import register

    spark = SparkSession.builder.appName(f"read order changes {args.table}").getOrCreate()
    try:
        register(spark)
        added = spark.read.format("snaptable").option("incremental-between", args.between).load(args.table)
        per_day = {r["day"]: r["n"] for r in added.groupBy("day").agg(F.count("*").alias("n")).collect()}
        total = added.agg(F.count("*").alias("rows"), F.sum("amount").alias("amount")).collect()[0]
        summary = {
            "between": args.between,
            "added_rows": int(total["rows"]),
            "added_amount": round(float(total["amount"] or 0.0), 2),
            "rows_per_day": dict(sorted(per_day.items())),
        }
        print("order changes: " + json.dumps(summary), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
