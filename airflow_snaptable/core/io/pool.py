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
#: Threads of the pool for local unlinks (core/io/storage.py ``delete_files``). An unlink mostly waits in
#: the filesystem (journal, freeing blocks), so more in flight hides more of that wait; on a shared
#: 2-core machine, 2,600 unlinks took 450 ms on 16 threads and 200 ms on 64 (load 8; 128 no better).
UNLINK_THREADS = 64

_pools: dict[int, ThreadPoolExecutor] = {}
_pool_lock = threading.Lock()


def io_pool(threads: int = IO_THREADS) -> ThreadPoolExecutor:
    """The process-wide pool of ``threads`` threads (one per size asked for)."""
    with _pool_lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"snaptable-io-{threads}")
        return pool


def map_io(fn: Callable[[T], R], items: Iterable[T], threads: int = IO_THREADS) -> list[R]:
    """``[fn(x) for x in items]`` on the pool of ``threads`` threads, results in order; the first exception is raised.

    Every call has finished when this returns or raises: work left running after a
    failure would change storage behind the caller's back (its cleanup, a rerun).
    Callers must not be pool tasks themselves (a task waiting on the pool can deadlock it).
    """
    items = list(items)
    if len(items) <= 1 or threading.current_thread().name.startswith("snaptable-io"):
        return [fn(x) for x in items]
    futures = [io_pool(threads).submit(fn, x) for x in items]
    wait(futures)
    return [future.result() for future in futures]


def _forget_pool_in_child() -> None:
    # A forked child (Airflow's task runner forks) inherits the pools but not their threads.
    global _pools, _pool_lock
    _pools, _pool_lock = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)
