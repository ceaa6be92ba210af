"""Iceberg manifests read and written with fastavro: the entries compaction and manifest rewriting move.

pyiceberg's Avro code is pure Python: about 0.2 ms per entry to decode and as much to encode
(it writes one compressed block per entry), seconds for the one manifest of a table of 10,000
small files. fastavro does the same in C. What is written is what pyiceberg's ``ManifestWriter``
writes, so pyiceberg, Spark and Java read it alike:

- the Avro schema is pyiceberg's for the format version, with the spec's partition struct (its
  field ids, names made Avro-compatible as Iceberg does, logical types), converted by pyiceberg's
  own ``AvroSchemaConversion`` (every ``field-id`` kept);
- the header's metadata keys are Iceberg's: ``schema``, ``partition-spec``,
  ``partition-spec-id``, ``format-version`` and, from v2, ``content``;
- an entry moved as EXISTING or DELETED keeps its data file's record as read: every statistic
  (column sizes, value, null and NaN counts, lower and upper bounds), split offsets, sort order
  and key metadata, byte for byte; its sequence numbers are inherited from its manifest as the
  spec says (``_inherit_from_manifest``) and written explicitly;
- the manifest list entry (counts, rows, partition field summaries, sequence numbers) is made
  as pyiceberg's ``to_manifest_file`` makes it.

Encoding a data file record costs as much as decoding it (fastavro picks each union branch by
validating the value, the statistics maps included): an entry that moves keeps the bytes its
``data_file`` was read from, and they are written again as they are when the manifest written has
the same ``data_file`` schema (the same format version and spec, as pyiceberg writes them); only
the entry's status, snapshot id and sequence numbers are encoded anew. Any other entry (a
manifest another writer wrote with another schema) is encoded from its record.

Partition values are held as pyiceberg holds them (a date as days, a timestamp as microseconds,
a uuid as ``UUID``): fastavro turns logical types into Python objects, which are turned back here.
"""

from __future__ import annotations

import datetime
import functools
import io
import json
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable

import fastavro

from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.formats.iceberg.files import avro_decoded

#: Iceberg's entry status values.
EXISTING, ADDED, DELETED = 0, 1, 2
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_DATE = datetime.date(1970, 1, 1)
_MICROS = datetime.timedelta(microseconds=1)
#: The fields of a data file record that say which file it is and what it holds (no statistics).
_IDENTITY = ("content", "file_path", "file_format", "record_count", "file_size_in_bytes", "sort_order_id")


class ContentFile:
    """A data or delete file as its manifest entry records it.

    ``record`` is the entry's Avro ``data_file`` record as read; ``encoded`` its bytes in the manifest
    read, under the data file schema ``encoding`` (see :func:`_schema_key`): written back as they are
    when the entry moves into a manifest of that schema. ``partition`` holds its partition values as
    pyiceberg does (a pyiceberg Record). Read like a pyiceberg DataFile by the code that plans and
    summarises (``file_path``, ``partition``, ``spec_id``, counts).
    """

    __slots__ = ("record", "spec_id", "partition", "encoded", "encoding")

    def __init__(self, record: dict, spec_id: int, partition, encoded: bytes | None = None, encoding: str | None = None):
        self.record = record
        self.spec_id = spec_id
        self.partition = partition
        self.encoded = encoded
        self.encoding = encoding

    @property
    def file_path(self) -> str:
        return self.record["file_path"]

    @property
    def file_size_in_bytes(self) -> int:
        return self.record["file_size_in_bytes"]

    @property
    def record_count(self) -> int:
        return self.record["record_count"]

    @property
    def content(self) -> int:
        return self.record.get("content") or 0

    def to_pyiceberg(self, format_version: int):
        """The pyiceberg DataFile (pyiceberg's own readers, e.g. its projection, take one)."""
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

        r = self.record
        data_file = DataFile.from_args(
            _table_format_version=format_version,
            content=DataFileContent(self.content), file_path=r["file_path"], file_format=FileFormat(r["file_format"]),
            partition=self.partition, record_count=r["record_count"], file_size_in_bytes=r["file_size_in_bytes"],
            column_sizes=_as_dict(r.get("column_sizes")), value_counts=_as_dict(r.get("value_counts")),
            null_value_counts=_as_dict(r.get("null_value_counts")), nan_value_counts=_as_dict(r.get("nan_value_counts")),
            lower_bounds=_as_dict(r.get("lower_bounds")), upper_bounds=_as_dict(r.get("upper_bounds")),
            key_metadata=r.get("key_metadata"), split_offsets=r.get("split_offsets"), equality_ids=r.get("equality_ids"),
            sort_order_id=r.get("sort_order_id"),
        )
        data_file.spec_id = self.spec_id
        return data_file

    def without_statistics(self) -> "ContentFile":
        """The file as a reader needs it (path, format, counts, partition): what is sent to a Spark task."""
        return ContentFile({key: self.record[key] for key in _IDENTITY if key in self.record}, self.spec_id, self.partition)

    def __reduce__(self):
        return ContentFile, (self.record, self.spec_id, self.partition, self.encoded, self.encoding)


