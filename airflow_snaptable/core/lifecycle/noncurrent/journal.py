"""The noncurrent journal: what a deleting run removed, recorded before it unpublished anything.

A run with a retention (``noncurrent_days``) deletes no data or metadata file. Each of its
deletion plans (and each tag, consumer or orphan batch it removes outside a plan) writes one
*entry* first, ``noncurrent/entry-<run id>-<key>.json`` in the engine's storage (the store's
``lifecycle``), holding:

- the snapshots, tags and consumers it removes, as they were (their own JSON);
- the files only they held (data files, and metadata files by their path under the table),
  which stay where they are: they are *noncurrent*.

Rules:

- The entry is written before the plan unpublishes (or the tag or consumer file goes): a crash
  leaves an entry for a removal that may not have happened, never a removal without an entry.
  An entry once written is never rewritten by a rerun (the snapshots it records may be gone).
- Noncurrent files are neither orphans nor missing (core/lifecycle/orphans.py,
  core/formats/native/verify.py): :meth:`NoncurrentJournal.held_paths`.
- Undo (undo.py) and purge (purge.py) exclude each other per run through markers written
  *before* each checks for the other's: ``undo-<run>.json`` and ``purge-<run>.json``.
  Either purge sees the undo marker and leaves the run alone, or undo sees the purge marker
  and refuses. ``undone-<run>.json`` records a finished undo, so undoing again is a no-op.
- A deleting run does not delete while an undo is marked (:func:`refuse_while_undoing`), and an
  undo does not start while a deleting run is under way:
  - expiry, rollback and tag deletions that free files publish their deletion plan before they read
    the undo marks; an undo reads the plans after it marks: one of the two backs out. An undo that
    ran whole between the run's first read and its plan's publication is seen by the *undo
    generation* (:func:`undo_markers`), read before planning and again after publishing: a change
    makes the run plan again (core/lifecycle/plan_executor.py);
  - the deleting steps no plan fences (consumer expiry, orphan removal, a tag deletion that frees
    nothing) hold a *deleting mark* (:class:`DeletingMark`, ``deleting-<token>.json``) from before
    their first read to after their last delete, and read the undo marks right before each delete
    (none may be up, and the undo generation must be the one read once the mark was up);
    an undo refuses while a fresh one is up (:func:`fresh_deleting_marks`). A deleting run's reads
    of the journal and of the live metadata cannot otherwise see a whole run-then-undo between
    them: orphan removal could take a file an expiry with a retention recorded after its first
    read, and an undo brought back before its last, for an orphan;
  - the holder renews its mark while it works; a mark not renewed for ``STALE_MARK_MILLIS`` is a
    crashed run's and holds nothing back, and a holder whose renewals failed for half that time
    no longer trusts its reads and deletes nothing more (``DeletingMarkLapsedError``).
- A file's retention is measured against the real clock from the run's real start time.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterator

from airflow_snaptable.core.arguments.checks import check_int
from airflow_snaptable.core.errors import CorruptMetadataError, DeletingMarkLapsedError, InvalidArgumentError, UndoInProgressError
from airflow_snaptable.core.io.path_set import PathHashSet, PathHashSetBuilder
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.io.table_paths import checked_relative_path

#: The longest a run keeps what it removed: a thousand years (its purge date must still be a date).
MAX_NONCURRENT_DAYS = 365_000


def check_noncurrent_days(days: object, name: str = "noncurrent_days") -> int:
    """``days`` if it is a whole number of days from 0 to :data:`MAX_NONCURRENT_DAYS`, else InvalidArgumentError
    (a larger one made a run whose purge date is no date: ``purge_after_iso: null``, never purged)."""
    check_int(days, name, minimum=0)
    if days > MAX_NONCURRENT_DAYS:
        raise InvalidArgumentError(f"{name} must be at most {MAX_NONCURRENT_DAYS} (1000 years), got {days!r}")
    return days


JOURNAL_DIR = "noncurrent"
ENTRY_PREFIX = "entry-"
UNDO_PREFIX = "undo-"
PURGE_PREFIX = "purge-"
UNDONE_PREFIX = "undone-"
#: A deleting step no deletion plan fences, under way (``deleting-<token>.json``): undo refuses while a fresh one is up.
DELETING_PREFIX = "deleting-"
#: A deleting mark not renewed for this long is a crashed run's: it no longer holds an undo back.
STALE_MARK_MILLIS = 15 * 60_000
#: How often a deleting run renews its mark.
RENEW_MARK_MILLIS = STALE_MARK_MILLIS // 5
DAY_MILLIS = 86_400_000

#: The operations a run records (what ``snaptable trash`` shows).
EXPIRE_SNAPSHOTS = "expire-snapshots"
DELETE_TAG = "delete-tag"
EXPIRE_TAGS = "expire-tags"
ROLLBACK = "rollback"
EXPIRE_CONSUMERS = "expire-consumers"
CLEAN = "clean"
REMOVE_ORPHANS = "remove-orphan-files"


def real_now_millis() -> int:
    """The real clock: retention is never measured against a caller's ``now``."""
    return int(time.time() * 1000)


