"""A lease per table, so that two maintenance runs never work on one table at once.

A lease is a small JSON file ``lease/lease-<generation>.json`` in the table's status directory
(core/lake/status.py) naming its owner (host, process, run id) and when it expires. Taking the
lease creates the next generation with the storage's atomic create-if-absent (the primitive
commits rely on: a hard link locally, a conditional PUT on S3), so of two runs racing for a free
table exactly one creates it; the other skips the table and says who holds it.

Rules:

- the newest generation holds the table while it is not released, not expired, and its owner
  is not a process of this host that no longer exists (a crashed run's table is free again at
  once on its own host; elsewhere after the lease expires);
- after creating generation ``g`` the taker lists again: a newer generation means it lost (a
  taker that stalled across other runs), and it withdraws;
- the holder renews the lease while it works (:class:`LeaseKeeper`, every third of its time to
  live), and checks before each job that it still holds it: a run that lost its lease (paused
  longer than the lease lives) stops with LeaseLostError instead of working beside the new holder;
- releasing rewrites the holder's own file as released; generations older than the previous one
  are deleted by the next taker, so a table keeps two lease files at most.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from airflow_snaptable.core.arguments.times import iso_time
from airflow_snaptable.core.errors import LeaseLostError
from airflow_snaptable.core.io.storage import Storage

LEASE_DIR = "lease"
#: How long a lease lives without renewal.
DEFAULT_LEASE_SECONDS = 600.0
_LEASE_FILE = re.compile(r"^lease-(\d{20})\.json$")


def _now_millis() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds (or held) a table's lease."""

    host: str
    pid: int
    run_id: str
    acquired_millis: int
    expires_millis: int
    released: bool = False

    @property
    def owner(self) -> str:
        return f"{self.host}:{self.pid} (run {self.run_id})"

    def holds(self, now_millis: int) -> bool:
        return not self.released and now_millis < self.expires_millis and not _process_gone(self.host, self.pid)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "LeaseHolder | None":
        try:
            doc = json.loads(data)
            return cls(
                host=str(doc["host"]), pid=int(doc["pid"]), run_id=str(doc["run_id"]),
                acquired_millis=int(doc["acquired_millis"]), expires_millis=int(doc["expires_millis"]),
                released=bool(doc.get("released", False)),
            )
        except (ValueError, KeyError, TypeError):
            return None  # not ours to understand: it holds nothing


def _process_gone(host: str, pid: int) -> bool:
    """True only when the owner is a process of this host that does not exist any more (POSIX)."""
    if os.name != "posix" or host != socket.gethostname() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # exists, owned by someone else
    return False


class Lease:
    """A lease this process holds on one table."""

    def __init__(self, storage: Storage, directory: str, generation: int, holder: LeaseHolder, ttl_millis: int):
        self.storage = storage
        self.directory = directory
        self.generation = generation
        self.holder = holder
        self.ttl_millis = ttl_millis
        #: Set when a renewal found the lease taken over: the run stops working on the table.
        self.lost: str | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> str:
        return _lease_path(self.directory, self.generation)

    def check(self) -> None:
        """Raise LeaseLostError if the lease expired or another run took it over."""
        if self.lost is None and _now_millis() >= self.holder.expires_millis:
            self.lost = f"the lease on the table expired at {self.holder.expires_millis} before it was renewed"
        if self.lost is not None:
            raise LeaseLostError(self.lost)

    def renew(self) -> None:
        """Extend the lease by its time to live, if it is still the newest generation."""
        with self._lock:
            if self.lost is not None:
                return
            newest = _generations(self.storage, self.directory)
            if not newest or newest[-1] != self.generation:
                self.lost = f"another run took the table's lease over (generation {newest[-1] if newest else '?'})"
                return
            self.holder = LeaseHolder(
                self.holder.host, self.holder.pid, self.holder.run_id, self.holder.acquired_millis, _now_millis() + self.ttl_millis
            )
            self.storage.write_bytes(self.path, self.holder.to_json())

    def release(self) -> None:
        """Give the table up (its file stays, marked released, until a later taker prunes it)."""
        with self._lock:
            if self.lost is not None:
                return  # not ours any more: leave the new holder's state alone
            released = LeaseHolder(
                self.holder.host, self.holder.pid, self.holder.run_id, self.holder.acquired_millis, _now_millis(), released=True
            )
            self.storage.write_bytes(self.path, released.to_json())
            self.lost = "released"


