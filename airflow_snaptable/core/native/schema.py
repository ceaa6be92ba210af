"""Table schema: the Arrow schema, the partition keys and the options, stored as ``schema/schema-<id>``."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence
from urllib.parse import quote, unquote

import pyarrow as pa

from airflow_snaptable.core.arguments.checks import is_int
from airflow_snaptable.core.errors import (
    CorruptMetadataError,
    InvalidArgumentError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedStorageError,
)
from airflow_snaptable.core.arguments.names import MAX_PATH_COMPONENT_BYTES, validate_partition_key
from airflow_snaptable.core.arguments.table_options import TableOptions
from airflow_snaptable.core.io.storage import Storage

SCHEMA_DIR = "schema"
_SCHEMA_FILE = re.compile(r"^schema-(\d+)$")
NULL_PARTITION = "__NULL__"
#: The directory text of a string value spelled like the null marker ("_" percent-encoded).
_NULL_LOOKALIKE = quote(NULL_PARTITION, safe="").replace("_", "%5F")


def schema_path(schema_id: int) -> str:
    return f"{SCHEMA_DIR}/schema-{schema_id}"


def parse_schema_id(name: str) -> int | None:
    match = _SCHEMA_FILE.match(name)
    return int(match.group(1)) if match else None


def _is_partition_type(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t) or pa.types.is_date32(t)


@dataclass(frozen=True)
class TableSchema:
    """One version of a table's schema. Partition columns are stored in the data files too."""

    id: int
    arrow_schema: pa.Schema
    partition_keys: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    time_millis: int = 0

    @classmethod
    def new(cls, arrow_schema: pa.Schema, partition_keys: Sequence[str], options: dict[str, Any] | None, time_millis: int) -> "TableSchema":
        if not isinstance(arrow_schema, pa.Schema):
            raise InvalidArgumentError(f"schema must be a pyarrow.Schema, got {type(arrow_schema).__name__}")
        if len(arrow_schema) == 0:
            raise InvalidArgumentError("schema has no fields")
        names = arrow_schema.names
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"schema has duplicate field names: {names}")
        if partition_keys is None:
            partition_keys = ()
        elif isinstance(partition_keys, str):
            partition_keys = (partition_keys,)
        elif not isinstance(partition_keys, (list, tuple)):
            raise InvalidArgumentError(f"partition_by must be a list of column names, got {partition_keys!r}")
        keys = tuple(partition_keys)
        if len(set(keys)) != len(keys):
            raise InvalidArgumentError(f"duplicate partition keys: {keys}")
        for key in keys:
            validate_partition_key(key)
            if key not in names:
                raise InvalidArgumentError(f"partition key {key!r} is not a field of the schema ({names})")
            if not _is_partition_type(arrow_schema.field(key).type):
                raise InvalidArgumentError(
                    f"partition key {key!r} has type {arrow_schema.field(key).type}; "
                    "partition keys must be integer, string, boolean or date32"
                )
        if keys and len(keys) == len(names):
            raise InvalidArgumentError("at least one column must not be a partition key")
        validated = TableOptions(options)
        return cls(id=0, arrow_schema=arrow_schema.remove_metadata(), partition_keys=keys, options=validated.raw, time_millis=time_millis)

    @property
    def table_options(self) -> TableOptions:
        return TableOptions(self.options)

    # -- serialisation -----------------------------------------------------

    def to_json(self) -> bytes:
        doc = {
            "version": 1,
            "id": self.id,
            "fields": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in self.arrow_schema],
            "partitionKeys": list(self.partition_keys),
            "options": self.options,
            "timeMillis": self.time_millis,
            # The readable "fields" are for people; the IPC form is exact.
            "arrowSchema": base64.b64encode(self.arrow_schema.serialize().to_pybytes()).decode("ascii"),
        }
        return json.dumps(doc, indent=2).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str = "schema") -> "TableSchema":
        try:
            doc = json.loads(data)
            arrow_schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(doc["arrowSchema"])))
            return cls(
                id=int(doc["id"]),
                arrow_schema=arrow_schema,
                partition_keys=tuple(doc.get("partitionKeys", ())),
                options=dict(doc.get("options", {})),
                time_millis=int(doc.get("timeMillis", 0)),
            )
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot parse schema file: {exc}") from exc

    # -- data checks -------------------------------------------------------

    def conform(self, data: pa.Table) -> pa.Table:
        """Return ``data`` with the table's exact schema and column order, or raise SchemaMismatchError.

        Columns are matched by name; types must be equal (no silent casts that
        could lose data); non-nullable fields must hold no nulls.
        """
        expected = self.arrow_schema
        got_names = data.schema.names
        missing = [n for n in expected.names if n not in got_names]
        extra = [n for n in got_names if n not in expected.names]
        if missing or extra or len(set(got_names)) != len(got_names):
            raise SchemaMismatchError(
                f"columns do not match the table schema: missing {missing}, unexpected {extra}"
            )
        columns = []
        for f in expected:
            column = data.column(f.name)
            if not column.type.equals(f.type):
                raise SchemaMismatchError(f"column {f.name!r} has type {column.type}, the table expects {f.type}")
            if not f.nullable and column.null_count:
                raise SchemaMismatchError(f"column {f.name!r} is not nullable but has {column.null_count} nulls")
            columns.append(column)
        return pa.Table.from_arrays(columns, schema=expected)

    # -- partitions --------------------------------------------------------

    def partition_types(self) -> list[pa.DataType]:
        return [self.arrow_schema.field(k).type for k in self.partition_keys]

    def partition_dir(self, partition: tuple) -> str:
        """``k1=v1/k2=v2`` (Hive style, values percent-encoded), or "" for unpartitioned tables.

        Raises InvalidArgumentError when a ``key=value`` is longer than a file system takes
        as one directory name, so writers check every partition before writing any file.
        """
        parts = []
        for key, value in zip(self.partition_keys, partition):
            if value is None:
                text = NULL_PARTITION
            else:
                text = quote(_partition_text(value), safe="")
                if text == NULL_PARTITION:
                    text = _NULL_LOOKALIKE
            part = f"{key}={text}"
            size = len(part.encode("utf-8"))
            if size > MAX_PATH_COMPONENT_BYTES:
                raise InvalidArgumentError(
                    f"partition {key}={_partition_text(value)[:40]!r}...: its directory name {key}=<percent-encoded value> "
                    f"is {size} bytes, over the {MAX_PATH_COMPONENT_BYTES} bytes file systems take"
                )
            parts.append(part)
        return "/".join(parts)

    def partition_from_dir(self, directory: str) -> tuple:
        values = []
        for part, key, t in zip(directory.split("/"), self.partition_keys, self.partition_types()):
            name, _, text = part.partition("=")
            if name != key:
                raise CorruptMetadataError(f"partition directory {directory!r} does not match keys {self.partition_keys}")
            values.append(None if text == NULL_PARTITION else decode_partition_value(unquote(text), t))
        return tuple(values)

    def check_partition_spec(self, spec: dict) -> dict:
        """The spec with values of the keys' types (a date may be an ISO string, as JSON has no dates).

        A value of another type would match no partition, turning a delete or an overwrite of
        it into a silent no-op: an error instead.
        """
        if not self.partition_keys:
            raise InvalidArgumentError("the table is not partitioned; partition filters are not allowed")
        if not isinstance(spec, dict) or not spec:
            raise InvalidArgumentError(f"a partition must be a non-empty dict of partition key -> value, got {spec!r}")
        unknown = [k for k in spec if k not in self.partition_keys]
        if unknown:
            raise InvalidArgumentError(f"{unknown} are not partition keys (partition keys: {list(self.partition_keys)})")
        return {key: _partition_value(key, value, self.arrow_schema.field(key).type) for key, value in spec.items()}

    def partition_matches(self, partition: tuple, specs: list[dict]) -> bool:
        """True if ``partition`` matches any spec (a spec names some keys; all it names must be equal)."""
        index = {k: i for i, k in enumerate(self.partition_keys)}
        return any(all(partition[index[k]] == v for k, v in spec.items()) for spec in specs)


