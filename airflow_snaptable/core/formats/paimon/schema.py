"""Paimon's ``schema/schema-<id>`` (JSON) -> the engine's TableSchema.

The Arrow schema is what Paimon's types map to (for reports: rows are Paimon's to read); the
options are Paimon's own under the keys core/arguments/table_options.py knows (``snapshot.num-retained.min``,
``tag.creation-period``, ...), other Paimon options are left out. A value core/arguments/table_options.py cannot
read raises UnsupportedMetadataError: expiring with a default instead of the table's retention
could delete what the table keeps.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa

from airflow_snaptable.core.errors import CorruptMetadataError, InvalidOptionError, TableNotFoundError, UnsupportedMetadataError
from airflow_snaptable.core.arguments.table_options import OPTION_SPECS, TableOptions
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.io.storage import Storage

SCHEMA_DIR = "schema"
_SCHEMA_FILE = re.compile(r"^schema-(\d+)$")
_ATOMIC = {
    "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "INTEGER": pa.int32(),
    "BIGINT": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "STRING": pa.string(), "VARCHAR": pa.string(),
    "CHAR": pa.string(), "BYTES": pa.binary(), "BINARY": pa.binary(), "VARBINARY": pa.binary(), "DATE": pa.date32(),
    "TIME": pa.time32("ms"),
}
#: Paimon options that put data files where this store does not look: refused, never half handled.
UNSUPPORTED_OPTIONS = {
    "data-file.external-paths": "external data paths",
    "data-file.path-directory": "a data file directory (data-file.path-directory)",
}


def schema_ids(storage: Storage) -> list[int]:
    ids = (_SCHEMA_FILE.match(name) for name in storage.list_names(SCHEMA_DIR))
    return sorted(int(m.group(1)) for m in ids if m)


def read_document(storage: Storage) -> dict:
    """The latest schema's JSON document."""
    ids = schema_ids(storage)
    if not ids:
        raise TableNotFoundError(f"no Paimon schema in {storage.uri}")
    path = f"{SCHEMA_DIR}/schema-{ids[-1]}"
    try:
        doc = json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        raise TableNotFoundError(f"no Paimon schema in {storage.uri}") from None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise CorruptMetadataError(f"{storage.full_uri(path)}: not JSON: {type(exc).__name__}: {exc}") from exc
    if not isinstance(doc, dict):
        raise CorruptMetadataError(f"{storage.full_uri(path)}: a schema is a JSON object")
    return doc


def is_paimon_schema(doc: dict) -> bool:
    """Paimon's schema has field ids and ``highestFieldId``; this package's has ``arrowSchema``."""
    return isinstance(doc, dict) and "highestFieldId" in doc and "arrowSchema" not in doc


def arrow_type(paimon_type) -> pa.DataType:
    """Paimon's type (a string such as ``"DECIMAL(10, 2) NOT NULL"``, or an object for nested types)."""
    if isinstance(paimon_type, dict):
        kind = str(paimon_type.get("type", "")).split()[0].upper()
        if kind in ("ARRAY", "MULTISET"):
            return pa.list_(arrow_type(paimon_type["element"]))
        if kind == "MAP":
            return pa.map_(arrow_type(paimon_type["key"]), arrow_type(paimon_type["value"]))
        if kind == "ROW":
            return pa.struct([pa.field(f["name"], arrow_type(f["type"])) for f in paimon_type["fields"]])
        raise ValueError(f"unknown type {paimon_type!r}")
    text = str(paimon_type).strip().upper()
    base = re.split(r"[\s(<]", text, maxsplit=1)[0]
    numbers = [int(n) for n in re.findall(r"\d+", text.split(")")[0])] if "(" in text else []
    if base in ("DECIMAL", "NUMERIC", "DEC"):
        return pa.decimal128(*(numbers or [10, 0]))
    if base.startswith("TIMESTAMP"):
        precision = numbers[0] if numbers else 6
        unit = "ms" if precision <= 3 else ("us" if precision <= 6 else "ns")
        return pa.timestamp(unit, tz="UTC" if "LOCAL" in text else None)
    if base in _ATOMIC:
        return _ATOMIC[base]
    return pa.binary()  # VARIANT, BLOB, ...: a placeholder, the table is not read here


def table_options(raw: dict, where: str) -> TableOptions:
    options = {}
    for key, value in (raw or {}).items():
        if key in UNSUPPORTED_OPTIONS and value not in (None, ""):
            raise UnsupportedMetadataError(f"{where}: {UNSUPPORTED_OPTIONS[key]} are not supported (option {key})")
        if key not in OPTION_SPECS or value is None:
            continue
        try:
            OPTION_SPECS[key].parse(value, key)
        except InvalidOptionError as exc:
            raise UnsupportedMetadataError(f"{where}: Paimon option {key}={value!r} cannot be read: {exc}") from exc
        options[key] = value
    try:
        return TableOptions(options)
    except InvalidOptionError as exc:
        raise UnsupportedMetadataError(f"{where}: Paimon options cannot be used: {exc}") from exc


def to_table_schema(doc: dict, where: str) -> TableSchema:
    try:
        fields = [pa.field(f["name"], arrow_type(f["type"]), nullable="NOT NULL" not in str(f["type"]).upper())
                  for f in doc["fields"]]
        partition_keys = tuple(doc.get("partitionKeys") or ())
        names = [f.name for f in fields]
        if any(key not in names for key in partition_keys):
            raise ValueError(f"partition keys {partition_keys} are not all fields")
        options = table_options(doc.get("options") or {}, where)
        return TableSchema(
            id=int(doc["id"]), arrow_schema=pa.schema(fields), partition_keys=partition_keys, options=options.raw,
            time_millis=int(doc.get("timeMillis") or 0),
        )
    except (UnsupportedMetadataError, CorruptMetadataError):
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptMetadataError(f"{where}: cannot parse Paimon schema: {exc!r}") from exc


def partition_types(doc: dict) -> tuple[str, ...]:
    types = {f["name"]: f["type"] for f in doc["fields"]}
    return tuple(str(types[key]) if not isinstance(types[key], dict) else json.dumps(types[key]) for key in doc.get("partitionKeys") or ())
