"""Errors that name the task they come from.

A DAG holds many snaptable tasks; ``retain_min must be an integer, got 'three'`` leaves the
author to guess which one. Every error an operator or sensor raises, when the DAG is parsed
or when the task runs, starts with ``<task_id>: ``. The error keeps its type (callers catch
core's typed errors, e.g. ``TagAlreadyExistsError``) and its attributes: only its message
changes.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from airflow.sdk.exceptions import AirflowException

from airflow_snaptable.core.errors import SnapTableError


def name_task(exc: BaseException, task_id: str) -> None:
    """Put ``<task_id>: `` before the message of ``exc``, once."""
    # Only a message: control-flow exceptions whose first argument is data (a reschedule date) stay as they are.
    prefix = f"{task_id}: "
    if exc.args and isinstance(exc.args[0], str) and not exc.args[0].startswith(prefix):
        exc.args = (prefix + exc.args[0], *exc.args[1:])


@contextmanager
def errors_naming_task(task_id: str) -> Iterator[None]:
    """Within the block, this package's errors and Airflow's name ``task_id``."""
    try:
        yield
    except (SnapTableError, AirflowException) as exc:
        name_task(exc, task_id)
        raise
