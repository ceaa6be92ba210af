"""An Iceberg table's files: where they are, and which ones a set of snapshots reaches.

Iceberg metadata names files by absolute URI. They are compared under Iceberg's
``DeleteOrphanFiles`` equivalences (``s3``, ``s3a`` and ``s3n`` are one scheme; ``file:/x``,
``file:///x`` and ``/x`` one path) and handled relative to the table location, through this
package's counted ``Storage`` (so operation counts and crash injection see every delete).
A file the metadata places outside the table location (``write.data.path``,
``write.metadata.path``) fails closed: nothing is deleted that this store cannot place.
"""

from __future__ import annotations

import contextlib
import gc
import io
from dataclasses import dataclass, field
from typing import Iterable
from urllib.parse import urlparse

import fastavro

from airflow_snaptable.core.errors import CorruptMetadataError, MissingMetadataError, UnsupportedMetadataError
from airflow_snaptable.core.io.storage import Storage

_EQUIVALENT_SCHEMES = {"s3a": "s3", "s3n": "s3", "gs": "gs", "gcs": "gs", "abfss": "abfs", "wasbs": "wasb"}
#: This package's own directory under the table location (deletion plans): never an orphan.
LIFECYCLE_DIR = "snaptable"


def normalize(uri: str) -> tuple[str, str, str]:
    """(scheme, authority, path) with equivalent schemes folded and the path without a trailing slash."""
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower() or "file"
    if len(scheme) == 1:  # a Windows drive letter is not a scheme
        scheme, path, authority = "file", uri, ""
    else:
        path, authority = parsed.path, parsed.netloc
    scheme = _EQUIVALENT_SCHEMES.get(scheme, scheme)
    if scheme == "file":
        authority = ""
    return scheme, authority, path.rstrip("/") or "/"


@dataclass(frozen=True)
class LocationStorage:
    """Opens a counted Storage rooted at a table location, on the filesystem pyiceberg's FileIO would use.

    Picklable (a location and the FileIO properties), so Spark executors open the same storage.
    """

    location: str
    io_properties: dict

    def __call__(self) -> Storage:
        from pyiceberg.io.fsspec import FsspecFileIO

        scheme, authority, path = normalize(self.location)
        fs = FsspecFileIO(properties=dict(self.io_properties)).get_fs(scheme)
        root = path if scheme == "file" else f"{authority}{path}"
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
        self._scheme, self._authority, self._path = normalize(location)
        #: Manifest lists name the same manifests over and over (a W1 table: 20,000 names, 200 distinct).
        self._known: dict[str, str | None] = {}

    def relative(self, uri: str) -> str | None:
        if uri in self._known:
            return self._known[uri]
        scheme, authority, path = normalize(uri)
        rel = None
        if (scheme, authority) == (self._scheme, self._authority):
            prefix = self._path.rstrip("/") + "/"
            rel = path[len(prefix):] if path.startswith(prefix) else None
        self._known[uri] = rel
        return rel

    def inside(self, uri: str, what: str) -> str:
        rel = self.relative(uri)
        if rel is None:
            raise UnsupportedMetadataError(
                f"{what} {uri} is outside the table location {self.location} (write.data.path / "
                "write.metadata.path): files there are not handled"
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
    sequence_number: int
    #: No live entry of the manifest has a smaller data sequence number.
    min_sequence_number: int


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

    def manifests_of(self, snapshot) -> list[ManifestRef]:
        self.prefetch_lists([snapshot])
        return self._lists[snapshot.manifest_list]

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

    def _read_many(self, rels: dict[str, str]) -> dict[str, list[dict]]:
        if not rels:
            return {}
        contents = self.storage.read_many(list(rels.values()))
        out = {}
        with _collection_paused():
            for path, rel in rels.items():
                if rel not in contents:
                    raise MissingMetadataError(f"{path} does not exist")
                try:
                    out[path] = list(fastavro.reader(io.BytesIO(contents[rel])))
                except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
                    raise CorruptMetadataError(f"{path}: cannot read: {type(exc).__name__}: {exc}") from exc
        return out


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
            min_sequence_number=int(record.get("min_sequence_number") or 0),
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
    deletion). ``manifest_filter(manifest) -> bool`` skips manifests that cannot matter."""
    reached = Reached()
    locator = reader.locator
    snapshots = list(snapshots)
    reader.prefetch_lists(snapshots)
    to_read: dict[str, ManifestRef] = {}
    for snapshot in snapshots:
        reached.manifest_lists.add(locator.inside(snapshot.manifest_list, "manifest list"))
        for manifest in reader.manifests_of(snapshot):
            rel = locator.inside(manifest.path, "manifest")
            if rel in reached.manifests:
                continue
            reached.manifests.add(rel)
            reached.bytes[rel] = manifest.length
            if manifest_filter is None or manifest_filter(manifest):
                to_read[rel] = manifest
    reader.prefetch(to_read.values())
    for manifest in to_read.values():
        for entry in reader.entries(manifest):
            if only_live and entry.status == DELETED:
                continue
            path = locator.inside(entry.path, "data file")
            reached.content_files[path] = max(entry.sequence_number, reached.content_files.get(path, -1))
            reached.bytes[path] = entry.size
    return reached
