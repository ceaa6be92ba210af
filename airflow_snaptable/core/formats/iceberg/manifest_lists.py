"""Reading the manifest lists of a whole history at the cost of what each one adds.

An Iceberg manifest list names every manifest of its snapshot, so a history of n appends holds
n(n+1)/2 list records for n distinct manifests: decoding them all is quadratic in the history
(2,000 appends: two million records). Writers build a snapshot's list from its parent's: Java's
``SnapshotProducer`` and pyiceberg write the new manifests, then the parent's records as they
were. So the lists are walked parents first, and a list whose decompressed records end with its
parent's exact bytes (same writer schema) is decoded only up to them: those records are the
parent's, byte for byte, and Avro records carry no state from one to the next. The check is on
the bytes, not on any writer's habit: a list laid out otherwise (new manifests last, manifests
rewritten in place, another writer) is decoded whole, and comes out the same.

What stays quadratic is reading and inflating the lists' bytes, at C speed (zlib, ``bytes``
comparison); what Python decodes is linear in the distinct records. Memory holds the lists of
the snapshots whose children are still to come (one along a straight history) and is bounded
by ``KEEP_BODIES`` on a history of many branches: a child whose parent's list was let go is
decoded whole.
"""

from __future__ import annotations

import io
import json
import zlib
from dataclasses import dataclass
from typing import Iterable, Iterator

import fastavro

from airflow_snaptable.core.errors import CorruptMetadataError, MissingMetadataError

_MAGIC = b"Obj\x01"
_SYNC_SIZE = 16
#: Lists read per bulk read: bounds the raw bytes held at once.
READ_BATCH = 128
#: Decoded lists kept for children still to come (a straight history needs one).
KEEP_BODIES = 64


@dataclass
class DecodedList:
    """One snapshot's manifest list.

    ``records`` are all of them, in order, when ``complete``; ``added`` those not shared with the
    parent's list (all of them when ``shares_parent`` is False). A list read by its head only
    (``complete`` False: see ``walk_lists``) has only ``added``; the rest is its parent's."""

    records: list
    added: list
    shares_parent: bool
    #: bytes of the file (Iceberg records no manifest list's size: its read is the measure)
    size: int
    schema: bytes
    #: the decompressed records, kept only while a child may share them
    body: bytes | None
    count: int = 0
    complete: bool = True


def _long(data: bytes, pos: int, where: str) -> tuple[int, int]:
    """An Avro long (zig-zag varint) at ``pos``, and the position after it."""
    shift = result = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise CorruptMetadataError(f"{where}: cannot read: truncated Avro container")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


@dataclass
class AvroContainer:
    """An Avro object container file, its blocks still compressed (inflated on demand)."""

    schema_json: bytes
    codec: str
    #: (record count, compressed bytes) of each block
    blocks: list

    @property
    def count(self) -> int:
        return sum(count for count, _data in self.blocks)

    def body(self, where: str) -> bytes:
        """Every record's bytes, the blocks inflated and joined (records never cross a block)."""
        try:
            return b"".join(zlib.decompress(data, -15) if self.codec == "deflate" else data for _count, data in self.blocks)
        except zlib.error as exc:
            raise CorruptMetadataError(f"{where}: cannot read: {exc}") from exc

    def head(self, size: int, where: str) -> tuple[bytes, bool]:
        """The first ``size`` bytes (or more) of the first block's records, and whether that is the whole block."""
        if not self.blocks:
            return b"", True
        data = self.blocks[0][1]
        if self.codec != "deflate":
            return data[:size], size >= len(data)
        inflate = zlib.decompressobj(-15)
        try:
            out = inflate.decompress(data, size)
        except zlib.error as exc:
            raise CorruptMetadataError(f"{where}: cannot read: {exc}") from exc
        return out, inflate.eof and not inflate.unconsumed_tail


def _container(data: bytes, where: str) -> AvroContainer | None:
    """The container; None for a codec only fastavro's reader decodes."""
    if not data.startswith(_MAGIC):
        raise CorruptMetadataError(f"{where}: cannot read: not an Avro container")
    pos = len(_MAGIC)
    meta: dict[str, bytes] = {}
    while True:
        count, pos = _long(data, pos, where)
        if count == 0:
            break
        if count < 0:
            count = -count
            _size, pos = _long(data, pos, where)
        for _ in range(count):
            length, pos = _long(data, pos, where)
            key = data[pos:pos + length].decode("utf-8", "replace")
            pos += length
            length, pos = _long(data, pos, where)
            meta[key] = data[pos:pos + length]
            pos += length
    codec = meta.get("avro.codec", b"null").decode()
    if codec not in ("null", "deflate"):
        return None
    sync = data[pos:pos + _SYNC_SIZE]
    pos += _SYNC_SIZE
    blocks = []
    while pos < len(data):
        count, pos = _long(data, pos, where)
        size, pos = _long(data, pos, where)
        if size < 0 or count < 0 or pos + size + _SYNC_SIZE > len(data) or data[pos + size:pos + size + _SYNC_SIZE] != sync:
            raise CorruptMetadataError(f"{where}: cannot read: a damaged Avro block")
        blocks.append((count, data[pos:pos + size]))
        pos += size + _SYNC_SIZE
    return AvroContainer(meta.get("avro.schema", b""), codec, blocks)


