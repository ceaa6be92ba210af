"""Paimon's Avro manifest lists and manifests (``manifest/``), read with fastavro.

A manifest list names manifests (``ManifestFileMeta``: ``_FILE_NAME``, ``_FILE_SIZE``, ...); a
manifest holds ``ManifestEntry`` records: ``_KIND`` (0 ADD, 1 DELETE), ``_PARTITION`` (a
BinaryRow), ``_BUCKET`` and ``_FILE`` (a ``DataFileMeta``). A data file lives at
``<partition dirs>/bucket-<n>/<_FILE_NAME>`` and its ``_EXTRA_FILES`` (file indexes) beside it:
they come and go with it, so each is reported as a data file of its own with the same kind.

Fail closed: a record version other than 2, files outside the table (``_EXTERNAL_PATH``),
manifest side files (``_EXTRA_FILES`` of a list entry) and an unknown kind raise
UnsupportedMetadataError; anything fastavro cannot read raises CorruptMetadataError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from airflow_snaptable.core.errors import CorruptMetadataError, MissingMetadataError, UnsupportedMetadataError
from airflow_snaptable.core.native.manifest import DataFile, FileKind, ManifestEntry
from airflow_snaptable.core.formats.paimon.avro import read_avro
from airflow_snaptable.core.formats.paimon.binary_row import PartitionLayout, bucket_directory
from airflow_snaptable.core.formats.paimon.index_manifests import INDEX_FILE_PREFIX, IndexFile, parse_index_manifest
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.io.table_paths import checked_file_name

MANIFEST_DIR = "manifest"
#: The ``_VERSION`` of manifest and manifest-list records this code reads (Paimon 0.9 - 1.x, pypaimon).
RECORD_VERSION = 2


def manifest_path(name: str) -> str:
    """Where the manifest or list ``name`` is: a plain name in ``manifest/`` (core/io/table_paths.py)."""
    return f"{MANIFEST_DIR}/{checked_file_name(name, 'manifest file name')}"


@dataclass(frozen=True)
class ManifestMeta:
    """One manifest as a list names it."""

    name: str
    size: int
    #: ADD and DELETE entries in the manifest (``_NUM_ADDED_FILES``, ``_NUM_DELETED_FILES``): data files, not their extra files.
    added_files: int = 0
    deleted_files: int = 0


@dataclass(frozen=True)
class PaimonEntry:
    """One ``ManifestEntry``: its kind, the identity Paimon merges entries by, and its files (data file first)."""

    kind: FileKind
    key: tuple  # (path, level, extra files): a level upgrade deletes and adds the same path
    files: tuple[DataFile, ...]


def _check_version(record: dict, where: str) -> None:
    version = record.get("_VERSION")
    if version != RECORD_VERSION:
        raise UnsupportedMetadataError(f"{where}: record version {version!r} is not {RECORD_VERSION}")


class ManifestReader:
    """Reads lists and manifests by name, each file once per instance (they are immutable)."""

    def __init__(self, storage: Storage, layout: PartitionLayout):
        self.storage = storage
        self.layout = layout
        self._lists: dict[str, list[ManifestMeta]] = {}
        self._list_sizes: dict[str, int] = {}
        self._manifests: dict[str, list[PaimonEntry]] = {}
        self._index_manifests: dict[str, list[IndexFile]] = {}
        self._index_manifest_sizes: dict[str, int] = {}

    # -- bulk reads ------------------------------------------------------------------------------

    def _read(self, names: Iterable[str], cache: dict, parse, skip_missing: list[str] | None) -> dict:
        names = list(dict.fromkeys(names))
        wanted = [n for n in names if n not in cache]
        contents = self.storage.read_many([manifest_path(n) for n in wanted])
        for name in wanted:
            data = contents.get(manifest_path(name))
            if data is None:
                if skip_missing is None:
                    raise MissingMetadataError(f"{self.storage.full_uri(manifest_path(name))} does not exist")
                skip_missing.append(manifest_path(name))
                continue
            cache[name] = parse(name, data)
        return {n: cache[n] for n in names if n in cache}

    def lists(self, names: Iterable[str], skip_missing: list[str] | None = None) -> dict[str, list[ManifestMeta]]:
        return self._read(names, self._lists, self._parse_list, skip_missing)

    def manifests(self, names: Iterable[str], skip_missing: list[str] | None = None) -> dict[str, list[PaimonEntry]]:
        return self._read(names, self._manifests, self._parse_manifest, skip_missing)

    def index_manifests(self, names: Iterable[str], skip_missing: list[str] | None = None) -> dict[str, list[IndexFile]]:
        """Index manifests (index_manifests.py, in this directory too) by name."""
        return self._read(names, self._index_manifests, self._parse_index_manifest, skip_missing)

    def cached(self) -> int:
        """How many parsed files this reader holds."""
        return len(self._lists) + len(self._manifests) + len(self._index_manifests)

    def index_manifest_size(self, name: str) -> int | None:
        return self._index_manifest_sizes.get(name)

    def list_size(self, name: str) -> int | None:
        return self._list_sizes.get(name)

    # -- parsing -----------------------------------------------------------------------------------

    def _parse_list(self, name: str, data: bytes) -> list[ManifestMeta]:
        where = self.storage.full_uri(manifest_path(name))
        self._list_sizes[name] = len(data)
        found = []
        for record in read_avro(data, where):
            _check_version(record, where)
            if record.get("_EXTRA_FILES"):
                raise UnsupportedMetadataError(f"{where}: manifest side files (_EXTRA_FILES) are not supported")
            try:
                found.append(ManifestMeta(
                    _manifest_name(record["_FILE_NAME"], where), int(record["_FILE_SIZE"]),
                    int(record.get("_NUM_ADDED_FILES") or 0), int(record.get("_NUM_DELETED_FILES") or 0),
                ))
            except (KeyError, TypeError, ValueError) as exc:
                raise CorruptMetadataError(f"{where}: bad manifest list entry: {exc}") from exc
        return found

    def _parse_index_manifest(self, name: str, data: bytes) -> list[IndexFile]:
        self._index_manifest_sizes[name] = len(data)
        return parse_index_manifest(data, self.layout, self.storage.full_uri(manifest_path(name)))

    def _parse_manifest(self, name: str, data: bytes) -> list[PaimonEntry]:
        where = self.storage.full_uri(manifest_path(name))
        return [self._entry(record, where) for record in read_avro(data, where)]

    def _entry(self, record: dict, where: str) -> PaimonEntry:
        _check_version(record, where)
        try:
            kind = {0: FileKind.ADD, 1: FileKind.DELETE}.get(record["_KIND"])
            if kind is None:
                raise UnsupportedMetadataError(f"{where}: manifest entry kind {record['_KIND']!r} is not supported")
            meta = record["_FILE"]
            if meta.get("_EXTERNAL_PATH"):
                raise UnsupportedMetadataError(
                    f"{where}: data file {meta['_FILE_NAME']} is at an external path (_EXTERNAL_PATH); external paths are not supported"
                )
            partition = self.layout.decode(record["_PARTITION"])
            # Inside the table by construction: each directory is "<key>=<value>" (escaped: no "/") or "bucket-<n>".
            directory = self.layout.directory(partition) + bucket_directory(int(record["_BUCKET"])) + "/"
            name = _file_name(meta["_FILE_NAME"], where)
            extras = tuple(_file_name(e, where) for e in meta.get("_EXTRA_FILES") or ())
            files = [DataFile(directory + name, partition, int(meta["_ROW_COUNT"]), int(meta["_FILE_SIZE"]))]
            # An extra file's size is not recorded: 0 (verify does not compare it).
            files += [DataFile(directory + extra, partition, 0, 0) for extra in extras]
            return PaimonEntry(kind, (directory + name, int(meta["_LEVEL"]), extras), tuple(files))
        except (UnsupportedMetadataError, CorruptMetadataError):
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptMetadataError(f"{where}: bad manifest entry: {exc}") from exc


def _manifest_name(name, where: str) -> str:
    """A manifest's name: plain, and not an index file's (``index-``: a plan tells their directories by it)."""
    name = checked_file_name(name, "manifest file name", where)
    if name.startswith(INDEX_FILE_PREFIX):
        raise UnsupportedMetadataError(f"{where}: manifest {name!r} is named like an index file ({INDEX_FILE_PREFIX})")
    return name


def _file_name(name, where: str) -> str:
    """A data or extra file's name: one plain component of its bucket directory."""
    return checked_file_name(name, "data file name (in its bucket directory)", where)


def fold(entries_in_order: Iterable[PaimonEntry]) -> dict[str, DataFile]:
    """The live files after these entries, in order (Paimon's ``FileEntry.mergeEntries``: an ADD puts
    an identity in, a DELETE takes it out)."""
    live: dict[tuple, PaimonEntry] = {}
    for entry in entries_in_order:
        if entry.kind is FileKind.ADD:
            live[entry.key] = entry
        else:
            live.pop(entry.key, None)
    return {f.path: f for entry in live.values() for f in entry.files}


def as_manifest_entries(entries: Iterable[PaimonEntry]) -> list[ManifestEntry]:
    return [ManifestEntry(entry.kind, f) for entry in entries for f in entry.files]
