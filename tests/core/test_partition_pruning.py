"""Partition pruning (core/native/partition_pruning.py): a filtered scan reads only the manifests whose partition
bounds may match, and returns exactly what the unfiltered scan, filtered in memory, returns; lists written
before there were bounds still read (every manifest)."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from airflow_snaptable.core import Table
from airflow_snaptable.core.native.manifest import _LIST_SCHEMA_WITHOUT_STATS, manifest_path
from tests.conftest import SCHEMA

P_VALUES = [0, 1, 2, 3, None]


def rows(partition, ids) -> pa.Table:
    """Rows in one partition; ``value`` has NaN and nulls among ordinary numbers."""
    values = [math.nan if i % 7 == 0 else None if i % 5 == 0 else i * 0.5 for i in ids]
    return pa.table({"p": [partition] * len(ids), "id": ids, "name": [f"n{i}" for i in ids], "value": values}, schema=SCHEMA)


FILTERS = [
    pc.field("p") == 1,
    pc.field("p") != 2,
    pc.field("p") < 2,
    pc.field("p") >= 3,
    pc.field("p").isin([0, 3]),
    pc.field("p").is_null(),
    ~pc.field("p").is_null(),
    (pc.field("p") == 1) | (pc.field("id") > 40),
    (pc.field("p") == 2) & (pc.field("value") > 3.0),
    pc.field("value").is_nan(),
    pc.field("value").is_null(),
    pc.field("id") < 10,
    (pc.field("p") > 0) & ~pc.field("value").is_nan(),
]

operations = st.lists(
    st.tuples(
        st.sampled_from(["append", "append", "overwrite", "delete"]),
        st.sampled_from(P_VALUES),
        st.integers(1, 4),
        st.sampled_from(P_VALUES),  # an append also writes here: manifests spanning partitions (and nulls)
    ),
    min_size=1,
    max_size=12,
)


def _sorted_rows(table: pa.Table) -> list:
    """Rows by id, NaN spelled out (NaN != NaN would fail equal rows)."""
    spelled = [{k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in table.to_pylist()]
    return sorted(spelled, key=lambda r: r["id"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=operations, filter_index=st.integers(0, len(FILTERS) - 1), merge=st.sampled_from(["2", "50"]))
def test_a_filtered_scan_is_the_unfiltered_scan_filtered_in_memory(tmp_path_factory, ops, filter_index, merge):
    table = Table.create(str(tmp_path_factory.mktemp("t") / "t"), SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": merge})
    next_id = 0
    for kind, partition, n, other in ops:
        ids = list(range(next_id, next_id + n))
        next_id += n
        if kind == "append":
            table.append(pa.concat_tables([rows(partition, ids), rows(other, [next_id])]))
            next_id += 1
        elif kind == "overwrite":
            table.overwrite(rows(partition, ids), partitions=[{"p": partition}])
        else:
            table.delete([{"p": partition}])
    expression = FILTERS[filter_index]
    for snapshot in table.snapshots():
        everything = table.scan(snapshot_id=snapshot.id).to_arrow()
        expected = _sorted_rows(everything.filter(expression)) if everything.num_rows else []
        assert _sorted_rows(table.scan(snapshot_id=snapshot.id, filter=expression).to_arrow()) == expected, (snapshot.id, str(expression))


def _manifest_reads(table: Table, action) -> int:
    reads = []
    table.storage.on_operation = lambda kind, path: reads.append(path) if kind == "read" and path.startswith("manifest/manifest-") and "list" not in path else None
    try:
        action()
    finally:
        table.storage.on_operation = None
    return len(reads)


def test_a_one_partition_scan_reads_only_the_manifests_that_may_hold_it(tmp_path):
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "1000"})
    for i in range(20):
        table.append(rows(i % 10, [i]))  # one manifest per commit, one partition each
    fresh = Table.open(uri)  # nothing cached
    assert _manifest_reads(fresh, lambda: fresh.scan(filter=[("p", "=", 3)]).files()) == 2
    assert sorted(r["id"] for r in fresh.scan(filter=[("p", "=", 3)]).to_arrow().to_pylist()) == [3, 13]
    again = Table.open(uri)
    assert _manifest_reads(again, lambda: again.scan().files()) == 20


def test_lists_written_without_partition_bounds_still_read(tmp_path):
    """A table whose manifest lists predate the bounds (the old five columns): every manifest is read, and a
    filtered scan still gives the right rows."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "1000"})
    for i in range(6):
        table.append(rows(i % 3, [i]))
    latest = table.latest_snapshot()
    for name in (latest.base_manifest_list, latest.delta_manifest_list):
        path = f"{uri}/{manifest_path(name)}"
        old = pq.read_table(path).select(_LIST_SCHEMA_WITHOUT_STATS.names).cast(_LIST_SCHEMA_WITHOUT_STATS)
        pq.write_table(old, path, compression="zstd")
    fresh = Table.open(uri)
    assert _manifest_reads(fresh, lambda: fresh.scan(filter=[("p", "=", 1)]).files()) == 6
    assert sorted(r["id"] for r in fresh.scan(filter=[("p", "=", 1)]).to_arrow().to_pylist()) == [1, 4]


