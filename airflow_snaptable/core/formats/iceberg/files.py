"""An Iceberg table's files: where they are, and which ones a set of snapshots reaches.

Iceberg metadata names files by absolute URI. They are compared in normal form under Iceberg's
``DeleteOrphanFiles`` equivalences (core/io/table_paths.py: ``s3``, ``s3a`` and ``s3n`` are one
scheme; ``file:/x``, ``file:///x`` and ``/x`` one path; ``.``, ``..`` and doubled slashes
resolved) and handled relative to the table location, through this package's counted
``Storage`` (so operation counts and crash injection see every delete). A file the metadata
places outside the table location (``write.data.path``, ``write.metadata.path``, also through
``..``) fails closed: nothing is deleted that this store cannot place.
"""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field
from typing import Callable, Collection, Iterable

from airflow_snaptable.core.errors import CorruptMetadataError, MissingMetadataError, PathOutsideTableError
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.io.table_paths import is_normal_relative, relative_to_location, split_uri

#: This package's own directory under the table location (deletion plans): never an orphan.
LIFECYCLE_DIR = "snaptable"


@dataclass(frozen=True)
class LocationStorage:
    """Opens a counted Storage rooted at a table location, on the filesystem pyiceberg's FileIO would use.

    Picklable (a location and the FileIO properties), so Spark executors open the same storage.
    """

    location: str
    io_properties: dict

    def __call__(self) -> Storage:
        from pyiceberg.io.fsspec import FsspecFileIO

        scheme, authority, path = split_uri(self.location)
        fs = FsspecFileIO(properties=dict(self.io_properties)).get_fs(scheme)
        # The root in the filesystem's own path form, as its listings name files: adlfs lists
        # abfs://<container>@<account>.dfs.core.windows.net/<path> as <container>/<path>.
        root = path if scheme == "file" else fs._strip_protocol(f"{scheme}://{authority}{path}")
        return Storage(fs, root, self.location)


def storage_opener(table) -> LocationStorage:
    return LocationStorage(table.location(), dict(table.io.properties))


def storage_for(table) -> Storage:
    """A counted Storage rooted at the table's location (see LocationStorage)."""
    return storage_opener(table)()


class Locator:
    """Maps the metadata's absolute URIs to paths relative to the table location."""

    def __init__(self, location: str):
        self.location = location
        #: Manifest lists name the same manifests over and over (a W1 table: 20,000 names, 200 distinct).
        self._known: dict[str, str | None] = {}
        #: What most URIs start with: the location as the metadata spells it. A URI that starts with it
        #: and goes on with a normal relative path is that path, whatever the normal form of the
        #: location (checked once here); any other goes through the general rule.
        prefix = location.rstrip("/") + "/"
        self._prefix = prefix if relative_to_location(prefix + "x/y.z", location) == "x/y.z" else None

    def relative(self, uri: str) -> str | None:
        """The normal path of ``uri`` relative to the location; None when it is not inside."""
        if uri in self._known:
            return self._known[uri]
        prefix = self._prefix
        if prefix is not None and isinstance(uri, str) and uri.startswith(prefix) and is_normal_relative(uri[len(prefix):]):
            rel = uri[len(prefix):]
        else:
            rel = relative_to_location(uri, self.location) if isinstance(uri, str) else None
        self._known[uri] = rel
        return rel

    def inside(self, uri: str, what: str) -> str:
        rel = self.relative(uri)
        if rel is None:
            raise PathOutsideTableError(
                f"{what} {uri} is outside the table location {self.location} (write.data.path / "
                "write.metadata.path, or '..' out of the location): files there are not handled"
            )
        return rel


@dataclass
class Reached:
    """What a set of snapshots references, as paths relative to the table location."""

    manifest_lists: set[str] = field(default_factory=set)
    manifests: set[str] = field(default_factory=set)
    #: data and delete files, with the largest data sequence number seen for each
    content_files: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)

    def all(self) -> set[str]:
        return self.manifest_lists | self.manifests | set(self.content_files)


@dataclass(frozen=True)
class ManifestRef:
    """One manifest as a manifest list names it (Iceberg's ``manifest_file`` record)."""

    path: str
    length: int
    #: The data sequence number of the commit that added the manifest: what ADDED entries without one inherit.
    #: Never a bound on the paths a manifest names: a file put back (``add_files`` after a delete)
    #: comes again with a new, higher number.
    sequence_number: int
    #: The snapshot that added the manifest (None where a version 1 list leaves it out).
    added_snapshot_id: int | None = None


@dataclass(frozen=True)
class EntryRef:
    """One manifest entry: a data or delete file and what the manifest says of it."""

    #: Iceberg's entry status: 0 EXISTING, 1 ADDED, 2 DELETED.
    status: int
    path: str
    size: int
    sequence_number: int


DELETED = 2


