"""Manifests and manifest lists (both Parquet, both immutable, names never reused).

A manifest holds entries ``ADD file`` / ``DELETE file``. A manifest list names
manifests in order. A snapshot's state is the fold of its base list's
manifests and then its delta list's manifests: ADD puts a file in the set,
DELETE takes it out. Because only the *last* entry of a file decides whether
it is in the set, any run of consecutive manifests can be replaced by one
manifest holding each file's last entry ("merge"), and a run that starts at
the first manifest can also drop DELETE entries ("full merge").
"""

from __future__ import annotations

import io
import threading
import uuid
from dataclasses import dataclass
from enum import IntEnum
from typing import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_snaptable.core.native.column_bounds import column_stats_of
from airflow_snaptable.core.errors import CorruptMetadataError, MissingMetadataError
from airflow_snaptable.core.native.partition_bounds import partition_stats_of
from airflow_snaptable.core.native.schema import decode_partition, encode_partition
from airflow_snaptable.core.io.table_paths import check_relative_column, checked_file_name

MANIFEST_DIR = "manifest"


class FileKind(IntEnum):
    ADD = 0
    DELETE = 1


# Per-file values use slots: a table holds millions of them (56 bytes each instead of ~350 with a __dict__).
@dataclass(frozen=True, slots=True)
class DataFile:
    """A Parquet data file of the table. ``path`` is relative to the table root.

    ``stats``: its column statistics as JSON text (core/native/column_stats.py: ``FileStats.encode()``,
    ``stats_of_table``), which let a filtered scan skip it; None: unknown (the file is always read).
    """

    path: str
    partition: tuple
    record_count: int
    file_size: int
    stats: str | None = None


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    kind: FileKind
    file: DataFile


@dataclass(frozen=True)
class ManifestFileMeta:
    """One manifest as its list names it."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    schema_id: int
    #: The bounds of its entries' partition values (``partition_stats``; Paimon's ``_PARTITION_STATS``),
    #: so a filtered scan skips it unread. None: unknown (written before there were bounds) or unpartitioned.
    partition_stats: str | None = None
    #: The union of its entries' column statistics (core/native/column_bounds.py): skipped unread on any column. None: unknown.
    column_stats: str | None = None


_MANIFEST_SCHEMA_WITHOUT_STATS = pa.schema(
    [
        ("kind", pa.int8()),
        ("path", pa.string()),
        ("partition", pa.string()),
        ("record_count", pa.int64()),
        ("file_size", pa.int64()),
    ]
)
#: Manifests written since column statistics exist (``stats``: ``DataFile.stats``, null if unknown); both forms read.
_MANIFEST_SCHEMA = _MANIFEST_SCHEMA_WITHOUT_STATS.append(pa.field("stats", pa.string()))
_LIST_SCHEMA_WITHOUT_STATS = pa.schema(
    [
        ("file_name", pa.string()),
        ("file_size", pa.int64()),
        ("num_added_files", pa.int64()),
        ("num_deleted_files", pa.int64()),
        ("schema_id", pa.int64()),
    ]
)
#: Lists written since partition bounds exist, and since column bounds exist; all three forms read.
_LIST_SCHEMA_WITHOUT_COLUMN_STATS = _LIST_SCHEMA_WITHOUT_STATS.append(pa.field("partition_stats", pa.string()))
_LIST_SCHEMA = _LIST_SCHEMA_WITHOUT_COLUMN_STATS.append(pa.field("column_stats", pa.string()))


def new_manifest_name() -> str:
    return f"manifest-{uuid.uuid4().hex}"


def new_manifest_list_name() -> str:
    return f"manifest-list-{uuid.uuid4().hex}"


def manifest_path(file_name: str) -> str:
    return f"{MANIFEST_DIR}/{checked_file_name(file_name, 'manifest file name')}"  # never "../x": core/io/table_paths.py


def _to_parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def _from_parquet(data: bytes, schema: pa.Schema, where: str, *older: pa.Schema) -> pa.Table:
    """The table in ``data``, whose columns must be ``schema``'s (or one of the ``older`` forms it still reads)."""
    try:
        # ParquetFile.read on a buffer: several times faster than read_table for these small files.
        table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
        raise CorruptMetadataError(f"{where}: cannot read Parquet: {exc}") from exc
    found = table.schema.remove_metadata()
    if not any(found.equals(accepted) for accepted in (schema, *older)):
        raise CorruptMetadataError(f"{where}: unexpected columns {table.schema.names}")
    return table


