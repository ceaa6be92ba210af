"""Intents: how a tag or a consumer position is published without a crash window.

A new tag or consumer position must be checked against unfinished deletion
plans *after* it is visible to them (see core/lifecycle/deletion_plans.py): either a plan's
executor sees it and keeps its files, or the writer sees the plan and backs
out. Publishing the tag itself and then checking leaves a window: a writer
that dies between the two leaves a tag on files a plan is deleting.

So the writer first publishes an *intent* (``intent/intent-<uuid>.json``),
checks, and only then writes the tag or consumer file and drops the intent:

- readers never see intents: a crashed writer leaves no broken tag and no
  lost consumer position, only an intent;
- deletion plans and expiry treat intents like what they announce: a tag
  intent's files are protected, a consumer intent's position bounds expiry;
- an intent whose writer passed its check never loses a file (every plan that
  started before the intent existed made the check fail), so an intent with
  a missing manifest, or a consumer intent below the earliest snapshot, was
  abandoned and is ignored; intents older than ``STALE_INTENT_SECONDS`` are
  dropped, like stale pending plans.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.io.local_files import is_abandoned_temp
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.native.tags import Tag

INTENT_DIR = "intent"
INTENT_PREFIX = "intent-"
TAG = "tag"
CONSUMER = "consumer"
#: A writer takes milliseconds from intent to publish; one this old lost its writer.
STALE_INTENT_SECONDS = 600


@dataclass(frozen=True)
class Intent:
    kind: str
    tag: Tag | None = None
    consumer: Consumer | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def path(self) -> str:
        return f"{INTENT_DIR}/{INTENT_PREFIX}{self.id}.json"

    def to_json(self) -> bytes:
        payload = self.tag.to_json() if self.kind == TAG else self.consumer.to_json()
        return json.dumps({"id": self.id, "kind": self.kind, "payload": json.loads(payload)}).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "Intent":
        try:
            doc = json.loads(data)
            payload = json.dumps(doc["payload"]).encode()
            if doc["kind"] == TAG:
                return cls(TAG, tag=Tag.from_json(payload, where), id=str(doc["id"]))
            if doc["kind"] == CONSUMER:
                return cls(CONSUMER, consumer=Consumer.from_json(payload, where), id=str(doc["id"]))
            raise ValueError(f"unknown intent kind {doc['kind']!r}")
        except CorruptMetadataError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot parse intent: {exc}") from exc


class IntentManager:
    """Writes, lists and drops intents. Listing is fail-closed: an unreadable intent is an error."""

    def __init__(self, storage: Storage):
        self.storage = storage

    def announce(self, intent: Intent) -> Intent:
        # A writer killed mid-announcement (kill -9) left a temp file; its rerun is the next announcement.
        self.storage.remove_abandoned_temps(INTENT_DIR)
        self.storage.write_bytes(intent.path, intent.to_json())
        return intent

    def withdraw(self, intent: Intent) -> None:
        self.storage.delete(intent.path)

    def intents(self) -> list[Intent]:
        found = []
        for name in self.storage.list_names(INTENT_DIR):
            if not (name.startswith(INTENT_PREFIX) and name.endswith(".json")):
                continue  # temp files of atomic writes
            path = f"{INTENT_DIR}/{name}"
            try:
                data = self.storage.read_bytes(path)
            except FileNotFoundError:
                continue  # withdrawn while we listed
            found.append(Intent.from_json(data, where=self.storage.full_uri(path)))
        return found

    def tags(self) -> list[Tag]:
        return [i.tag for i in self.intents() if i.kind == TAG]

    def consumers(self) -> list[Consumer]:
        return [i.consumer for i in self.intents() if i.kind == CONSUMER]

    def drop_stale(self, earliest: int | None) -> int:
        """Drop intents whose writer is gone: older than STALE_INTENT_SECONDS, or consumer intents below
        ``earliest``; and the temp files of intent writes whose writer is gone (core/io/local_files.py)."""
        dropped = 0
        now = time.time()  # compared with storage modification times, not the table's clock
        for rel, _size, mtime in self.storage.list_files(INTENT_DIR):
            name = rel.rsplit("/", 1)[-1]
            if is_abandoned_temp(name, mtime, now):
                self.storage.delete(rel)
                continue
            if not name.startswith(INTENT_PREFIX):
                continue
            stale = mtime is not None and now - mtime > STALE_INTENT_SECONDS
            if not stale and earliest is not None:
                try:
                    intent = Intent.from_json(self.storage.read_bytes(rel), where=self.storage.full_uri(rel))
                except FileNotFoundError:
                    continue
                stale = intent.kind == CONSUMER and intent.consumer.next_snapshot < earliest
            if stale:
                self.storage.delete(rel)
                dropped += 1
        return dropped
