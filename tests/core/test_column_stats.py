"""Column statistics (core/native/column_stats.py) and data skipping: a filtered scan skips manifests whose column
bounds (core/native/column_bounds.py) and files whose statistics prove no row matches and still returns exactly what the unfiltered scan, filtered in memory, returns
(nulls, NaN, infinities, long strings included); manifests written before statistics still read."""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from airflow_snaptable.core import Table
from airflow_snaptable.core.native.column_stats import ColumnStats, FileStats, stats_of_table
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.native.manifest import _LIST_SCHEMA_WITHOUT_COLUMN_STATS, _MANIFEST_SCHEMA_WITHOUT_STATS, DataFile, manifest_path
from airflow_snaptable.core.native.partition_pruning import prune_files

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("p", pa.int64()),
        ("id", pa.int64()),
        ("name", pa.string()),
        ("value", pa.float64()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("flag", pa.bool_()),
        ("small", pa.float32()),
    ]
)
LONG = "x" * 70  # longer than the bound kept (STRING_PREFIX): lower bound cut, upper bound dropped
DOMAINS = {
    "id": [-3, 0, 1, 2, 5, 9, 20],
    "name": ["", "a", "ab", "b", "é", LONG, LONG + "a", "y" * 80],
    "value": [math.nan, -0.0, 0.0, 1.5, -2.0, math.inf, -math.inf, 3.0],
    "day": [dt.date(2026, 1, d) for d in (1, 2, 5, 9)],
    "ts": [dt.datetime(2026, 1, 1, h, tzinfo=UTC) for h in (0, 1, 7, 23)],
    "flag": [True, False],
    "small": [math.nan, -1.25, 0.5, 2.0],
}
COLUMNS = list(DOMAINS)


def value_of(column: str):
    return st.one_of(st.none(), st.sampled_from(DOMAINS[column]))


row = st.fixed_dictionaries({"p": st.sampled_from([0, 1, None]), **{c: value_of(c) for c in COLUMNS}})


def comparison(column: str):
    literal = st.sampled_from(DOMAINS[column]).filter(lambda v: not (isinstance(v, float) and math.isnan(v)))
    field = pc.field(column)
    return st.one_of(
        st.tuples(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), literal).map(
            lambda t: {"==": field.__eq__, "!=": field.__ne__, "<": field.__lt__, "<=": field.__le__, ">": field.__gt__, ">=": field.__ge__}[t[0]](t[1])
        ),
        st.lists(literal, min_size=1, max_size=3).map(lambda vs: field.isin(pa.array(vs, SCHEMA.field(column).type))),
        st.just(field.is_null()),
        st.just(field.is_valid()),
        *([st.just(field.is_nan()), st.just(~field.is_nan())] if column in ("value", "small") else []),
    )


atom = st.sampled_from(COLUMNS).flatmap(comparison)
filters = st.recursive(
    atom,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: t[0] & t[1]),
        st.tuples(inner, inner).map(lambda t: t[0] | t[1]),
        inner.map(lambda e: ~e),
    ),
    max_leaves=3,
)
operations = st.lists(
    st.tuples(st.sampled_from(["append", "append", "append", "overwrite", "delete", "compact"]), st.lists(row, min_size=1, max_size=8)),
    min_size=1,
    max_size=8,
)


def _sorted_rows(table: pa.Table) -> list:
    """Rows in a stable order, NaN spelled out (NaN != NaN would fail equal rows)."""
    spelled = [tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r.values()) for r in table.to_pylist()]
    return sorted(spelled, key=repr)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=operations, expression=filters, partitioned=st.booleans())
