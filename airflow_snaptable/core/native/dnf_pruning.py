"""Partition pruning of a DNF filter (``[("p", "=", 1)]``, ``[[...], [...]]``) decided from its terms, in Python.

``data_skipping.may_select`` asks Arrow (a dataset's ``get_fragments(filter)``) which partitions a filter may select;
importing ``pyarrow.dataset`` imports pandas, most of a second of a fresh process (a sensor poke, a CLI call, a
mapped task). A DNF filter, what users, the CLI and the sensor give, is judged here instead, with the same answers
(tests/core/test_dnf_pruning.py draws partitions, bounds and filters and compares with ``may_select``):

- What is known of a column is a :class:`~airflow_snaptable.core.native.column_stats.Bounds`: a partition's exact
  value is ``Bounds(v, v, False, False)`` (null: all null), a manifest's bounds its lower/upper and whether a null
  occurs. A column with nothing known (a column that is not a partition key) may hold any value.
- Three-valued: a term may select rows unless what is known proves it selects none; a conjunction unless one of
  its terms selects none; a disjunction if one of its conjunctions may.
- Nulls as Arrow filters rows: a comparison with a null (a null row, or a None literal) selects nothing;
  ``in`` selects a null row when its list holds None, ``not in`` when it does not (``~is_in``).

Only terms whose literal compares with the column's values as Arrow compares them are judged (integers, strings,
booleans, dates; see :func:`_fits`); a filter with another term on a known column is left to ``may_select``
(:func:`dnf_conjunctions` returns None), and so is a filter given as a ``pyarrow.compute.Expression``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow as pa

from airflow_snaptable.core.native import arrow_values
from airflow_snaptable.core.native.column_stats import Bounds

_OPS = {"=": "=", "==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "in": "in", "not in": "not in"}


@dataclass(frozen=True)
class Term:
    """One predicate ``column op value`` of a DNF filter (``op`` normalised: ``==`` is ``=``)."""

    column: str
    op: str
    value: Any


Conjunction = tuple[Term, ...]


def parse_dnf(filter: Any) -> list[Conjunction] | None:
    """The conjunctions of a DNF filter as ``scan.dnf_expression`` reads it, or None if it is not one it reads."""
    if not isinstance(filter, (list, tuple)) or not filter:
        return None
    if any(not isinstance(c, (list, tuple)) or len(c) == 0 for c in filter):
        return None
    disjunction = [filter] if isinstance(filter[0][0], str) else filter
    conjunctions = []
    for conjunction in disjunction:
        terms = []
        for term in conjunction:
            if not isinstance(term, (list, tuple)) or len(term) != 3 or not isinstance(term[0], str) or term[1] not in _OPS:
                return None
            column, op, value = term
            op = _OPS[op]
            if op in ("in", "not in"):
                if not isinstance(value, (list, tuple, set, frozenset)):
                    return None
                value = tuple(value)
            terms.append(Term(column, op, value))
        conjunctions.append(tuple(terms))
    return conjunctions


def _fits(value: Any, t: pa.DataType) -> bool:
    """Whether Python's comparison of ``value`` with the column's values (decoded partition values, or statistics'
    bounds of the bound type) is Arrow's comparison of the column with the literal."""
    if value is None:
        return True
    if pa.types.is_boolean(t):
        return isinstance(value, bool)
    if pa.types.is_uint64(t):
        return False  # Arrow compares uint64 with an int64 literal as int64
    if pa.types.is_integer(t):
        return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
    if pa.types.is_floating(t):
        # Arrow compares a float column with an int literal in the column's float type: exact up to its mantissa.
        exact_ints = 2**24 if pa.types.is_float32(t) else 2**53
        if isinstance(value, int) and not isinstance(value, bool):
            return -exact_ints <= value <= exact_ints
        return isinstance(value, float) and not pa.types.is_float16(t)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return isinstance(value, str)  # Python's order of code points is UTF-8's order of bytes
    if pa.types.is_date32(t):
        return isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    return False