class Entry:
    """One manifest entry, its snapshot id and sequence numbers inherited from its manifest."""

    __slots__ = ("status", "snapshot_id", "sequence_number", "file_sequence_number", "data_file")

    def __init__(self, status: int, snapshot_id, sequence_number, file_sequence_number, data_file: ContentFile):
        self.status = status
        self.snapshot_id = snapshot_id
        self.sequence_number = sequence_number
        self.file_sequence_number = file_sequence_number
        self.data_file = data_file


@dataclass(frozen=True)
class _Layout:
    """A manifest entry schema cut where its last field, ``data_file``, starts."""

    head: dict  # the fields before data_file, as a record schema (parsed)
    data_file: dict  # the data_file record schema (parsed)
    key: str  # what makes two data_file schemas encode alike (see _schema_key)


def _strip_docs(schema):
    if isinstance(schema, dict):
        return {k: _strip_docs(v) for k, v in schema.items() if k != "doc"}
    if isinstance(schema, list):
        return [_strip_docs(v) for v in schema]
    return schema


def _schema_key(data_file_schema: dict) -> str:
    """Two data_file schemas with one key encode alike and mean the same (names, types, field ids, logical types)."""
    return json.dumps(_strip_docs(data_file_schema), sort_keys=True)


@functools.lru_cache(maxsize=64)
def _layout(schema_json: str) -> _Layout | None:
    """The layout of a manifest entry schema (an Avro file header's ``avro.schema``); None when data_file is not its last field."""
    schema = json.loads(schema_json)
    fields = schema.get("fields") if isinstance(schema, dict) else None
    if not fields or fields[-1].get("name") != "data_file" or not isinstance(fields[-1].get("type"), dict):
        return None
    data_file = fields[-1]["type"]
    head = {"type": "record", "name": "manifest_entry_head", "fields": fields[:-1]}
    return _Layout(fastavro.parse_schema(head), fastavro.parse_schema(data_file), _schema_key(data_file))


def _decode_entries(data: bytes) -> list[tuple[dict, bytes | None, str | None]]:
    """Each entry of a manifest: its record, its data_file's bytes and their schema key (None, None when
    the schema does not end with data_file: then the records alone)."""
    blocks = fastavro.block_reader(io.BytesIO(data))
    layout = _layout(blocks.metadata["avro.schema"])
    if layout is None:
        return [(record, None, None) for block in blocks for record in block]
    out = []
    for block in blocks:
        stream = block.bytes_
        raw = stream.getvalue()
        for _ in range(block.num_records):
            entry = fastavro.schemaless_reader(stream, layout.head, None)
            start = stream.tell()
            entry["data_file"] = fastavro.schemaless_reader(stream, layout.data_file, None)
            out.append((entry, raw[start:stream.tell()], layout.key))
    return out


