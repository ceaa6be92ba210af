"""Column statistics of a data file: per column the smallest and largest value, the null count and
whether a NaN occurs, so a filtered scan skips files whose statistics prove no row can match.

A data file carries them as compact JSON text (``DataFile.stats``; None: unknown, e.g. a file
committed by another writer), stored as is in the manifest's optional ``stats`` column, so
manifests decode as fast as before and merges copy the text untouched::

    {"rows":100,"columns":{"id":{"nulls":0,"lower":17,"upper":912,"nan":false},"name":{"nulls":3,"lower":"ab","upper":null,"nan":false}}}

Per column an object (not a list: a column's bounds have its type, so Arrow's JSON reader parses the
statistics of all of a scan's files at once with a schema made from the table's, core/native/data_skipping.py):
``nulls`` the null count, ``nan`` whether a NaN occurs, ``lower``/``upper`` bound the column's non-null,
non-NaN values (null: unknown, e.g. all values null or NaN, or a long string's upper bound);
temporal values are their integer storage (days, or units since the epoch). Only the types that
compare exactly are kept: integers, floats, strings, bools, dates, times and timestamps; other
columns (decimals, binary, nested ...) have no statistics. A long string's lower bound is cut to
:data:`STRING_PREFIX` characters (a prefix sorts at or before the string: still a lower bound);
its upper bound is dropped (a cut upper bound would sort before the string).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from airflow_snaptable.core.errors import InvalidArgumentError

#: The keys of a column's statistics (``lower``/``upper`` may be left out: unknown).
_FIELDS = frozenset({"nulls", "lower", "upper", "nan"})
#: Characters of a string bound kept; a longer lower bound is cut, a longer upper bound dropped.
STRING_PREFIX = 64


@dataclass(frozen=True)
class ColumnStats:
    """What is known of one column's values in one data file.

    :param null_count: rows whose value is null.
    :param lower: the smallest non-null, non-NaN value, in its JSON form (None: unknown).
    :param upper: the largest one (None: unknown).
    :param has_nan: whether a NaN occurs (floating point columns).
    """

    null_count: int
    lower: Any = None
    upper: Any = None
    has_nan: bool = False


@dataclass(frozen=True)
class FileStats:
    """The statistics of one data file: its row count and what is known of each column."""

    rows: int
    columns: Mapping[str, ColumnStats]

    def encode(self) -> str:
        """The JSON text a :class:`~airflow_snaptable.core.native.manifest.DataFile` carries (one line)."""
        columns = {name: {"nulls": c.null_count, "lower": c.lower, "upper": c.upper, "nan": c.has_nan} for name, c in self.columns.items()}
        return json.dumps({"rows": self.rows, "columns": columns}, separators=(",", ":"), allow_nan=False)

    @classmethod
    def decode(cls, text: str) -> "FileStats":
        """The statistics in ``text`` (as :meth:`encode` writes it); ValueError if it is not that."""
        doc = json.loads(text)
        if not isinstance(doc, dict) or not isinstance(doc.get("rows"), int) or not isinstance(doc.get("columns"), dict):
            raise ValueError(f"not column statistics: {text[:200]!r}")
        columns = {}
        for name, value in doc["columns"].items():
            if (
                not isinstance(value, dict) or not set(value) <= _FIELDS or not isinstance(value.get("nulls"), int)
                or not isinstance(value.get("nan"), bool)
                or not all(value.get(bound) is None or isinstance(value[bound], (int, float, str)) for bound in ("lower", "upper"))
            ):
                raise ValueError(f"column {name!r}: not {{\"nulls\": n, \"lower\": l, \"upper\": u, \"nan\": b}}: {value!r}")
            columns[name] = ColumnStats(value["nulls"], value.get("lower"), value.get("upper"), value["nan"])
        return cls(doc["rows"], columns)


def check_stats(text, where: str) -> None:
    """Raise :class:`InvalidArgumentError` unless ``text`` is None or valid statistics JSON."""
    if text is None:
        return
    if not isinstance(text, str):
        raise InvalidArgumentError(f"{where}: stats must be JSON text (FileStats.encode()) or None, got {type(text).__name__}")
    try:
        FileStats.decode(text)
    except ValueError as exc:
        raise InvalidArgumentError(f"{where}: invalid stats: {exc}") from None


@functools.lru_cache(maxsize=256)
def bound_type(t: pa.DataType) -> pa.DataType | None:
    """The type a column's bounds are computed and stored in (their JSON is parsed as); None for types
    without statistics."""
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_float32(t) or pa.types.is_float64(t):
        return t
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return t
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_date64(t) or pa.types.is_time64(t) or pa.types.is_timestamp(t):
        return pa.int64()
    return None


def _bound(value, is_upper: bool):
    """A bound in its JSON form, or None (unknown, always a correct bound): JSON has no NaN or infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str) and len(value) > STRING_PREFIX:
        return None if is_upper else value[:STRING_PREFIX]
    return value


def stats_of_table(table: pa.Table, skip: tuple[str, ...] = ()) -> str:
    """The statistics of the rows of one data file, as :attr:`DataFile.stats` text.

    :param table: the file's rows, with the table's types.
    :param skip: columns left out (partition keys: one value per file, known already).
    """
    columns = {}
    for name, column in zip(table.column_names, table.columns):
        storage = bound_type(column.type)
        if name in skip or storage is None:
            continue
        has_nan = pa.types.is_floating(column.type) and table.num_rows > 0 and bool(pc.any(pc.is_nan(column)).as_py())
        values = column if storage == column.type else column.cast(storage)
        bounds = pc.min_max(values)  # skips nulls and NaN
        lower, upper = bounds["min"].as_py(), bounds["max"].as_py()
        columns[name] = ColumnStats(column.null_count, _bound(lower, False), _bound(upper, True), has_nan)
    return FileStats(table.num_rows, columns).encode()


@dataclass(frozen=True)
class Bounds:
    """What is known of one column over some rows (one file's, or several files' together).

    :param lower: a value at or below every non-null value (None: unknown).
    :param upper: a value at or above every non-null value (None: unknown).
    :param has_nulls: whether a null may occur.
    :param all_null: whether every value is null.
    """

    lower: Any
    upper: Any
    has_nulls: bool
    all_null: bool


def _scalar(value, t: pa.DataType) -> pa.Scalar:
    storage = bound_type(t)
    return pa.scalar(value, storage) if storage == t else pa.scalar(value, storage).cast(t)


def column_condition(name: str, t: pa.DataType, bounds: Bounds | None) -> list[pc.Expression] | None:
    """What ``bounds`` prove of column ``name``, as alternatives: every row satisfies one of them.

    None: nothing is proved (the rows may hold any value): unknown bounds (a NaN occurs: Arrow has
    no guarantee form for NaN), a type without statistics, or a bound that does not fit the
    column's type (e.g. statistics written under another schema).
    """
    if bounds is None or bound_type(t) is None:
        return None
    field = pc.field(name)
    if bounds.all_null:
        return [field.is_null()]
    try:
        terms = []
        if bounds.lower is not None:
            terms.append(field >= _scalar(bounds.lower, t))
        if bounds.upper is not None:
            terms.append(field <= _scalar(bounds.upper, t))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError):
        return None
    if not terms:
        return None if bounds.has_nulls else [field.is_valid()]
    present = terms[0] if len(terms) == 1 else terms[0] & terms[1]
    # Arrow reads a comparison guarantee as "never null"; rows with nulls are a separate alternative.
    return [present, field.is_null()] if bounds.has_nulls else [present]