# The cases a wrong bound would fail on, every run: a NaN beside in-bound values under a negated comparison,
# a long string's upper bound, an all-null column, and a null beside in-bound values.
@example(ops=[("append", [{"id": 1, "value": math.nan, "name": "a"}, {"id": 2, "value": 1.5, "name": LONG}])], expression=~(pc.field("value") <= 1.5), partitioned=False)
@example(ops=[("append", [{"id": 1, "value": math.nan, "name": "a"}, {"id": 2, "value": 1.5, "name": LONG}])], expression=pc.field("name") == LONG, partitioned=False)
@example(ops=[("append", [{"id": 1}, {"id": 2}])], expression=pc.field("day").is_null(), partitioned=True)
@example(ops=[("append", [{"id": 1}, {"id": None}])], expression=pc.field("id").is_null() | (pc.field("id") > 5), partitioned=False)
# Manifests skipped by their column bounds (core/native/column_bounds.py): commits of different ranges, and DELETE entries
# (overwrite, delete, compact) in a manifest whose other files cannot match: the deleted file must stay deleted.
@example(ops=[("append", [{"id": 20}]), ("append", [{"id": 1}]), ("overwrite", [{"id": 2}])], expression=pc.field("id") == 20, partitioned=False)
@example(ops=[("append", [{"p": 0, "id": 20}, {"p": 1, "id": 1}]), ("delete", [{"p": 0}])], expression=pc.field("id") == 20, partitioned=True)
@example(
    ops=[("append", [{"id": 1, "value": math.nan}]), ("append", [{"id": 9, "name": LONG}]), ("append", [{"id": 2}]), ("compact", [{}])],
    expression=(pc.field("id") > 5) | (pc.field("name") == LONG), partitioned=False,
)
@example(ops=[("append", [{"id": 1, "day": dt.date(2026, 1, 1)}]), ("append", [{"id": 9, "ts": None}])], expression=pc.field("ts").is_valid(), partitioned=False)
def test_a_scan_skipping_files_by_statistics_is_the_unfiltered_scan_filtered_in_memory(tmp_path_factory, ops, expression, partitioned):
    # A tiny target file size: several files per partition per write, each with its own statistics.
    table = Table.create(
        str(tmp_path_factory.mktemp("t") / "t"), SCHEMA, partition_by=["p"] if partitioned else [],
        options={"target-file-size": "300", "manifest.merge-min-count": "3"},
    )
    for kind, rows in ops:
        data = pa.Table.from_pylist(rows, schema=SCHEMA)
        if kind == "append":
            table.append(data)
        elif kind == "overwrite":
            table.overwrite(data)
        elif kind == "delete" and partitioned:
            table.delete([{"p": rows[0]["p"]}])
        elif kind == "compact":
            table.compact(min_file_num=2, target_file_size="1mb")
    for snapshot in table.snapshots():
        everything = table.scan(snapshot_id=snapshot.id).to_arrow()
        expected = _sorted_rows(everything.filter(expression)) if everything.num_rows else []
        scan = table.scan(snapshot_id=snapshot.id, filter=expression)
        assert _sorted_rows(scan.to_arrow()) == expected, (snapshot.id, str(expression))
        assert {f.path for f in scan.files()} <= {f.path for f in table.scan(snapshot_id=snapshot.id).files()}


