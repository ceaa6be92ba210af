"""A DNF filter's pruning decided from its terms (core/native/dnf_pruning.py) against Arrow's (a dataset's
``get_fragments``, ``data_skipping.may_select``: the oracle) and against the rows themselves.

- Exact partitions: the same answer as the oracle, and never "no" for a partition whose row the filter selects.
- Manifests (partition bounds): never "no" where the oracle says "maybe", nor for bounds around a partition
  the filter selects.
- Files (column statistics, ``may_match``): never drops a file with a row the filter selects, and keeps no
  file the oracle drops.

A wrongly pruned partition or file is rows silently lost, so the draws mix nulls, NaN, ``in`` lists holding
None, and terms on partition keys and on other columns of several types.
"""

from __future__ import annotations

import datetime as dt
import json
import math

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.native import dnf_pruning
from airflow_snaptable.core.native.column_stats import stats_of_table
from airflow_snaptable.core.native.data_skipping import may_match
from airflow_snaptable.core.native.partition_pruning import manifests_may_select, partitions_may_select
from airflow_snaptable.core.native.scan import check_filter, to_expression
from airflow_snaptable.core.native.schema import TableSchema

DAY = dt.date(2024, 1, 1)
#: Partition keys of every partition type, and columns with statistics of several types.
PARTITION_VALUES = {
    "pi": (pa.int64(), st.integers(-2, 2)),
    "ps": (pa.string(), st.sampled_from(["", "a", "ab", "b", "é"])),
    "pb": (pa.bool_(), st.booleans()),
    "pd": (pa.date32(), st.integers(0, 3).map(lambda d: DAY + dt.timedelta(days=d))),
    "p8": (pa.int8(), st.integers(-2, 2)),
}
COLUMN_VALUES = {
    "x": (pa.int64(), st.integers(-3, 3)),
    "f": (pa.float64(), st.sampled_from([-1.5, 0.0, -0.0, 1.0, 2.5, math.nan])),
    "s": (pa.string(), st.sampled_from(["", "a", "ab", "b", "é"])),
    "d": (pa.date32(), st.integers(0, 3).map(lambda d: DAY + dt.timedelta(days=d))),
    "t": (pa.timestamp("us"), st.integers(0, 3).map(lambda h: dt.datetime(2024, 1, 1, h))),
}
VALUES = {**PARTITION_VALUES, **COLUMN_VALUES}
SCHEMA = TableSchema(0, pa.schema([(n, t) for n, (t, _v) in VALUES.items()]), tuple(PARTITION_VALUES))
OPS = ["=", "==", "!=", "<", "<=", ">", ">="]


def nullable(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), values, values)


@st.composite
def terms(draw, columns: list[str]):
    column = draw(st.sampled_from(columns))
    values = VALUES[column][1]
    op = draw(st.sampled_from([*OPS, "in", "not in"]))
    if op in ("in", "not in"):
        return (column, op, draw(st.lists(nullable(values), max_size=3)))
    return (column, op, draw(nullable(values)))


def dnf(columns: list[str]) -> st.SearchStrategy:
    conjunction = st.lists(terms(columns), min_size=1, max_size=3)
    return st.one_of(conjunction, st.lists(conjunction, min_size=1, max_size=3))


def expression_of(filter) -> pc.Expression:
    """The filter as a scan takes it; draws the schema refuses (e.g. a None literal) are not plans."""
    try:
        return check_filter(SCHEMA, to_expression(filter))
    except InvalidArgumentError:
        assume(False)


def rows(columns: dict[str, list]) -> pa.Table:
    return pa.table({n: pa.array(v, VALUES[n][0]) for n, v in columns.items()})


def selects_a_row(expression: pc.Expression, table: pa.Table) -> bool:
    full = {n: table[n] if n in table.column_names else pa.nulls(table.num_rows, VALUES[n][0]) for n in VALUES}
    return pa.table(full).filter(expression).num_rows > 0