class ManifestReader:
    """Reads manifest lists and manifests with fastavro, each once (they are immutable), through ``storage``.

    Bulk reads go through ``Storage.read_many``, so they are counted, fail on a crash the tests
    inject, and run in parallel on remote storage. Only the fields the lifecycle needs are kept;
    the Avro schemas of format versions 1 to 3 name them alike (version 1 has no sequence numbers: 0).
    """

    def __init__(self, storage: Storage, locator: Locator):
        self.storage = storage
        self.locator = locator
        self._lists: dict[str, list[ManifestRef]] = {}
        self._manifests: dict[str, list[EntryRef]] = {}
        #: Bytes of each file read, by URI (Iceberg records no manifest list's size: its read is the measure).
        self._sizes: dict[str, int] = {}

    def manifests_of(self, snapshot) -> list[ManifestRef]:
        self.prefetch_lists([snapshot])
        return self._lists[snapshot.manifest_list]

    def list_size(self, snapshot) -> int:
        """The bytes of the snapshot's manifest list (read once)."""
        self.prefetch_lists([snapshot])
        return self._sizes[snapshot.manifest_list]

    def entries(self, manifest: ManifestRef) -> list[EntryRef]:
        """Every entry, deleted ones included (a DELETED entry still names a file that once was live)."""
        self.prefetch([manifest])
        return self._manifests[manifest.path]

    def prefetch_lists(self, snapshots: Iterable) -> None:
        """Read the manifest lists of ``snapshots`` not read yet, in one bulk read."""
        wanted = {s.manifest_list: self.locator.inside(s.manifest_list, "manifest list") for s in snapshots}
        for path, records in self._read_many({p: r for p, r in wanted.items() if p not in self._lists}).items():
            self._lists[path] = [_manifest_ref(r, path) for r in records]

    def prefetch(self, manifests: Iterable[ManifestRef]) -> None:
        """Read the manifests not read yet, in one bulk read."""
        wanted = {m.path: (m, self.locator.inside(m.path, "manifest")) for m in manifests if m.path not in self._manifests}
        records = self._read_many({path: rel for path, (_m, rel) in wanted.items()})
        for path, rows in records.items():
            self._manifests[path] = [_entry_ref(r, wanted[path][0], path) for r in rows]

    def walk(self, snapshots: Iterable, read_by_head=None):
        """Each snapshot with its decoded manifest list, parents first, each record a list shares
        with its parent's decoded once (manifest_lists.py). Nothing is cached: memory stays
        bounded on a long history."""
        from airflow_snaptable.core.formats.iceberg.manifest_lists import walk_lists

        return walk_lists(self.storage, self.locator, snapshots, _manifest_ref, read_by_head)

    def iter_entries(self, manifests: Iterable[ManifestRef]):
        """Each manifest with its entries (deleted ones included), read in bounded batches, each
        once; those read before (``prefetch``) come from memory, the others are not kept."""
        manifests = list({m.path: m for m in manifests}.values())
        for start in range(0, len(manifests), _LIVE_BATCH):
            batch = manifests[start:start + _LIVE_BATCH]
            wanted = {m.path: self.locator.inside(m.path, "manifest") for m in batch if m.path not in self._manifests}
            contents = self.storage.read_many(list(wanted.values())) if wanted else {}
            for manifest in batch:
                if manifest.path in self._manifests:
                    yield manifest, self._manifests[manifest.path]
                    continue
                data = contents.pop(wanted[manifest.path], None)
                if data is None:
                    raise MissingMetadataError(f"{manifest.path} does not exist")
                yield manifest, [_entry_ref(r, manifest, manifest.path) for r in _decoded(manifest.path, data, None)]

    def live_paths(self, manifests: Iterable[ManifestRef], among: Collection[str]) -> set[str]:
        """The paths of ``among`` (relative to the location) that a live entry of ``manifests`` names.

        Every manifest is read, whatever its sequence numbers say (see ManifestRef.sequence_number):
        a missing one is MissingMetadataError, an unreadable one CorruptMetadataError. Nothing read
        is kept, and only entries whose file name is among the wanted ones are placed: the retained
        side of an expiry is the table's whole live metadata.
        """
        wanted = set(among)
        names = {path.rsplit("/", 1)[-1] for path in wanted}
        found: set[str] = set()
        manifests = list({m.path: m for m in manifests}.values())
        for start in range(0, len(manifests), _LIVE_BATCH):
            batch = {m.path: self.locator.inside(m.path, "manifest") for m in manifests[start:start + _LIVE_BATCH]}
            contents = self.storage.read_many(list(batch.values()))
            for path, rel in batch.items():
                data = contents.pop(rel, None)
                if data is None:
                    raise MissingMetadataError(f"{path} does not exist")
                for status, file_path in _decoded(path, data, _live_entry):
                    if status == DELETED or file_path.rsplit("/", 1)[-1] not in names:
                        continue
                    rel_path = self.locator.inside(file_path, "data file")
                    if rel_path in wanted:
                        found.add(rel_path)
        return found

    def _read_many(self, rels: dict[str, str]) -> dict[str, list[dict]]:
        if not rels:
            return {}
        contents = self.storage.read_many(list(rels.values()))
        out = {}
        for path, rel in rels.items():
            if rel not in contents:
                raise MissingMetadataError(f"{path} does not exist")
            self._sizes[path] = len(contents[rel])
            out[path] = _decoded(path, contents[rel], None)
        return out


