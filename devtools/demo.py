"""The demo run by ``scripts/demo``: the whole Airflow + Spark story on embedded defaults.

Everything is local and temporary: an AIRFLOW_HOME with SQLite (``airflow db migrate``, no
Airflow example DAGs, DAGs folder = the repository's ``example_dags/``), Spark in local mode
(``spark-submit --master local[2]`` from the venv) and the table on local files. Each step is
a real ``airflow dags test`` run of an example DAG:

1. ``snaptable_spark_ingest``: a Spark job writes three days of orders through the
   ``snaptable`` data source (one snapshot per day).
2. ``snaptable_incremental``: ``SnapTableNewSnapshotSensor`` finds what the consumer has not read, a
   Spark job reads exactly that range incrementally, ``SnapTableAdvanceConsumerOperator`` commits it.
3. ``snaptable_daily_maintenance``: tag the day (``{{ ds }}``), expire old snapshots, expire
   tags, remove orphan files.
4. ``snaptable_spark_ingest`` again: today's extract arrives broken (too few rows).
5. ``snaptable_backfill_from_tag``: roll back to the day's tag, re-ingest today with Spark,
   tag the repaired state.

It ends with the table's timeline: snapshots, the tags on them, where the consumer sits; and the
same as a picture, timeline.html / timeline.svg in the work directory (``snaptable timeline``).
(The demo squeezes days into minutes: every commit happens now, so the daily tag is today's.)

``--core-only`` runs the earlier, faster story of the core API alone (no Airflow, no Spark).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from airflow_snaptable.cli import render_table
from airflow_snaptable.cli import main as cli_main
from airflow_snaptable.core import Table
from devtools.local_airflow import EXAMPLE_DAGS, LocalAirflow, snaptable_conn, spark_local_env

TABLE_NAME = "orders"
CONSUMER = "orders_downstream"  # the incremental example DAG's default consumer
TIMELINE_HEADERS = ["snapshot", "kind", "committed (UTC)", "records", "tags", "consumers (next to read)"]


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


def run_core_story(root: Path) -> None:
    """The core API alone (no Airflow, no Spark): commits, time travel, changes, a stream."""
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




# -- the Airflow + Spark story ---------------------------------------------------------------


def timeline_rows(table: Table) -> list[list[Any]]:
    """One row per snapshot: id, kind, commit time, records, the tags on it, the consumers there.

    A consumer "sits" at its next snapshot (the first one it has not read); one that has read
    everything sits at ``latest + 1``, shown as a ``(next)`` row. Snapshots that expired but
    are kept by a tag are shown as ``KIND (tag only)``.
    """
    snapshots = {s.id: s for s in table.snapshots()}
    tags: dict[int, list[str]] = {}
    for tag in table.tags():
        tags.setdefault(tag.snapshot_id, []).append(tag.name)
        snapshots.setdefault(tag.snapshot_id, tag.snapshot)
    retained = {s.id for s in table.snapshots()}
    consumers: dict[int, list[str]] = {}
    for consumer in table.consumers():
        consumers.setdefault(consumer.next_snapshot, []).append(consumer.id)
    rows: list[list[Any]] = []
    for snapshot_id in sorted(snapshots):
        snapshot = snapshots[snapshot_id]
        kind = snapshot.commit_kind.value + ("" if snapshot_id in retained else " (tag only)")
        when = dt.datetime.fromtimestamp(snapshot.time_millis / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        rows.append([snapshot_id, kind, when, snapshot.total_record_count,
                     ", ".join(sorted(tags.get(snapshot_id, []))), ", ".join(sorted(consumers.get(snapshot_id, [])))])
    latest = max(retained, default=0)
    waiting = [c for next_id, ids in consumers.items() if next_id > latest for c in ids]
    if waiting:
        rows.append([latest + 1, "(next)", "", "", "", ", ".join(sorted(waiting))])
    return rows


def render_timeline(table: Table) -> str:
    return render_table(TIMELINE_HEADERS, timeline_rows(table))


def _lines_with(output: str, marker: str) -> list[str]:
    """``marker`` + the JSON after it, from each line of a DAG run's output that has it (log decoration dropped)."""
    decoder = json.JSONDecoder()
    found = []
    for line in output.splitlines():
        if marker in line:
            rest = line[line.index(marker) + len(marker):]
            try:
                value, _ = decoder.raw_decode(rest.lstrip())
            except ValueError:
                continue
            found.append(marker + json.dumps(value))
    return found


