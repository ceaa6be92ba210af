"""The native format's in-use pass for orphan cleaning, in memory bounded by the table's file count
times 8 bytes (core/io/path_set.py), not by its listing or its manifests' entries as objects.

It references what ``NativeFiles.referenced_by`` references (that pass, with owners and recorded
sizes, serves ``verify``): every retained snapshot's two lists and their manifests; the data files
of the first snapshot of each run of consecutive ids and of every tag (their states, folded); and
every file the other snapshots' delta manifests name. The snapshots are read ``SNAPSHOT_CHUNK`` at a
time and the manifests as Arrow columns (``kind``, ``path``) in batches; only path hashes are kept.

A state's fold is exact, on the paths: a file is live when its last entry is an ADD. The DELETE
entries' paths are the only strings held (a fully merged base has none), so a hash collision can
never drop a live file from the set (core/io/path_set.py: collisions only ever keep files).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.native import arrow_values
from airflow_snaptable.core.native.manifest import FileKind, ManifestIO, manifest_path, manifest_batches
from airflow_snaptable.core.io.path_set import PathHashSet, PathHashSetBuilder
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.io.table_paths import check_relative_column
from airflow_snaptable.core.native.tags import Tag

#: Snapshots whose lists and delta manifests are read at once (one bulk ``Storage.read_many`` each):
#: their 5,000 lists reach the Spark job's threshold for reading on executors
#: (spark/maintenance.py ``DEFAULT_READ_THRESHOLD``), and their deltas' bytes stay a few tens of MB
#: (a delta of 1,000 files is ~25 KB).
SNAPSHOT_CHUNK = 2_500
#: Manifest rows decoded at once.
BATCH_ROWS = 65_536

_COLUMNS = {"kind": pa.int8(), "path": pa.string()}
#: The valid ``kind`` values, as Python ints: ``pa.array`` of them is built per call, not at import,
#: where it would import pandas (pyarrow probes for it) into every process that imports core.
_KINDS = tuple(int(k) for k in FileKind)


def native_paths_in_use(manifests: ManifestIO, snapshots: Sequence[Snapshot], tags: Sequence[Tag]) -> PathHashSet:
    """The paths (relative to the table root) that ``snapshots`` (ascending ids, possibly with gaps)
    and ``tags`` reference, as a :class:`PathHashSet`. A missing or unreadable list or manifest raises."""
    used = PathHashSetBuilder()
    history = list(snapshots)
    for start in range(0, len(history), SNAPSHOT_CHUNK):
        chunk = history[start:start + SNAPSHOT_CHUNK]
        lists = manifests.read_lists(name for s in chunk for name in (s.base_manifest_list, s.delta_manifest_list))
        deltas = []
        for position, snapshot in enumerate(chunk, start):
            used.add_paths(_metadata_paths(snapshot, lists))
            starts_run = position == 0 or history[position - 1].id != snapshot.id - 1
            if starts_run:
                # Every file of a later state of the run is in this state or added since.
                names = [m.file_name for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list) for m in lists[name]]
                used.add_paths(_live_paths(manifests, names))
            else:
                deltas += [m.file_name for m in lists[snapshot.delta_manifest_list]]
        # Every file a delta names (ADD or DELETE: a deleted file was in the previous state, already in the set).
        contents = manifests.read_manifest_bytes(deltas)
        for name in dict.fromkeys(deltas):
            for kinds, paths in _entries(contents.pop(name), name):
                used.add_paths(paths.to_pylist())
    for tag in tags:
        lists = manifests.read_lists((tag.snapshot.base_manifest_list, tag.snapshot.delta_manifest_list))
        used.add_paths(_metadata_paths(tag.snapshot, lists))
        names = [m.file_name for name in (tag.snapshot.base_manifest_list, tag.snapshot.delta_manifest_list) for m in lists[name]]
        used.add_paths(_live_paths(manifests, names))
    return used.build()


def _metadata_paths(snapshot: Snapshot, lists: dict) -> list[str]:
    """The snapshot's two lists and the manifests they name."""
    paths = []
    for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
        paths.append(manifest_path(name))
        paths += [manifest_path(m.file_name) for m in lists[name]]
    return paths


def _live_paths(manifests: ManifestIO, names: list[str]) -> Iterator[str]:
    """The paths live after folding the manifests ``names`` in order (each file's last entry decides).

    Two passes over the manifests' bytes (compressed: a few bytes per entry): the first records each
    deleted path's last DELETE position, the second yields each ADD not followed by a DELETE of its path.
    """
    contents = manifests.read_manifest_bytes(names)
    order = [(name, contents[name]) for name in names]  # a manifest named twice folds twice, as apply_entries does
    last_delete: dict[str, int] = {}
    position = 0
    for name, data in order:
        for kinds, paths in _entries(data, name):
            deleting = pc.equal(kinds, arrow_values.scalar(int(FileKind.DELETE), pa.int8()))
            if pc.any(deleting).as_py():
                rows = pc.indices_nonzero(deleting).to_pylist()
                for row, path in zip(rows, pc.filter(paths, deleting).to_pylist()):
                    last_delete[path] = position + row
            position += len(kinds)
    deleted = arrow_values.array(list(last_delete), pa.string())
    position = 0
    for name, data in order:
        for kinds, paths in _entries(data, name):
            adding = pc.equal(kinds, arrow_values.scalar(int(FileKind.ADD), pa.int8()))
            # An ADD of a path never deleted is live; one of a deleted path only if after its last DELETE.
            maybe_deleted = pc.and_(adding, pc.is_in(paths, value_set=deleted))
            yield from pc.filter(paths, pc.and_(adding, pc.invert(maybe_deleted))).to_pylist()
            if len(deleted):
                for row in pc.indices_nonzero(maybe_deleted).to_pylist():
                    path = paths[row].as_py()
                    if last_delete[path] < position + row:
                        yield path
            position += len(kinds)


def _entries(data: bytes, where: str) -> Iterator[tuple[pa.Array, pa.Array]]:
    """A manifest's ``kind`` and ``path`` columns, ``BATCH_ROWS`` rows at a time (the other columns are not decoded)."""
    def accepts(schema: pa.Schema) -> bool:
        return all(schema.get_field_index(column) >= 0 and schema.field(column).type.equals(wanted) for column, wanted in _COLUMNS.items())

    for batch in manifest_batches(data, where, accepts, BATCH_ROWS, list(_COLUMNS)):
        kinds, paths = batch.column("kind"), batch.column("path")
        if kinds.null_count or paths.null_count or (len(kinds) and not pc.all(pc.is_in(kinds, value_set=arrow_values.array(_KINDS, pa.int8()))).as_py()):
            raise CorruptMetadataError(f"{where}: unreadable entry: a null or unknown kind or path")
        # A path spelled otherwise than the listing spells it would leave the listed file unreferenced.
        check_relative_column(batch.column("path"), "data file path", where)
        yield kinds, paths