def read_entries(manifest, file_io, metadata, discard_deleted: bool = True, data: bytes | None = None) -> list[Entry]:
    """The entries of ``manifest`` (a pyiceberg ManifestFile), read through ``file_io`` in one read
    (``data``: its bytes, read already).

    ``metadata``: the table metadata whose specs and schema type the partition values.
    """
    path = manifest.manifest_path
    if data is None:
        with file_io.new_input(path).open() as stream:
            data = stream.read()
    to_internal = _partition_converters(metadata, manifest.partition_spec_id, to_avro=False)
    # Decoded and made into entries with the collector paused (files.avro_decoded): 10,000 entries of
    # nested dicts are tens of thousands of objects that each collection would scan again.
    return avro_decoded(path, data, lambda data: _entries(manifest, to_internal, _decode_entries(data), discard_deleted))


def _entries(manifest, to_internal: list, decoded, discard_deleted: bool) -> list[Entry]:
    path = manifest.manifest_path
    spec_id = manifest.partition_spec_id
    inherited = manifest.sequence_number
    added_snapshot = manifest.added_snapshot_id
    entries = []
    try:
        for record, encoded, encoding in decoded:
            status = record["status"]
            if discard_deleted and status == DELETED:
                continue
            data_file = record["data_file"]
            snapshot_id = record.get("snapshot_id")
            if snapshot_id is None:
                snapshot_id = added_snapshot
            # v1 keeps no sequence numbers (0); from v2, only ADDED entries inherit their manifest's.
            sequence = record.get("sequence_number")
            file_sequence = record.get("file_sequence_number")
            if inherited == 0 or status == ADDED:
                sequence = inherited if sequence is None else sequence
                file_sequence = inherited if file_sequence is None else file_sequence
            if data_file.get("content") is None:
                data_file["content"] = 0  # a v1 manifest's files are data files
            values = data_file["partition"].values()
            if len(values) != len(to_internal):
                raise ValueError(f"a partition of {len(values)} values in a manifest of spec {spec_id} ({len(to_internal)} fields)")
            partition = _record([convert(value) for convert, value in zip(to_internal, values)])
            content = ContentFile(data_file, spec_id, partition, encoded, encoding)
            entries.append(Entry(status, snapshot_id, sequence, file_sequence, content))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptMetadataError(f"{path}: not an Iceberg manifest ({type(exc).__name__}: {exc})") from exc
    return entries


class _Block:
    """Encoded entries as fastavro's ``Writer.write_block`` takes them (what its ``block_reader`` yields)."""

    def __init__(self, entries: list[bytes]):
        self.num_records = len(entries)
        self.bytes_ = io.BytesIO(b"".join(entries))


#: Uncompressed bytes of entries per Avro block written.
_BLOCK_BYTES = 64 * 1024