class Story:
    """The steps of the demo against one work directory (AIRFLOW_HOME and tables under it)."""

    def __init__(self, workdir: Path, say: Callable[[str], None] = print, master: str = "local[2]",
                 picture_dir: Path | None = None):
        self.workdir = workdir
        #: Where the timeline pictures go: the work directory, or a kept one when the work directory is removed.
        self.picture_dir = picture_dir or workdir
        self.say = say
        self.warehouse = workdir / "warehouse"
        self.uri = str(self.warehouse / TABLE_NAME)
        self.airflow = LocalAirflow(
            workdir / "airflow-home",
            EXAMPLE_DAGS,
            env={
                "AIRFLOW_CONN_SNAPTABLE_DEFAULT": snaptable_conn(str(self.warehouse)),
                "SNAPTABLE_EXAMPLE_TABLE": TABLE_NAME,
                "SNAPTABLE_EXAMPLE_POKE_INTERVAL": "1",
                **spark_local_env(master),
            },
        )
        self.today = dt.datetime.now(dt.timezone.utc).date()
        self.days = [(self.today - dt.timedelta(days=n)).isoformat() for n in (3, 2, 1)]
        self.seconds: dict[str, float] = {}

    def step(self, title: str) -> None:
        self.say(f"\n== {title}")

    def dag_run(self, label: str, dag_id: str, logical_date: str | None = None, conf: dict | None = None) -> str:
        started = time.monotonic()
        proc = self.airflow.dags_test(dag_id, logical_date=logical_date, conf=conf)
        self.seconds[label] = time.monotonic() - started
        self.say(f"airflow dags test {dag_id}{' ' + logical_date if logical_date else ''}"
                 f"{' -c ' + repr(conf) if conf else ''}: success ({self.seconds[label]:.0f} s)")
        return proc.stdout + proc.stderr

    def table(self) -> Table:
        return Table.open(self.uri)

    def run(self) -> Table:
        self.step(f"0. Airflow: AIRFLOW_HOME {self.airflow.home} (SQLite), DAGs from {EXAMPLE_DAGS}")
        started = time.monotonic()
        self.airflow.migrate()
        self.seconds["migrate"] = time.monotonic() - started
        self.say(f"airflow db migrate: done ({self.seconds['migrate']:.0f} s); table {self.uri}; Spark master local[2]")

        self.step(f"1. ingest with Spark: {', '.join(self.days)} through the snaptable data source (snaptable_spark_ingest)")
        output = self.dag_run("ingest", "snaptable_spark_ingest", conf={"days": self.days})
        for line in _lines_with(output, "ingested: "):
            self.say("  " + line)

        self.step(f"2. incremental downstream: sensor -> Spark incremental read -> advance consumer {CONSUMER!r} (snaptable_incremental)")
        output = self.dag_run("incremental", "snaptable_incremental")
        found = self.airflow.return_values("snaptable_incremental").get("wait_for_snapshots") or {}
        self.say(f"  SnapTableNewSnapshotSensor: snapshots {found.get('snapshot_ids')} are new "
                 f"(range ({found.get('from_snapshot_id')}, {found.get('to_snapshot_id')}], +{found.get('added_records')} records)")
        for line in _lines_with(output, "order changes: "):
            self.say("  Spark: " + line)
        self.say(f"  consumer {CONSUMER!r} now at snapshot {self.table().consumer(CONSUMER).next_snapshot} (the next one to read)")

        tomorrow = (self.today + dt.timedelta(days=1)).isoformat()
        self.step(f"3. daily maintenance for {self.today}: tag {{{{ ds }}}} -> expire snapshots -> expire tags -> orphans (snaptable_daily_maintenance)")
        before = [s.id for s in self.table().snapshots()]
        # The run after the day (interval today -> tomorrow) tags the state at the day's end.
        self.dag_run("maintenance", "snaptable_daily_maintenance", logical_date=tomorrow, conf={"retain_max": 2})
        results = {k: v.get("result") for k, v in self.airflow.return_values("snaptable_daily_maintenance").items() if isinstance(v, dict)}
        tag = results.get("tag_day") or {}
        expired = results.get("expire_snapshots") or {}
        orphans = results.get("remove_orphan_files") or {}
        self.say(f"  tag_day: tag {tag.get('name')!r} -> snapshot {tag.get('snapshot_id')}")
        self.say(f"  expire_snapshots (retain_max=2): expired {expired.get('expired_snapshot_ids')} of {before}, "
                 f"{expired.get('deleted_data_files')} data file(s) deleted (a file goes once no snapshot, tag or consumer needs it)")
        self.say(f"  expire_tags: {results.get('expire_tags')}; remove_orphan_files: {orphans.get('orphan_count')} orphan file(s) older than 1 d")

        self.step(f"4. today's extract ({self.today}) arrives broken: 4 orders instead of 10 (snaptable_spark_ingest)")
        output = self.dag_run("broken ingest", "snaptable_spark_ingest", conf={"days": [self.today.isoformat()], "rows": 4})
        for line in _lines_with(output, "ingested: "):
            self.say("  " + line)

        self.step(f"5. backfill: roll back to tag {self.today.isoformat()!r}, re-ingest {self.today} with Spark, tag it (snaptable_backfill_from_tag)")
        self.dag_run("backfill", "snaptable_backfill_from_tag", conf={"tag": self.today.isoformat(), "days": [self.today.isoformat()]})
        results = {k: v.get("result") for k, v in self.airflow.return_values("snaptable_backfill_from_tag").items() if isinstance(v, dict)}
        rollback = results.get("rollback_to_tag") or {}
        self.say(f"  rollback_to_tag: {_short(rollback)}")
        self.say(f"  tag_backfill: tag {(results.get('tag_backfill') or {}).get('name')!r} -> snapshot "
                 f"{(results.get('tag_backfill') or {}).get('snapshot_id')}")

        table = self.table()
        self.step(f"6. timeline of {self.uri}")
        self.say(render_timeline(table))
        self.say("\n" + write_timeline_picture(table, self.picture_dir))  # after a blank line: the printed timeline ends there
        return table


