"""One process-wide thread pool for storage I/O that overlaps well.

Writing data files, reading many manifests and deleting many files each cost
a round trip (S3) or a syscall that releases the GIL (local files, Parquet
decoding), so a few threads hide most of the latency. Starting threads per
call costs more than the work, hence one shared pool.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
R = TypeVar("R")

IO_THREADS = 16

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def io_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="snaptable-io")
        return _pool


def map_io(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]`` on the pool, results in order; the first exception is raised.

    Every call has finished when this returns or raises: work left running after a
    failure would change storage behind the caller's back (its cleanup, a rerun).
    Callers must not be pool tasks themselves (a task waiting on the pool can deadlock it).
    """
    items = list(items)
    if len(items) <= 1 or threading.current_thread().name.startswith("snaptable-io"):
        return [fn(x) for x in items]
    futures = [io_pool().submit(fn, x) for x in items]
    wait(futures)
    return [future.result() for future in futures]


def _forget_pool_in_child() -> None:
    # A forked child (Airflow's task runner forks) inherits the pool but not its threads.
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)