#: Retained manifests read per bulk read when only their live paths matter.
_LIVE_BATCH = 1000


def _decoded(where: str, data: bytes, project) -> list:
    """Every record of an Avro file, each through ``project`` (a record to what is kept) if given.

    Manifests carry the table schema in their header: it is parsed once per distinct schema
    (manifest_lists.py), not once per file."""
    from airflow_snaptable.core.formats.iceberg.manifest_lists import read_records

    with _collection_paused():
        return read_records(where, data, project)


def avro_decoded(where: str, data: bytes, decode: Callable[[bytes], list]) -> list:
    """``decode(data)``: an Avro file decoded with the collector paused; any failure to parse is CorruptMetadataError."""
    with _collection_paused():
        try:
            return decode(data)
        except CorruptMetadataError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot read: {type(exc).__name__}: {exc}") from exc


def avro_records(where: str, data: bytes) -> list[dict]:
    """Every record of an Avro file (a manifest list or manifest), decoded with fastavro; unreadable is CorruptMetadataError."""
    return _decoded(where, data, None)


def _live_entry(record: dict, where: str) -> tuple[int, str]:
    try:
        return int(record["status"]), record["data_file"]["file_path"]
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptMetadataError(f"{where}: not an Iceberg manifest ({type(exc).__name__}: {exc})") from exc


def statistics_entries(metadata) -> list:
    """The table's statistics and partition-statistics entries (each names one snapshot and one file)."""
    return list(metadata.statistics or []) + list(getattr(metadata, "partition_statistics", None) or [])


@contextlib.contextmanager
def _collection_paused():
    """Decoding makes a dict per record and keeps them all: the cyclic garbage collector, run on every
    few hundred of them, scanned everything alive again and doubled the decoding time (measured on W1)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _manifest_ref(record: dict, where: str) -> ManifestRef:
    try:
        return ManifestRef(
            path=record["manifest_path"],
            length=int(record["manifest_length"]),
            sequence_number=int(record.get("sequence_number") or 0),
            added_snapshot_id=None if record.get("added_snapshot_id") is None else int(record["added_snapshot_id"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptMetadataError(f"{where}: not an Iceberg manifest list ({type(exc).__name__}: {exc})") from exc


def _entry_ref(record: dict, manifest: ManifestRef, where: str) -> EntryRef:
    try:
        status, data_file = int(record["status"]), record["data_file"]
        sequence = record.get("sequence_number")
        if sequence is None:
            # Iceberg's inheritance: an ADDED entry without one has its manifest's (version 1: all 0).
            sequence = manifest.sequence_number
        return EntryRef(status, data_file["file_path"], int(data_file["file_size_in_bytes"]), int(sequence))
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptMetadataError(f"{where}: not an Iceberg manifest ({type(exc).__name__}: {exc})") from exc


def reach(reader: ManifestReader, snapshots: Iterable, *, only_live: bool, manifest_filter=None) -> Reached:
    """The files ``snapshots`` reference. ``only_live``: a manifest's DELETED entries are not
    references (the snapshot does not read them); else every entry counts (a candidate for
    deletion). ``manifest_filter(manifest) -> bool`` skips manifests that cannot matter.

    The lists are walked parents first and each record a list shares with its parent's is
    taken once (manifest_lists.py); the manifests are read in bounded batches, each once."""
    reached = Reached()
    locator = reader.locator
    to_read: dict[str, ManifestRef] = {}
    for snapshot, decoded in reader.walk(snapshots):
        list_rel = locator.inside(snapshot.manifest_list, "manifest list")
        reached.manifest_lists.add(list_rel)
        reached.bytes[list_rel] = decoded.size
        # Shared records are the parent's, which this walk took already: the parent is among ``snapshots``.
        for manifest in decoded.added if decoded.shares_parent else decoded.records:
            rel = locator.inside(manifest.path, "manifest")
            if rel in reached.manifests:
                continue
            reached.manifests.add(rel)
            reached.bytes[rel] = manifest.length
            if manifest_filter is None or manifest_filter(manifest):
                to_read[rel] = manifest
    for manifest, entries in reader.iter_entries(to_read.values()):
        for entry in entries:
            if only_live and entry.status == DELETED:
                continue
            path = locator.inside(entry.path, "data file")
            reached.content_files[path] = max(entry.sequence_number, reached.content_files.get(path, -1))
            reached.bytes[path] = entry.size
    return reached