class ListDecoder:
    """Decodes manifest lists, sharing what a list has of its parent's (module docstring)."""

    def __init__(self, project):
        #: ``project(record, where)`` -> what is kept of one record (files.py's ManifestRef)
        self.project = project
        self._schemas: dict[bytes, dict] = {}

    def decode(self, where: str, data: bytes, parent: DecodedList | None, head_of: int | None = None) -> DecodedList:
        """``head_of``: the snapshot id, when the list may be read by its head (see ``walk_lists``)."""
        container = _container(data, where)
        if container is None:
            records = self._whole(where, data)
            return DecodedList(records, records, False, len(data), b"", None, len(records))
        schema = self._parsed(container.schema_json, where)
        count = container.count
        if head_of is not None and parent is not None and parent.schema == container.schema_json:
            added = self._own_head(where, container, schema, head_of, count - parent.count)
            if added is not None:
                return DecodedList(added, added, True, len(data), container.schema_json, None, count, complete=False)
        body = container.body(where)
        if parent is not None and parent.body is not None and parent.schema == container.schema_json and body.endswith(parent.body):
            head_end = len(body) - len(parent.body)
            added = self._records(where, body, schema, 0, head_end)
            if len(added) + len(parent.records) != count:
                raise CorruptMetadataError(f"{where}: cannot read: the block counts do not match the records")
            return DecodedList(added + parent.records, added, True, len(data), container.schema_json, body, count)
        records = self._records(where, body, schema, 0, len(body))
        if len(records) != count:
            raise CorruptMetadataError(f"{where}: cannot read: the block counts do not match the records")
        return DecodedList(records, records, False, len(data), container.schema_json, body, count)

    def _own_head(self, where: str, container: AvroContainer, schema: dict, snapshot_id: int, own: int) -> list | None:
        """The ``own`` first records, when exactly they are the snapshot's own manifests and the next
        record is not: the layout of an append by Iceberg's writers. None when the list is not so."""
        if own < 0:
            return None
        size = 4096
        while True:
            head, whole = container.head(size, where)
            stream = io.BytesIO(head)
            out = []
            try:
                while len(out) <= own and stream.tell() < len(head):
                    out.append(self.project(fastavro.schemaless_reader(stream, schema), where))
            except CorruptMetadataError:
                raise
            except Exception:  # noqa: BLE001 - a record cut by the head's end: inflate more
                if whole:
                    return None
                size *= 4
                continue
            if len(out) > own or whole:
                break
            size *= 4
        mine = [r for r in out[:own] if r.added_snapshot_id == snapshot_id]
        next_is_mine = len(out) > own and out[own].added_snapshot_id == snapshot_id
        if len(mine) != own or next_is_mine or (len(out) <= own and container.count > own):
            return None
        return mine

    def _parsed(self, schema_json: bytes, where: str) -> dict:
        if schema_json not in self._schemas:
            try:
                self._schemas[schema_json] = fastavro.parse_schema(json.loads(schema_json))
            except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
                raise CorruptMetadataError(f"{where}: cannot read: bad writer schema: {exc}") from exc
        return self._schemas[schema_json]

    def _records(self, where: str, body: bytes, schema: dict, start: int, end: int) -> list:
        """The records of ``body[start:end]``, which must end on a record boundary."""
        stream = io.BytesIO(body)
        stream.seek(start)
        out = []
        try:
            while stream.tell() < end:
                out.append(self.project(fastavro.schemaless_reader(stream, schema), where))
        except CorruptMetadataError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot read: {type(exc).__name__}: {exc}") from exc
        if stream.tell() != end:
            raise CorruptMetadataError(f"{where}: cannot read: a record crosses the end of its block")
        return out

    def _whole(self, where: str, data: bytes) -> list:
        try:
            return [self.project(r, where) for r in fastavro.reader(io.BytesIO(data))]
        except CorruptMetadataError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot read: {type(exc).__name__}: {exc}") from exc


#: Writer schemas parsed so far (a table has few: one per spec and format version).
_PARSED: dict[bytes, dict] = {}
_PARSED_MAX = 256


