"""Hypothesis state machine over recoverable deletes (issue 26): commits, tags, expiries and tag
deletions with a retention (0 or 10 days) or without, undo of any recorded run, purge.

After every step: every live snapshot and every tag scans to the rows its snapshot had when it was
committed (ids are never reused here), the history is contiguous, and verify() finds nothing missing
and nothing unreferenced (noncurrent files are neither). An undo either restores every snapshot and
tag of its run or refuses with a typed error and changes nothing on storage. Seeded: deterministic.
"""

from __future__ import annotations

import itertools
from collections import Counter
import os
import shutil
import tempfile

from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import RunNotFoundError, UndoRefusedError
from tests.conftest import SCHEMA, make_rows, sorted_ids

DAYS = st.sampled_from([10, 0, 10, None])
#: How undos ended across the examples (the test below checks each kind happened).
OUTCOMES: Counter = Counter()


def _tree(root: str) -> dict[str, bytes]:
    out = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


class NoncurrentLifecycle(RuleBasedStateMachine):
    @initialize()
    def create(self):
        self.directory = tempfile.mkdtemp()
        self.uri = f"{self.directory}/t"
        self.table = Table.create(self.uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "3"})
        self.clock = itertools.count(1_000_000, 1_000)
        self.table.clock = lambda: next(self.clock)
        self.rows: dict[int, list[int]] = {}  # snapshot id -> its rows, forever (ids are never reused here)
        self.current: list[int] = []
        self.ids = itertools.count()
        self.tag_names = itertools.count()
        self.runs: list[tuple[str, int]] = []  # (run id, days)
        self.table.append(make_rows([next(self.ids)]))
        self.current = [0]
        self.rows[1] = [0]

    def teardown(self):
        shutil.rmtree(self.directory, ignore_errors=True)

    def _retaining(self, days, call):
        with self.table.retaining_noncurrent(days, "test") as run:
            call()
        if run is not None and self.table.trash() and any(s.run_id == run.run_id for s in self.table.trash()):
            self.runs.append((run.run_id, days))

    @rule(count=st.integers(1, 3), overwrite=st.booleans())
    def commit(self, count, overwrite):
        new = [next(self.ids) for _ in range(count)]
        if overwrite:
            snapshot = self.table.overwrite(make_rows(new))
            self.current = new
        else:
            snapshot = self.table.append(make_rows(new))
            self.current = self.current + new
        self.rows[snapshot.id] = sorted(self.current)

    @rule()
    def tag_latest(self):
        self.table.create_tag(f"t{next(self.tag_names)}")

    @rule(retain=st.integers(1, 3), days=DAYS)
    def expire(self, retain, days):
        self._retaining(days, lambda: self.table.expire_snapshots(retain_min=retain, time_retained="0 s"))

    @precondition(lambda self: self.table.tag_manager.names())
    @rule(pick=st.integers(0, 100), days=DAYS)
    def delete_tag(self, pick, days):
        names = self.table.tag_manager.names()
        self._retaining(days, lambda: self.table.delete_tag(names[pick % len(names)]))

    @precondition(lambda self: self.runs)
    @rule(pick=st.integers(0, 100))
    def undo(self, pick):
        run_id, _days = self.runs[pick % len(self.runs)]
        before = _tree(self.uri)
        try:
            result = self.table.undo(run_id)
        except (UndoRefusedError, RunNotFoundError) as exc:
            assert _tree(self.uri) == before, "a refused undo changed storage"
            OUTCOMES[type(exc).__name__] += 1
            return
        OUTCOMES["undone" if not result.already_undone else "already"] += 1
        if not result.already_undone:
            live = set(self.table.snapshot_manager.list_ids())
            assert set(result.restored_snapshot_ids) <= live
            assert set(result.restored_tags) <= set(self.table.tag_manager.names())

    @rule()
    def purge(self):
        self.table.purge()
        purged = {run_id for run_id, days in self.runs if days == 0}
        left = {s.run_id for s in self.table.trash()}
        assert not (purged & left) or all(s.state == "undoing" for s in self.table.trash() if s.run_id in purged)

    @invariant()
    def everything_reads_its_rows_and_verify_is_clean(self):
        if not hasattr(self, "table"):
            return
        fresh = Table.open(self.uri)
        live = fresh.snapshot_manager.list_ids()
        assert live == list(range(live[0], live[-1] + 1)), live
        for snapshot_id in live:
            assert sorted_ids(fresh.scan(snapshot_id=snapshot_id).to_arrow()) == self.rows[snapshot_id]
        for tag in fresh.tags():
            assert sorted_ids(fresh.scan(tag=tag.name).to_arrow()) == self.rows[tag.snapshot_id]
        result = fresh.verify()
        assert result.ok, result.to_dict()


NoncurrentLifecycle.TestCase.settings = settings(
    max_examples=10, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True,
)
test_noncurrent_lifecycle = NoncurrentLifecycle.TestCase


def test_the_machine_saw_undos_succeed_and_refuse():
    """The examples above reached both outcomes (otherwise the machine proves less than it says)."""
    if not OUTCOMES:
        test_noncurrent_lifecycle().runTest()
    assert OUTCOMES["undone"] > 0 and OUTCOMES["DependentRunError"] + OUTCOMES["RunNotFoundError"] + OUTCOMES["UndoInvariantError"] > 0, OUTCOMES