class ManifestWriter:
    """Writes one manifest of ``spec_id`` (as pyiceberg's ``write_manifest``): entries are collected, and
    leaving the ``with`` block writes the whole file in one storage operation."""

    def __init__(self, output_file, metadata, spec_id: int, snapshot_id: int, compression: str):
        from pyiceberg.manifest import data_file_with_partition, manifest_entry_schema_with_data_file
        from pyiceberg.utils.schema_conversion import AvroSchemaConversion
        from pydantic_core import to_json

        self.output_file = output_file
        self.format_version = metadata.format_version
        self.spec = metadata.specs()[spec_id]
        self.schema = metadata.schema()
        self.snapshot_id = snapshot_id
        self.codec = _avro_codec(compression)
        partition_type = self.spec.partition_type(self.schema)
        entry_schema = manifest_entry_schema_with_data_file(self.format_version, data_file_with_partition(partition_type, self.format_version))
        avro_schema = AvroSchemaConversion().iceberg_to_avro(entry_schema, schema_name="manifest_entry")
        self.avro_schema = fastavro.parse_schema(avro_schema)
        self.layout = _layout(json.dumps(avro_schema))
        if self.layout is None:
            raise AssertionError("pyiceberg's manifest entry schema ends with data_file")
        self.partition_names = [f["name"] for f in _field(_field(avro_schema, "data_file"), "partition")["fields"]]
        self.to_avro = _partition_converters(metadata, spec_id, to_avro=True)
        self.meta = {
            "schema": self.schema.model_dump_json(),
            "partition-spec": to_json(self.spec.fields).decode("utf-8"),
            "partition-spec-id": str(self.spec.spec_id),
            "format-version": str(self.format_version),
        }
        if self.format_version >= 2:
            self.meta["content"] = "data"
        self.encoded: list[bytes] = []
        self.partitions: list = []
        self.counts = {ADDED: [0, 0], EXISTING: [0, 0], DELETED: [0, 0]}
        self.min_sequence_number: int | None = None
        self.length: int | None = None

    def __enter__(self) -> "ManifestWriter":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type is not None:
            return  # nothing was written
        if not self.encoded:
            raise ValueError("An empty manifest file has been written")  # pyiceberg's guard
        buffer = io.BytesIO()
        writer = fastavro.write.Writer(buffer, self.avro_schema, codec=self.codec, metadata=self.meta)
        block: list[bytes] = []
        size = 0
        for entry in self.encoded:
            block.append(entry)
            size += len(entry)
            if size >= _BLOCK_BYTES:
                writer.write_block(_Block(block))
                block, size = [], 0
        if block:
            writer.write_block(_Block(block))
        writer.flush()
        with self.output_file.create(overwrite=True) as out:
            out.write(buffer.getvalue())
        self.length = buffer.tell()

    def add(self, data_file) -> "ManifestWriter":
        """A new file (a pyiceberg DataFile written by this commit): ADDED, its sequence numbers inherited."""
        self._entry(ADDED, self.snapshot_id, None, None, ContentFile(_record_of(data_file), data_file.spec_id, data_file.partition))
        return self

    def existing(self, entry: Entry) -> "ManifestWriter":
        self._entry(EXISTING, entry.snapshot_id, entry.sequence_number, entry.file_sequence_number, entry.data_file)
        return self

    def delete(self, entry: Entry) -> "ManifestWriter":
        self._entry(DELETED, self.snapshot_id, entry.sequence_number, entry.file_sequence_number, entry.data_file)
        return self

    def _entry(self, status: int, snapshot_id, sequence, file_sequence, data_file: ContentFile) -> None:
        if self.format_version >= 2 and sequence is None and status != ADDED:
            raise ValueError("Only entries with status ADDED can have null sequence number")  # pyiceberg's ManifestWriterV2 rule
        head = io.BytesIO()
        fastavro.schemaless_writer(head, self.layout.head, {
            "status": status, "snapshot_id": snapshot_id, "sequence_number": sequence, "file_sequence_number": file_sequence,
        })
        if data_file.encoded is not None and data_file.encoding == self.layout.key:
            body = data_file.encoded  # read under this very schema: the same bytes
        else:
            body = self._encoded(data_file)
        self.encoded.append(head.getvalue() + body)
        partition = data_file.partition
        self.partitions.append(partition)
        self.counts[status][0] += 1
        self.counts[status][1] += data_file.record_count
        if status != DELETED and sequence is not None and (self.min_sequence_number is None or sequence < self.min_sequence_number):
            self.min_sequence_number = sequence

    def _encoded(self, data_file: ContentFile) -> bytes:
        """The data file record under this manifest's schema: its partition by position under this spec's field names."""
        record = dict(data_file.record)
        partition = data_file.partition
        record["partition"] = {name: convert(partition[i]) for i, (name, convert) in enumerate(zip(self.partition_names, self.to_avro))}
        if self.format_version == 1:
            from pyiceberg.manifest import DEFAULT_BLOCK_SIZE

            record.setdefault("block_size_in_bytes", DEFAULT_BLOCK_SIZE)  # v1 requires it; v2 drops it
        out = io.BytesIO()
        fastavro.schemaless_writer(out, self.layout.data_file, record)
        return out.getvalue()

    def to_manifest_file(self):
        """The manifest list's entry for this manifest, as pyiceberg's ``ManifestWriter.to_manifest_file``."""
        from pyiceberg.manifest import UNASSIGNED_SEQ, ManifestContent, ManifestFile, construct_partition_summaries

        if self.length is None:
            raise ValueError(f"{self.output_file.location} is not written yet")
        return ManifestFile.from_args(
            manifest_path=self.output_file.location, manifest_length=self.length, partition_spec_id=self.spec.spec_id,
            content=ManifestContent.DATA, sequence_number=UNASSIGNED_SEQ,
            min_sequence_number=self.min_sequence_number if self.min_sequence_number is not None else UNASSIGNED_SEQ,
            added_snapshot_id=self.snapshot_id,
            added_files_count=self.counts[ADDED][0], existing_files_count=self.counts[EXISTING][0], deleted_files_count=self.counts[DELETED][0],
            added_rows_count=self.counts[ADDED][1], existing_rows_count=self.counts[EXISTING][1], deleted_rows_count=self.counts[DELETED][1],
            partitions=construct_partition_summaries(self.spec, self.schema, self.partitions), key_metadata=None,
        )


