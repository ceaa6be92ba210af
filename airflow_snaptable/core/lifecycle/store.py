"""The table-format seam: what the lifecycle engine reads and changes, and nothing more.

The lifecycle engine (expiry planning, protection by tags and consumers, the crash-safe
deletion plans, rollback, orphan detection, incremental reads) holds the *rules*: what
expires, what protects a file, in which order a plan unpublishes and deletes. It reaches a
table only through a :class:`TableStore`: four narrow stores plus the place where the
engine keeps its own files. The native format is the first implementation
(``SnapshotManager``, ``NativeFiles``, ``TagManager``, ``ConsumerManager``, wired by
``Table``); docs/format.md ("Store interface") says where an Apache Paimon and an Apache
Iceberg store plug in.

Contracts every store keeps:

- Snapshot ids are integers that grow by one per commit on the table's history
  (Paimon's ids; an Iceberg store numbers the main branch's snapshots by sequence).
- Reads fail closed: metadata that is missing raises MissingMetadataError, metadata
  that cannot be parsed CorruptMetadataError, and metadata the store reads but does not
  understand (a format version, a kind of file such as delete files it does not
  implement) UnsupportedMetadataError. Never an empty answer: the engine deletes what
  nothing it can read protects.
- Reads of a missing snapshot raise SnapshotNotFoundError, of a missing tag
  TagNotFoundError, of a missing consumer ConsumerNotFoundError.
- Every change a plan makes is idempotent (deleting what is gone is success), so a
  rerun after a crash at any point finishes the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, NamedTuple, Protocol, Sequence

from airflow_snaptable.core.errors import SnapTableError
from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.native.manifest import DataFile, ManifestEntry
from airflow_snaptable.core.io.path_set import PathHashSet
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.native.tags import Tag


# -- values that cross the seam ---------------------------------------------------------------


class StoredFile(NamedTuple):
    """A file as a listing shows it: path relative to the table root, size, modification time (epoch seconds)."""

    path: str
    size: int
    modified: float | None


class SnapshotChanges(Protocol):
    """The ADD/DELETE entries of each expiring snapshot, handed out once each (a dict is one; the
    native store decodes each snapshot's when asked, so planning holds one snapshot's at a time)."""

    def pop(self, snapshot_id: int) -> Iterable[ManifestEntry]:
        """That snapshot's entries, in order, to be iterated once. Planning reads an entry's ``kind``,
        ``file.path`` and ``file.file_size`` only (the native store hands out just those:
        core/native/manifest_changes.py ``EntryChange``)."""
        ...


@dataclass
class ExpiringMetadata:
    """What expiring the snapshots ``first .. end-1`` (keeping ``end``) reads from the format."""

    #: The ADD/DELETE entries of each snapshot ``first+1 .. end``, by snapshot id (planning pops each once).
    changes: SnapshotChanges | dict[int, list[ManifestEntry]]
    #: Metadata files (name, bytes) the expired snapshots use and ``end`` does not: deleted with them.
    metadata_files: list[tuple[str, int]]


@dataclass
class InUse:
    """What a set of snapshots and tags references."""

    data_files: dict[str, str] = field(default_factory=dict)  # path -> what references it
    metadata_files: dict[str, str] = field(default_factory=dict)
    #: Byte sizes the metadata records for those files (verify compares them with the listing).
    recorded_sizes: dict[str, int] = field(default_factory=dict)

    def all_paths(self) -> set[str]:
        return set(self.data_files) | set(self.metadata_files)


# -- the four stores ------------------------------------------------------------------------------


class SnapshotStore(Protocol):
    """The table's history. Native: ``SnapshotManager`` (``snapshot/snapshot-<id>`` and its hints)."""

    def earliest_id(self) -> int | None:
        """The oldest retained snapshot (None: no snapshot)."""
        ...

    def latest_id(self) -> int | None:
        """The newest snapshot (None: no snapshot)."""
        ...

    def earliest_floor(self) -> int:
        """No retained snapshot is below this, even while an expiry is unpublishing (1 if unknown)."""
        ...

    def list_ids(self) -> list[int]:
        """Every snapshot id present, ascending (a listing: may include ids being unpublished)."""
        ...

    def exists(self, snapshot_id: int) -> bool: ...

    def snapshot(self, snapshot_id: int) -> Snapshot: ...

    def read_ids(self, snapshot_ids: Iterable[int]) -> dict[int, tuple[Snapshot, int]]:
        """Those snapshots with the bytes each one's metadata takes, read in bulk; a missing one raises."""
        ...

    def latest_snapshot(self) -> Snapshot | None: ...

    def earliest_snapshot(self) -> Snapshot | None: ...

    def snapshot_at(self, time_millis: int) -> Snapshot | None:
        """The latest snapshot committed at or before the time (commit times never go backwards)."""
        ...

    def identity(self, snapshot: Snapshot) -> str:
        """Tells two commits apart that had the same id (a rollback lets ids be reused)."""
        ...

    def path(self, snapshot_id: int) -> str:
        """Where the snapshot's metadata is, relative to the table root (what a dry run reports)."""
        ...

    def unpublish(self, snapshot_ids: Iterable[int]) -> Sequence[str] | None:
        """Remove snapshots from the history in the given order; each removal is idempotent.

        May return paths (relative to the FileStore's root) of files the removed snapshots left
        outside the history, which the caller deletes with the plan's files (FileStore.delete);
        None or empty when the removal deleted everything itself.
        """
        ...

    def restore(self, snapshot: Snapshot) -> None:
        """Publish an expired snapshot again below the retained ones (a rollback to a tag's copy)."""
        ...

    def write_earliest_hint(self, snapshot_id: int) -> None:
        """Record that the history now starts here (advisory: readers must not depend on it)."""
        ...

    def write_latest_hint(self, snapshot_id: int) -> None:
        """Record that the history now ends here (advisory)."""
        ...