def write_timeline_picture(table: Table, workdir: Path) -> str:
    """The same timeline as a picture: ``timeline.svg`` and ``timeline.html`` (``snaptable timeline``'s)."""
    from airflow_snaptable.core.timeline.model import build_timeline
    from airflow_snaptable.core.timeline.render import render_html, render_svg

    timeline = build_timeline(table)
    (workdir / "timeline.svg").write_text(render_svg(timeline), encoding="utf-8")
    (workdir / "timeline.html").write_text(render_html(timeline), encoding="utf-8")
    return f"picture: {workdir / 'timeline.html'} (and timeline.svg; snaptable timeline URI --out FILE.svg|.html draws it)"


def _short(result: Any) -> str:
    if not isinstance(result, dict):
        return str(result)
    return ", ".join(f"{k}={v}" for k, v in result.items() if not isinstance(v, (list, dict)) or len(v) <= 5)


def run_story(workdir: Path, say: Callable[[str], None] = print, picture_dir: Path | None = None) -> Table:
    """Run the Airflow + Spark story in ``workdir`` (recreated) and return the table; the timeline pictures go to
    ``picture_dir`` (default: ``workdir``)."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    started = time.monotonic()
    table = Story(workdir, say, picture_dir=picture_dir).run()
    say(f"\ndone in {time.monotonic() - started:.0f} s")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="work directory, kept afterwards (recreated); default: a temporary one, removed")
    parser.add_argument("--core-only", action="store_true", help="only the core API story (no Airflow, no Spark; seconds)")
    args = parser.parse_args(argv)
    if args.dir:
        workdir = Path(args.dir).resolve()
        (run_core_story if args.core_only else run_story)(workdir)
        print(f"files kept in {workdir}")
        return 0
    if args.core_only:
        with tempfile.TemporaryDirectory(prefix="snaptable-demo-") as tmp:
            run_core_story(Path(tmp) / "demo")
        return 0
    # The work directory is removed at the end; the pictures the demo ends by naming are not: they go to a
    # directory of their own, kept (a path printed is a path that exists).
    pictures = Path(tempfile.mkdtemp(prefix="snaptable-demo-timeline-"))
    with tempfile.TemporaryDirectory(prefix="snaptable-demo-") as tmp:
        run_story(Path(tmp) / "demo", picture_dir=pictures)
    print(f"work directory removed; the timeline pictures are kept in {pictures} (scripts/demo --dir DIR keeps everything)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