def _avro_codec(compression: str) -> str:
    from pyiceberg.avro.file import CODEC_MAPPING_ICEBERG_TO_AVRO

    return CODEC_MAPPING_ICEBERG_TO_AVRO.get(compression, compression)


def _field(avro_record: dict, name: str) -> dict:
    found = next(f for f in avro_record["fields"] if f["name"] == name)["type"]
    return found if isinstance(found, dict) else next(t for t in found if isinstance(t, dict))


def _record(values: list):
    from pyiceberg.typedef import Record

    return Record(*values)


def _as_dict(pairs) -> dict | None:
    """An Iceberg map as Avro holds it (key/value records) as a dict."""
    return None if pairs is None else {pair["key"]: pair["value"] for pair in pairs}


def _as_pairs(mapping) -> list | None:
    return None if mapping is None else [{"key": key, "value": value} for key, value in mapping.items()]


def _record_of(data_file) -> dict:
    """A pyiceberg DataFile as the Avro ``data_file`` record (its partition is set by the writer)."""
    return {
        "content": int(data_file.content), "file_path": data_file.file_path, "file_format": data_file.file_format.value,
        "record_count": data_file.record_count, "file_size_in_bytes": data_file.file_size_in_bytes,
        "column_sizes": _as_pairs(data_file.column_sizes), "value_counts": _as_pairs(data_file.value_counts),
        "null_value_counts": _as_pairs(data_file.null_value_counts), "nan_value_counts": _as_pairs(data_file.nan_value_counts),
        "lower_bounds": _as_pairs(data_file.lower_bounds), "upper_bounds": _as_pairs(data_file.upper_bounds),
        "key_metadata": data_file.key_metadata, "split_offsets": data_file.split_offsets,
        "equality_ids": data_file.equality_ids, "sort_order_id": data_file.sort_order_id,
    }


def _same(value):
    return value


def _days(value):
    return (value - _EPOCH_DATE).days if isinstance(value, datetime.date) else value


def _micros(value):
    if isinstance(value, datetime.datetime):
        return (value - (_EPOCH if value.tzinfo is not None else _EPOCH_NAIVE)) // _MICROS
    return value


def _time_micros(value):
    if isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    return value


def _uuid(value):
    if isinstance(value, (bytes, bytearray)):
        return uuid.UUID(bytes=bytes(value))
    return uuid.UUID(value) if isinstance(value, str) else value


def _uuid_bytes(value):
    return value.bytes if isinstance(value, uuid.UUID) else value


def _partition_converters(metadata, spec_id: int, to_avro: bool) -> list[Callable[[Any], Any]]:
    """Per partition field of the spec, a function from fastavro's value to pyiceberg's (``to_avro``: back)."""
    spec = metadata.specs()[spec_id]
    return _converters(tuple(f.field_type for f in spec.partition_type(metadata.schema()).fields), to_avro)


@functools.lru_cache(maxsize=256)
def _converters(types: tuple, to_avro: bool) -> list[Callable[[Any], Any]]:
    from pyiceberg.types import DateType, TimestampType, TimestamptzType, TimeType, UUIDType

    if to_avro:
        return [_uuid_bytes if isinstance(t, UUIDType) else _same for t in types]
    converters = []
    for field_type in types:
        if isinstance(field_type, DateType):
            converters.append(_days)
        elif isinstance(field_type, (TimestampType, TimestamptzType)):
            converters.append(_micros)
        elif isinstance(field_type, TimeType):
            converters.append(_time_micros)
        elif isinstance(field_type, UUIDType):
            converters.append(_uuid)
        else:
            converters.append(_same)
    return converters
