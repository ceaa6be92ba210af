"""core/lifecycle/store.py ``FileStore`` on a Paimon table: manifests under ``manifest/``, data files in bucket directories.

What Paimon's ``SnapshotDeletion``/``FileDeletionBase`` read, read the same way: a snapshot's
state is its base list's manifests then its delta list's, folded by file identity; its delta
is its delta list's entries; the metadata files it uses are its two lists and their manifests
(with the sizes the lists record), its index manifest and the index files that lists
(index_manifests.py), and its changelog: its changelog manifest list, the manifests that lists
and the changelog files they add (changelogs.py; a tag's snapshot has none: Paimon's tags do not
keep changelog). Expiring ``first .. end-1`` frees their metadata that ``end`` does not use
(Paimon's ``cleanUnusedManifests`` and ``cleanUnusedIndexManifests``; their changelog with them,
``ExpireSnapshotsImpl``'s coupled changelog). Data files the format keeps are under the partition and bucket
directories; temporary files of interrupted atomic writes are in ``snapshot/``, ``tag/``,
``consumer/`` and the engine's own directory.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
from typing import Iterator, Mapping, Sequence

from airflow_snaptable.core.errors import UnsupportedMetadataError
from airflow_snaptable.core.native.manifest import DataFile, FileKind, ManifestEntry
from airflow_snaptable.core.formats.paimon.binary_row import PartitionLayout, escape_path_name
from airflow_snaptable.core.formats.paimon.manifests import (
    MANIFEST_DIR,
    ManifestMeta,
    ManifestReader,
    PaimonEntry,
    as_manifest_entries,
    fold,
    manifest_path,
)
from airflow_snaptable.core.formats.paimon.index_manifests import INDEX_DIR, IndexFile, is_index_file_name
from airflow_snaptable.core.formats.paimon.snapshots import RAW_KEY, changelog_manifest_list_name, index_manifest_name
from airflow_snaptable.core.io.path_set import PathHashSet
from airflow_snaptable.core.io.table_paths import checked_file_name, checked_relative_path
from airflow_snaptable.core.lifecycle.deletion_plans import DataCandidate
from airflow_snaptable.core.native.snapshot import FileCounts, Snapshot
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.store import ExpiringMetadata, InUse, StoredFile
from airflow_snaptable.core.native.tags import Tag

#: Directories whose hidden ``.<name>.<uuid>.tmp`` files are leftovers of interrupted atomic writes.
_METADATA_DIRS = ("snapshot", "tag", "consumer")
#: The engine's own directories inside the lifecycle directory.
_LIFECYCLE_DIRS = ("plan", "intent", "readd")
#: Drop the parsed-file cache past this many files (they are immutable; the cache only saves reads).
_CACHE_LIMIT = 20_000


def metadata_path(name: str) -> str:
    """Where a metadata file of a Paimon table is, told by its name (checked to follow Paimon's prefixes
    when it was read): an index file in ``index/``; a list, manifest or index manifest in ``manifest/``;
    a changelog file is named by its path in its bucket directory (changelogs.py)."""
    if "/" in name:
        path = checked_relative_path(name, "changelog file")
        if not path.split("/")[-2].startswith("bucket-"):  # a plan read back names nothing else by a path
            raise UnsupportedMetadataError(f"changelog file {name!r} is not in a bucket directory")
        return path
    if is_index_file_name(name):
        return f"{INDEX_DIR}/{checked_file_name(name, 'index file name')}"
    return manifest_path(name)


class PaimonFiles:
    def __init__(self, storage: Storage, layout: PartitionLayout, lifecycle_dir: str):
        self.storage = storage
        self.layout = layout
        self.lifecycle_dir = lifecycle_dir
        self._reader = ManifestReader(storage, layout)

    @property
    def reader(self) -> ManifestReader:
        if self._reader.cached() > _CACHE_LIMIT:
            self._reader = ManifestReader(self.storage, self.layout)
        return self._reader

    # -- one snapshot ----------------------------------------------------------------------------

    def _lists(self, snapshots: Sequence[Snapshot], skip_missing: list[str] | None = None) -> dict[str, list[ManifestMeta]]:
        return self.reader.lists((n for s in snapshots for n in (s.base_manifest_list, s.delta_manifest_list)), skip_missing)

    def _entries(self, snapshot: Snapshot, lists: Mapping[str, list[ManifestMeta]], which: str = "both") -> list[str]:
        names = {"base": [snapshot.base_manifest_list], "delta": [snapshot.delta_manifest_list]}.get(
            which, [snapshot.base_manifest_list, snapshot.delta_manifest_list]
        )
        return [m.name for name in names for m in lists.get(name, ())]

    def delta(self, snapshot: Snapshot) -> list[ManifestEntry]:
        return as_manifest_entries(self._delta_entries(snapshot))

    def _delta_entries(self, snapshot: Snapshot) -> list[PaimonEntry]:
        names = self._entries(snapshot, self._lists([snapshot]), "delta")
        manifests = self.reader.manifests(names)
        return [e for name in names for e in manifests[name]]

    def delta_file_counts(self, snapshots: Sequence[Snapshot], index_files: bool = False) -> dict[int, FileCounts]:
        """Each snapshot's added and deleted data files, as its delta list's manifests count them (one
        read per snapshot, no manifest read); with ``index_files`` also the index files it lists (its
        index manifest read) and the changelog files it wrote (its changelog list's count)."""
        lists = self.reader.lists(s.delta_manifest_list for s in snapshots)
        changelogs: dict[str, list[ManifestMeta]] = {}
        if index_files:
            self._read_indexes(snapshots)
            names = [n for n in (changelog_manifest_list_name(s) for s in snapshots) if n is not None]
            changelogs = self.reader.lists(names, [])  # a missing one is no changelog (_changelog)
        counts = {}
        for snapshot in snapshots:
            metas = lists[snapshot.delta_manifest_list]
            changelog = changelogs.get(changelog_manifest_list_name(snapshot) or "")
            counts[snapshot.id] = FileCounts(
                sum(m.added_files for m in metas), sum(m.deleted_files for m in metas),
                len(self.index_files(snapshot)) if index_files else None,
                None if changelog is None else sum(m.added_files for m in changelog),
            )
        return counts

    def live_file_count(self, snapshot: Snapshot) -> int:
        """The data files the snapshot reads: its lists' manifests' ADD entries less their DELETE entries
        (each DELETE takes out one earlier ADD), without reading a manifest."""
        lists = self._lists([snapshot])
        metas = [m for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list) for m in lists[name]]
        return sum(m.added_files for m in metas) - sum(m.deleted_files for m in metas)

    def state(self, snapshot: Snapshot) -> dict[str, DataFile]:
        names = self._entries(snapshot, self._lists([snapshot]))
        manifests = self.reader.manifests(names)
        return fold(e for name in names for e in manifests[name])

    def metadata_files(self, snapshot: Snapshot) -> dict[str, int]:
        return self._metadata(snapshot, self._lists([snapshot]))

    def _metadata(self, snapshot: Snapshot, lists: Mapping[str, list[ManifestMeta]], skip_missing: bool = False) -> dict[str, int]:
        """Its lists (the sizes the snapshot records, else the bytes read) and their manifests, its index
        manifest (the bytes read) and the index files it lists (the sizes it records); a list or index
        manifest that was skipped as missing contributes nothing."""
        found: dict[str, int] = {}
        doc_sizes = _list_sizes(snapshot)
        for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            if list_name not in lists:
                continue
            found.update((m.name, m.size) for m in lists[list_name])
            found[list_name] = doc_sizes.get(list_name) or self.reader.list_size(list_name) or 0
        index_manifest = index_manifest_name(snapshot)
        if index_manifest is not None:
            # Missing ones were recorded by _read_indexes; a scratch list here records nothing twice.
            indexes = self.reader.index_manifests([index_manifest], [] if skip_missing else None)
            if index_manifest in indexes:
                found.update((f.name, f.size) for f in indexes[index_manifest])
                found[index_manifest] = self.reader.index_manifest_size(index_manifest) or 0
        found.update(self._changelog(snapshot, skip_missing))
        return found

    def _changelog(self, snapshot: Snapshot, skip_missing: bool = False) -> dict[str, int]:
        """The snapshot's own changelog: its changelog manifest list (the size it records, else the bytes
        read), the manifests that lists and the changelog files they add (by path: they are in the bucket
        directories). Only that commit wrote them (Paimon's ``deleteAddedDataFiles(changelogManifestList)``
        deletes every one with the snapshot). A missing changelog list is no changelog, as Paimon reads it
        (``tryReadManifestList``): a rollback to a tag of an expired snapshot restores a snapshot whose
        changelog its expiry deleted."""
        list_name = changelog_manifest_list_name(snapshot)
        if list_name is None:
            return {}
        lists = self.reader.lists([list_name], [])
        if list_name not in lists:
            return {}
        found = {m.name: m.size for m in lists[list_name]}
        found[list_name] = _list_sizes(snapshot).get(list_name) or self.reader.list_size(list_name) or 0
        manifests = self.reader.manifests([m.name for m in lists[list_name]], [] if skip_missing else None)
        for entries in manifests.values():
            for entry in entries:
                if entry.kind is FileKind.ADD:
                    found.update((f.path, f.file_size) for f in entry.files)
        return found

    def _read_indexes(self, snapshots: Sequence[Snapshot], skip_missing: list[str] | None = None) -> None:
        """Read the snapshots' index manifests at once (the reader keeps them)."""
        names = [n for n in (index_manifest_name(s) for s in snapshots) if n is not None]
        self.reader.index_manifests(names, skip_missing)

    def index_files(self, snapshot: Snapshot) -> list[IndexFile]:
        """The index files the snapshot lists (its index manifest's entries)."""
        name = index_manifest_name(snapshot)
        return [] if name is None else list(self.reader.index_manifests([name])[name])

    def metadata_path(self, name: str) -> str:
        return metadata_path(name)

    def exists(self, path: str) -> bool:
        return self.storage.exists(path)

    def delete(self, paths: Sequence[str]) -> None:
        self.storage.delete_files(list(paths))

    def measured(self, candidates: list[DataCandidate]) -> list[DataCandidate]:
        """The candidates with the sizes of the extra files (file indexes) measured: Paimon records none
        (they read as 0), and the bytes an operation frees count every file it deletes."""
        directories = sorted({posixpath.dirname(c.path) for c in candidates if c.size == 0})
        if not directories:
            return candidates
        # One listing per bucket directory (a file index sits beside its data file), not a request per file.
        sizes = {rel: size for directory in directories for rel, size, _mtime in self.storage.list_files(directory)}
        return [dataclasses.replace(c, size=sizes.get(c.path, 0)) if c.size == 0 else c for c in candidates]

    # -- expiry -------------------------------------------------------------------------------------

    def expiring(self, snapshots: Mapping[int, Snapshot], missing: list[str] | None = None, changes_from: int | None = None) -> ExpiringMetadata:
        first, end = min(snapshots), max(snapshots)
        kept_lists = self._lists([snapshots[end]])  # the kept snapshot's must read
        expired = [snapshots[i] for i in range(first, end)]
        self._read_indexes([snapshots[end]])
        lists = {**self._lists(expired, missing), **kept_lists}
        self._read_indexes(expired, missing)
        changes: dict[int, list[ManifestEntry]] = {}
        for snapshot_id in range(max(first + 1, changes_from or 0), end + 1):
            snapshot = snapshots[snapshot_id]
            names = self._entries(snapshot, lists, "delta")
            manifests = self.reader.manifests(names, None if snapshot_id == end else missing)
            changes[snapshot_id] = as_manifest_entries(e for name in names for e in manifests.get(name, ()))
        kept = set(self._metadata(snapshots[end], lists))
        freed: dict[str, int] = {}
        for snapshot in expired:
            freed.update(self._metadata(snapshot, lists, skip_missing=missing is not None))
        return ExpiringMetadata(changes, sorted((n, s) for n, s in freed.items() if n not in kept))

    # -- what is in use -------------------------------------------------------------------------------

    def referenced_by(self, snapshots: Sequence[Snapshot], tags: Sequence[Tag]) -> InUse:
        """Every file they reference. A run of consecutive snapshots is its first state plus what each
        later commit's delta names (as NativeFiles.referenced_by); tags are read whole."""
        history = list(snapshots)
        used = InUse()
        lists = self._lists(history + [t.snapshot for t in tags])
        self._read_indexes(history + [t.snapshot for t in tags])
        run_starts = {s.id for i, s in enumerate(history) if i == 0 or history[i - 1].id != s.id - 1}
        whole = [s for s in history if s.id in run_starts] + [t.snapshot for t in tags]
        manifests = self.reader.manifests(
            [n for s in whole for n in self._entries(s, lists)]
            + [n for s in history if s.id not in run_starts for n in self._entries(s, lists, "delta")]
        )

        def reference(snapshot: Snapshot, owner: str, files) -> None:
            for name, size in self._metadata(snapshot, lists).items():
                used.metadata_files.setdefault(metadata_path(name), owner)
                if size or "/" not in name:  # a changelog file's extra files (file indexes) record no size
                    used.recorded_sizes.setdefault(metadata_path(name), size)
            for data_file in files:
                used.data_files.setdefault(data_file.path, owner)
                if data_file.file_size or data_file.record_count:  # extra files record no size
                    used.recorded_sizes.setdefault(data_file.path, data_file.file_size)

        for snapshot in history:
            if snapshot.id in run_starts:
                names = self._entries(snapshot, lists)
                files = fold(e for n in names for e in manifests[n]).values()
            else:
                files = [f for n in self._entries(snapshot, lists, "delta") for e in manifests[n] for f in e.files]
            reference(snapshot, f"snapshot {snapshot.id}", files)
        for tag in tags:
            names = self._entries(tag.snapshot, lists)
            reference(tag.snapshot, f"tag {tag.name}", fold(e for n in names for e in manifests[n]).values())
        return used

    # -- listings ---------------------------------------------------------------------------------------

    def _data_roots(self) -> list[str]:
        """The top-level partition directories (``<first key>=...``), or the bucket directories."""
        prefix = f"{escape_path_name(self.layout.keys[0])}=" if self.layout.keys else "bucket-"
        return [name for name in self.storage.list_names("") if name.startswith(prefix)]

    def paths_in_use(self, snapshots: Sequence[Snapshot], tags: Sequence[Tag]) -> PathHashSet:
        """:meth:`referenced_by`'s paths as a compact set (the per-file records go once it is built)."""
        return PathHashSet.of(self.referenced_by(snapshots, tags).all_paths())

    def listed_files(self) -> Iterator[StoredFile]:
        """The data, manifest and index directories, a directory at a time (``Storage.iter_files``)."""
        for directory in self._data_roots() + [MANIFEST_DIR, INDEX_DIR]:
            for found in self.storage.iter_files(directory):
                yield StoredFile(*found)

    def leftover_files(self) -> Iterator[StoredFile]:
        directories = list(_METADATA_DIRS) + [f"{self.lifecycle_dir}/{d}" for d in _LIFECYCLE_DIRS]
        for directory in directories:
            for rel, size, mtime in self.storage.iter_files(directory):
                name = rel.rsplit("/", 1)[-1]
                if name.startswith(".") and name.endswith(".tmp"):
                    yield StoredFile(rel, size, mtime)


def _list_sizes(snapshot: Snapshot) -> dict[str, int]:
    """The list sizes Paimon (>= 1.1) records in the snapshot."""
    raw = (snapshot.summary or {}).get(RAW_KEY)
    if not isinstance(raw, str):
        return {}
    doc = json.loads(raw)
    sizes = {}
    for name_key, size_key in (
        ("baseManifestList", "baseManifestListSize"),
        ("deltaManifestList", "deltaManifestListSize"),
        ("changelogManifestList", "changelogManifestListSize"),
    ):
        if isinstance(doc.get(size_key), int):
            sizes[doc[name_key]] = doc[size_key]
    return sizes
