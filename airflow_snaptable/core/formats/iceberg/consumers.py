"""Consumers of an Iceberg table: readers whose unread snapshots expiry keeps.

Iceberg has no consumers; this package carries one in the table's metadata, written in one
catalog commit:

- the table property ``snaptable.consumer.<id>`` = ``{"nextSnapshot": n, "updateTime": ms}``:
  the exact position (a data sequence number along ``main``, core/formats/iceberg/positions.py) and when
  it last moved (``consumer.expiration-time``, a table property, removes idle consumers);
- the tag ref ``snaptable-consumer-<id>`` on the snapshot the consumer read last, the base its
  next changes are read from: ``main``'s newest ancestor numbered below ``n`` (or ``main``'s
  oldest, before anything was read).

This package's expiry keeps ``main``'s ancestors from that base on, whatever the retain rules
and ref ages say. Other engines (Spark's ``expire_snapshots``, pyiceberg) see only the ref, so they
keep the base snapshot but may expire the unread ones after it.

A move races an expiry as on this package's tables (announce, check): the expiry journals its
plan before its commit, then reads the table again and plans anew if anything committed; a move
commits, then looks for a journaled plan that removes what it holds and, finding one, restores
the consumer as it was and fails with SnapshotNotFoundError.
"""

from __future__ import annotations

import json
from typing import Callable

from airflow_snaptable.core.arguments.checks import check_int
from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.errors import (
    ConsumerNotFoundError,
    CorruptMetadataError,
    InvalidArgumentError,
    SnapshotNotFoundError,
)
from airflow_snaptable.core.formats.iceberg.journal import journal_of
from airflow_snaptable.core.formats.iceberg.positions import IcebergPositions
from airflow_snaptable.core.lifecycle.consumers import remove_expired_consumers
from airflow_snaptable.core.formats.iceberg.retention import CONSUMER_REF_PREFIX as REF_PREFIX, MAIN, ancestors
from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.arguments.times import duration_argument, millis

PROPERTY_PREFIX = "snaptable.consumer."


def property_name(consumer_id: str) -> str:
    return PROPERTY_PREFIX + consumer_id


def ref_name(consumer_id: str) -> str:
    return REF_PREFIX + consumer_id


def read_consumers(metadata) -> dict[str, Consumer]:
    """Every consumer in the table's properties; an unreadable one fails closed (it may hold snapshots)."""
    found = {}
    for key, value in (metadata.properties or {}).items():
        if not key.startswith(PROPERTY_PREFIX):
            continue
        consumer_id = key[len(PROPERTY_PREFIX):]
        try:
            doc = json.loads(value)
            consumer = Consumer(consumer_id, int(doc["nextSnapshot"]), int(doc["updateTime"]))
            if consumer.next_snapshot < 1:
                raise ValueError(f"nextSnapshot {consumer.next_snapshot} < 1")
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"table property {key}={value!r} is not a consumer: {exc}") from exc
        found[consumer_id] = consumer
    return found


def encode(consumer: Consumer) -> str:
    return json.dumps({"nextSnapshot": consumer.next_snapshot, "updateTime": consumer.update_time_millis})


def base_snapshot(metadata, next_snapshot: int):
    """The snapshot a consumer at ``next_snapshot`` read last: ``main``'s newest ancestor numbered below it,
    or ``main``'s oldest when it has read nothing of what is retained. None for an empty table."""
    history = ancestors(metadata, metadata.refs[MAIN].snapshot_id) if MAIN in metadata.refs else []
    below = [s for s in history if s.sequence_number < next_snapshot]
    if below:
        return below[0]
    return history[-1] if history else None


def held_by_consumers(metadata, consumers: dict[str, Consumer] | None = None) -> dict[int, str]:
    """Snapshot id -> a consumer that holds it: ``main``'s ancestors from each consumer's base on."""
    consumers = read_consumers(metadata) if consumers is None else consumers
    if not consumers or MAIN not in metadata.refs:
        return {}
    history = ancestors(metadata, metadata.refs[MAIN].snapshot_id)  # newest first
    held: dict[int, str] = {}
    for consumer in consumers.values():
        base = base_snapshot(metadata, consumer.next_snapshot)
        for snapshot in history:
            held.setdefault(snapshot.snapshot_id, consumer.id)
            if base is not None and snapshot.snapshot_id == base.snapshot_id:
                break
    return held


