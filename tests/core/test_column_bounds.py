"""Column bounds of manifests (core/native/column_bounds.py): a manifest list entry carries the union of its manifest's
file statistics, a filtered scan skips the manifests whose bounds cannot match unread, and the result is the
same as without skipping (the hypothesis test in tests/core/test_column_stats.py); lists written before
there were column bounds read and filter as before; unreadable bounds are CorruptMetadataError."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from airflow_snaptable.core import Table
from airflow_snaptable.core.native.column_bounds import _python_union, column_stats_of
from airflow_snaptable.core.native.column_stats import ColumnStats, FileStats
from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.native.manifest import _LIST_SCHEMA, _LIST_SCHEMA_WITHOUT_COLUMN_STATS, DataFile, FileKind, ManifestEntry, manifest_path

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("value", pa.float64())])


def entry(stats: FileStats | None, kind: FileKind = FileKind.ADD, name: str = "f") -> ManifestEntry:
    return ManifestEntry(kind, DataFile(f"data/{name}.parquet", (), 10, 10, None if stats is None else stats.encode()))


def united(*stats: FileStats | None) -> FileStats | None:
    text = column_stats_of([entry(s, name=str(i)) for i, s in enumerate(stats)])
    return None if text is None else FileStats.decode(text)


def test_the_union_of_files_statistics():
    a = FileStats(10, {"id": ColumnStats(0, 5, 9), "name": ColumnStats(2, "b", "d"), "value": ColumnStats(0, 1.5, 2.5)})
    b = FileStats(20, {"id": ColumnStats(3, -1, 4), "name": ColumnStats(0, "a", None), "value": ColumnStats(0, 0.5, 1.0, True)})
    both = united(a, b)
    assert both.rows == 30
    assert both.columns["id"] == ColumnStats(3, -1, 9, False)
    assert both.columns["name"] == ColumnStats(2, "a", None, False)  # a long string's dropped upper bound stays unknown
    assert both.columns["value"] == ColumnStats(0, 0.5, 2.5, True)  # a NaN in one file: the column is unknown (data_skipping)


def test_all_null_and_empty_files_count_as_null_and_keep_the_others_bounds():
    values = FileStats(10, {"id": ColumnStats(0, 5, 9)})
    all_null = FileStats(4, {"id": ColumnStats(4, None, None)})
    empty = FileStats(0, {"id": ColumnStats(0, None, None)})
    both = united(values, all_null)
    assert both.columns["id"] == ColumnStats(4, 5, 9) and both.rows == 14  # not all null, has nulls
    assert united(all_null, empty).columns["id"].null_count >= united(all_null, empty).rows  # all null
    with_empty = united(values, empty)
    assert 0 < with_empty.columns["id"].null_count < with_empty.rows  # an empty file may be judged "all null": so a null


def test_what_leaves_a_column_or_a_manifest_unknown():
    known = FileStats(10, {"id": ColumnStats(0, 5, 9), "name": ColumnStats(0, "a", "b")})
    # A file without statistics, or with unreadable ones: no bounds at all.
    assert united(known, None) is None
    assert column_stats_of([entry(known), ManifestEntry(FileKind.ADD, DataFile("data/x.parquet", (), 1, 1, "{oops"))]) is None
    assert column_stats_of([]) is None
    # A column one file has no statistics for: unknown (``nan``), its extremes kept (they must fail to parse where the file's would).
    partial = united(known, FileStats(10, {"id": ColumnStats(0, 1, 2)}))
    assert partial.columns["id"] == ColumnStats(0, 1, 9) and partial.columns["name"].has_nan
    # Bounds that would not parse alike (kinds mixed, non-finite, out-of-range counts): no bounds.
    assert united(known, FileStats(10, {"id": ColumnStats(0, "a", "b")})) is None
    assert united(known, FileStats(10, {"id": ColumnStats(0, True, True)})) is None
    infinite = '{"rows":10,"columns":{"id":{"nulls":0,"lower":0,"upper":Infinity,"nan":false}}}'  # Python's json reads it
    assert column_stats_of([entry(known), ManifestEntry(FileKind.ADD, DataFile("data/x.parquet", (), 1, 1, infinite))]) is None
    assert united(known, FileStats(10, {"id": ColumnStats(-1, 0, 1)})) is None
    assert united(known, FileStats(2**63, {"id": ColumnStats(0, 0, 1)})) is None
    # Ints and floats mixed are written as floats (they parse for a float column only, as the files' floats do).
    mixed = united(FileStats(1, {"value": ColumnStats(0, 1, 2)}), FileStats(1, {"value": ColumnStats(0, 0.5, 1.5)}))
    assert mixed.columns["value"] == ColumnStats(0, 0.5, 2.0) and isinstance(mixed.columns["value"].upper, float)
    # An out-of-range int is an extreme: the manifest's bounds do not parse where that file's do not.
    assert united(known, FileStats(1, {"id": ColumnStats(0, 0, 2**70)})).columns["id"].upper == 2**70


def test_delete_entries_count_too():
    kept = FileStats(10, {"id": ColumnStats(0, 5, 9)})
    gone = FileStats(10, {"id": ColumnStats(0, 100, 109)})
    text = column_stats_of([entry(kept), entry(gone, FileKind.DELETE, "g")])
    assert FileStats.decode(text).columns["id"] == ColumnStats(0, 5, 109)


def _manifest_reads(table: Table, action) -> int:
    reads = []
    table.storage.on_operation = lambda kind, rel: reads.append(rel) if kind == "read" and rel.startswith("manifest/manifest-") and not rel.startswith("manifest/manifest-list-") else None
    try:
        action()
    finally:
        table.storage.on_operation = None
    return len(reads)


def _ranged_table(uri: str) -> Table:
    """Ten commits, each of ids 100c .. 100c + 9 (one manifest each: merges only far later)."""
    table = Table.create(uri, SCHEMA, options={"manifest.merge-min-count": "1000"})
    for c in range(10):
        table.append(pa.table({"id": [100 * c + i for i in range(10)], "name": [f"n{c}"] * 10, "value": [float(c)] * 10}, schema=SCHEMA))
    return table


def test_a_manifest_whose_column_bounds_cannot_match_is_not_read(tmp_path):
    table = _ranged_table(str(tmp_path / "t"))
    fresh = Table.open(table.uri)  # no manifest cached
    rows = []
    assert _manifest_reads(fresh, lambda: rows.extend(fresh.scan(filter=(pc.field("id") >= 403) & (pc.field("id") < 406)).to_arrow()["id"].to_pylist())) == 1
    assert rows == [403, 404, 405]
    fresh = Table.open(table.uri)
    assert _manifest_reads(fresh, lambda: fresh.scan(filter=pc.field("name") == "n7").files()) == 1
    fresh = Table.open(table.uri)
    assert _manifest_reads(fresh, lambda: fresh.scan(filter=pc.field("id").is_null()).files()) == 0  # no nulls anywhere
    fresh = Table.open(table.uri)
    assert _manifest_reads(fresh, lambda: fresh.scan().files()) == 10
    # An overwrite's delta holds the DELETE entries of the old files and the new file: its bounds span both, so
    # a filter on an old value reads it and the deleted rows stay deleted.
    table.overwrite(pa.table({"id": [5000], "name": ["new"], "value": [1.0]}, schema=SCHEMA))
    fresh = Table.open(table.uri)
    assert fresh.scan(filter=pc.field("id") == 404).files() == []
    assert fresh.scan(filter=pc.field("id") == 5000).to_arrow()["id"].to_pylist() == [5000]


def test_lists_written_before_column_bounds_read_and_filter(tmp_path):
    """A table whose manifest lists have no ``column_stats`` column (the six-column form): every manifest is
    read, files are still skipped by their own statistics, and the rows are right; a new commit adds bounds."""
    uri = str(tmp_path / "t")
    _ranged_table(uri)
    rewritten = 0
    for path in (tmp_path / "t" / "manifest").iterdir():
        if path.name.startswith("manifest-list-"):
            pq.write_table(pq.read_table(path).select(_LIST_SCHEMA_WITHOUT_COLUMN_STATS.names), path, compression="zstd")
            rewritten += 1
    assert rewritten >= 10
    fresh = Table.open(uri)
    assert all(m.column_stats is None for m in fresh.manifest_io.read_list(fresh.latest_snapshot().base_manifest_list))
    rows = []
    assert _manifest_reads(fresh, lambda: rows.extend(fresh.scan(filter=pc.field("id") == 404).to_arrow()["id"].to_pylist())) == 10
    assert rows == [404] and len(fresh.scan(filter=pc.field("id") == 404).files()) == 1
    fresh.append(pa.table({"id": [2000], "name": ["x"], "value": [0.0]}, schema=SCHEMA))
    fresh = Table.open(uri)
    assert _manifest_reads(fresh, lambda: fresh.scan(filter=pc.field("id") == 404).files()) == 10  # the old ones (unknown), not the new
    assert fresh.scan(filter=pc.field("id") >= 900).to_arrow()["id"].to_pylist() == [900 + i for i in range(10)] + [2000]


@pytest.mark.parametrize("bad", ["{not json", '{"rows": "many", "columns": {}}', '{"rows": 1, "columns": {"id": [0, 1, 2, false]}}', "[]"])
def test_unreadable_column_bounds_in_a_list_are_a_typed_error(tmp_path, bad):
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, options={"manifest.merge-min-count": "1000"})
    table.append(pa.table({"id": [1], "name": ["a"], "value": [1.0]}, schema=SCHEMA))
    path = f"{uri}/{manifest_path(table.latest_snapshot().delta_manifest_list)}"
    damaged = pq.read_table(path).cast(_LIST_SCHEMA)
    damaged = damaged.set_column(damaged.schema.get_field_index("column_stats"), "column_stats", pa.array([bad], pa.string()))
    pq.write_table(damaged, path, compression="zstd")
    with pytest.raises(CorruptMetadataError):
        Table.open(uri).scan(filter=pc.field("id") == 1).files()
    assert len(Table.open(uri).scan().files()) == 1  # an unfiltered scan does not look at them


def _stats(**columns) -> str:
    return FileStats(10, {name: ColumnStats(*c) for name, c in columns.items()}).encode()


def test_a_deleted_file_stays_deleted_when_its_manifest_is_judged_on_more_columns_than_the_file(tmp_path):
    """The judgment must be monotone (core/native/data_skipping.py ``_conditions``): a file whose five filtered columns
    have nulls, overwritten by one without statistics for the first column. The overwrite's manifest (the
    file's DELETE entry) must not be ruled out on the fifth column while the file itself is judged on the first
    four only: the file would be planned although deleted."""
    schema = pa.schema([(c, pa.int64()) for c in "abcde"])
    table = Table.create(str(tmp_path / "t"), schema, options={"manifest.merge-min-count": "1000"})
    old = DataFile("data/old.parquet", (), 10, 10, _stats(**{c: (1, 0, 10) for c in "abcde"}))
    new = DataFile("data/new.parquet", (), 10, 10, _stats(**{c: (1, 0, 10) for c in "bcde"}))
    table.commit_files([old])
    table.commit_files([new], mode="overwrite")
    expression = (pc.field("a") < 100) & (pc.field("b") < 100) & (pc.field("c") < 100) & (pc.field("d") < 100) & (pc.field("e") > 1000)
    planned = {f.path for f in Table.open(table.uri).scan(filter=expression).files()}
    assert "data/old.parquet" not in planned


def test_a_deleted_file_whose_statistics_do_not_parse_stays_deleted(tmp_path):
    """A file whose bounds do not parse as its column's type is kept whatever the filter (unknown): the manifest
    holding its DELETE entry must not be ruled out either, also when another file there has no statistics for
    that column (the column is unknown in the manifest, but its bounds still fail to parse)."""
    schema = pa.schema([("a", pa.int64()), ("b", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema, options={"manifest.merge-min-count": "1000"})
    odd = DataFile("data/odd.parquet", (), 10, 10, _stats(a=(0, "x", "y"), b=(0, 0, 10)))
    new = DataFile("data/new.parquet", (), 10, 10, _stats(b=(0, 0, 10)))
    table.commit_files([odd])
    assert [f.path for f in Table.open(table.uri).scan(filter=(pc.field("a") < 5) & (pc.field("b") > 1000)).files()] == [odd.path]
    table.commit_files([new], mode="overwrite")
    planned = {f.path for f in Table.open(table.uri).scan(filter=(pc.field("a") < 5) & (pc.field("b") > 1000)).files()}
    assert planned <= {new.path}


def test_column_bounds_are_json_of_the_file_statistics_form(tmp_path):
    table = _ranged_table(str(tmp_path / "t"))
    metas = table.manifest_io.read_list(table.latest_snapshot().delta_manifest_list)
    doc = json.loads(metas[0].column_stats)
    assert doc["rows"] == 10 and doc["columns"]["id"] == {"nulls": 0, "lower": 900, "upper": 909, "nan": False}


_BOUNDS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([2**62, 2**70, -(2**63)]), st.sampled_from([-1.5, 0.0, -0.0, 2.0, 1e300]),
    st.sampled_from(["", "a", "b", "é", "2026-01-01", "x" * 70]),
)
_COLUMN = st.builds(ColumnStats, st.integers(0, 6), _BOUNDS, _BOUNDS, st.booleans())
_FILE = st.builds(FileStats, st.integers(0, 5), st.dictionaries(st.sampled_from(["a", "b", "c"]), _COLUMN, max_size=3))


@settings(max_examples=300, deadline=None)
@given(files=st.lists(_FILE, min_size=1, max_size=6), uniform=st.booleans())
def test_the_vectorised_union_is_the_per_file_union(files, uniform):
    """Arrow unites the statistics of a manifest's files column-wise (shapes it does not handle go to the per-file
    union, core/native/column_bounds.py): whenever it answers, its answer is the per-file union's."""
    if uniform:  # the usual case: every file with the same columns, of one kind each
        files = [FileStats(f.rows, {"a": ColumnStats(c.null_count, _int(c.lower), _int(c.upper), c.has_nan) for c in f.columns.values()}) for f in files]
    texts = [f.encode() for f in files]
    vectorised = column_stats_of([entry(f, name=str(i)) for i, f in enumerate(files)])
    per_file = _python_union(texts)
    assert (vectorised is None) == (per_file is None)
    if vectorised is not None:
        assert FileStats.decode(vectorised) == FileStats.decode(per_file)


def _int(value):
    return value if type(value) is int else None