def _partition_value(key: str, value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_date32(t):
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value)
            except ValueError:
                pass
        elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return value
        expected = "a datetime.date or an ISO date string (YYYY-MM-DD)"
    elif pa.types.is_boolean(t):
        if isinstance(value, bool):
            return value
        expected = "True or False"
    elif pa.types.is_integer(t):
        if is_int(value):
            try:
                pa.scalar(value, t)
            except (pa.ArrowInvalid, OverflowError):
                raise InvalidArgumentError(f"partition value for {key!r} ({t}): {value} is out of the type's range") from None
            return value
        expected = "an integer"
    else:
        if isinstance(value, str):
            return value
        expected = "a string"
    raise InvalidArgumentError(f"partition value for {key!r} ({t}) must be {expected} or None, got {value!r}")


def _partition_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def encode_partition(partition: tuple) -> str:
    """Partition values as JSON text for manifests (dates as ISO strings)."""
    return json.dumps([v.isoformat() if isinstance(v, dt.date) else v for v in partition])


def decode_partition(text: str, types: list[pa.DataType]) -> tuple:
    values = json.loads(text)
    return tuple(None if v is None else decode_partition_value(v, t) for v, t in zip(values, types))


def decode_partition_value(value: Any, t: pa.DataType) -> Any:
    if pa.types.is_date32(t):
        return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))
    if pa.types.is_boolean(t):
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if pa.types.is_integer(t):
        return int(value)
    return str(value)