class FileStore(Protocol):
    """What snapshots reference: data files and the format's metadata files. Native: ``NativeFiles``."""

    def delta(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """The ADD/DELETE entries of this snapshot's commit, in order."""
        ...

    def state(self, snapshot: Snapshot) -> dict[str, DataFile]:
        """Every live data file of the snapshot, by path."""
        ...

    def metadata_files(self, snapshot: Snapshot) -> dict[str, int]:
        """The metadata files (name -> bytes) reading this snapshot's state takes."""
        ...

    def expiring(self, snapshots: Mapping[int, Snapshot], missing: list[str] | None = None, changes_from: int | None = None) -> ExpiringMetadata:
        """Read what expiring ``snapshots`` (ids ``first .. end``, contiguous) except the last one needs.

        ``missing`` (the repair path): metadata of the *expired* snapshots that is gone is
        skipped and its path appended there; the kept snapshot's metadata must still read.
        ``changes_from``: the deltas of the snapshots below it are not needed (their changes are
        left out; core/lifecycle/expiry/plan.py ``first_deleting``).
        """
        ...

    def referenced_by(self, snapshots: Sequence[Snapshot], tags: Sequence[Tag]) -> InUse:
        """Every data and metadata file these snapshots (ascending ids) and tags reference."""
        ...

    def paths_in_use(self, snapshots: Sequence[Snapshot], tags: Sequence[Tag]) -> PathHashSet:
        """The paths ``referenced_by`` would return, as a compact set (orphan cleaning's in-use set):
        a store may build it without holding one object per file."""
        ...

    def listed_files(self) -> Iterable[StoredFile]:
        """Every data and metadata file the format keeps under the table (orphan cleaning's candidates),
        listed as iterated (``Storage.iter_files``): a table of millions of files is never one list."""
        ...

    def leftover_files(self) -> Iterable[StoredFile]:
        """Temporary files of interrupted writes, which nothing ever references."""
        ...

    def metadata_path(self, name: str) -> str:
        """Where the metadata file ``name`` (as ``metadata_files`` names it) is, relative to the table root."""
        ...

    def exists(self, path: str) -> bool: ...

    def delete(self, paths: Sequence[str]) -> None:
        """Delete many files (relative paths) in any order; missing ones are success."""
        ...


class TagStore(Protocol):
    """Named states that outlive their snapshot. Native: ``TagManager`` (``tag/tag-<name>``)."""

    def names(self) -> list[str]: ...

    def tag(self, name: str) -> Tag: ...

    def exists(self, name: str) -> bool: ...

    def tags(self, unreadable: Callable[[str, SnapTableError], None] | None = None) -> list[Tag]:
        """Every tag, ordered by snapshot id then name; fails closed on an unreadable one, unless
        ``unreadable(name, error)`` is given (verify): then it is reported there and left out."""
        ...

    def create(self, tag: Tag) -> bool:
        """Create-if-absent, atomically; False if a tag of that name exists."""
        ...

    def replace(self, tag: Tag) -> None: ...

    def delete(self, name: str) -> None: ...


class ConsumerStore(Protocol):
    """Readers' positions. Native: ``ConsumerManager`` (``consumer/consumer-<id>``)."""

    def consumer(self, consumer_id: str) -> Consumer: ...

    def get(self, consumer_id: str) -> Consumer | None: ...

    def consumers(self) -> list[Consumer]:
        """Every consumer; fails closed on an unreadable one."""
        ...

    def write(self, consumer: Consumer) -> None: ...

    def delete(self, consumer_id: str) -> None: ...


@dataclass(frozen=True)
class TableStore:
    """One table as the lifecycle engine sees it."""

    #: The table's location, for messages.
    uri: str
    snapshots: SnapshotStore
    files: FileStore
    tags: TagStore
    consumers: ConsumerStore
    #: Where the engine keeps its own files (``plan/``, ``intent/``, ``readd/``; core/lifecycle/deletion_plans.py,
    #: core/lifecycle/intents.py, core/lifecycle/readds.py): the table's root for the native format, a directory
    #: beside the format's metadata for another one.
    lifecycle: Storage


#: The format name of tables this package writes itself.
NATIVE_FORMAT = "snaptable"


@dataclass(frozen=True)
class FormatTable:
    """A table another engine writes (Apache Paimon, Apache Iceberg), opened through its store:
    what ``Table`` needs to run the lifecycle on it."""

    #: "paimon", "iceberg": reported in results and errors.
    format: str
    #: The table's Arrow schema, partition keys and options; the options under the keys
    #: core/arguments/table_options.py knows (Paimon's own), which the format's store maps its settings to.
    schema: TableSchema
    store: TableStore
    #: The table's root: ``DataFile.path`` is relative to it.
    storage: Storage
    #: Whether reading a snapshot's data files gives its rows (False for merge-on-read
    #: formats such as Paimon primary-key tables: their engine must merge them).
    readable: bool = True
