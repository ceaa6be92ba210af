"""Consumers: readers' leases on history (``consumer/consumer-<id>``).

A consumer's ``next_snapshot`` is the first snapshot it has not read yet;
that snapshot and every later one are never expired while the consumer lives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from airflow_snaptable.core.checks import check_int
from airflow_snaptable.core.errors import ConsumerNotFoundError, CorruptMetadataError
from airflow_snaptable.core.names import validate_name
from airflow_snaptable.core.storage import Storage

CONSUMER_DIR = "consumer"
CONSUMER_PREFIX = "consumer-"


@dataclass(frozen=True)
class Consumer:
    id: str
    next_snapshot: int
    update_time_millis: int

    def to_json(self) -> bytes:
        return json.dumps({"id": self.id, "nextSnapshot": self.next_snapshot, "updateTime": self.update_time_millis}).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "Consumer":
        try:
            doc = json.loads(data)
            consumer = cls(id=str(doc["id"]), next_snapshot=int(doc["nextSnapshot"]), update_time_millis=int(doc["updateTime"]))
            if consumer.next_snapshot < 1:
                raise ValueError(f"nextSnapshot {consumer.next_snapshot} < 1")
            return consumer
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot parse consumer file: {exc}") from exc

    def to_dict(self) -> dict:
        return {"id": self.id, "next_snapshot": self.next_snapshot, "update_time_millis": self.update_time_millis}


def consumer_path(consumer_id: str) -> str:
    return f"{CONSUMER_DIR}/{CONSUMER_PREFIX}{consumer_id}"


class ConsumerManager:
    """Reads and writes consumer files; reading is fail-closed like tags."""

    def __init__(self, storage: Storage):
        self.storage = storage

    def consumer(self, consumer_id: str) -> Consumer:
        validate_name(consumer_id, "consumer")
        path = consumer_path(consumer_id)
        try:
            data = self.storage.read_bytes(path)
        except FileNotFoundError:
            raise ConsumerNotFoundError(f"consumer {consumer_id!r} does not exist in {self.storage.uri}") from None
        return Consumer.from_json(data, where=self.storage.full_uri(path))

    def get(self, consumer_id: str) -> Consumer | None:
        try:
            return self.consumer(consumer_id)
        except ConsumerNotFoundError:
            return None

    def consumers(self) -> list[Consumer]:
        found = []
        for entry in self.storage.list_names(CONSUMER_DIR):
            if entry.startswith(CONSUMER_PREFIX) and not entry.startswith("."):
                consumer = self.get(entry[len(CONSUMER_PREFIX):])
                if consumer is not None:
                    found.append(consumer)
        return sorted(found, key=lambda c: c.id)

    def min_next_snapshot(self) -> int | None:
        consumers = self.consumers()
        return min((c.next_snapshot for c in consumers), default=None)

    def write(self, consumer: Consumer) -> None:
        self.storage.write_bytes(consumer_path(consumer.id), consumer.to_json())

    def delete(self, consumer_id: str) -> None:
        self.storage.delete(consumer_path(consumer_id))


def update_consumer(table, consumer_id: str, next_snapshot: int) -> Consumer:
    """Move a consumer: announce the position, check it against unfinished plans (core/plans.py), then write it."""
    from airflow_snaptable.core.errors import InvalidArgumentError, SnapshotNotFoundError
    from airflow_snaptable.core.intents import CONSUMER as CONSUMER_INTENT, Intent, IntentManager
    from airflow_snaptable.core.plans import PlanManager

    validate_name(consumer_id, "consumer")
    check_int(next_snapshot, "next_snapshot", minimum=1)
    latest = table.snapshot_manager.latest_id() or 0
    earliest = table.snapshot_manager.earliest_id() or 1
    if next_snapshot > latest + 1:
        raise InvalidArgumentError(f"next_snapshot {next_snapshot} is beyond latest + 1 ({latest + 1})")
    if next_snapshot < earliest:
        raise SnapshotNotFoundError(f"snapshot {next_snapshot} has expired (earliest is {earliest})")
    # Announce, check, publish (core/intents.py): a crash at any point keeps the previous position.
    intents = IntentManager(table.storage)
    consumer = Consumer(consumer_id, next_snapshot, table.clock())
    intent = intents.announce(Intent(CONSUMER_INTENT, consumer=consumer))
    try:
        plans = PlanManager(table)
        ceiling = plans.ceiling()
        earliest_now = max(table.snapshot_manager.earliest_id() or 1, table.snapshot_manager.earliest_floor())
        if (
            next_snapshot < plans.fence()
            or next_snapshot < earliest_now  # an expiry ran to completion since the first check
            or (ceiling is not None and next_snapshot > ceiling + 1)
        ):
            raise SnapshotNotFoundError(f"snapshot {next_snapshot} is being expired or rolled back")
        table.consumer_manager.write(consumer)
    finally:
        intents.withdraw(intent)
    return consumer


def expire_consumers(table, now=None) -> list[str]:
    # ``now`` first: a bad one is an error whether or not the option makes this run do anything.
    now_millis = table.clock() if now is None else table.to_millis(now)
    expiration = table.options.get("consumer.expiration-time")
    if expiration is None:
        return []
    limit = now_millis - int(expiration.total_seconds() * 1000)
    expired = [c.id for c in table.consumer_manager.consumers() if c.update_time_millis < limit]
    for consumer_id in expired:
        table.consumer_manager.delete(consumer_id)
    return expired
