"""Consumers: readers' leases on history (``consumer/consumer-<id>``).

A consumer's ``next_snapshot`` is the first snapshot it has not read yet;
that snapshot and every later one are never expired while the consumer lives
(moving one safely while expiry runs: core/lifecycle/consumers.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from airflow_snaptable.core.errors import ConsumerNotFoundError, CorruptMetadataError
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.native.named_files import read_named_file

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
        path = consumer_path(consumer_id)
        data = read_named_file(self.storage, "consumer", consumer_id, path, ConsumerNotFoundError)
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
        self.storage.remove_abandoned_temps(CONSUMER_DIR)  # left by a write killed mid-way (kill -9)
        self.storage.write_bytes(consumer_path(consumer.id), consumer.to_json())

    def delete(self, consumer_id: str) -> None:
        self.storage.delete(consumer_path(consumer_id))
        self.storage.sync_directory(CONSUMER_DIR)  # as for tags: it must not come back over expired snapshots