def encode_manifest(entries: list[ManifestEntry]) -> bytes:
    table = pa.table(
        [
            pa.array([int(e.kind) for e in entries], pa.int8()),
            pa.array([e.file.path for e in entries], pa.string()),
            pa.array([encode_partition(e.file.partition) for e in entries], pa.string()),
            pa.array([e.file.record_count for e in entries], pa.int64()),
            pa.array([e.file.file_size for e in entries], pa.int64()),
            pa.array([e.file.stats for e in entries], pa.string()),
        ],
        schema=_MANIFEST_SCHEMA,
    )
    return _to_parquet(table)


def manifest_table(data: bytes, where: str) -> pa.Table:
    """A manifest's entries as Arrow columns (``partition``: the values as JSON text), checked (paths too:
    core/io/table_paths.py); a manifest written before column statistics gets an all-null ``stats`` column."""
    table = _from_parquet(data, _MANIFEST_SCHEMA, where, _MANIFEST_SCHEMA_WITHOUT_STATS)
    check_relative_column(table.column("path"), "data file path", where)
    if table.num_columns == len(_MANIFEST_SCHEMA_WITHOUT_STATS):
        table = table.append_column(_MANIFEST_SCHEMA.field("stats"), pa.nulls(table.num_rows, pa.string()))
    return table


def decode_manifest(data: bytes, partition_types: list[pa.DataType], where: str) -> list[ManifestEntry]:
    return decode_manifest_table(manifest_table(data, where), partition_types, where)


def iter_manifest(data: bytes, partition_types: list[pa.DataType], where: str, batch_rows: int = 65_536) -> Iterator[ManifestEntry]:
    """A manifest's entries, decoded ``batch_rows`` at a time: a manifest of a million entries (a full
    overwrite's delta) is never a million objects at once for a reader that uses each entry and lets go."""
    for batch in manifest_batches(data, where, _MANIFEST_SCHEMA.equals, batch_rows):
        check_relative_column(batch.column("path"), "data file path", where)
        yield from decode_manifest_table(pa.Table.from_batches([batch]), partition_types, where)