@pytest.mark.parametrize("bad", [[("nope", "=", 1)], [("p", "=", "text")]])
def test_a_filter_that_does_not_fit_is_a_typed_error(tmp_path, bad):
    from airflow_snaptable.core.errors import InvalidArgumentError

    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.append(rows(1, [1]))
    with pytest.raises(InvalidArgumentError):
        table.scan(filter=bad).to_arrow()


def test_unreadable_partition_bounds_in_a_list_are_a_typed_error(tmp_path):
    """A list entry whose ``partition_stats`` is not the bounds' JSON: CorruptMetadataError, never a stray exception."""
    from airflow_snaptable.core.errors import CorruptMetadataError
    from airflow_snaptable.core.native.manifest import _LIST_SCHEMA

    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "1000"})
    table.append(rows(1, [1]))
    path = f"{uri}/{manifest_path(table.latest_snapshot().delta_manifest_list)}"
    damaged = pq.read_table(path).cast(_LIST_SCHEMA)
    damaged = damaged.set_column(damaged.schema.get_field_index("partition_stats"), "partition_stats", pa.array(["{not json"], pa.string()))
    pq.write_table(damaged, path, compression="zstd")
    with pytest.raises(CorruptMetadataError):
        Table.open(uri).scan(filter=[("p", "=", 1)]).files()


#: Partition values that print alike or like a null somewhere (Iceberg's paths, Hive's, Python's str, our NULL directory).
LOOKALIKES = [None, "null", "None", "__NULL__", "", "%5F%5FNULL%5F%5F"]


def test_a_null_partition_and_strings_that_print_like_it_stay_apart(tmp_path):
    """Issue 34, item 8, on our tables: partitions are keyed by their typed values through appends, compaction,
    a delete and an overwrite of one of them; a scan by ``IS NULL`` or ``=`` returns exactly its rows."""
    schema = pa.schema([("p", pa.string()), ("id", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema, partition_by=["p"], options={"compaction.min.file-num": "2"})
    for n in range(3):
        table.append(pa.table({"p": LOOKALIKES, "id": [10 * n + k for k in range(len(LOOKALIKES))]}, schema=schema))

    def ids(value) -> list[int]:
        where = pc.field("p").is_null() if value is None else pc.field("p") == value
        return sorted(r["id"] for r in table.scan(filter=where).to_arrow().to_pylist())

    compacted = table.compact()
    assert compacted.summary["changed_partitions"] == len(LOOKALIKES)
    assert sorted(f.partition for f in table.scan().files() if f.partition != (None,)) == sorted((v,) for v in LOOKALIKES if v is not None)
    for k, value in enumerate(LOOKALIKES):
        assert ids(value) == [k, 10 + k, 20 + k], value
    table.delete([{"p": None}])
    table.overwrite(pa.table({"p": ["null"], "id": [99]}, schema=schema), partitions=[{"p": "null"}])
    assert ids(None) == [] and ids("null") == [99]
    for k, value in enumerate(LOOKALIKES[2:], start=2):
        assert ids(value) == [k, 10 + k, 20 + k], value
