"""Random periodic-tag histories on our own tables, against the oracle of tests/periodic_history.py
(issue 22 items 8, 9 and 12; the same histories run on Paimon tables in tests/paimon).

Every period (daily, hourly, two-hours, 30- and 90-minute durations) with every formatter. Manual
tags are named in every pattern but the table's own, in the table's own pattern far in the future,
and, since our tables record who made a tag, in the table's own pattern for past periods too. Some
are written as a writer that records no source leaves them (an older version's tag files): those
follow the name rules of Paimon's tables. After every run the tags are exactly the oracle's; at the
end every tag reads as its snapshot did and verify() finds nothing wrong.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.native.tags import Tag, tag_path
from tests.conftest import SCHEMA, make_rows
from tests.periodic_history import Oracle, combinations, random_history, spell

SEED = 20_261_122


def _rows(table: Table, **read) -> Counter:
    return Counter(table.scan(**read).to_arrow().column("id").to_pylist())


def _write_sourceless_tag(table: Table, name: str, snapshot_id: int) -> None:
    """A tag file as a writer that records no source leaves it."""
    doc = json.loads(Tag(name, table.snapshot(snapshot_id), table.snapshot(snapshot_id).time_millis).to_json())
    del doc["source"]
    table.storage.write_bytes(tag_path(name), json.dumps(doc).encode())


@pytest.mark.parametrize("period, formatter", combinations(), ids=lambda v: str(v))
def test_random_periodic_histories_follow_the_rules(tmp_path, period, formatter):
    rng = random.Random(f"{SEED}-{period}-{formatter}")
    for attempt in range(2):
        history = random_history(rng, period, formatter)
        # In memory: the rules are what is tested here, not the disk (tests/core/test_crash.py is for that).
        table = Table.create(f"memory://periodic/{tmp_path.name}/{attempt}", SCHEMA, partition_by=["p"], options=history.options())
        for i, at in enumerate(history.commits, start=1):
            table.clock = lambda at=at: at
            table.append(make_rows([i]))
        states = {i: _rows(table, snapshot_id=i) for i in range(1, len(history.commits) + 1)}
        oracle = Oracle(history)
        # Our tables record who made a tag: a manual tag named like a past period of the table is still manual.
        own_past = spell(history.commits[1] // history.step * history.step, history.pattern)
        manual = {**history.manual, own_past: 1}
        for n, (name, snapshot_id) in enumerate(sorted(manual.items())):
            if n % 2 and name != own_past:
                _write_sourceless_tag(table, name, snapshot_id)
            else:
                table.create_tag(name, snapshot_id)
        oracle.add_manual(manual)
        for index, run in enumerate(history.runs):
            for name, snapshot_id in history.manual_later.get(index, {}).items():
                if snapshot_id >= oracle.earliest:
                    table.create_tag(name, snapshot_id)
                    oracle.add_manual({name: snapshot_id})
            result = table.create_periodic_tags(catch_up=run.catch_up, now=run.now)
            expected = oracle.run(run)
            where = (attempt, index, run)
            assert (result.created, result.deleted, result.skipped) == expected, where
            if run.expire_to is not None:
                table.expire_snapshots(retain_min=run.expire_to, retain_max=run.expire_to, now=history.runs[-1].now + 10**9)
            assert {t.name: t.snapshot_id for t in table.tags()} == oracle.snapshot_ids(), where
        assert set(oracle.manual()) >= set(manual)  # no manual tag was ever deleted
        for name, snapshot_id in oracle.snapshot_ids().items():
            assert _rows(table, tag=name) == states[snapshot_id], name
        assert table.verify().ok
