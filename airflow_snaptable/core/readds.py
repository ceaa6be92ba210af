"""The registry of files a snapshot added back after the table had deleted them.

Everything else in the format relies on "a deleted file is never added back",
so expiry can decide from one delta whether a file is unused. A rollback with
``keep_history=True`` breaks that rule on purpose; it records the files it
re-adds here (``readd/readd-<snapshot id>.json``, or ``readd-pending-<uuid>.json``
until its commit lands) *before* committing, and deletion plans keep any
candidate that a snapshot at or after the candidate's deleting snapshot
re-added. Entries whose snapshot has expired are pruned by expiry.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.storage import Storage

READD_DIR = "readd"
_FINAL = re.compile(r"^readd-(\d+)\.json$")
_PENDING = re.compile(r"^readd-pending-[0-9a-f]+\.json$")


@dataclass(frozen=True)
class ReaddEntry:
    name: str
    snapshot_id: int | None  # None while the re-adding commit is pending: protects everything it lists
    paths: frozenset[str]

    def protects(self, path: str, deleted_at: int) -> bool:
        """Is ``path``, deleted from the table at snapshot ``deleted_at``, live again later?"""
        return path in self.paths and (self.snapshot_id is None or self.snapshot_id >= deleted_at)


class ReaddRegistry:
    def __init__(self, storage: Storage):
        self.storage = storage

    def entries(self) -> list[ReaddEntry]:
        """Fail closed: an unreadable entry is an error, never "nothing re-added"."""
        found = []
        for name in self.storage.list_names(READD_DIR):
            final = _FINAL.match(name)
            if not final and not _PENDING.match(name):
                continue
            path = f"{READD_DIR}/{name}"
            try:
                doc = json.loads(self.storage.read_bytes(path))
                paths = frozenset(doc["paths"])
            except FileNotFoundError:
                continue
            except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
                raise CorruptMetadataError(f"{self.storage.full_uri(path)}: cannot parse: {exc}") from exc
            found.append(ReaddEntry(name, int(final.group(1)) if final else None, paths))
        return found

    def add_pending(self, paths: list[str]) -> str:
        name = f"readd-pending-{uuid.uuid4().hex}.json"
        self.storage.write_bytes(f"{READD_DIR}/{name}", json.dumps({"paths": sorted(paths)}).encode())
        return name

    def finalize(self, pending: str, snapshot_id: int, paths: list[str]) -> None:
        self.storage.write_bytes(f"{READD_DIR}/readd-{snapshot_id}.json", json.dumps({"paths": sorted(paths)}).encode())
        self.storage.delete(f"{READD_DIR}/{pending}")

    def discard(self, name: str) -> None:
        self.storage.delete(f"{READD_DIR}/{name}")

    def prune(self, earliest: int) -> None:
        """Entries of snapshots below ``earliest`` protect nothing any more: every deletion before them is done."""
        for entry in self.entries():
            if entry.snapshot_id is not None and entry.snapshot_id < earliest:
                self.discard(entry.name)