partition = st.fixed_dictionaries({k: nullable(v) for k, (_t, v) in PARTITION_VALUES.items()})
any_filter = dnf(list(VALUES))
#: Mostly partition keys, where an exact value meets a literal often enough to test each boundary.
partition_filter = dnf([*PARTITION_VALUES, "x"])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], deadline=None)
@given(partitions=st.lists(partition, min_size=1, max_size=4), filter=st.one_of(partition_filter, any_filter), others=st.fixed_dictionaries({k: nullable(v) for k, (_t, v) in COLUMN_VALUES.items()}))
def test_exact_partitions_are_judged_as_arrow_judges_them(partitions, filter, others):
    expression = expression_of(filter)
    values = [tuple(p[k] for k in PARTITION_VALUES) for p in partitions]
    assume(dnf_pruning.dnf_conjunctions(filter, dict(zip(SCHEMA.partition_keys, SCHEMA.partition_types()))) is not None)
    judged = partitions_may_select(SCHEMA, values, expression, filter)
    assert judged == partitions_may_select(SCHEMA, values, expression)  # the oracle: a dataset's fragments
    for p, selected in zip(partitions, judged):
        if selects_a_row(expression, rows({**{k: [v] for k, v in p.items()}, **{k: [v] for k, v in others.items()}})):
            assert selected, f"partition {p} pruned although the filter selects its row {others}"


@st.composite
def manifest_bounds(draw):
    """A manifest's ``partition_stats``, and partitions inside them."""
    inside = draw(st.lists(partition, min_size=1, max_size=4))
    lower, upper, nulls = [], [], []
    for key in PARTITION_VALUES:
        present = [p[key] for p in inside if p[key] is not None]
        nulls.append(len(present) < len(inside))
        lower.append(min(present) if present else None)
        upper.append(max(present) if present else None)
    encode = lambda v: v.isoformat() if isinstance(v, dt.date) else v  # noqa: E731 - as the manifest writes them
    stats = json.dumps({"lower": [encode(v) for v in lower], "upper": [encode(v) for v in upper], "nulls": nulls})
    return stats, inside


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], deadline=None)
@given(manifests=st.lists(st.one_of(st.none().map(lambda _: (None, [])), manifest_bounds()), min_size=1, max_size=4), filter=st.one_of(partition_filter, any_filter))
def test_manifest_bounds_are_never_pruned_where_arrow_or_a_partition_inside_may_match(manifests, filter):
    expression = expression_of(filter)
    assume(dnf_pruning.dnf_conjunctions(filter, dict(zip(SCHEMA.partition_keys, SCHEMA.partition_types()))) is not None)
    stats = [s for s, _inside in manifests]
    judged = manifests_may_select(SCHEMA, stats, expression, filter)
    oracle = manifests_may_select(SCHEMA, stats, expression)
    for (text, inside), selected, arrow_selects in zip(manifests, judged, oracle):
        assert selected or not arrow_selects, f"manifest {text} pruned where Arrow may select it"
        if inside and any(partitions_may_select(SCHEMA, [tuple(p[k] for k in PARTITION_VALUES) for p in inside], expression, filter)):
            assert selected, f"manifest {text} pruned although a partition inside may match"


file_rows = st.lists(st.fixed_dictionaries({k: nullable(v) for k, (_t, v) in COLUMN_VALUES.items()}), min_size=1, max_size=3)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], deadline=None)
@given(files=st.lists(file_rows, min_size=1, max_size=6), filter=dnf(list(COLUMN_VALUES)))
def test_files_are_kept_where_a_row_matches_and_wherever_arrow_keeps_them(files, filter):
    expression = expression_of(filter)
    assume(dnf_pruning.stats_conjunctions(filter, {n: t for n, (t, _v) in COLUMN_VALUES.items()}) is not None)
    tables = [rows({k: [r[k] for r in file] for k in COLUMN_VALUES}) for file in files]
    texts = pa.array([stats_of_table(t) for t in tables], pa.string())
    judged = may_match(SCHEMA, texts, expression, filter).to_pylist()
    oracle = may_match(SCHEMA, texts, expression).to_pylist()
    for table, kept, arrow_keeps in zip(tables, judged, oracle):
        assert kept or not arrow_keeps, f"file {table.to_pylist()} dropped where Arrow keeps it"
        if selects_a_row(expression, table):
            assert kept, f"file {table.to_pylist()} dropped although the filter selects a row of it"
