"""The native format's FileStore (core/lifecycle/store.py): manifests, manifest lists and data files.

A snapshot's state is its base list's manifests folded, then its delta list's
(core/native/manifest.py). A base list holds only the previous base, the previous delta and
manifests merged from them, so the manifests a run of snapshots uses are the first one's
plus what each later commit wrote; snapshots record that (``written_metadata``, with byte
sizes), which lets expiry and the in-use pass read a delta per snapshot instead of every
state. Snapshots written before that record existed are read through their lists.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Mapping, Sequence

from airflow_snaptable.core.errors import MissingMetadataError
from airflow_snaptable.core.native.manifest import (
    MANIFEST_DIR, DataFile, FileKind, ManifestEntry, ManifestIO, apply_entries, iter_manifest, manifest_path,
)
from airflow_snaptable.core.native.manifest_changes import iter_changes
from airflow_snaptable.core.formats.native.in_use import native_paths_in_use
from airflow_snaptable.core.io.path_set import PathHashSet
from airflow_snaptable.core.native.snapshot import FileCounts, Snapshot
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.store import ExpiringMetadata, InUse, StoredFile
from airflow_snaptable.core.native.tags import Tag
from airflow_snaptable.core.native.data_files import DATA_DIR

# Directories whose leftovers from interrupted writes (temp files) are orphans too.
_METADATA_DIRS = ("snapshot", "tag", "consumer", "plan", "intent", "schema", "readd", "_probe")


class NativeFiles:
    def __init__(self, storage: Storage, manifests: ManifestIO):
        self.storage = storage
        self.manifests = manifests

    def delta(self, snapshot: Snapshot) -> list[ManifestEntry]:
        return self.manifests.read_delta(snapshot)

    def state(self, snapshot: Snapshot) -> dict[str, DataFile]:
        return self.manifests.read_state(snapshot)

    def delta_file_counts(self, snapshots: Sequence[Snapshot]) -> dict[int, FileCounts]:
        """Each snapshot's added and deleted data files: its summary's counts (written from the commit's
        request), else its delta's entries counted."""
        counts = {}
        for snapshot in snapshots:
            summary = snapshot.summary or {}
            added, deleted = summary.get("added_files"), summary.get("deleted_files")
            if not (isinstance(added, int) and isinstance(deleted, int)):
                kinds = [entry.kind for entry in self.delta(snapshot)]
                added, deleted = kinds.count(FileKind.ADD), kinds.count(FileKind.DELETE)
            counts[snapshot.id] = FileCounts(added, deleted)
        return counts

    def state_entries(self, snapshot: Snapshot) -> Iterator[ManifestEntry]:
        """The entries that fold to the snapshot's state (its base list's manifests, then its delta's),
        read one manifest at a time and decoded in batches: a tag of millions of files is streamed,
        never held (core/lifecycle/protection.py builds its compact path set from this)."""
        manifests = self.manifests
        for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            for meta in manifests.read_list(list_name):
                data = manifests.read_manifest_bytes([meta.file_name])[meta.file_name]
                yield from iter_manifest(data, manifests.partition_types, where=meta.file_name)

    def metadata_files(self, snapshot: Snapshot) -> dict[str, int]:
        """Its two lists and their manifests, with byte sizes (a list's own size is 0 until this instance read or wrote it)."""
        return self.manifests.sizes_of(snapshot)

    def metadata_path(self, name: str) -> str:
        return manifest_path(name)

    def exists(self, path: str) -> bool:
        return self.storage.exists(path)

    def delete(self, paths: Sequence[str]) -> None:
        """Delete the files, then the partition directories under ``data/`` they leave empty (as
        Paimon's expiry and orphan clean do)."""
        self.storage.delete_files(list(paths))
        self.storage.remove_empty_dirs([p for p in paths if p.startswith(DATA_DIR + "/")], stop_at=DATA_DIR)

    # -- expiry -------------------------------------------------------------------------------

    def expiring(self, snapshots: Mapping[int, Snapshot], missing: list[str] | None = None, changes_from: int | None = None) -> ExpiringMetadata:
        """Of the lists, only the first snapshot's and the kept one's are read, plus every list of a
        snapshot without ``written_metadata``; of the manifests, only the deltas. In bulk
        (``Storage.read_many``: threads on remote stores, executors in the Spark job)."""
        manifests = self.manifests
        earliest, end = min(snapshots), max(snapshots)
        snaps = snapshots
        # Lists: those of the first and the kept snapshot, and every list of a snapshot that does not record its metadata.
        kept_lists = (snaps[end].base_manifest_list, snaps[end].delta_manifest_list)
        lists = manifests.read_lists(kept_lists)
        lists.update(_read_some(manifests.read_lists, (
            name
            for i, snapshot in snaps.items()
            if i == earliest or (i < end and snapshot.written_metadata is None)
            for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list)
        ), missing))

        def delta_manifests(snapshot: Snapshot) -> list[str]:
            written = snapshot.written_metadata
            if written is not None:
                return list(written["delta_manifests"])
            return [m.file_name for m in lists.get(snapshot.delta_manifest_list, [])]

        deltas = {i: delta_manifests(snaps[i]) for i in range(max(earliest + 1, changes_from or 0), end + 1)}
        # The deltas' bytes in one bulk read (compressed: a few bytes per entry); their entries are
        # decoded one snapshot at a time, when planning asks for them, and let go once used.
        contents = _read_some(manifests.read_manifest_bytes, (name for names in deltas.values() for name in names), missing)
        # Planning uses each entry's kind, path and size only: those three columns are read (core/native/manifest_changes.py).
        changes = DeltaEntries(deltas, contents, lambda name, data: iter_changes(data, where=name))

        def sizes(snapshot: Snapshot) -> dict[str, int]:
            """Its lists and their manifests with byte sizes; a skipped (missing) list contributes nothing."""
            found = {}
            for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
                if list_name in lists:
                    found.update((m.file_name, m.file_size) for m in lists[list_name])
                    found[list_name] = manifests.list_size(list_name) or 0
            return found

        kept = set(sizes(snaps[end]))
        manifest_sizes = sizes(snaps[earliest])
        for snapshot_id in range(earliest + 1, end):
            snapshot = snaps[snapshot_id]
            written = snapshot.written_metadata
            if written is None:
                manifest_sizes.update(sizes(snapshot))
                continue
            manifest_sizes[snapshot.base_manifest_list] = written["base_list"] or 0
            manifest_sizes[snapshot.delta_manifest_list] = written["delta_list"] or 0
            manifest_sizes.update(written["delta_manifests"])
            manifest_sizes.update(written["merged_manifests"])
        metadata_files = sorted((name, size) for name, size in manifest_sizes.items() if name not in kept)
        return ExpiringMetadata(changes=changes, metadata_files=metadata_files)

    # -- what is in use -------------------------------------------------------------------------

    def referenced_by(self, snapshots: Sequence[Snapshot], tags: Sequence[Tag]) -> InUse:
        """What the snapshots (ascending ids, possibly with gaps) and ``tags`` reference.

        Every snapshot's and tag's lists are read (a missing one raises); of the manifests, only
        the states read whole (the first snapshot of each run of consecutive ids, and the tags')
        and the other commits' deltas: a later state's files are its run's first state's plus what
        the commits since added. Without gaps that run is the whole history; verify passes what
        it could read, so a gap or an unreadable snapshot splits a run.
        """
        history = list(snapshots)
        used = InUse()
        manifests = self.manifests
        lists = manifests.read_lists(
            name for s in history + [t.snapshot for t in tags] for name in (s.base_manifest_list, s.delta_manifest_list)
        )

        def listed(snapshot, which: str = "both") -> list[str]:
            names = {"base": [snapshot.base_manifest_list], "delta": [snapshot.delta_manifest_list]}.get(
                which, [snapshot.base_manifest_list, snapshot.delta_manifest_list]
            )
            return [m.file_name for name in names for m in lists[name]]

        run_starts = {s.id for i, s in enumerate(history) if i == 0 or history[i - 1].id != s.id - 1}
        folded = [s for s in history if s.id in run_starts] + [t.snapshot for t in tags]  # states read whole
        entries = manifests.read_manifests([name for s in folded for name in listed(s)])
        # The other commits' deltas (most of a long history's entries): read in bulk as bytes,
        # decoded one at a time while their files are recorded, never all as objects at once.
        delta_bytes = manifests.read_manifest_bytes(
            name for s in history if s.id not in run_starts for name in listed(s, "delta") if name not in entries
        )

        def delta_entries(name: str) -> Iterable[ManifestEntry]:
            return entries[name] if name in entries else iter_manifest(delta_bytes[name], manifests.partition_types, where=name)

        def state(snapshot) -> dict:
            files: dict = {}
            for name in listed(snapshot):  # base manifests, then delta: the fold order
                apply_entries(files, entries[name])
            return files

        def reference_metadata(snapshot, owner: str) -> None:
            for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
                used.metadata_files.setdefault(manifest_path(name), owner)
                for meta in lists[name]:
                    used.metadata_files.setdefault(manifest_path(meta.file_name), owner)
                    used.recorded_sizes.setdefault(manifest_path(meta.file_name), meta.file_size)
            for path, size in written_sizes(snapshot).items():
                used.recorded_sizes.setdefault(path, size)

        def reference_data(data_file, owner: str) -> None:
            used.data_files.setdefault(data_file.path, owner)
            used.recorded_sizes.setdefault(data_file.path, data_file.file_size)

        for snapshot in history:
            owner = f"snapshot {snapshot.id}"
            reference_metadata(snapshot, owner)
            if snapshot.id in run_starts:
                for data_file in state(snapshot).values():
                    reference_data(data_file, owner)
            else:
                # Every file of a later state is in its run's first state or added since.
                for name in listed(snapshot, "delta"):
                    for entry in delta_entries(name):
                        reference_data(entry.file, owner)
        for tag in tags:
            owner = f"tag {tag.name}"
            for data_file in state(tag.snapshot).values():
                reference_data(data_file, owner)
            reference_metadata(tag.snapshot, owner)
        return used

    # -- listings -------------------------------------------------------------------------------

    def paths_in_use(self, snapshots: Sequence[Snapshot], tags: Sequence[Tag]) -> PathHashSet:
        """What :meth:`referenced_by` references, streamed into 8 bytes per path (core/formats/native/in_use.py)."""
        return native_paths_in_use(self.manifests, snapshots, tags)

    def listed_files(self) -> Iterator[StoredFile]:
        """Everything under ``data/`` and ``manifest/``, a directory at a time."""
        for directory in (DATA_DIR, MANIFEST_DIR):
            for found in self.storage.iter_files(directory):
                yield StoredFile(*found)

    def leftover_files(self) -> Iterator[StoredFile]:
        """Temp files of interrupted atomic writes in the metadata directories, and ``Table.create``'s probes."""
        for directory in _METADATA_DIRS:
            for rel, size, mtime in self.storage.iter_files(directory):
                name = rel.rsplit("/", 1)[-1]
                if (name.startswith(".") and name.endswith(".tmp")) or directory == "_probe":
                    yield StoredFile(rel, size, mtime)