def _judged(conjunctions: list[Conjunction], types: Mapping[str, pa.DataType], convert) -> list[Conjunction] | None:
    judged = []
    for conjunction in conjunctions:
        terms = []
        for term in conjunction:
            if term.column in types:
                t = types[term.column]
                try:
                    if term.op in ("in", "not in"):
                        term = Term(term.column, term.op, tuple(convert(v, t) for v in term.value))
                    else:
                        term = Term(term.column, term.op, convert(term.value, t))
                except (TypeError, ValueError, OverflowError):
                    return None
            terms.append(term)
        judged.append(tuple(terms))
    return judged


def _as_is(value: Any, t: pa.DataType) -> Any:
    if not _fits(value, t):
        raise TypeError(f"{value!r} is not judged here for a column of {t}")
    return value


def dnf_conjunctions(filter: Any, types: Mapping[str, pa.DataType]) -> list[Conjunction] | None:
    """``filter``'s conjunctions if every term on a column of ``types`` (the partition keys: their values are
    known) can be judged here; None: leave the filter to Arrow."""
    conjunctions = parse_dnf(filter)
    return None if conjunctions is None else _judged(conjunctions, types, _as_is)


def _as_bound(value: Any, t: pa.DataType) -> Any:
    """``value`` as the column's statistics hold their bounds (core/native/column_stats.py ``bound_type``): dates
    as days, timestamps as ticks of the column's unit."""
    if value is None:
        return None
    if pa.types.is_date32(t):
        return arrow_values.days(_as_is(value, t))
    if pa.types.is_timestamp(t):
        if not isinstance(value, dt.datetime) or (value.tzinfo is None) != (t.tz is None):
            raise TypeError(f"{value!r} is not judged here for a column of {t}")
        return arrow_values.ticks(value, t)  # TypeError unless exact in the column's unit
    return _as_is(value, t)


def stats_conjunctions(filter: Any, types: Mapping[str, pa.DataType]) -> list[Conjunction] | None:
    """``filter``'s conjunctions with the literals of terms on columns of ``types`` (those with statistics) as
    their bounds are stored, if every such term can be judged here; None: leave the filter to Arrow."""
    conjunctions = parse_dnf(filter)
    return None if conjunctions is None else _judged(conjunctions, types, _as_bound)


def _term_may_select(term: Term, known: Bounds | None) -> bool:
    if term.op not in ("in", "not in") and term.value is None:
        return False  # a comparison with a null selects nothing, whatever the column holds
    if known is None:
        return True  # (Arrow keeps even ``in []`` on such a column: judged as it judges)
    present = not known.all_null  # a non-null value may occur
    low, high = (None, None) if known.all_null else (known.lower, known.upper)
    if term.op in ("in", "not in"):
        listed = [v for v in term.value if v is not None]
        null_listed = len(listed) < len(term.value)
        if term.op == "in":
            if null_listed and known.has_nulls:
                return True
            return present and any(_equal_may(v, low, high) for v in listed)
        if not null_listed and known.has_nulls:
            return True
        # On bounds Arrow does not decide ``not in``/``!=`` (bounds [v, v] are not the value v): nor is it here.
        return present and not (isinstance(known, Exact) and low in listed)
    value = term.value
    if value is None or not present:
        return False  # a comparison with a null selects nothing
    if term.op == "=":
        return _equal_may(value, low, high)
    if term.op == "!=":
        return not (isinstance(known, Exact) and low == value)
    if term.op == "<":
        return low is None or low < value
    if term.op == "<=":
        return low is None or low <= value
    if term.op == ">":
        return high is None or high > value
    return high is None or high >= value  # ">="


def _equal_may(value: Any, low: Any, high: Any) -> bool:
    return (low is None or low <= value) and (high is None or value <= high)


def may_select(conjunctions: Sequence[Conjunction], known: Mapping[str, Bounds | None]) -> bool:
    """May the filter select rows of which ``known`` is known (per column; a column not in it: anything)?"""
    return any(all(_term_may_select(t, known.get(t.column)) for t in conjunction) for conjunction in conjunctions)


@dataclass(frozen=True)
class Exact(Bounds):
    """A column's one value (a partition's): Bounds [v, v] without nulls, or all null, known to be exact."""


def exact(value: Any) -> Exact:
    """What a partition's value says of its column."""
    return Exact(None, None, True, True) if value is None else Exact(value, value, False, False)
