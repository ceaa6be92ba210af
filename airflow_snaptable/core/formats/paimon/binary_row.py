"""A Paimon manifest entry's ``_PARTITION`` (a serialized BinaryRow) -> its directory, ``k=v/.../bucket-N/``.

Layout (Paimon's ``BinaryRow``, after the 4-byte big-endian arity ``SerializationUtils`` puts in
front): a header of null bits (one row-kind byte, then one bit per field; the width rounded up to
8-byte words), one 8-byte little-endian slot per field, then the variable-length part. A string
of at most 7 bytes sits in its slot (highest byte ``0x80 | length``); a longer one is
``offset << 32 | length`` into the row.

The directory text is Paimon's ``InternalRowPartitionComputer`` with ``PartitionPathUtils``:
with ``partition.legacy-name`` (the default) the value's ``toString()``, else its cast to STRING;
a null or blank value is ``partition.default-name``; key and value are escaped (``%XX``). Types
whose text this module cannot reproduce exactly (floating point, decimals, timestamps, ...) raise
UnsupportedMetadataError: a wrong directory would make orphan cleaning delete live files.
"""

from __future__ import annotations

import datetime as dt
import re
import struct
from dataclasses import dataclass

from airflow_snaptable.core.errors import CorruptMetadataError, UnsupportedMetadataError

_INT_SIZES = {"TINYINT": "<b", "SMALLINT": "<h", "INT": "<i", "INTEGER": "<i", "BIGINT": "<q"}
_STRING_TYPES = ("STRING", "VARCHAR", "CHAR")
_ESCAPED = set('"#%\'*/:=?\\{}[]^') | {chr(c) for c in range(0x20)} | {chr(0x7F)}
_HEADER_BITS = 8
_EPOCH = dt.date(1970, 1, 1)


def base_type(paimon_type: str) -> str:
    """``"VARCHAR(10) NOT NULL"`` -> ``"VARCHAR"``."""
    return re.split(r"[\s(]", paimon_type.strip().upper(), maxsplit=1)[0]


def escape_path_name(text: str) -> str:
    """Paimon's ``PartitionPathUtils.escapePathName``: control characters and ``"#%'*/:=?\\{}[]^`` as ``%XX``."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


@dataclass(frozen=True)
class PartitionLayout:
    """How a table's partition values become directories."""

    keys: tuple[str, ...]
    types: tuple[str, ...]  # Paimon type strings, one per key
    default_name: str = "__DEFAULT_PARTITION__"
    legacy_name: bool = True

    def check(self) -> None:
        """Fail closed on a partition type whose directory text is not reproduced here."""
        for key, paimon_type in zip(self.keys, self.types):
            kind = base_type(paimon_type)
            if kind not in _INT_SIZES and kind not in _STRING_TYPES and kind not in ("BOOLEAN", "DATE"):
                raise UnsupportedMetadataError(
                    f"partition key {key!r} has Paimon type {paimon_type}: its partition directory names are not supported"
                )

    def decode(self, data: bytes) -> tuple:
        """The partition values (None for null) of a serialized BinaryRow."""
        arity = len(self.keys)
        if arity == 0:
            return ()
        try:
            if len(data) < 4 or struct.unpack(">i", data[:4])[0] != arity:
                raise ValueError(f"arity is not {arity}")
            row = data[4:]
            width = ((arity + 63 + _HEADER_BITS) // 64) * 8
            values = []
            for i, paimon_type in enumerate(self.types):
                bit = i + _HEADER_BITS
                if row[bit // 8] & (1 << (bit % 8)):
                    values.append(None)
                    continue
                values.append(_field(row, width + i * 8, base_type(paimon_type)))
            return tuple(values)
        except UnsupportedMetadataError:
            raise
        except Exception as exc:  # noqa: BLE001 - any decoding failure is corruption
            raise CorruptMetadataError(f"cannot decode a partition BinaryRow: {exc}") from exc

    def directory(self, values: tuple) -> str:
        """``k1=v1/k2=v2/`` ('' without partition keys)."""
        parts = []
        for key, paimon_type, value in zip(self.keys, self.types, values):
            text = None if value is None else self._text(value, base_type(paimon_type))
            if text is None or not text.strip():
                text = self.default_name
            parts.append(f"{escape_path_name(key)}={escape_path_name(text)}/")
        return "".join(parts)

    def _text(self, value, kind: str) -> str:
        if kind == "BOOLEAN":
            return "true" if value else "false"
        if kind == "DATE":
            return str(value) if self.legacy_name else (_EPOCH + dt.timedelta(days=value)).isoformat()
        return str(value)


def bucket_directory(bucket: int) -> str:
    """``bucket-<n>``; Paimon's postpone bucket (-2) is ``bucket-postpone``."""
    return "bucket-postpone" if bucket == -2 else f"bucket-{bucket}"


def _field(row: bytes, offset: int, kind: str):
    slot = row[offset:offset + 8]
    if len(slot) != 8:
        raise ValueError("row too short")
    if kind in _INT_SIZES:
        fmt = _INT_SIZES[kind]
        return struct.unpack(fmt, slot[:struct.calcsize(fmt)])[0]
    if kind == "BOOLEAN":
        return slot[0] != 0
    if kind == "DATE":
        return struct.unpack("<i", slot[:4])[0]  # days since the epoch
    if kind in _STRING_TYPES:
        word = struct.unpack("<Q", slot)[0]
        if word & (0x80 << 56):
            length = (word >> 56) & 0x7F
            if length > 7:
                raise ValueError(f"inline string of {length} bytes")
            return slot[:length].decode("utf-8")
        start, length = word >> 32, word & 0xFFFFFFFF
        if start + length > len(row):
            raise ValueError("string out of the row")
        return row[start:start + length].decode("utf-8")
    raise UnsupportedMetadataError(f"partition type {kind} is not supported")
