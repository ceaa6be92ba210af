"""Expiry of a long range in sub-ranges: memory bounded by a sub-range, not by the range.

The rules (core/lifecycle/expiry/plan.py ``ExpireRule``) decide the range ``[earliest, end)``; it is carried
out as consecutive sub-ranges ``[earliest, x1)``, ``[x1, x2)``, ... Each is exactly what a run with a
smaller ``limit`` plans (``plan_expiry(start, x)``): a complete expiry of a prefix, carried out as its
own plan (pending -> protection -> active -> execute), so a crash between two leaves a valid table
and a tag or consumer that comes in between is honoured by the next one.

A sub-range ends where it reaches :data:`MAX_SNAPSHOTS` snapshots or :data:`MAX_DELETED_FILES`
deleted files recorded in the summaries of the deltas it reads (``summary["deleted_files"]``). A
snapshot without that record (a Paimon table's, or an older one) counts toward the snapshot bound
only: ending a sub-range at each of them would expire such a table one snapshot per plan, each
paying a plan's fixed reads and writes. A sub-range always holds at least one snapshot.
"""

from __future__ import annotations

from airflow_snaptable.core.errors import SnapshotNotFoundError
from airflow_snaptable.core.lifecycle.expiry.plan import ExpireRule, SnapshotCache

#: Snapshots one sub-range expires at most.
MAX_SNAPSHOTS = 10_000
#: Snapshots read at most in one ``Storage.read_many`` while walking a sub-range (never past its bounds).
READ_AHEAD = 1_000
#: Deleted files (summary records of the deltas a sub-range reads) past which a sub-range ends.
MAX_DELETED_FILES = 500_000


def subrange_end(rule: ExpireRule, read: SnapshotCache, start: int) -> int | None:
    """``x``: the sub-range ``[start, x)`` expires next; None if ``start`` does not expire.

    Sub-range ``[start, x)`` reads the deltas of ``start+1 .. x`` (plan_expiry's candidates), so
    including snapshot ``x`` adds the deleted files of snapshot ``x + 1``. Reads only the snapshots
    of this sub-range and the one after it (which the plan reads anyway), in bulk reads growing with
    the walk up to :data:`READ_AHEAD` (the time rule may end the range early: little is read past it).
    """
    end = start
    deleted = 0
    while True:
        # Half as many as walked so far (at most READ_AHEAD): where the time rule ends the range, at
        # most half again is read past it; never past this sub-range and the snapshot after it.
        ahead = min(end + max(1, min(READ_AHEAD, (end - start) // 2)), start + MAX_SNAPSHOTS + 1, rule.end_bound)
        if end + 1 not in read.cache and end + 1 <= ahead:
            _read_ahead(read, end + 1, ahead)
        if not rule.expires(read, end):
            break
        recorded = (read.get(end + 1).summary or {}).get("deleted_files")
        recorded = recorded if isinstance(recorded, int) else 0  # unknown: bounded by the snapshot count only
        if end > start and (end - start >= MAX_SNAPSHOTS or deleted + recorded > MAX_DELETED_FILES):
            break
        deleted += recorded
        end += 1
    return end if end > start else None


def _read_ahead(read: SnapshotCache, first: int, last: int) -> None:
    """Snapshots ``first..last`` into ``read`` in bulk; when one is missing nothing is read ahead, and
    the walk reads one at a time, failing only where it needs a missing one."""
    try:
        read.load(first, last)
    except SnapshotNotFoundError:
        pass
