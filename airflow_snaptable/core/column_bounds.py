"""A manifest's column bounds (``ManifestFileMeta.column_stats``; Iceberg's manifest summaries, Paimon's
aggregated ``_VALUE_STATS``): the union of its entries' column statistics, so a filtered scan skips a manifest
unread when no file in it can hold a matching row (core/partition_pruning.py).

Written with each manifest (:func:`column_stats_of`) into its list entry as :class:`FileStats` JSON, so the
manifests' bounds are judged by the very code that judges files (``data_skipping.may_match``)::

    {"rows":300,"columns":{"id":{"nulls":0,"lower":17,"upper":912,"nan":false}}}

Per column: the smallest lower and largest upper bound of its files (a file with all values null adds its
bounds if it has any), the null count that makes "all null" and "has nulls" come out as in the files (an
all-null file counts ``max(rows, 1)`` nulls and rows), and whether any file has a NaN. A column some file has no
statistics for is unknown here (may match: written with ``nan`` true); an entry without statistics leaves the
manifest without bounds. A long string's bounds need no rule of their own: a cut lower bound is still a lower bound, and a
dropped upper bound leaves the manifest's unknown.

Entries of both kinds count: a DELETE entry carries the deleted file's statistics, so a manifest holding the
DELETE of a file that may match is read, and a file is never planned live because its DELETE went unread.
For that the judgment must never keep a file whose manifest it rules out. Hence the conservative rules:

- a manifest is left without bounds when some file's statistics would not parse as the ones it unites do
  (data_skipping parses a file's statistics whole, and a file that does not parse is kept): bounds of mixed
  JSON kinds in a column (strings and numbers, booleans and numbers), a non-finite number, a count outside
  0..2**63; an int and a float mixed are written as floats, which parse only where the files' floats do;
- an out-of-range int (e.g. 2**70 for an int64 column) is one of the extremes, so the manifest's bounds fail
  to parse where the file's do.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Iterable

from airflow_snaptable.core.column_stats import ColumnStats, FileStats
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


class _ColumnUnion:
    """The union of one column's statistics over a manifest's files."""

    def __init__(self) -> None:
        self.files = 0  # files with statistics for the column
        self.nulls = 0
        self.has_nan = False
        self.values: list = []  # every bound given (the files' with all values null too: wider is still a bound)
        self.lower_missing = False
        self.upper_missing = False

    def add(self, column: ColumnStats, rows: int, counted_rows: int) -> None:
        if not 0 <= column.null_count < _COUNT_LIMIT:
            raise _Irregular
        self.files += 1
        all_null = column.null_count >= rows
        self.nulls += counted_rows if all_null else column.null_count
        self.has_nan = self.has_nan or column.has_nan
        for value, is_lower in ((column.lower, True), (column.upper, False)):
            if value is None:
                if not all_null:  # the file's bound is unknown, so is the manifest's
                    self.lower_missing = self.lower_missing or is_lower
                    self.upper_missing = self.upper_missing or not is_lower
            elif isinstance(value, float) and not math.isfinite(value):
                raise _Irregular
            else:
                self.values.append(value)

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
    decoded: dict[str, FileStats] = {}
    rows_total = files = 0
    unions: dict[str, _ColumnUnion] = {}
    try:
        for entry in entries:
            text = entry.file.stats
            if text is None:
                return None
            stats = decoded.get(text)
            if stats is None:
                stats = decoded[text] = FileStats.decode(text)
            if not 0 <= stats.rows < _COUNT_LIMIT:
                return None
            counted = max(stats.rows, 1)  # an empty file is all null: it must count a null
            rows_total += counted
            files += 1
            for name, column in stats.columns.items():
                union = unions.get(name)
                if union is None:
                    union = unions[name] = _ColumnUnion()
                union.add(column, stats.rows, counted)
        if not files or rows_total >= _COUNT_LIMIT:
            return None
        return FileStats(rows_total, {name: union.stats(files) for name, union in unions.items()}).encode()
    except (_Irregular, ValueError, TypeError):
        return None


@lru_cache(maxsize=65536)
def check_column_stats(text: str) -> None:
    """Raise :class:`CorruptMetadataError` unless a list entry's ``column_stats`` is :class:`FileStats` JSON
    (bounds that do not parse as the columns' types are not corrupt: unknown, as for a file)."""
    try:
        FileStats.decode(text)
    except (ValueError, TypeError, AttributeError) as exc:
        raise CorruptMetadataError(f"unreadable column bounds {text[:200]!r}: {exc}") from exc
