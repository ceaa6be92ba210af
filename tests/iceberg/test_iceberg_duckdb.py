"""DuckDB as a second Iceberg reader of compacted and manifest-rewritten tables.

pyiceberg is one reader; a table we rewrote must read alike in another engine that has its own
Avro and manifest code. DuckDB's ``iceberg`` extension (and the ``avro`` one it needs) comes from
PyPI as a package holding the extension binary (``duckdb-extension-iceberg``, pinned to the duckdb
version it was built for), loaded from that file: nothing is downloaded at run time, and automatic
extension installs are turned off so that a missing file fails here instead of reaching the network
(the ``duckdb_iceberg`` fixture, tests/iceberg/conftest.py).
"""

from __future__ import annotations

from airflow_snaptable.core import Table
from tests.iceberg.conftest import assert_exactly_reachable_left
from tests.iceberg.test_iceberg_compaction import FAR, URI, _live_files, _rows, _small_appends


def _duckdb_rows(connection, table, where: str = "") -> list:
    metadata = table.refresh().metadata_location
    return sorted(connection.execute(f"SELECT p, id FROM iceberg_scan(?) {where}", [metadata]).fetchall(), key=repr)


def _duckdb_snapshot(connection, table) -> tuple[int, str]:
    """The snapshot DuckDB reads (the newest by sequence number) and its operation."""
    metadata = table.refresh().metadata_location
    return connection.execute(
        "SELECT snapshot_id, manifest_list FROM iceberg_snapshots(?) ORDER BY sequence_number DESC LIMIT 1", [metadata],
    ).fetchone()


def test_duckdb_reads_the_rows_pyiceberg_reads_after_compact_rewrite_manifests_and_expiry(iceberg_env, duckdb_iceberg):
    table = _small_appends(iceberg_env, per_partition=6)  # two specs: identity(p), then unpartitioned
    before = _rows(table)
    assert _duckdb_rows(duckdb_iceberg, table) == before
    ours = Table.open(URI, catalog=iceberg_env.properties)

    compacted = ours.compact()
    table = table.refresh()
    assert compacted.added_files == 3 and len(_live_files(table)) == 3
    assert _duckdb_snapshot(duckdb_iceberg, table)[0] == compacted.snapshot_id == table.metadata.current_snapshot_id
    assert _duckdb_rows(duckdb_iceberg, table) == _rows(table) == before
    # DuckDB prunes by the partition values kept in the rewritten manifests.
    assert _duckdb_rows(duckdb_iceberg, table, "WHERE p = 'b'") == [("b", 100 + i) for i in range(6)]

    rewritten = ours.rewrite_manifests()
    table = table.refresh()
    assert rewritten.manifests_after == len(table.metadata.current_snapshot().manifests(table.io)) == 2
    assert _duckdb_snapshot(duckdb_iceberg, table)[0] == rewritten.snapshot_id
    assert _duckdb_rows(duckdb_iceberg, table) == _rows(table) == before
    assert _duckdb_rows(duckdb_iceberg, table, "WHERE p = 'a'") == [r for r in before if r[0] == "a"]

    # The small files are gone after an expiry; DuckDB reads none of them.
    assert ours.expire_snapshots(retain_min=1, older_than=FAR).deleted_data_files == 18
    assert_exactly_reachable_left(iceberg_env.table(), iceberg_env.location())
    assert _duckdb_rows(duckdb_iceberg, table) == _rows(table) == before


def test_duckdb_reads_a_compaction_of_a_date_partitioned_table(iceberg_env, duckdb_iceberg):
    """Partition values of a logical type (a date, held as days) written back into rewritten manifests."""
    import datetime

    import pyarrow as pa
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DateType, LongType, NestedField

    catalog = iceberg_env.catalog()
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.orders", schema=Schema(NestedField(1, "p", DateType(), required=False), NestedField(2, "id", LongType(), required=False)),
        partition_spec=PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "p")),
    )
    days = [datetime.date(2026, 1, 1), datetime.date(2026, 1, 2)]
    for i in range(5):
        table.append(pa.table({"p": days, "id": [i, 10 + i]}))
    before = _rows(table)
    ours = Table.open(URI, catalog=iceberg_env.properties)
    assert ours.compact().added_files == 2
    assert ours.rewrite_manifests().manifests_after == 1
    table = table.refresh()
    assert _duckdb_rows(duckdb_iceberg, table) == _rows(table) == before
    day_two = _duckdb_rows(duckdb_iceberg, table, "WHERE p = DATE '2026-01-02'")
    assert day_two == [(days[1], 10 + i) for i in range(5)]
