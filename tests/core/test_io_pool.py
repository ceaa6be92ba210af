"""map_io: results in order, the first error raised, and no call still running once it returns or raises."""

from __future__ import annotations

import time

import pytest

from airflow_snaptable.core.io.pool import map_io


def test_results_in_order():
    assert map_io(lambda x: x * x, range(20)) == [x * x for x in range(20)]


def test_a_failure_is_raised_only_after_every_call_finished():
    finished = []

    def work(x):
        if x == 0:
            raise ValueError("first fails at once")
        time.sleep(0.2)
        finished.append(x)

    with pytest.raises(ValueError, match="first fails"):
        map_io(work, range(4))
    assert sorted(finished) == [1, 2, 3]  # nothing left running behind the caller
