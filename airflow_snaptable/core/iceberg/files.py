"""An Iceberg table's files: where they are, and which ones a set of snapshots reaches.

Iceberg metadata names files by absolute URI. They are compared under Iceberg's
``DeleteOrphanFiles`` equivalences (``s3``, ``s3a`` and ``s3n`` are one scheme; ``file:/x``,
``file:///x`` and ``/x`` one path) and handled relative to the table location, through this
package's counted ``Storage`` (so operation counts and crash injection see every delete).
A file the metadata places outside the table location (``write.data.path``,
``write.metadata.path``) fails closed: nothing is deleted that this store cannot place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable
from urllib.parse import urlparse

from airflow_snaptable.core.errors import CorruptMetadataError, MissingMetadataError, UnsupportedMetadataError
from airflow_snaptable.core.storage import Storage

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


def storage_for(table) -> Storage:
    """A counted Storage rooted at the table's location, on the filesystem pyiceberg's FileIO would use."""
    from pyiceberg.io.fsspec import FsspecFileIO

    location = table.location()
    scheme, authority, path = normalize(location)
    fs = FsspecFileIO(properties=dict(table.io.properties)).get_fs(scheme)
    root = path if scheme == "file" else f"{authority}{path}"
    return Storage(fs, root, location)


class Locator:
    """Maps the metadata's absolute URIs to paths relative to the table location."""

    def __init__(self, location: str):
        self.location = location
        self._scheme, self._authority, self._path = normalize(location)

    def relative(self, uri: str) -> str | None:
        scheme, authority, path = normalize(uri)
        if (scheme, authority) != (self._scheme, self._authority):
            return None
        prefix = self._path.rstrip("/") + "/"
        return path[len(prefix):] if path.startswith(prefix) else None

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


class ManifestReader:
    """Reads manifest lists and manifests, each once (they are immutable), counting each read on ``storage``."""

    def __init__(self, table, storage: Storage, locator: Locator):
        self.io = table.io
        self.storage = storage
        self.locator = locator
        self._lists: dict[str, list] = {}
        self._manifests: dict[str, list] = {}

    def manifests_of(self, snapshot) -> list:
        path = snapshot.manifest_list
        if path not in self._lists:
            rel = self.locator.inside(path, "manifest list")
            self.storage._op("read", rel)
            self._lists[path] = self._read(lambda: snapshot.manifests(self.io), path)
        return self._lists[path]

    def entries(self, manifest) -> list:
        """Every entry, deleted ones included (a DELETED entry still names a file that once was live)."""
        path = manifest.manifest_path
        if path not in self._manifests:
            rel = self.locator.inside(path, "manifest")
            self.storage._op("read", rel)
            self._manifests[path] = self._read(lambda: manifest.fetch_manifest_entry(self.io, discard_deleted=False), path)
        return self._manifests[path]

    @staticmethod
    def _read(call, path: str) -> list:
        try:
            return list(call())
        except FileNotFoundError as exc:
            raise MissingMetadataError(f"{path} does not exist") from exc
        except OSError as exc:
            if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
                raise MissingMetadataError(f"{path} does not exist") from exc
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{path}: cannot read: {type(exc).__name__}: {exc}") from exc


def reach(reader: ManifestReader, snapshots: Iterable, *, only_live: bool, manifest_filter=None) -> Reached:
    """The files ``snapshots`` reference. ``only_live``: a manifest's DELETED entries are not
    references (the snapshot does not read them); else every entry counts (a candidate for
    deletion). ``manifest_filter(manifest) -> bool`` skips manifests that cannot matter."""
    reached = Reached()
    locator = reader.locator
    for snapshot in snapshots:
        reached.manifest_lists.add(locator.inside(snapshot.manifest_list, "manifest list"))
        for manifest in reader.manifests_of(snapshot):
            rel = locator.inside(manifest.manifest_path, "manifest")
            if rel in reached.manifests:
                continue
            reached.manifests.add(rel)
            reached.bytes[rel] = manifest.manifest_length
            if manifest_filter is not None and not manifest_filter(manifest):
                continue
            for entry in reader.entries(manifest):
                if only_live and entry.status.name == "DELETED":
                    continue
                data_file = entry.data_file
                path = locator.inside(data_file.file_path, "data file")
                sequence = entry.sequence_number if entry.sequence_number is not None else 0
                reached.content_files[path] = max(sequence, reached.content_files.get(path, -1))
                reached.bytes[path] = data_file.file_size_in_bytes
    return reached