def read_records(where: str, data: bytes, project=None) -> list:
    """Every record of an Avro container file, each through ``project(record, where)`` if given."""
    container = _container(data, where)
    try:
        if container is None:
            records = fastavro.reader(io.BytesIO(data))
            return list(records) if project is None else [project(r, where) for r in records]
        schema = _PARSED.get(container.schema_json)
        if schema is None:
            schema = fastavro.parse_schema(json.loads(container.schema_json))
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[container.schema_json] = schema
        out = []
        stream = io.BytesIO(container.body(where))
        for _ in range(container.count):
            record = fastavro.schemaless_reader(stream, schema)
            out.append(record if project is None else project(record, where))
        if stream.read(1):
            raise ValueError("bytes after the last record")
        return out
    except CorruptMetadataError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
        raise CorruptMetadataError(f"{where}: cannot read: {type(exc).__name__}: {exc}") from exc


def parents_first(snapshots: Iterable) -> list:
    """The snapshots with every parent before its children (depth first: along a straight history,
    each list right after its parent's); roots and siblings in commit order."""
    snapshots = list(snapshots)
    by_id = {s.snapshot_id: s for s in snapshots}
    children: dict[int, list] = {}
    roots = []
    for s in snapshots:
        if s.parent_snapshot_id is not None and s.parent_snapshot_id in by_id and s.parent_snapshot_id != s.snapshot_id:
            children.setdefault(s.parent_snapshot_id, []).append(s)
        else:
            roots.append(s)

    def key(s):
        return (s.sequence_number or 0, s.timestamp_ms, s.snapshot_id)

    order, seen = [], set()
    stack = sorted(roots, key=key, reverse=True)
    while stack:
        s = stack.pop()
        if s.snapshot_id in seen:
            continue
        seen.add(s.snapshot_id)
        order.append(s)
        stack.extend(sorted(children.get(s.snapshot_id, ()), key=key, reverse=True))
    # A parent cycle (corrupt metadata) leaves snapshots no root reaches: read them too, unshared.
    order.extend(s for s in snapshots if s.snapshot_id not in seen)
    return order


def walk_lists(storage, locator, snapshots: Iterable, project, read_by_head=None) -> Iterator[tuple[object, DecodedList]]:
    """Each snapshot with its decoded manifest list, parents first (see the module docstring).

    ``read_by_head(snapshot) -> bool`` names the lists an expiry may read by their head: those of
    expired appends. Such a list is not inflated whole when (all checked) its writer schema is its
    parent's, its first records are exactly the manifests the snapshot added, the next one is
    not, and it holds as many more records as its parent's list: Iceberg's append (Java's
    ``FastAppend`` and ``MergeAppend``, pyiceberg's) writes the new manifests, then the
    parent's. A merge or a rewrite in place changes the count; new manifests put last leave
    the head without them: those lists are read whole. Only expired lists are read so: what
    such a reading could miss from a list no writer makes is a file left unreferenced (orphan
    removal frees it), never a file a retained snapshot uses, since every retained list is read
    whole. A missing list is MissingMetadataError, an unreadable one CorruptMetadataError."""
    order = parents_first(snapshots)
    pending_children: dict[int, int] = {}
    for s in order:
        if s.parent_snapshot_id is not None:
            pending_children[s.parent_snapshot_id] = pending_children.get(s.parent_snapshot_id, 0) + 1
    decoder = ListDecoder(project)
    kept: dict[int, DecodedList] = {}
    for start in range(0, len(order), READ_BATCH):
        batch = order[start:start + READ_BATCH]
        rels = {s.snapshot_id: locator.inside(s.manifest_list, "manifest list") for s in batch}
        contents = storage.read_many(sorted(set(rels.values())))
        for s in batch:
            data = contents.get(rels[s.snapshot_id])
            if data is None:
                raise MissingMetadataError(f"{s.manifest_list} does not exist")
            parent = kept.get(s.parent_snapshot_id) if s.parent_snapshot_id is not None else None
            head_of = s.snapshot_id if read_by_head is not None and read_by_head(s) else None
            decoded = decoder.decode(s.manifest_list, data, parent, head_of)
            if parent is not None:
                pending_children[s.parent_snapshot_id] -= 1
                if pending_children[s.parent_snapshot_id] <= 0:
                    kept.pop(s.parent_snapshot_id, None)
            if pending_children.get(s.snapshot_id, 0) > 0:
                kept[s.snapshot_id] = decoded
                while len(kept) > KEEP_BODIES:
                    kept.pop(next(iter(kept)))
            yield s, _without_body(decoded)


def _without_body(decoded: DecodedList) -> DecodedList:
    """What a caller gets: the records, not the bytes (only the walk keeps those, for the children)."""
    return DecodedList(decoded.records, decoded.added, decoded.shares_parent, decoded.size, decoded.schema, None, decoded.count, decoded.complete)