class DeltaEntries:
    """Each expiring snapshot's delta entries (``ExpiringMetadata.changes``), decoded when asked for.

    Holds the manifests' bytes; :meth:`pop` forgets the snapshot and returns its entries as an
    iterator that decodes them in batches, so planning, which uses each entry once, never holds the
    decoded entries of the range, nor of a whole large delta. A manifest whose bytes are absent was
    skipped as missing (the repair path) and contributes nothing.
    """

    def __init__(self, deltas: dict[int, list[str]], contents: dict[str, bytes], decode: Callable[[str, bytes], Iterable[ManifestEntry]]):
        self._deltas = deltas
        self._contents = contents
        self._decode = decode

    def pop(self, snapshot_id: int) -> Iterator[ManifestEntry]:
        names = self._deltas.pop(snapshot_id)  # now, not when the iterator starts
        return self._entries(names)

    def _entries(self, names: list[str]) -> Iterator[ManifestEntry]:
        for name in names:
            data = self._contents.get(name)  # kept: a name listed twice decodes twice, never to nothing
            if data is not None:
                yield from self._decode(name, data)


def written_sizes(snapshot: Snapshot) -> dict[str, int]:
    """Byte sizes of the metadata files ``snapshot``'s commit wrote, as it recorded them (no I/O; {} without the record)."""
    written = snapshot.written_metadata or {}
    sizes = {}
    for key, name in (("base_list", snapshot.base_manifest_list), ("delta_list", snapshot.delta_manifest_list)):
        if isinstance(written.get(key), int):
            sizes[manifest_path(name)] = written[key]
    for key in ("delta_manifests", "merged_manifests"):
        for name, size in (written.get(key) or {}).items():
            if isinstance(size, int):
                sizes[manifest_path(name)] = size
    return sizes


def _read_some(read_many: Callable[[list[str]], dict], names: Iterable[str], missing: list[str] | None) -> dict:
    """``read_many(names)``; with ``missing`` a list, the names that do not exist are appended to it instead."""
    names = list(dict.fromkeys(names))
    if missing is None:
        return read_many(names)
    try:
        return read_many(names)
    except MissingMetadataError:
        found: dict = {}
        for name in names:
            try:
                found.update(read_many([name]))
            except MissingMetadataError:
                missing.append(manifest_path(name))
        return found
