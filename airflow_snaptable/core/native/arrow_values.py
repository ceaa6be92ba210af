"""Python values as Arrow scalars and arrays, built from buffers: without importing pandas.

pyarrow (26) imports pandas the first time it converts a Python value to Arrow (``pa.scalar``, ``pa.array``, a
compute call or an expression with a Python literal): its pandas shim is probed for every value. That is most of a
second of a fresh process (a sensor poke, a CLI call, a mapped task), so the planning path builds its literals here,
from the values' bytes, which pyarrow takes without probing anything (tests/test_no_pandas_imports.py).

:func:`array` handles the types the planning path meets (integers, floats, booleans, strings, binary, dates,
times, timestamps, null); :func:`literal_type` infers a Python value's type as ``pa.scalar`` does, or None when
it would not be built here (the caller then converts it the ordinary way).
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any, Sequence

import pyarrow as pa

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
#: struct format of the fixed-width types, by byte width and kind.
_INT_FORMATS = {(1, True): "b", (2, True): "h", (4, True): "i", (8, True): "q", (1, False): "B", (2, False): "H", (4, False): "I", (8, False): "Q"}


def literal_type(value: Any) -> pa.DataType | None:
    """The type ``pa.scalar(value)`` would give a Python value, for the values :func:`array` builds; else None."""
    if value is None:
        return pa.null()
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64() if -(2**63) <= value < 2**63 else None
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, bytes):
        return pa.binary()
    if isinstance(value, dt.datetime):
        tz = value.tzinfo
        if tz is None:
            return pa.timestamp("us")
        return pa.timestamp("us", "UTC") if tz is dt.timezone.utc else None  # other zones: pyarrow names them
    if isinstance(value, dt.date):
        return pa.date32()
    if isinstance(value, dt.time):
        return pa.time64("us") if value.tzinfo is None else None
    return None


def list_type(values: Sequence[Any]) -> pa.DataType | None:
    """The type ``pa.array(values)`` would infer, when every non-null value has one type :func:`array` builds."""
    types = {literal_type(v) for v in values if v is not None}
    if None in types or len(types) > 1:
        return None
    return types.pop() if types else pa.null()


def _fixed(values: Sequence[Any], t: pa.DataType) -> bytes:
    if pa.types.is_integer(t):
        fmt = _INT_FORMATS[(t.bit_width // 8, pa.types.is_signed_integer(t))]
        return struct.pack(f"<{len(values)}{fmt}", *(0 if v is None else _int(v) for v in values))
    if pa.types.is_floating(t):
        fmt = {16: "e", 32: "f", 64: "d"}[t.bit_width]
        return struct.pack(f"<{len(values)}{fmt}", *(0.0 if v is None else float(v) for v in values))
    if pa.types.is_date32(t):
        return struct.pack(f"<{len(values)}i", *(0 if v is None else days(v) for v in values))
    if pa.types.is_date64(t):
        return struct.pack(f"<{len(values)}q", *(0 if v is None else days(v) * 86_400_000 for v in values))
    if pa.types.is_timestamp(t):
        return struct.pack(f"<{len(values)}q", *(0 if v is None else ticks(v, t) for v in values))
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        fmt = "i" if pa.types.is_time32(t) else "q"
        return struct.pack(f"<{len(values)}{fmt}", *(0 if v is None else _time_ticks(v, t.unit) for v in values))
    raise TypeError(f"no buffer layout for {t}")


def _int(value: Any) -> int:
    if isinstance(value, float) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def days(value: Any) -> int:
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        raise TypeError(f"{value!r} is not a date")
    return (value - _EPOCH_DATE).days


def ticks(value: Any, t: pa.TimestampType) -> int:
    if not isinstance(value, dt.datetime):
        raise TypeError(f"{value!r} is not a datetime")
    if value.tzinfo is not None:  # an aware value is an instant; stored as UTC
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    elif t.tz is not None:
        raise TypeError(f"a naive datetime {value!r} for a column with time zone {t.tz}")
    delta = value - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    per_second = _UNITS[t.unit]
    if per_second >= 1_000_000:
        return micros * (per_second // 1_000_000)
    if micros % (1_000_000 // per_second):
        raise TypeError(f"{value!r} does not fit unit {t.unit}")  # pa.scalar refuses to truncate too
    return micros // (1_000_000 // per_second)


def _time_ticks(value: Any, unit: str) -> int:
    if not isinstance(value, dt.time):
        raise TypeError(f"{value!r} is not a time")
    micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    per_second = _UNITS[unit]
    if per_second >= 1_000_000:
        return micros * (per_second // 1_000_000)
    if micros % (1_000_000 // per_second):
        raise TypeError(f"{value!r} does not fit unit {unit}")
    return micros // (1_000_000 // per_second)


def _validity(values: Sequence[Any]) -> pa.Buffer | None:
    if all(v is not None for v in values):
        return None
    bits = bytearray((len(values) + 7) // 8)
    for i, v in enumerate(values):
        if v is not None:
            bits[i // 8] |= 1 << (i % 8)
    return pa.py_buffer(bytes(bits))


def array(values: Sequence[Any], t: pa.DataType) -> pa.Array:
    """``pa.array(values, t)`` for the types listed in the module doc, from buffers (None: a null).

    TypeError when a value is not of the type (no silent conversion: the caller then converts it the ordinary
    way, with pyarrow's rules and errors)."""
    values = values if isinstance(values, list) else list(values)
    n = len(values)
    validity = _validity(values)
    if pa.types.is_null(t):
        if any(v is not None for v in values):
            raise TypeError("a null array holds only None")
        return pa.Array.from_buffers(pa.null(), n, [None], null_count=n)
    if pa.types.is_boolean(t):
        bits = bytearray((n + 7) // 8)
        for i, v in enumerate(values):
            if v is not None and not isinstance(v, bool):
                raise TypeError(f"{v!r} is not a boolean")
            if v:
                bits[i // 8] |= 1 << (i % 8)
        return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(bytes(bits))])
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        text = pa.types.is_string(t) or pa.types.is_large_string(t)
        chunks = []
        for v in values:
            if v is None:
                chunks.append(b"")
            elif text and isinstance(v, str):
                chunks.append(v.encode("utf-8"))
            elif not text and isinstance(v, bytes):
                chunks.append(v)
            else:
                raise TypeError(f"{v!r} is not of type {t}")
        offsets = [0]
        for c in chunks:
            offsets.append(offsets[-1] + len(c))
        fmt = "q" if pa.types.is_large_string(t) or pa.types.is_large_binary(t) else "i"
        return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(struct.pack(f"<{n + 1}{fmt}", *offsets)), pa.py_buffer(b"".join(chunks))])
    return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(_fixed(values, t))])


def scalar(value: Any, t: pa.DataType) -> pa.Scalar:
    """``pa.scalar(value, t)`` from buffers (see :func:`array`)."""
    return array([value], t)[0]


def literal(value: Any) -> Any:
    """``value`` as an Arrow scalar of the type ``pa.scalar`` would infer, built here when it can be (else the
    Python value itself, which pyarrow then converts the ordinary way)."""
    t = literal_type(value)
    if t is None:
        return value
    try:
        return scalar(value, t)
    except (TypeError, struct.error, OverflowError):
        return value


def literal_array(values: Sequence[Any]) -> Any:
    """``values`` as the Arrow array ``pa.array`` would infer, built here when it can be (else the list itself)."""
    values = list(values)
    t = list_type(values)
    if t is None:
        return values
    try:
        return array(values, t)
    except (TypeError, struct.error, OverflowError):
        return values
