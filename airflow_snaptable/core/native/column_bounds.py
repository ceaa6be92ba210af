"""A manifest's column bounds (``ManifestFileMeta.column_stats``; Iceberg's manifest summaries, Paimon's
aggregated ``_VALUE_STATS``): the union of its entries' column statistics, so a filtered scan skips a manifest
unread when no file in it can hold a matching row (core/native/partition_pruning.py).

Written with each manifest (:func:`column_stats_of`) into its list entry as :class:`FileStats` JSON, so the
manifests' bounds are judged by the very code that judges files (``data_skipping.may_match``)::

    {"rows":300,"columns":{"id":{"nulls":0,"lower":17,"upper":912,"nan":false}}}

Per column: the smallest lower and largest upper bound of its files (a file with all values null adds its
bounds if it has any), the null count that makes "all null" and "has nulls" come out as in the files (an
all-null file counts ``max(rows, 1)`` nulls and rows), and whether any file has a NaN. A column some file has no
statistics for is unknown here (may match: written with ``nan`` true); an entry without statistics leaves the
manifest without bounds. A long string's bounds need no rule of their own: a cut lower bound is still a lower
bound, and a dropped upper bound leaves the manifest's unknown.

Arrow unites the usual statistics column-wise (one JSON read of all the entries' texts, types inferred);
statistics of another shape (kinds mixed, a string Arrow takes for a timestamp, ...) are united one file at a
time, with the same answer (tests/core/test_column_bounds.py holds the two to it).

Entries of both kinds count: a DELETE entry carries the deleted file's statistics, so a manifest holding the
DELETE of a file that may match is read, and a file is never planned live because its DELETE went unread.
For that the judgment must never keep a file whose manifest it rules out. Hence the conservative rules:

- a manifest is left without bounds when some file's statistics would not parse as the ones it unites do
  (data_skipping parses a file's statistics whole, and a file that does not parse is kept): bounds of mixed
  JSON kinds in a column (strings and numbers, booleans and numbers), a non-finite number, a count outside
  0..2**63; an int and a float mixed are written as floats, which parse only where the files' floats do;
- an out-of-range int (e.g. 2**70 for an int64 column) is one of the extremes, so the manifest's bounds fail
  to parse where the file's do; the extremes of a column some file has no statistics for are written too
  (the column is unknown, but its bounds still fail to parse where a file's would).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from airflow_snaptable.core.native.column_stats import _FIELDS, ColumnStats, FileStats
from airflow_snaptable.core.errors import CorruptMetadataError

_COUNT_LIMIT = 2**63  # rows and nulls are parsed as int64


def _kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "str"


class _Irregular(Exception):
    """Some file's statistics would not parse as the united ones: the manifest gets no bounds."""


def _count(value) -> int:
    """A row or null count as the files' JSON reader parses it (int64, not a boolean), else irregular."""
    if type(value) is not int or not 0 <= value < _COUNT_LIMIT:
        raise _Irregular
    return value


class _ColumnUnion:
    """The union of one column's statistics over a manifest's files."""

    __slots__ = ("files", "nulls", "has_nan", "values", "lower_missing", "upper_missing")

    def __init__(self) -> None:
        self.files = 0  # files with statistics for the column
        self.nulls = 0
        self.has_nan = False
        self.values: list = []  # every bound given (the files' with all values null too: wider is still a bound)
        self.lower_missing = False
        self.upper_missing = False

    def add(self, column, rows: int, counted_rows: int) -> None:
        """One file's statistics of the column (its JSON object), the file's rows, and the rows it counts for."""
        if type(column) is not dict or not column.keys() <= _FIELDS or type(column.get("nan")) is not bool:
            raise _Irregular
        nulls = _count(column.get("nulls"))
        self.files += 1
        all_null = nulls >= rows
        self.nulls += counted_rows if all_null else nulls
        self.has_nan = self.has_nan or column["nan"]
        lower, upper = column.get("lower"), column.get("upper")
        for value in (lower, upper):
            if value is not None:
                if type(value) is float and not math.isfinite(value) or not isinstance(value, (int, float, str)):
                    raise _Irregular
                self.values.append(value)
        if not all_null:  # a file's unknown bound leaves the manifest's unknown
            self.lower_missing = self.lower_missing or lower is None
            self.upper_missing = self.upper_missing or upper is None

    def stats(self, files: int) -> ColumnStats:
        """The column's statistics over ``files`` files; unknown (``nan``) if some file has none for it, its
        extremes still written: they fail to parse where a file's bound would."""
        kinds = {_kind(v) for v in self.values}
        values = self.values
        if kinds == {"int", "float"}:
            try:
                values = [float(v) for v in values]  # a float of the files' fails to parse as an int column's: so does this
            except OverflowError:
                raise _Irregular from None
        elif len(kinds) > 1:
            raise _Irregular
        if self.files < files:
            return ColumnStats(0, min(values) if values else None, max(values) if values else None, True)
        lower = None if self.lower_missing or not values else min(values)
        upper = None if self.upper_missing or not values else max(values)
        return ColumnStats(self.nulls, lower, upper, self.has_nan)


def column_stats_of(entries: Iterable) -> str | None:
    """:class:`FileStats` JSON uniting the statistics of the entries' files (both kinds of entries); None when
    there are no entries, an entry has no statistics (or unreadable ones), or they would not parse alike."""
    texts = []
    for entry in entries:
        if entry.file.stats is None:
            return None
        texts.append(entry.file.stats)
    if not texts:
        return None
    try:
        return _arrow_union(texts)
    except _Unusual:
        return _python_union(texts)


class _Unusual(Exception):
    """The statistics are not of the shape the vectorised union handles: the per-file union decides."""