def manifest_batches(
    data: bytes, where: str, accepts: Callable[[pa.Schema], bool], batch_rows: int, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """A manifest's rows, ``batch_rows`` at a time (only ``columns`` decoded; all when None), for the readers
    that stream a manifest (the full decode above, expiry planning's, the in-use pass's). Fails closed:
    bytes that are not Parquet, or whose schema ``accepts`` refuses, raise CorruptMetadataError."""
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        found = parquet.schema_arrow.remove_metadata()
    except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
        raise CorruptMetadataError(f"{where}: cannot read Parquet: {exc}") from exc
    if not accepts(found):
        raise CorruptMetadataError(f"{where}: unexpected columns {found.names}")
    batches = parquet.iter_batches(batch_size=batch_rows, columns=columns, use_threads=False)
    while True:
        try:
            batch = next(batches, None)
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot read Parquet: {exc}") from exc
        if batch is None:
            return
        yield batch


_KINDS = tuple(FileKind)  # indexing a tuple: an Enum call per entry was half of decoding


def decode_manifest_table(table: pa.Table, partition_types: list[pa.DataType], where: str) -> list[ManifestEntry]:
    columns = table.to_pydict()
    decoded: dict[str, tuple] = {}
    entries = []
    try:
        for kind, path, partition, records, size, stats in zip(
            columns["kind"], columns["path"], columns["partition"], columns["record_count"], columns["file_size"], columns["stats"]
        ):
            if partition not in decoded:
                decoded[partition] = decode_partition(partition, partition_types)
            entries.append(ManifestEntry(_KINDS[kind], DataFile(path, decoded[partition], records, size, stats)))
    except (IndexError, TypeError, ValueError) as exc:
        raise CorruptMetadataError(f"{where}: unreadable entry: {type(exc).__name__}: {exc}") from exc
    return entries


def encode_manifest_list(metas: list[ManifestFileMeta]) -> bytes:
    table = pa.table(
        [
            pa.array([m.file_name for m in metas], pa.string()),
            pa.array([m.file_size for m in metas], pa.int64()),
            pa.array([m.num_added_files for m in metas], pa.int64()),
            pa.array([m.num_deleted_files for m in metas], pa.int64()),
            pa.array([m.schema_id for m in metas], pa.int64()),
            pa.array([m.partition_stats for m in metas], pa.string()),
            pa.array([m.column_stats for m in metas], pa.string()),
        ],
        schema=_LIST_SCHEMA,
    )
    return _to_parquet(table)


def decode_manifest_list(data: bytes, where: str) -> list[ManifestFileMeta]:
    columns = _from_parquet(data, _LIST_SCHEMA, where, _LIST_SCHEMA_WITHOUT_COLUMN_STATS, _LIST_SCHEMA_WITHOUT_STATS).to_pydict()
    unknown = [None] * len(columns["file_name"])
    for file_name in columns["file_name"]:  # expiry deletes them by these names
        checked_file_name(file_name, "manifest file name", where)
    names = ("file_name", "file_size", "num_added_files", "num_deleted_files", "schema_id", "partition_stats", "column_stats")
    return [ManifestFileMeta(*row) for row in zip(*(columns.get(name) or unknown for name in names))]


def apply_entries(state: dict[str, DataFile], entries: Iterable[ManifestEntry]) -> dict[str, DataFile]:
    """Fold entries into a ``path -> DataFile`` set, in order."""
    for entry in entries:
        if entry.kind is FileKind.ADD:
            state[entry.file.path] = entry.file
        else:
            state.pop(entry.file.path, None)
    return state


def last_entries(entries: Iterable[ManifestEntry], keep_deletes: bool) -> list[ManifestEntry]:
    """Each file's last entry, in first-seen order; DELETEs dropped unless ``keep_deletes``."""
    last: dict[str, ManifestEntry] = {}
    for entry in entries:
        last.pop(entry.file.path, None)  # re-insert so the order follows the last entry
        last[entry.file.path] = entry
    return [e for e in last.values() if keep_deletes or e.kind is FileKind.ADD]


class ManifestIO:
    """Reads and writes manifests and manifest lists of one table, caching what it read.

    The files are immutable and their names are never reused, so a cache keyed
    by name can never be stale.
    """

    def __init__(self, storage, partition_types: list[pa.DataType], cache_size: int = 2048):
        from collections import OrderedDict

        self.storage = storage
        self.partition_types = partition_types
        self._cache: "OrderedDict[str, list]" = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()  # manifests are read from the shared I/O pool
        #: Byte sizes of the manifest lists this instance read or wrote (lists record their manifests' sizes, not their own).
        self._list_sizes: dict[str, int] = {}

    def _cached(self, name: str):
        with self._lock:
            value = self._cache.get(name)
            if value is not None:
                self._cache.move_to_end(name)
            return value

    def _remember(self, name: str, value: list) -> None:
        with self._lock:
            self._cache[name] = value
            if len(self._cache) > self._cache_size:
                evicted, _ = self._cache.popitem(last=False)
                self._list_sizes.pop(evicted, None)

    def _read(self, name: str) -> bytes:
        path = manifest_path(name)
        try:
            return self.storage.read_bytes(path)
        except FileNotFoundError:
            raise MissingMetadataError(f"{self.storage.full_uri(path)} is missing") from None

    def list_size(self, name: str) -> int | None:
        """The byte size of a manifest list this instance read or wrote (None if unknown)."""
        return self._list_sizes.get(name)

    def read_list(self, name: str) -> list[ManifestFileMeta]:
        cached = self._cached(name)
        if cached is None:
            data = self._read(name)
            cached = decode_manifest_list(data, where=name)
            self._list_sizes[name] = len(data)
            self._remember(name, cached)
        return list(cached)

    def read_lists(self, names) -> dict[str, list[ManifestFileMeta]]:
        """:meth:`read_list` for many lists, the uncached ones in one ``Storage.read_many``."""
        return self._read_many(names, lambda name, data: decode_manifest_list(data, where=name), is_list=True)

    def read_manifests(self, names) -> dict[str, list[ManifestEntry]]:
        """:meth:`read_manifest` for many manifests, the uncached ones in one ``Storage.read_many``."""
        return self._read_many(names, lambda name, data: decode_manifest(data, self.partition_types, where=name), is_list=False)

    def read_paths(self, names) -> dict[str, frozenset[str]]:
        """The data paths each manifest names (any entry kind), checked, read in bulk; cached, not the entries."""
        return self._read_many(names, lambda name, data: frozenset(manifest_table(data, where=name).column("path").to_pylist()), False, "#paths")

    def _read_many(self, names, decode, is_list: bool, key: str = "") -> dict[str, list]:
        found: dict[str, list] = {}
        missing = []
        for name in dict.fromkeys(names):
            cached = self._cached(name + key)
            if cached is None:
                missing.append(name)
            else:
                found[name] = cached
        contents = self.storage.read_many([manifest_path(name) for name in missing])
        for name in missing:
            data = contents.get(manifest_path(name))
            if data is None:
                raise MissingMetadataError(f"{self.storage.full_uri(manifest_path(name))} is missing")
            found[name] = decode(name, data)
            if is_list:
                self._list_sizes[name] = len(data)
            self._remember(name + key, found[name])
        return found

    def read_manifest_bytes(self, names) -> dict[str, bytes]:
        """Manifests' raw bytes (compressed: a few bytes per entry; ``iter_manifest`` decodes them) in one
        ``Storage.read_many``, not cached; a missing one raises."""
        names = list(dict.fromkeys(names))
        contents = self.storage.read_many([manifest_path(name) for name in names])
        if len(contents) < len(names):
            gone = next(name for name in names if manifest_path(name) not in contents)
            raise MissingMetadataError(f"{self.storage.full_uri(manifest_path(gone))} is missing")
        return {name: contents.pop(manifest_path(name)) for name in names}

    def read_manifest_tables(self, names) -> dict[str, pa.Table]:
        """Manifests as Arrow tables (``manifest_table``), in one ``Storage.read_many``, not cached: a
        filtered scan decodes only the entries it keeps (core/native/partition_pruning.py)."""
        return {name: manifest_table(data, where=name) for name, data in self.read_manifest_bytes(names).items()}

    def write_list(self, metas: list[ManifestFileMeta]) -> str:
        name = new_manifest_list_name()
        data = encode_manifest_list(metas)
        self.storage.write_bytes(manifest_path(name), data)
        self._list_sizes[name] = len(data)
        self._remember(name, list(metas))
        return name

    def read_manifest(self, name: str) -> list[ManifestEntry]:
        cached = self._cached(name)
        if cached is None:
            cached = decode_manifest(self._read(name), self.partition_types, where=name)
            self._remember(name, cached)
        return cached

    def write_manifest(self, entries: list[ManifestEntry], schema_id: int) -> ManifestFileMeta:
        name = new_manifest_name()
        data = encode_manifest(entries)
        self.storage.write_bytes(manifest_path(name), data)
        self._remember(name, list(entries))
        added = sum(1 for e in entries if e.kind is FileKind.ADD)
        return ManifestFileMeta(name, len(data), added, len(entries) - added, schema_id, partition_stats_of(entries), column_stats_of(entries))

    def read_entries(self, list_name: str) -> list[ManifestEntry]:
        entries: list[ManifestEntry] = []
        for meta in self.read_list(list_name):
            entries.extend(self.read_manifest(meta.file_name))
        return entries

    def read_state(self, snapshot) -> dict[str, DataFile]:
        """The live data files of a snapshot: its base manifests folded, then its delta."""
        state: dict[str, DataFile] = {}
        apply_entries(state, self.read_entries(snapshot.base_manifest_list))
        return apply_entries(state, self.read_entries(snapshot.delta_manifest_list))

    def read_delta(self, snapshot) -> list[ManifestEntry]:
        """The ADD/DELETE entries this snapshot's commit made."""
        return self.read_entries(snapshot.delta_manifest_list)

    def names_of(self, snapshot) -> set[str]:
        """Names of the manifest lists and manifests a snapshot references."""
        names = {snapshot.base_manifest_list, snapshot.delta_manifest_list}
        for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            names.update(meta.file_name for meta in self.read_list(list_name))
        return names

    def sizes_of(self, snapshot) -> dict[str, int]:
        """Like :meth:`names_of`, with byte sizes (a list's own size is known once this instance read or wrote it, else 0)."""
        sizes = {}
        for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            sizes.update((meta.file_name, meta.file_size) for meta in self.read_list(list_name))
            sizes[list_name] = self._list_sizes.get(list_name, 0)
        return sizes
