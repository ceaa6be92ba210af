"""Periodic tags on Paimon tables pypaimon writes: which tags are automatic (issue 22 items 8, 9 and 12).

A Paimon tag records no source. Paimon's TagPeriodHandler counts a tag as automatic only if its
name is the pattern of the table's own period and formatter; any other tag is someone's, and
``tag.num-retained-max`` never deletes it (nor the files only it holds). A tag naming a period
that is not over yet cannot be a run's either: it is manual, and never moves where catch-up
resumes. pypaimon writes the tables and the manual tags, and reads every tag left afterwards with
the rows its snapshot had; the files left are exactly what the snapshots and tags left use.
"""

from __future__ import annotations

import datetime as dt
import os
import random

import pytest

from airflow_snaptable.core import Table
from tests.paimon.conftest import FAR_FUTURE, run_client, table_files
from tests.periodic_history import Oracle, combinations, random_history

COLUMNS = [["p", "string"], ["id", "int64"], ["v", "string"]]
SEED = 20_261_122


def utc(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


class Warehouse:
    """Paimon tables made by pypaimon in one call (each start of its interpreter costs seconds)."""

    def __init__(self, python: str, root: str):
        self.python, self.root = python, root
        self.before: dict[str, dict] = {}

    def create(self, tables: dict[str, tuple[dict, list[int], dict[str, int]]]) -> None:
        """``tables``: name -> (options, commit times, manual tags {name: snapshot id}); pypaimon commits
        and tags, then reads every snapshot (kept as ``before``)."""
        steps = []
        for name, (options, times, tags) in tables.items():
            steps.append({"create": f"db.{name}", "columns": COLUMNS, "partition": ["p"], "options": {"bucket": "-1", **options}})
            steps += [{"write": f"db.{name}", "rows": [[f"p{n % 2}", n, f"at {at}"]], "at": at} for n, at in enumerate(times, 1)]
            steps += [{"tag": f"db.{name}", "name": tag, "snapshot": snapshot_id} for tag, snapshot_id in tags.items()]
        answer = run_client(self.python, self.root, steps + [{"read": f"db.{name}"} for name in tables])
        for full, read in answer.items():
            assert all("error" not in s for s in read["snapshots"].values()), read
            self.before[full.split(".", 1)[1]] = read["snapshots"]

    def path(self, name: str) -> str:
        return os.path.join(self.root, "db.db", name)

    def table(self, name: str) -> Table:
        return Table.open(self.path(name))

    def check(self, expected: dict[str, dict[str, int]]) -> None:
        """pypaimon reads exactly the ``expected`` tags (name -> snapshot id) of each table, each with its
        snapshot's rows; every snapshot left reads as before; the files left are exactly theirs."""
        answer = run_client(self.python, self.root, [{"read": f"db.{name}"} for name in expected])
        for full, read in answer.items():
            name = full.split(".", 1)[1]
            before = self.before[name]
            assert sorted(read["tags"]) == sorted(expected[name]), name
            files = set()
            for key, snapshot in read["snapshots"].items():
                assert snapshot.get("rows") == before[key]["rows"], (name, key, snapshot)
                files |= set(before[key]["files"])
            for tag, tagged in read["tags"].items():
                held = before[str(expected[name][tag])]
                assert tagged.get("rows") == held["rows"], (name, tag, tagged)
                files |= set(held["files"])
            assert table_files(self.path(name)) == files, name


@pytest.fixture
def warehouse(paimon, tmp_path) -> Warehouse:
    return Warehouse(paimon.python, str(tmp_path / "warehouse"))


def test_manual_tags_in_other_patterns_and_future_periods_are_never_automatic(warehouse):
    """issue 22 items 8 and 9, as reported: on a daily ``with_dashes`` table retention (at most 1) pruned the manual
    tags ``20200101``, ``2020-01-01 05`` and ``202001010530``; on a daily ``without_dashes`` table a manual
    ``20991231`` made catch-up create nothing for ever (and counted toward retention)."""
    times = [utc("2020-01-01T06:00:00"), utc("2020-01-02T06:00:00"), utc("2020-01-03T06:00:00")]
    others = {"20200101": 1, "2020-01-01 05": 1, "202001010530": 1, "2020-01-01 05:30": 2, "release": 1}
    warehouse.create({
        "dashes": ({"tag.creation-period": "daily", "tag.num-retained-max": "1"}, times, others),
        "plain": ({"tag.creation-period": "daily", "tag.period-formatter": "without_dashes", "tag.num-retained-max": "1"},
                  times, {"20991231": 1}),
    })
    dashes = warehouse.table("dashes")
    assert dashes.create_periodic_tags(catch_up=True, now=utc("2020-01-04T00:10:00")).deleted == ["2020-01-01", "2020-01-02"]
    assert {t.name for t in dashes.tags() if t.source == "manual"} == set(others)
    assert {t.name: t.snapshot_id for t in dashes.tags()} == {**others, "2020-01-03": 3}
    plain = warehouse.table("plain")
    result = plain.create_periodic_tags(catch_up=True, now=utc("2020-01-04T00:10:00"))
    assert (result.created, result.deleted) == (["20200101", "20200102", "20200103"], ["20200101", "20200102"])
    assert plain.tag("20991231").source == "manual"
    # Expiry then frees what only the pruned tags held; the manual tags keep theirs.
    for table in (dashes, plain):
        table.expire_snapshots(retain_min=1, retain_max=1, now=FAR_FUTURE)
    warehouse.check({"dashes": {**others, "2020-01-03": 3}, "plain": {"20991231": 1, "20200103": 3}})


def test_random_periodic_histories_on_paimon_tables(warehouse):
    """issue 22 item 12: one seeded random history per period (daily, hourly, two-hours, 30- and 90-minute
    durations) and formatter, on tables pypaimon writes with the tag options in their schema and manual tags
    pypaimon creates (named in every pattern but the table's own, and in its own for periods in 2096-2099),
    more made between runs. After every run the tags are exactly the oracle's (tests/periodic_history.py);
    at the end pypaimon reads every tag left with its snapshot's rows."""
    rng = random.Random(SEED)
    histories = {f"t{i}": random_history(rng, period, formatter) for i, (period, formatter) in enumerate(combinations())}
    warehouse.create({name: (h.options(), h.commits, h.manual) for name, h in histories.items()})
    expected = {}
    for name, history in histories.items():
        oracle = Oracle(history)
        oracle.add_manual(history.manual)
        for index, run in enumerate(history.runs):
            table = warehouse.table(name)
            for tag, snapshot_id in history.manual_later.get(index, {}).items():
                if snapshot_id >= oracle.earliest:
                    table.create_tag(tag, snapshot_id)
                    oracle.add_manual({tag: snapshot_id})
            result = table.create_periodic_tags(catch_up=run.catch_up, now=run.now)
            where = (name, history.period, history.formatter, index, run)
            assert (result.created, result.deleted, result.skipped) == oracle.run(run), where
            if run.expire_to is not None:
                table.expire_snapshots(retain_min=run.expire_to, retain_max=run.expire_to, now=FAR_FUTURE)
            assert {t.name: t.snapshot_id for t in table.tags()} == oracle.snapshot_ids(), where
        assert set(oracle.manual()) >= set(history.manual), name  # no manual tag was ever deleted
        expected[name] = oracle.snapshot_ids()
    warehouse.check(expected)