@dataclass(frozen=True)
class Busy:
    """The table's lease is held by another run."""

    holder: LeaseHolder | None

    def describe(self) -> str:
        if self.holder is None:
            return "another maintenance run took the table's lease at the same moment"
        return f"locked by {self.holder.owner}: another maintenance run is working on the table"

    def to_dict(self) -> dict[str, Any]:
        if self.holder is None:
            return {"owner": None, "runId": None, "expiresAt": None}
        # One time format in every report and status: ISO-8601 UTC ending in Z, to the millisecond.
        return {"owner": self.holder.owner, "runId": self.holder.run_id, "expiresAt": iso_time(self.holder.expires_millis)}


def acquire(storage: Storage, directory: str, run_id: str, ttl_seconds: float = DEFAULT_LEASE_SECONDS) -> Lease | Busy:
    """Take the table's lease, or say who holds it. ``directory``: the lease's directory under ``storage``."""
    ttl_millis = max(1, int(ttl_seconds * 1000))
    generations = _generations(storage, directory)
    top = generations[-1] if generations else 0
    if generations:
        current = _read(storage, directory, top)
        if current is not None and current.holds(_now_millis()):
            return Busy(current)
    now = _now_millis()
    mine = LeaseHolder(socket.gethostname(), os.getpid(), run_id, now, now + ttl_millis)
    if not storage.create_exclusive(_lease_path(directory, top + 1), mine.to_json()):
        return Busy(_read(storage, directory, top + 1))
    lease = Lease(storage, directory, top + 1, mine, ttl_millis)
    after = _generations(storage, directory)
    if after and after[-1] > lease.generation:
        # A newer generation exists: this taker stalled between its listing and its create, and lost.
        lease.release()
        return Busy(_read(storage, directory, after[-1]))
    stale = [g for g in after if g < lease.generation - 1]
    if stale:
        storage.delete_files([_lease_path(directory, g) for g in stale])
    return lease


def current_holder(storage: Storage, directory: str) -> LeaseHolder | None:
    """Who holds the table's lease now (None: nobody)."""
    generations = _generations(storage, directory)
    if not generations:
        return None
    holder = _read(storage, directory, generations[-1])
    return holder if holder is not None and holder.holds(_now_millis()) else None


def _generations(storage: Storage, directory: str) -> list[int]:
    found = (_LEASE_FILE.match(name) for name in storage.list_names(directory))
    return sorted(int(m.group(1)) for m in found if m)


def _read(storage: Storage, directory: str, generation: int) -> LeaseHolder | None:
    try:
        return LeaseHolder.from_json(storage.read_bytes(_lease_path(directory, generation)))
    except FileNotFoundError:
        return None


def _lease_path(directory: str, generation: int) -> str:
    return f"{directory}/lease-{generation:020d}.json"


class LeaseKeeper:
    """Renews the leases a run holds, every third of their time to live, on one background thread."""

    def __init__(self, ttl_seconds: float):
        self.interval = max(0.05, ttl_seconds / 3)
        self._leases: set[Lease] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases.add(lease)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="snaptable-lease-keeper", daemon=True)
                self._thread.start()

    def discard(self, lease: Lease) -> None:
        with self._lock:
            self._leases.discard(lease)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                leases = list(self._leases)
            for lease in leases:
                try:
                    lease.renew()
                except Exception:  # noqa: BLE001 - a storage hiccup: the next round retries, and check() judges expiry
                    continue

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
