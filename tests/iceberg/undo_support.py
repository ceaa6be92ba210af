"""The Iceberg tables the tests of recoverable deletes start from (issue 26): a history with a tag and a
branch, expired under a retention; a table with a consumer, expired under a retention."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_snaptable.core import Table
from airflow_snaptable.core.native.consumers import Consumer
from tests.iceberg.conftest import read_everything, rows

FAR = "2100-01-01T00:00:00"


def open_orders(env) -> Table:
    """``db.orders`` of ``env``, opened as our table."""
    return Table.open("iceberg://db.orders", catalog=env.properties)


def history(env) -> tuple[Any, list[int]]:
    """``db.orders`` with four appends on main, tag ``t1`` on the second, branch ``audit`` on the third (one
    append on it), then an overwrite of main; the pyiceberg table and the ids of the first four snapshots."""
    table = env.create()
    for n in range(4):
        table.append(rows(n))
    table = table.refresh()
    ids = [s.snapshot_id for s in table.metadata.snapshots]
    table.manage_snapshots().create_tag(ids[1], "t1").create_branch(ids[2], "audit").commit()
    table = table.refresh()
    table.append(rows(50, "b"), branch="audit")
    table.overwrite(rows(99, "c"))
    return table.refresh(), ids


@dataclass(frozen=True)
class ExpiredHistory:
    table: Any  # the pyiceberg table
    ids: list[int]
    #: What pyiceberg read before the expiry (read_everything).
    before: dict
    run_id: str


def expired_history(env, *, retain_min: int = 1) -> ExpiredHistory:
    """:func:`history`, expired (all but ``retain_min`` snapshots of main) under a retention of 10 days."""
    table, ids = history(env)
    before = read_everything(table)
    ours = open_orders(env)
    with ours.retaining_noncurrent(10, "expire") as run:
        ours.expire_snapshots(retain_min=retain_min, older_than=FAR)
    return ExpiredHistory(table, ids, before, run.run_id)


@dataclass(frozen=True)
class ExpiredConsumer:
    table: Any  # the pyiceberg table
    #: The consumer ``reader`` as it was before the expiry.
    position: Consumer
    run_id: str
    #: What the expiry returned.
    expired: list[str]


def expired_consumer(env) -> ExpiredConsumer:
    """``db.orders`` (consumers expire after 1 h) with three appends and consumer ``reader`` at snapshot 2,
    its consumers expired under a retention of 10 days."""
    table = env.create(properties={"consumer.expiration-time": "1 h"})
    for n in range(3):
        table.append(rows(n))
    ours = open_orders(env)
    ours.update_consumer("reader", 2)
    position = ours.consumer("reader")
    with ours.retaining_noncurrent(10, "expire-consumers") as run:
        expired = ours.expire_consumers(now=FAR)
    return ExpiredConsumer(table, position, run.run_id, expired)
