"""The registry of files that have several live intervals.

Every deletion rule relies on "a file deleted at snapshot s was live in one
interval [a, s)", so the newest tag below s is the only tag that can hold it.
A rollback with ``keep_history=True`` breaks that on purpose: it adds back
files the table had deleted. It records them here *before* committing:

- ``readd/readd-pending-<uuid>.json`` while its commit is in flight: the files
  are live at some snapshot not yet known, so every deletion keeps them;
- ``readd/readd-<snapshot id>.json`` once committed: the files are live again at
  that snapshot, so a deletion at or before it keeps them;
- ``readd/readd-history-<uuid>.json`` when a rollback discards the re-adding
  snapshot: no longer live there, but the files still had several intervals.

A file listed in any entry is *multi-interval*: a tag in any of its intervals
may hold it, so deletion plans keep it while any tag holds it, not only the
newest tag below its deletion. A path leaves the registry only when a plan has
deleted the file itself (names are never reused), so that knowledge outlives
the snapshots that re-added it.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Collection

from airflow_snaptable.core.errors import CommitConflictError, CorruptMetadataError
from airflow_snaptable.core.io.storage import Storage

READD_DIR = "readd"
#: Listings of the registry one read of it takes at most: each one after the first follows an entry replaced meanwhile.
_MAX_LISTINGS = 10
_FINAL = re.compile(r"^readd-(\d+)\.json$")
_PENDING = re.compile(r"^readd-pending-[0-9a-f]+\.json$")
_HISTORY = re.compile(r"^readd-history-[0-9a-f]+\.json$")


def is_entry_name(name: str) -> bool:
    """A registry entry's file name (anything else in ``readd/`` is a temp file of an atomic write)."""
    return any(pattern.match(name) for pattern in (_FINAL, _PENDING, _HISTORY))


def parse_entry(data: bytes, where: str) -> frozenset[str]:
    """The paths an entry lists; CorruptMetadataError if it cannot be parsed."""
    try:
        paths = json.loads(data)["paths"]
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise ValueError("'paths' must be a list of strings")
        return frozenset(paths)
    except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
        raise CorruptMetadataError(f"{where}: cannot parse: {exc}") from exc


@dataclass(frozen=True)
class ReaddEntry:
    name: str
    #: The snapshot that added the files back; None while that commit is pending.
    snapshot_id: int | None
    paths: frozenset[str]
    #: False for history entries: the re-adding snapshot was discarded.
    live: bool = True

    @property
    def pending(self) -> bool:
        return self.live and self.snapshot_id is None

    def protects(self, path: str, deleted_at: int) -> bool:
        """Is ``path``, deleted from the table at snapshot ``deleted_at``, live again at or after it?"""
        return self.live and path in self.paths and (self.snapshot_id is None or self.snapshot_id >= deleted_at)


class ReaddRegistry:
    def __init__(self, storage: Storage):
        self.storage = storage

    def entries(self) -> list[ReaddEntry]:
        """Fail closed: an unreadable entry is an error, never "nothing re-added".

        An entry is replaced by writing its successor, then deleting it (a pending entry finalised, a
        final one retired to history): one listed and gone when read had its successor written before,
        under a name the listing did not show. The directory is listed again until no listed entry
        vanished, so no entry is lost between a listing and its reads (an expiry's protection read
        while a rollback finalised its entry would otherwise miss the files it re-added)."""
        found: dict[str, ReaddEntry] = {}
        for _listing in range(_MAX_LISTINGS):
            vanished = False
            for name in self.storage.list_names(READD_DIR):
                if not is_entry_name(name) or name in found:
                    continue  # temp files of atomic writes; an entry read in an earlier listing
                final = _FINAL.match(name)
                paths = self._read(name)
                if paths is None:
                    vanished = True  # replaced (its successor is listed next time), or dropped
                    continue
                live = not _HISTORY.match(name)
                found[name] = ReaddEntry(name, int(final.group(1)) if final else None, paths, live)
            if not vanished:
                return list(found.values())
        raise CommitConflictError(f"{self.storage.full_uri(READD_DIR)}: re-add entries kept changing while they were read")

    def _read(self, name: str) -> frozenset[str] | None:
        path = f"{READD_DIR}/{name}"
        try:
            data = self.storage.read_bytes(path)
        except FileNotFoundError:
            return None  # finalised, discarded or pruned while we listed
        return parse_entry(data, self.storage.full_uri(path))

    @staticmethod
    def multi_interval(entries: list[ReaddEntry]) -> frozenset[str]:
        """Every path with (possibly) several live intervals."""
        return frozenset(path for entry in entries for path in entry.paths)

    def add_pending(self, paths: list[str]) -> str:
        name = f"readd-pending-{uuid.uuid4().hex}.json"
        self._write(name, paths)
        return name

    def finalize(self, pending: str, snapshot_id: int, paths: list[str]) -> None:
        self._write(f"readd-{snapshot_id}.json", paths)
        self.storage.delete(f"{READD_DIR}/{pending}")

    def discard(self, name: str) -> None:
        """Drop a pending entry whose commit did not happen (nothing was added back)."""
        self.storage.delete(f"{READD_DIR}/{name}")

    def retire(self, entry: ReaddEntry) -> None:
        """The re-adding snapshot was discarded: keep its files known as multi-interval, without the liveness claim.

        The history entry is written before the final one goes, so a crash in between
        leaves both (a claim that only keeps files longer), never neither.
        """
        self._write(f"readd-history-{uuid.uuid4().hex}.json", sorted(entry.paths))
        self.storage.delete(f"{READD_DIR}/{entry.name}")

    def forget(self, deleted: Collection[str]) -> None:
        """Drop paths whose files a plan has deleted; entries left empty go.

        Pending entries are left alone: their writer may still finalise them. ``deleted`` becomes a
        set only when there is an entry to check it against (a plan may have deleted millions).
        """
        if not deleted:
            return
        entries = [e for e in self.entries() if not e.pending]
        if not entries:
            return
        deleted = deleted if isinstance(deleted, (set, frozenset)) else set(deleted)
        for entry in entries:
            if not (entry.paths & deleted):
                continue
            remaining = sorted(entry.paths - deleted)
            if remaining:
                self._write(entry.name, remaining)
            else:
                self.storage.delete(f"{READD_DIR}/{entry.name}")

    def _write(self, name: str, paths) -> None:
        self.storage.write_bytes(f"{READD_DIR}/{name}", json.dumps({"paths": sorted(paths)}).encode())
