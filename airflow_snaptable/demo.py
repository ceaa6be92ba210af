"""The end-to-end demo on embedded defaults (local files): ``scripts/demo``.

It writes a small orders table through the core API, commits appends, a
partition overwrite, a delete and a compaction, then shows what downstream
users do with the history: time travel, an incremental change set, a
streaming reader with a checkpoint, and the snapshot timeline.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
from pathlib import Path

import pyarrow as pa

from airflow_snaptable.cli import render_table
from airflow_snaptable.cli import main as cli_main
from airflow_snaptable.core import Table

SCHEMA = pa.schema(
    [
        ("day", pa.date32()),
        ("order_id", pa.int64()),
        ("customer", pa.string()),
        ("amount", pa.float64()),
    ]
)
DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(3)]


def orders(day: dt.date, first_id: int, count: int) -> pa.Table:
    ids = list(range(first_id, first_id + count))
    return pa.table(
        {
            "day": [day] * count,
            "order_id": ids,
            "customer": [f"customer-{i % 7}" for i in ids],
            "amount": [round(10 + (i * 37 % 100) / 4, 2) for i in ids],
        },
        schema=SCHEMA,
    )


def step(text: str) -> None:
    print(f"\n== {text}")


def run(root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    uri = str(root / "orders")
    table = Table.create(uri, SCHEMA, partition_by=["day"], options={"snapshot.num-retained.min": "5"})
    step(f"created {uri} (partitioned by day)")

    next_id = 1
    for day in DAYS:
        for _ in range(2):
            snapshot = table.append(orders(day, next_id, 50), commit_user="ingest", commit_identifier=next_id)
            print(f"append     -> snapshot {snapshot.id}: {snapshot.total_record_count} rows")
            next_id += 50
    retried = table.append(orders(DAYS[-1], next_id - 50, 50), commit_user="ingest", commit_identifier=next_id - 50)
    print(f"retry of the last append (same commit identifier) -> snapshot {retried.id}, applied once")

    corrected = orders(DAYS[0], 1_000, 40)
    snapshot = table.overwrite(corrected, partitions=[{"day": DAYS[0]}])
    print(f"overwrite {DAYS[0]} -> snapshot {snapshot.id}: {snapshot.total_record_count} rows")
    snapshot = table.delete(partitions=[{"day": DAYS[1]}])
    print(f"delete {DAYS[1]}    -> snapshot {snapshot.id}: {snapshot.total_record_count} rows")
    snapshot = table.compact(min_file_num=2)
    print(f"compact    -> snapshot {snapshot.id}: {snapshot.summary['deleted_files']} files into {snapshot.summary['added_files']}")

    step("time travel")
    rows = []
    for snapshot in table.snapshots():
        scan = table.scan(snapshot_id=snapshot.id)
        rows.append((snapshot.id, snapshot.commit_kind.value, scan.to_arrow().num_rows, len(scan.files())))
    print(render_table(["snapshot", "kind", "rows", "files"], rows))
    as_of = table.snapshots()[3].time_millis
    print(f"as of {as_of} ms: {table.scan(as_of=as_of).to_arrow().num_rows} rows (snapshot {table.snapshot_at(as_of).id})")
    day3 = table.scan(filter=[("day", "=", DAYS[2])])
    print(f"filter day={DAYS[2]}: {len(day3.files())} file(s), {day3.to_arrow().num_rows} rows")

    step("incremental: what changed after snapshot 4")
    changes = table.changes(4)
    print(f"snapshots {changes.snapshot_ids} kinds {changes.commit_kinds}")
    print(f"+{changes.added_record_count} rows in {len(changes.added_files)} files, -{changes.deleted_record_count} rows in {len(changes.deleted_files)} files")

    step("streaming reader with a checkpoint")
    stream = table.stream("from-snapshot-full", snapshot_id=2)
    for plan in stream:
        kind = "full" if plan.full else plan.commit_kind.lower()
        print(f"snapshot {plan.snapshot_id}: {kind}, {plan.record_count} rows")
    position = stream.checkpoint()
    table.append(orders(DAYS[2], 5_000, 10), commit_user="ingest", commit_identifier=5_000)
    resumed = table.stream("latest")
    resumed.restore(position)
    print(f"restored at {position}: " + ", ".join(f"snapshot {p.snapshot_id} +{p.record_count}" for p in resumed))

    step("timeline: snaptable snapshots " + uri)
    cli_main(["snapshots", uri])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="demo-output", help="where the demo table goes (recreated)")
    args = parser.parse_args(argv)
    run(Path(args.dir).resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