class IcebergConsumers:
    """The consumers of one Iceberg table (``Table.consumer_manager``); ``journaled()`` gives the snapshots
    the journaled expiry plans remove (core/formats/iceberg/expire.py)."""

    def __init__(self, table, journaled: Callable[[], set[int]]):
        self.table = table
        self.journaled = journaled

    def consumers(self) -> list[Consumer]:
        return sorted(read_consumers(self.table.refresh().metadata).values(), key=lambda c: c.id)

    def get(self, consumer_id: str) -> Consumer | None:
        return read_consumers(self.table.refresh().metadata).get(consumer_id)

    def consumer(self, consumer_id: str) -> Consumer:
        found = self.get(consumer_id)
        if found is None:
            raise ConsumerNotFoundError(f"consumer {consumer_id!r} does not exist in {self.table.uri}")
        return found

    def update(self, consumer_id: str, next_snapshot: int) -> Consumer:
        """Record that ``consumer_id`` has read ``main`` up to position ``next_snapshot - 1``: move, then check."""
        validate_name(consumer_id, "consumer")
        check_int(next_snapshot, "next_snapshot", minimum=1)
        history = IcebergPositions(self.table).history()
        if not history:
            # The consumer's ref is a tag on the snapshot it read last: on a table without one there is
            # nothing to point it at (and pyiceberg refuses every ref but main's there).
            raise SnapshotNotFoundError(
                f"{self.table.uri} has no snapshot on {MAIN} yet: a consumer is recorded once the table has one"
            )
        latest = history[-1].sequence_number
        if next_snapshot > latest + 1:
            raise InvalidArgumentError(f"next_snapshot {next_snapshot} is beyond the latest position + 1 ({latest + 1})")
        oldest = history[0].sequence_number
        if next_snapshot - 1 < oldest and not (next_snapshot == 1 and oldest == 1):
            raise SnapshotNotFoundError(
                f"position {next_snapshot - 1} of {self.table.uri} has expired (main's oldest snapshot is number {oldest})"
            )
        consumer = Consumer(consumer_id, next_snapshot, self.table.clock())
        previous = read_consumers(self.table.iceberg.metadata).get(consumer_id)
        self._write(consumer_id, consumer)
        # The check after the announcement: a journaled expiry removing what the consumer now holds
        # planned without it; restore the consumer as it was.
        held = held_by_consumers(self.table.refresh().metadata, {consumer_id: consumer})
        if self.journaled() & set(held):
            self._write(consumer_id, previous)
            raise SnapshotNotFoundError(f"position {next_snapshot - 1} of {self.table.uri} is being expired")
        return consumer

    def delete(self, consumer_id: str) -> None:
        self.consumer(consumer_id)  # ConsumerNotFoundError when there is none
        self._write(consumer_id, None)

    def expire(self, now_millis: int, expiration_time=None,
               record: Callable[[list[Consumer]], None] | None = None) -> list[str]:
        """Delete the consumers not updated for ``expiration_time`` (default: the table property
        ``consumer.expiration-time``); returns their ids. ``record``: a run with a retention records them,
        as they were, before they go (core/formats/iceberg/noncurrent.py)."""
        if expiration_time is not None:
            expiration = millis(duration_argument(expiration_time, "expiration_time"))
        else:
            raw = (self.table.refresh().metadata.properties or {}).get("consumer.expiration-time")
            if raw is None:
                return []
            expiration = millis(duration_argument(raw, "table property consumer.expiration-time"))
        expired = [c for c in self.consumers() if c.update_time_millis < now_millis - expiration]
        return remove_expired_consumers(
            journal_of(self.table.storage), self.table.uri, expired,
            current=self.get, remove=lambda consumer_id: self._write(consumer_id, None),
            record=record or (lambda consumers: None),
        )

    def restore(self, consumer: Consumer) -> bool:
        """Write back a consumer an expiry removed (undo), unless one of that id exists now; whether it did."""
        if self.get(consumer.id) is not None:
            return False
        self._write(consumer.id, consumer)
        return True

    def _write(self, consumer_id: str, consumer: Consumer | None) -> None:
        """One catalog commit: the consumer's property and ref, or their removal (``None``)."""
        from pyiceberg.table.refs import SnapshotRefType
        from pyiceberg.table.update import (
            AssertRefSnapshotId,
            RemovePropertiesUpdate,
            RemoveSnapshotRefUpdate,
            SetPropertiesUpdate,
            SetSnapshotRefUpdate,
        )

        name = ref_name(consumer_id)

        def updates(metadata) -> tuple:
            if consumer is None:
                removal = (RemoveSnapshotRefUpdate(ref_name=name),) if name in metadata.refs else ()
                return removal + (RemovePropertiesUpdate(removals=[property_name(consumer_id)]),)
            base = base_snapshot(metadata, consumer.next_snapshot)
            ref = () if base is None else (SetSnapshotRefUpdate(ref_name=name, type=SnapshotRefType.TAG, snapshot_id=base.snapshot_id),)
            return ref + (SetPropertiesUpdate(updates={property_name(consumer_id): encode(consumer)}),)

        def requirements(metadata) -> tuple:
            if not metadata.snapshots:  # pyiceberg asserts no other ref of a table without snapshots
                return (AssertRefSnapshotId(ref=MAIN, snapshot_id=None),)
            current = metadata.refs.get(name)
            return (AssertRefSnapshotId(ref=name, snapshot_id=current.snapshot_id if current else None),)

        self.table.ref_commit(updates, requirements)
