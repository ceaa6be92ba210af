"""Moving and expiring consumers, checked against the deletion plans.

A consumer's new position is announced first (core/lifecycle/intents.py), then checked against
the plans' fences, and only then written; the intent is withdrawn last. Either an
expiry sees the intent and keeps the position, or this check sees its fence and the
move fails: a crash at any point keeps the previous position.

Consumer expiry (every format: :func:`remove_expired_consumers`) is a deleting step no plan
fences: it holds a deleting mark over its removals (core/lifecycle/noncurrent/journal.py), and
removes only a consumer unchanged since it was listed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Callable, Sequence

from airflow_snaptable.core.arguments.checks import check_int
from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.errors import InvalidArgumentError, SnapshotNotFoundError
from airflow_snaptable.core.lifecycle.intents import CONSUMER as CONSUMER_INTENT, Intent, IntentManager
from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.lifecycle.deletion_plans import PlanManager
from airflow_snaptable.core.lifecycle.noncurrent.journal import EXPIRE_CONSUMERS, DeletingMark, NoncurrentJournal, NoncurrentRun
from airflow_snaptable.core.lifecycle.noncurrent.record import record_removed
from airflow_snaptable.core.lifecycle.store import TableStore


class ConsumerLifecycle:
    def __init__(
        self, store: TableStore, clock: Callable[[], int], expiration: timedelta | None, noncurrent: NoncurrentRun | None = None
    ):
        self.store = store
        #: A run with a retention records the consumers it expires first (core/lifecycle/noncurrent/).
        self.noncurrent = noncurrent
        self.clock = clock
        #: Option ``consumer.expiration-time``: consumers idle this long are removed (None: never).
        self.expiration = expiration

    def update(self, consumer_id: str, next_snapshot: int) -> Consumer:
        """Move a consumer: announce the position, check it against unfinished plans, then write it."""
        validate_name(consumer_id, "consumer")
        check_int(next_snapshot, "next_snapshot", minimum=1)
        snapshots = self.store.snapshots
        latest = snapshots.latest_id() or 0
        earliest = snapshots.earliest_id() or 1
        if next_snapshot > latest + 1:
            raise InvalidArgumentError(f"next_snapshot {next_snapshot} is beyond latest + 1 ({latest + 1})")
        if next_snapshot < earliest:
            raise SnapshotNotFoundError(f"snapshot {next_snapshot} has expired (earliest is {earliest})")
        # Announce, check, publish (core/lifecycle/intents.py): a crash at any point keeps the previous position.
        intents = IntentManager(self.store.lifecycle)
        consumer = Consumer(consumer_id, next_snapshot, self.clock())
        intent = intents.announce(Intent(CONSUMER_INTENT, consumer=consumer))
        try:
            plans = PlanManager(self.store)
            ceiling = plans.ceiling()
            earliest_now = max(snapshots.earliest_id() or 1, snapshots.earliest_floor())
            if (
                next_snapshot < plans.fence()
                or next_snapshot < earliest_now  # an expiry ran to completion since the first check
                or (ceiling is not None and next_snapshot > ceiling + 1)
            ):
                raise SnapshotNotFoundError(f"snapshot {next_snapshot} is being expired or rolled back")
            self.store.consumers.write(consumer)
        finally:
            intents.withdraw(intent)
        return consumer

    def delete(self, consumer_id: str) -> None:
        self.store.consumers.consumer(consumer_id)  # ConsumerNotFoundError when there is none
        self.store.consumers.delete(consumer_id)

    def expire(self, now_millis: int) -> list[str]:
        """Delete the consumers not updated for the expiration time before ``now_millis``; returns their ids."""
        if self.expiration is None:
            return []
        limit = now_millis - int(self.expiration.total_seconds() * 1000)
        expired = [c for c in self.store.consumers.consumers() if c.update_time_millis < limit]
        return remove_expired_consumers(
            NoncurrentJournal(self.store.lifecycle), self.store.uri, expired,
            current=self.store.consumers.get, remove=self.store.consumers.delete,
            record=lambda consumers: record_removed(self.store, self.noncurrent, "consumers", consumers=consumers),
        )


def remove_expired_consumers(
    journal: NoncurrentJournal, where: str, expired: Sequence[Consumer],
    current: Callable[[str], Consumer | None], remove: Callable[[str], None], record: Callable[[list[Consumer]], None],
) -> list[str]:
    """Remove the listed ``expired`` consumers that are still as listed; returns their ids.

    Under a deleting mark, put up after the listing: an undo that brings a consumer back either
    finished before the mark (the consumer read by ``current`` is not the listed one, and stays) or
    refuses. ``record``: a run with a retention records them, as they were, before they go."""
    if not expired:
        return []
    with DeletingMark(journal, EXPIRE_CONSUMERS) as mark:
        mark.check(where, "no consumer was expired")
        record(list(expired))
        gone = []
        for consumer in expired:
            # One written since the listing (moved, or brought back by an undo) is not the one that expired.
            if current(consumer.id) == consumer:
                remove(consumer.id)
                gone.append(consumer.id)
        return gone