#: Bound types Arrow's JSON reader infers that the vectorised union handles (others, e.g. a string inferred as a
#: timestamp, go to the per-file union).
_BOUND_TYPES = (pa.int64(), pa.float64(), pa.bool_(), pa.string(), pa.null())
_READ = pj.ReadOptions(use_threads=False, block_size=1 << 26)


def _arrow_union(texts: list[str]) -> str | None:
    """The union, with Arrow: the texts parsed at once (types inferred), reduced column-wise. Statistics of an
    unusual shape (kinds mixed, a text that does not parse, other inferred types) raise :class:`_Unusual`.
    Ints and floats together are inferred as doubles: written as floats, as in the per-file union."""
    try:
        joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(texts)], pa.int32()), pa.array(texts, pa.string())), "\n")
        parsed = pj.read_json(pa.BufferReader(joined[0].as_buffer()), read_options=_READ).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise _Unusual from None
    if parsed.num_rows != len(texts) or parsed.schema.names != ["rows", "columns"] or parsed.schema.field("rows").type != pa.int64():
        raise _Unusual
    columns_type = parsed.schema.field("columns").type
    rows, columns = parsed["rows"].chunk(0), parsed["columns"].chunk(0)
    if not pa.types.is_struct(columns_type) or rows.null_count or columns.null_count or pc.min(rows).as_py() < 0:
        raise _Unusual
    counted = pc.max_element_wise(rows, 1)  # an empty file is all null: it must count a null
    rows_total = pc.sum(counted).as_py()
    if rows_total >= _COUNT_LIMIT:
        return None
    united = {}
    for field in columns_type:
        fields = {f.name: f.type for f in field.type} if pa.types.is_struct(field.type) else None
        if fields is None or fields.get("nulls") != pa.int64() or fields.get("nan") != pa.bool_() or not fields.keys() <= _FIELDS:
            raise _Unusual
        if any(fields.get(bound, pa.null()) not in _BOUND_TYPES for bound in ("lower", "upper")):
            raise _Unusual
        column = pc.struct_field(columns, field.name)
        present = pc.is_valid(column)
        nulls, nan = pc.struct_field(column, "nulls").filter(present), pc.struct_field(column, "nan").filter(present)
        if nulls.null_count or nan.null_count or (len(nulls) and pc.min(nulls).as_py() < 0):
            raise _Unusual
        values = _bound_values([pc.struct_field(column, bound).drop_null() for bound in ("lower", "upper") if bound in fields])
        if pa.types.is_floating(values.type) and not pc.all(pc.is_finite(values)).as_py():
            return None
        extremes = pc.min_max(values) if len(values) else None
        low, high = (extremes["min"].as_py(), extremes["max"].as_py()) if extremes is not None else (None, None)
        if len(nulls) < len(texts):  # some file has no statistics for it: unknown, extremes kept
            united[field.name] = ColumnStats(0, low, high, True)
            continue
        all_null = pc.greater_equal(nulls, rows)
        some = pc.invert(all_null)
        missing = [
            bool(pc.any(pc.and_(some, pc.is_null(pc.struct_field(column, bound)))).as_py()) if bound in fields else bool(pc.any(some).as_py())
            for bound in ("lower", "upper")
        ]
        null_count = pc.sum(pc.if_else(all_null, counted, nulls)).as_py() or 0
        united[field.name] = ColumnStats(
            null_count, None if missing[0] else low, None if missing[1] else high, bool(pc.any(nan).as_py())
        )
    return FileStats(rows_total, united).encode()


def _bound_values(arrays: list[pa.Array]) -> pa.Array:
    """A column's lower and upper bounds in one array: ints and floats as floats, other kinds mixed unusual."""
    arrays = [a for a in arrays if a.type != pa.null()]
    types = {a.type for a in arrays}
    if not types:
        return pa.array([], pa.null())
    if len(types) > 1:
        if types != {pa.int64(), pa.float64()}:
            raise _Unusual
        try:
            arrays = [a.cast(pa.float64()) for a in arrays]
        except pa.ArrowInvalid:  # an int a float cannot hold exactly
            raise _Unusual from None
    return pa.concat_arrays(arrays)


def _python_union(texts: list[str]) -> str | None:
    """The union, one file at a time (any shape of statistics)."""
    weights: dict[str, int] = {}  # each distinct statistics text once, with the number of entries carrying it
    for text in texts:
        weights[text] = weights.get(text, 0) + 1
    rows_total = files = 0
    unions: dict[str, _ColumnUnion] = {}
    try:
        for text, weight in weights.items():
            doc = json.loads(text)
            if type(doc) is not dict or type(doc.get("columns")) is not dict:
                return None
            rows = _count(doc.get("rows"))
            counted = max(rows, 1)  # an empty file is all null: it must count a null
            rows_total += weight * counted
            files += weight
            for name, column in doc["columns"].items():
                union = unions.get(name)
                if union is None:
                    union = unions[name] = _ColumnUnion()
                for _ in range(weight):
                    union.add(column, rows, counted)
        if not files or rows_total >= _COUNT_LIMIT:
            return None
        return FileStats(rows_total, {name: union.stats(files) for name, union in unions.items()}).encode()
    except (_Irregular, ValueError, TypeError, RecursionError):
        return None


@lru_cache(maxsize=65536)
def check_column_stats(text: str) -> None:
    """Raise :class:`CorruptMetadataError` unless a list entry's ``column_stats`` is :class:`FileStats` JSON
    (bounds that do not parse as the columns' types are not corrupt: unknown, as for a file)."""
    try:
        FileStats.decode(text)
    except (ValueError, TypeError, AttributeError) as exc:
        raise CorruptMetadataError(f"unreadable column bounds {text[:200]!r}: {exc}") from exc