class SchemaManager:
    """Finds, reads and creates the schema files of one table (``schema/schema-<id>``): a table exists where one is."""

    def __init__(self, storage: Storage):
        self.storage = storage

    def ids(self) -> list[int]:
        return sorted(i for i in (parse_schema_id(n) for n in self.storage.list_names(SCHEMA_DIR)) if i is not None)

    def latest(self) -> TableSchema:
        """The newest schema; TableNotFoundError when there is none."""
        ids = self.ids()
        if not ids:
            raise TableNotFoundError(f"no table at {self.storage.uri}")
        path = schema_path(ids[-1])
        return TableSchema.from_json(self.storage.read_bytes(path), where=self.storage.full_uri(path))

    def create(self, schema: TableSchema) -> None:
        """Write the first schema of a new table; TableAlreadyExistsError if there is a table already.

        The storage must make commits atomic: an object store (or emulator) that ignores the
        create-if-absent condition (S3/Azure ``If-None-Match: *``, GCS ``ifGenerationMatch=0``) is
        refused (UnsupportedStorageError), as commits there could overwrite each other.
        """
        if self.ids():
            raise TableAlreadyExistsError(f"a table exists already at {self.storage.uri}")
        self._check_atomic_create()
        if not self.storage.create_exclusive(schema_path(0), schema.to_json()):
            raise TableAlreadyExistsError(f"a table was created concurrently at {self.storage.uri}")

    def _check_atomic_create(self) -> None:
        storage = self.storage
        if not storage.has_conditional_create:
            return
        probe = f"_probe/create-{uuid.uuid4().hex}"
        try:
            if not storage.create_exclusive(probe, b"1"):
                raise UnsupportedStorageError(f"{storage.uri}: a new object reported as existing")
            if storage.create_exclusive(probe, b"2"):
                raise UnsupportedStorageError(
                    f"{storage.uri}: the server ignores the create-if-absent condition ({storage.object_store.name}), "
                    "so concurrent commits could overwrite each other; use a server with conditional writes"
                )
        finally:
            storage.delete(probe)