@dataclass(frozen=True)
class NoncurrentRun:
    """One deleting run with a retention: its id, its retention in days, when it really started."""

    run_id: str
    days: int
    at_millis: int
    operation: str

    @classmethod
    def start(cls, days: int, operation: str) -> "NoncurrentRun":
        return cls(uuid.uuid4().hex, check_noncurrent_days(days), real_now_millis(), operation)

    @property
    def purge_after_millis(self) -> int:
        return self.at_millis + self.days * DAY_MILLIS

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "days": self.days, "at_millis": self.at_millis, "operation": self.operation}

    @classmethod
    def from_dict(cls, doc: dict) -> "NoncurrentRun":
        run = cls(str(doc["run_id"]), int(doc["days"]), int(doc["at_millis"]), str(doc["operation"]))
        if not run.run_id.isalnum() or run.days < 0:
            raise ValueError(f"not a noncurrent run: {doc!r}")
        return run


def entry_key(*parts: str) -> str:
    """A key made of anything (tag names, plan ids) that is safe in a file name and unique per input."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


@dataclass
class JournalEntry:
    """What one step of a run removed (see the module doc)."""

    run: NoncurrentRun
    key: str
    #: Snapshots it removed, as their JSON text, ascending ids.
    snapshots: list[str] = field(default_factory=list)
    #: True when they were discarded above the history (a rollback), not expired below it.
    above: bool = False
    #: A rollback to an expired snapshot published it again first: its id (undo unpublishes it).
    restored: int | None = None
    #: Tags and consumers it removed, as their JSON text.
    tags: list[str] = field(default_factory=list)
    consumers: list[str] = field(default_factory=list)
    #: Formats whose history is refs (Apache Iceberg): the refs it removed or moved, as their JSON text by name,
    #: the snapshot ids it left them at (None: removed), and the history log entries it dropped.
    refs: dict[str, str] = field(default_factory=dict)
    refs_after: dict[str, int | None] = field(default_factory=dict)
    log: list[dict] = field(default_factory=list)
    #: Formats whose snapshot removal unlinks the children of what it removed (Apache Iceberg clears a retained
    #: snapshot's ``parent-snapshot-id`` when its parent goes): each such child's id and the parent it had.
    #: None: not recorded (an entry written before this was).
    parents: dict[int, int] | None = None
    #: Formats that list statistics files per snapshot in their metadata (Apache Iceberg's ``statistics`` and
    #: ``partition-statistics``): the entries of the snapshots it removed, as their JSON text.
    statistics: list[str] = field(default_factory=list)
    partition_statistics: list[str] = field(default_factory=list)
    #: Files only they held: (path relative to the table's file root, bytes).
    data_files: list[tuple[str, int]] = field(default_factory=list)
    metadata_files: list[tuple[str, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{ENTRY_PREFIX}{self.run.run_id}-{self.key}.json"

    @property
    def files(self) -> list[tuple[str, int]]:
        return self.data_files + self.metadata_files

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "run": self.run.to_dict(), "key": self.key, "snapshots": self.snapshots, "above": self.above, "restored": self.restored,
                "tags": self.tags, "consumers": self.consumers,
                "data_files": [list(f) for f in self.data_files], "metadata_files": [list(f) for f in self.metadata_files],
                "refs": self.refs, "refs_after": self.refs_after, "log": self.log,
                "parents": None if self.parents is None else {str(child): parent for child, parent in self.parents.items()},
                "statistics": self.statistics, "partition_statistics": self.partition_statistics,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "JournalEntry":
        try:
            doc = json.loads(data)
            entry = cls(
                NoncurrentRun.from_dict(doc["run"]), str(doc["key"]), snapshots=list(doc["snapshots"]), above=bool(doc["above"]),
                restored=None if doc.get("restored") is None else int(doc["restored"]),
                tags=list(doc["tags"]), consumers=list(doc["consumers"]),
                refs={str(k): str(v) for k, v in doc.get("refs", {}).items()},
                refs_after={str(k): (None if v is None else int(v)) for k, v in doc.get("refs_after", {}).items()},
                log=list(doc.get("log", [])),
                parents=None if doc.get("parents") is None else {int(child): int(parent) for child, parent in doc["parents"].items()},
                statistics=[str(t) for t in doc.get("statistics", [])],
                partition_statistics=[str(t) for t in doc.get("partition_statistics", [])],
                data_files=[(str(p), int(s)) for p, s in doc["data_files"]],
                metadata_files=[(str(p), int(s)) for p, s in doc["metadata_files"]],
            )
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot parse noncurrent journal entry: {exc}") from exc
        for path, _size in entry.files:
            # What purge deletes must be inside the table, as a plan's files are.
            checked_relative_path(path, "noncurrent file", where)
        return entry


def run_of_entry(name: str) -> str | None:
    if not (name.startswith(ENTRY_PREFIX) and name.endswith(".json")):
        return None
    return name[len(ENTRY_PREFIX):].split("-", 1)[0]


class NoncurrentJournal:
    """Reads and writes the journal of one table. Reading fails closed: an unreadable entry is an error,
    as the files it holds must not silently become orphans."""

    def __init__(self, storage: Storage, directory: str = JOURNAL_DIR):
        """:param directory: where under ``storage`` (an Iceberg table keeps it in its ``snaptable/`` directory)."""
        self.storage = storage
        self.directory = directory

    # -- entries --------------------------------------------------------------------------------

    def write(self, entry: JournalEntry) -> None:
        self.storage.write_bytes(f"{self.directory}/{entry.name}", entry.to_json())

    def has(self, run_id: str, key: str) -> bool:
        return self.storage.exists(f"{self.directory}/{ENTRY_PREFIX}{run_id}-{key}.json")

    def names(self) -> list[str]:
        return [n for n in self.storage.list_names(self.directory) if run_of_entry(n) is not None]

    def run_ids(self) -> list[str]:
        return sorted({run_of_entry(n) for n in self.names()})

    def entry_names(self, run_id: str) -> list[str]:
        return [n for n in self.names() if run_of_entry(n) == run_id]

    def read(self, name: str) -> JournalEntry | None:
        path = f"{self.directory}/{name}"
        try:
            data = self.storage.read_bytes(path)
        except FileNotFoundError:
            return None  # purged or undone while we listed
        return JournalEntry.from_json(data, where=self.storage.full_uri(path))

    def entries(self, run_id: str | None = None) -> Iterator[JournalEntry]:
        """Entries one at a time (memory: one entry, whatever the journal's size)."""
        for name in self.names():
            if run_id is None or run_of_entry(name) == run_id:
                entry = self.read(name)
                if entry is not None:
                    yield entry

    def delete(self, names: list[str]) -> None:
        for name in names:
            self.storage.delete(f"{self.directory}/{name}")

    def held_paths(self) -> PathHashSet:
        """Every noncurrent file still recorded: not an orphan, not to be reported missing or unreferenced."""
        builder = PathHashSetBuilder()
        for entry in self.entries():
            builder.add_paths(path for path, _size in entry.files)
        return builder.build()

    # -- markers --------------------------------------------------------------------------------

    def _marker(self, prefix: str, run_id: str) -> str:
        return f"{self.directory}/{prefix}{run_id}.json"

    def mark(self, prefix: str, run_id: str, **fields: str) -> None:
        """Write (or rewrite) the marker, stamped with the real clock; ``fields``: what else it records."""
        doc = {"run_id": run_id, "at_millis": real_now_millis(), **fields}
        self.storage.write_bytes(self._marker(prefix, run_id), json.dumps(doc).encode())

    def read_mark(self, prefix: str, run_id: str) -> dict:
        """The marker's document (FileNotFoundError when it is gone)."""
        return json.loads(self.storage.read_bytes(self._marker(prefix, run_id)))

    def marked(self, prefix: str, run_id: str) -> bool:
        return self.storage.exists(self._marker(prefix, run_id))

    def unmark(self, prefix: str, run_id: str) -> None:
        self.storage.delete(self._marker(prefix, run_id))

    def marked_runs(self, prefix: str) -> set[str]:
        return {n[len(prefix):-len(".json")] for n in self.storage.list_names(self.directory) if n.startswith(prefix) and n.endswith(".json")}


class DeletingMark:
    """A deleting step no deletion plan fences, marked from before its first read to after its last
    delete (see the module doc). Use as a context manager; call :meth:`check` right before each delete.

    The mark is renewed on a background thread every ``renew_millis``, so a long step (an orphan
    listing of millions of files) keeps holding undo back; the mark records the operation, which an
    undo's refusal names."""

    def __init__(self, journal: NoncurrentJournal, operation: str, renew_millis: int = RENEW_MARK_MILLIS):
        self.journal = journal
        self.operation = operation
        self.token = uuid.uuid4().hex
        self.renew_millis = renew_millis
        #: Set once renewals failed for half the stale time: an undo may have taken the mark for a crashed run's.
        self.lapsed = False
        #: The undo markers once the mark was up (:func:`undo_markers`): each check proves them unchanged.
        self._undo_generation: frozenset[str] = frozenset()
        self._renewed_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "DeletingMark":
        self._renewed_at = time.monotonic()
        self._write()
        # Read once the mark is up: an undo that marks from now on sees the mark and refuses, so a change
        # of this generation by the time of a delete is an undo that was under way when the run began.
        self._undo_generation = undo_markers(self.journal)
        self._thread = threading.Thread(target=self._renew, name="snaptable-deleting-mark", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()  # no renewal may write the mark again after it is taken down
        self.journal.unmark(DELETING_PREFIX, self.token)

    def _write(self) -> None:
        self.journal.mark(DELETING_PREFIX, self.token, operation=self.operation)
        self.lapsed = self.lapsed or self._unrenewed_too_long()
        self._renewed_at = time.monotonic()

    def _unrenewed_too_long(self) -> bool:
        """No renewal succeeded for half the stale time: an undo may have judged the mark stale."""
        return (time.monotonic() - self._renewed_at) * 1000 >= STALE_MARK_MILLIS / 2

    def _renew(self) -> None:
        while not self._stop.wait(self.renew_millis / 1000):
            try:
                self._write()
            except Exception:  # noqa: BLE001 - a storage hiccup: the next round retries, check() judges the gap
                continue

    def check(self, where: str, outcome: str) -> None:
        """Right before a delete: no undo is marked, and the mark held since it went up.
        ``outcome``: what the run left, for the message."""
        self.lapsed = self.lapsed or self._unrenewed_too_long()
        if self.lapsed:
            raise DeletingMarkLapsedError(
                f"the {self.operation} mark on {where} was not renewed for {STALE_MARK_MILLIS // 120_000} minutes or more: "
                f"an undo may have run meanwhile; {outcome}"
            )
        markers = undo_markers(self.journal)
        refuse_while_undoing(self.journal, where, outcome, markers)
        if markers != self._undo_generation:
            # An undo under way when the mark went up finished since: what the run read may predate what it brought back.
            raise UndoInProgressError(f"an undo ran on {where} while this {self.operation} run read the table; {outcome}; rerun it")


def _deleting_marks(journal: NoncurrentJournal) -> Iterator[tuple[str, str, int | None]]:
    """Each deleting mark: (token, operation, when it was last renewed; None for a torn write)."""
    for token in sorted(journal.marked_runs(DELETING_PREFIX)):
        try:
            doc = journal.read_mark(DELETING_PREFIX, token)
            yield token, str(doc["operation"]), int(doc["at_millis"])
        except FileNotFoundError:
            continue  # finished while we listed
        except Exception:  # noqa: BLE001 - an unreadable mark is a torn write of a crashed run
            yield token, "", None


def fresh_deleting_marks(journal: NoncurrentJournal) -> list[tuple[str, str]]:
    """The deleting steps under way (token, operation), oldest mark first; stale and torn marks are crashed runs'."""
    now = real_now_millis()
    fresh = sorted((at, token, operation) for token, operation, at in _deleting_marks(journal)
                   if at is not None and now - at < STALE_MARK_MILLIS)
    return [(token, operation) for _at, token, operation in fresh]


def drop_crashed_deleting_marks(journal: NoncurrentJournal) -> None:
    """Purge's housekeeping: the marks of crashed deleting runs (not renewed for four times the stale time,
    a live holder renews every few minutes) are deleted."""
    now = real_now_millis()
    for token, _operation, at in _deleting_marks(journal):
        if at is None or now - at >= 4 * STALE_MARK_MILLIS:
            journal.unmark(DELETING_PREFIX, token)


def refuse_while_undoing(journal: NoncurrentJournal, where: str, outcome: str, markers: frozenset[str] | None = None) -> None:
    """A deleting run backs out (``UndoInProgressError``) while an undo of the table is marked: what it
    would delete may be what the undo is bringing back. ``outcome``: what the run left, for the message;
    ``markers``: the undo markers (:func:`undo_markers`) when just read."""
    undoing = sorted(n[len(UNDO_PREFIX):-len(".json")] for n in (undo_markers(journal) if markers is None else markers)
                     if n.startswith(UNDO_PREFIX))
    if undoing:
        raise UndoInProgressError(f"undo of run {undoing[0]} is under way on {where} (or was interrupted: rerun it); {outcome}")


def undo_markers(journal: NoncurrentJournal) -> frozenset[str]:
    """The undo markers of the table (``undo-<run>.json``: under way; ``undone-<run>.json``: finished), in one
    listing: the table's *undo generation*. An undo that starts changes it (its ``undo-`` mark goes up), one
    that finishes changes it (``undone-`` goes up, ``undo-`` comes down), one refused leaves it as it found
    it. A deleting run reads it before it reads what it plans on and again once its plan (or its deleting
    mark) is visible to undo: the same generation, with no undo marked, proves no undo brought anything
    back in between (docs/lifecycle.md, "Crash safety and races: deletion plans")."""
    return frozenset(
        n for n in journal.storage.list_names(journal.directory)
        if n.endswith(".json") and (n.startswith(UNDO_PREFIX) or n.startswith(UNDONE_PREFIX))
    )
