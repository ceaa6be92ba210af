"""Progress of long deletions (expiry, tag deletion, rollback, orphan cleaning), for logs and terminals.

Deletions go through :func:`delete_with_progress`, which deletes in chunks and tells the
current listener after each chunk. The listener is set for a block of work with
:func:`reporting` (the CLI draws a bar on a terminal); without one, progress goes to the
``airflow_snaptable.progress`` logger at INFO, at most every ``every_files`` files or
``every_seconds`` seconds and once at the end, which an Airflow task log shows for the
local runner and the Spark job's driver log (in the task log) for the Spark runner.

Chunks are large (``chunk_files``, default 10 000 files, or a twentieth of the total) so
that a distributed delete still sends each chunk to the executors in one Spark job.
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

log = logging.getLogger("airflow_snaptable.progress")

DEFAULT_CHUNK_FILES = 10_000


@dataclass(frozen=True)
class ProgressEvent:
    #: What is being done, e.g. "deleting data files".
    phase: str
    done: int
    total: int
    elapsed_seconds: float

    @property
    def rate(self) -> float:
        """Files per second so far."""
        return self.done / self.elapsed_seconds if self.elapsed_seconds > 0 else float(self.done)

    def __str__(self) -> str:
        percent = 100 * self.done // self.total if self.total else 100
        return f"{self.phase}: {self.done:,}/{self.total:,} ({percent}%), {self.rate:,.0f} files/s"


Listener = Callable[[ProgressEvent], None]


class LogProgress:
    """Logs an event at most every ``every_files`` files or ``every_seconds`` seconds, and each phase's end."""

    def __init__(self, every_files: int = 10_000, every_seconds: float = 10.0, logger: logging.Logger = log):
        self.every_files = every_files
        self.every_seconds = every_seconds
        self.logger = logger
        self._last: dict[str, tuple[int, float]] = {}

    def __call__(self, event: ProgressEvent) -> None:
        last_done, last_time = self._last.get(event.phase, (0, 0.0))
        finished = event.done >= event.total
        due = event.done - last_done >= self.every_files or event.elapsed_seconds - last_time >= self.every_seconds
        if finished or due:
            self.logger.info("%s", event)
            self._last[event.phase] = (event.done, event.elapsed_seconds)
        if finished:
            self._last.pop(event.phase, None)


@dataclass
class _Reporting:
    listener: Listener
    chunk_files: int


_current: ContextVar[_Reporting | None] = ContextVar("snaptable_progress", default=None)


@contextmanager
def reporting(listener: Listener, chunk_files: int = DEFAULT_CHUNK_FILES) -> Iterator[None]:
    """Send the progress of the deletions in this block to ``listener``."""
    token = _current.set(_Reporting(listener, chunk_files))
    try:
        yield
    finally:
        _current.reset(token)


def delete_with_progress(phase: str, paths: Sequence[str], delete: Callable[[Sequence[str]], None]) -> None:
    """``delete(paths)`` in chunks, reporting after each one."""
    if not paths:
        return
    current = _current.get() or _Reporting(LogProgress(), DEFAULT_CHUNK_FILES)
    total = len(paths)
    chunk = max(current.chunk_files, math.ceil(total / 20))
    start = time.monotonic()
    for first in range(0, total, chunk):
        delete(paths[first:first + chunk])
        current.listener(ProgressEvent(phase, min(first + chunk, total), total, time.monotonic() - start))