@pytest.fixture(scope="module")
def many_files(tmp_path_factory):
    """One write of 1200 rows in files of a few rows each: more files than the coarsest of several block levels (data_skipping._FANOUT),
    ``id`` rising with the row, other columns drawn from the domains (nulls and NaN included)."""
    import random

    rng = random.Random(15)
    rows = [
        {"p": rng.choice([0, 1]), **{c: rng.choice([None, *DOMAINS[c]]) for c in COLUMNS}, "id": i // 100 if rng.random() > 0.02 else None}
        for i in range(1200)
    ]
    table = Table.create(str(tmp_path_factory.mktemp("many") / "t"), SCHEMA, options={"target-file-size": "300"})
    table.append(pa.Table.from_pylist(rows, schema=SCHEMA))
    assert len(table.scan().files()) > 4 * 64
    return table, table.scan().to_arrow()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(expression=filters)
@example(expression=pc.field("id") == 7)
def test_files_judged_a_block_at_a_time_give_the_rows_of_in_memory_filtering(many_files, expression):
    table, everything = many_files
    assert _sorted_rows(table.scan(filter=expression).to_arrow()) == _sorted_rows(everything.filter(expression)), str(expression)


def _data_reads(table: Table, action) -> int:
    reads = []
    table.storage.on_operation = lambda kind, path: reads.append(path) if kind == "read" and path.startswith("data/") else None
    try:
        action()
    finally:
        table.storage.on_operation = None
    return len(reads)


def test_a_selective_filter_on_a_sorted_column_reads_only_the_files_that_may_match(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    for c in range(100):  # id increases over commits: each file holds ten consecutive ids
        table.append(pa.Table.from_pylist([{"p": 0, "id": 10 * c + i, "value": float(i)} for i in range(10)], schema=SCHEMA))
    scan = table.scan(filter=(pc.field("id") >= 420) & (pc.field("id") < 430))
    assert len(table.scan().files()) == 100 and len(scan.files()) == 1
    rows = []
    assert _data_reads(table, lambda: rows.extend(scan.to_arrow().column("id").to_pylist())) == 1
    assert rows == list(range(420, 430))
    # A NaN or null anywhere keeps the file for filters the bounds alone would rule out.
    table.append(pa.Table.from_pylist([{"p": 0, "id": 5000, "value": math.nan}, {"p": 0, "id": None}], schema=SCHEMA))
    assert len(table.scan(filter=pc.field("value") > 100.0).files()) == 1
    assert len(table.scan(filter=pc.field("id").is_null()).files()) == 1
    assert [r["id"] for r in table.scan(filter=pc.field("value").is_nan()).to_arrow().to_pylist()] == [5000]


def test_manifests_written_before_statistics_still_read(tmp_path):
    """A table whose manifests predate the ``stats`` column (the old five columns), and whose lists predate
    ``column_stats``: files have no statistics, none is skipped, and filtered scans give the right rows."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "1000"})
    for c in range(6):
        table.append(pa.Table.from_pylist([{"p": c % 2, "id": c, "value": c * 1.5}], schema=SCHEMA))
    assert len(table.scan(filter=pc.field("id") == 4).files()) == 1  # with statistics
    rewritten = 0
    for path in (tmp_path / "t" / "manifest").iterdir():
        if path.name.startswith("manifest-list-"):
            pq.write_table(pq.read_table(path).select(_LIST_SCHEMA_WITHOUT_COLUMN_STATS.names), path, compression="zstd")
            continue
        old = pq.read_table(path).select(_MANIFEST_SCHEMA_WITHOUT_STATS.names).cast(_MANIFEST_SCHEMA_WITHOUT_STATS)
        pq.write_table(old, path, compression="zstd")
        rewritten += 1
    assert rewritten == 6
    fresh = Table.open(uri)
    assert all(f.stats is None for f in fresh.scan().files())
    scan = fresh.scan(filter=pc.field("id") == 4)
    assert len(scan.files()) == 6  # no statistics to skip by
    assert [r["id"] for r in scan.to_arrow().to_pylist()] == [4]
    fresh.append(pa.Table.from_pylist([{"p": 0, "id": 10}], schema=SCHEMA))  # a merge of old and new entries reads too
    assert [r["id"] for r in Table.open(uri).scan(filter=pc.field("id") >= 4).to_arrow().to_pylist()] == [4, 5, 10]


def test_statistics_of_a_table():
    data = pa.table(
        {
            "p": [1, 1, 1],
            "name": ["b" * 70, "a", None],
            "value": [math.nan, 2.5, -1.0],
            "blob": [b"x", b"y", b"z"],
            "ts": pa.array([0, 5, None], pa.timestamp("ms")),
        }
    )
    stats = FileStats.decode(stats_of_table(data, skip=("p",)))
    assert stats.rows == 3 and set(stats.columns) == {"name", "value", "ts"}  # no binary bounds, no partition key
    assert stats.columns["name"] == ColumnStats(1, "a", None, False)  # a long upper bound is dropped
    assert stats.columns["value"] == ColumnStats(0, -1.0, 2.5, True)
    assert stats.columns["ts"] == ColumnStats(1, 0, 5, False)
    long_lower = FileStats.decode(stats_of_table(pa.table({"s": ["c" * 70, "d" * 70]})))
    assert long_lower.columns["s"] == ColumnStats(0, "c" * 64, None, False)  # a cut lower bound is still a lower bound


@pytest.mark.parametrize("stats", ["nope", '{"rows": 1}', '{"rows": 1, "columns": {"id": [0, [1], 2, false]}}', 42])
def test_commit_files_refuses_invalid_statistics(tmp_path, stats):
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    with pytest.raises(InvalidArgumentError):
        table.commit_files([DataFile("data/data-1.parquet", (), 1, 10, stats)])
    assert table.latest_snapshot() is None


def test_commit_files_keeps_statistics_given_and_files_without(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    known = FileStats(10, {"id": ColumnStats(0, 100, 109)}).encode()
    table.commit_files([DataFile("data/data-1.parquet", (), 10, 10, known), DataFile("data/data-2.parquet", (), 10, 10)])
    planned = Table.open(table.uri).scan(filter=pc.field("id") < 50).files()
    assert [f.path for f in planned] == ["data/data-2.parquet"]  # no statistics: always kept
    assert Table.open(table.uri).scan().files()[0].stats in (known, None)


def test_statistics_whose_bounds_do_not_parse_as_the_column_type_keep_only_their_file(tmp_path):
    """Statistics are parsed for all files at once with the columns' types (core/native/data_skipping.py): a file whose
    bounds are not of its column's type is kept (unknown), and its neighbours are still judged by theirs."""
    def data_file(name: str, lower, upper) -> DataFile:
        return DataFile(f"data/{name}.parquet", (), 10, 10, FileStats(10, {"id": ColumnStats(0, lower, upper)}).encode())

    ordered = [data_file(f"data-{i}", 10 * i, 10 * i + 9) for i in range(40)]
    odd = [data_file("strings", "a", "b"), data_file("floats", 1.5, 2.5), data_file("huge", 0, 2**70)]
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    table.commit_files(ordered[:20] + odd + ordered[20:])
    expected = {"data/data-12.parquet", *(f.path for f in odd)}
    fresh = Table.open(table.uri)
    assert {f.path for f in fresh.scan(filter=pc.field("id") == 125).files()} == expected
    # The same decision on DataFile objects (prune_files: the Spark data source's pushFilters).
    assert {f.path for f in prune_files(fresh.schema, fresh.scan().files(), pc.field("id") == 125)} == expected


@pytest.mark.parametrize("missing, expression", [("lower", pc.field("value") < 0), ("upper", pc.field("value") > 100)])
def test_a_block_with_a_file_missing_a_bound_has_that_bound_unknown(tmp_path, missing, expression):
    """A file whose bound is unknown (here an infinity: JSON has none) but whose column has no NaN sorts after the
    files with bounds (core/native/data_skipping.py), so it shares a block with some of them: the block's union must
    leave that bound unknown, not take the others' (which would skip the block, and the file, for this filter)."""
    bounded = [DataFile(f"data/data-{i}.parquet", (), 10, 10, FileStats(10, {"value": ColumnStats(0, 10.0, 20.0)}).encode()) for i in range(19)]
    infinite = ColumnStats(0, None, 15.0) if missing == "lower" else ColumnStats(0, 15.0, None)
    odd = DataFile("data/infinite.parquet", (), 10, 10, FileStats(10, {"value": infinite}).encode())
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    table.commit_files([odd, *bounded])
    assert [f.path for f in Table.open(table.uri).scan(filter=expression).files()] == [odd.path]
