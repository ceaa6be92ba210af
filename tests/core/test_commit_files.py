"""Table.commit_files: committing data files written beforehand (the Spark writer's path), and its checks."""

from __future__ import annotations

import os
from dataclasses import replace

import pyarrow as pa
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import (
    CommitConflictError,
    InvalidArgumentError,
    SchemaMismatchError,
    SnapTableError,
)
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.native.snapshot import CommitKind
from airflow_snaptable.core.native.data_files import split_by_partition, write_partition_files
from tests.conftest import SCHEMA, make_rows, sorted_ids


def write_files(table: Table, rows: pa.Table) -> list[DataFile]:
    """What a Spark task does: core's writer, no commit."""
    schema = table.schema
    files = []
    for partition, group in split_by_partition(schema.conform(rows), schema):
        files += write_partition_files(table.storage, schema, partition, group, schema.table_options.get("target-file-size"), "zstd")
    return files


def files_on_disk(uri: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), uri) for d, _dirs, names in os.walk(uri) for n in names}


def assert_clean(table: Table) -> None:
    result = table.verify()
    assert result.missing_files == [] and result.unreferenced_files == [], result


def test_append_commits_the_given_files_as_one_snapshot(table):
    files = write_files(table, make_rows(range(12)))
    snapshot = table.commit_files(files, summary={"engine": "spark", "job": 7})
    assert snapshot.summary["engine"] == "spark" and snapshot.summary["job"] == 7
    assert snapshot.summary["added_files"] == len(files)
    assert snapshot.id == 1 and snapshot.commit_kind is CommitKind.APPEND
    assert sorted(f.path for f in table.scan().files()) == sorted(f.path for f in files)
    assert sorted_ids(table.scan().to_arrow()) == list(range(12))
    more = write_files(table, make_rows(range(12, 15)))
    assert table.commit_files(more, base_snapshot_id=1).id == 2
    assert sorted_ids(table.scan().to_arrow()) == list(range(15))
    assert_clean(table)


def test_overwrite_replaces_the_table_or_only_the_given_partitions(table):
    table.append(make_rows(range(30)))  # p = 0, 1, 2
    only_p2 = write_files(table, make_rows([101, 104], partitions=3))  # ids % 3 == 2
    snapshot = table.commit_files(only_p2, mode="overwrite", partitions=[{"p": 2}], base_snapshot_id=1)
    assert snapshot.commit_kind is CommitKind.OVERWRITE
    assert sorted(f.partition for f in table.changes(1, 2).deleted_files) == [(2,)]
    assert sorted_ids(table.scan().to_arrow()) == sorted([i for i in range(30) if i % 3 != 2] + [101, 104])

    everything = write_files(table, make_rows([7]))
    table.commit_files(everything, mode="overwrite")
    assert sorted_ids(table.scan().to_arrow()) == [7]
    table.expire_snapshots(retain_min=1, retain_max=1)
    assert_clean(table)


def test_an_overwrite_conflicts_with_a_change_to_its_partitions_after_its_base(table):
    table.append(make_rows(range(30)))
    written = write_files(table, make_rows([101]))  # p = 2, written against snapshot 1
    table.overwrite(make_rows([200]), partitions=[{"p": 2}])  # concurrent: snapshot 2 changes p = 2
    with pytest.raises(CommitConflictError):
        table.commit_files(written, mode="overwrite", partitions=[{"p": 2}], base_snapshot_id=1)
    # a change to another partition does not conflict
    table.append(make_rows([0]))  # p = 0: snapshot 3
    assert table.commit_files(written, mode="overwrite", partitions=[{"p": 2}], base_snapshot_id=2).id == 4
    assert [r for r in table.scan().to_arrow().to_pylist() if r["p"] == 2] == make_rows([101]).to_pylist()


def test_base_zero_is_the_empty_table_and_an_expired_base_conflicts_only_for_overwrites(table):
    written = write_files(table, make_rows([5]))
    table.append(make_rows(range(3)))  # committed while "the job" ran on the empty table
    with pytest.raises(CommitConflictError):
        table.commit_files(written, mode="overwrite", base_snapshot_id=0)
    for i in range(3):
        table.append(make_rows([10 + i]))
    table.expire_snapshots(retain_min=1, retain_max=1)  # snapshot 1 is gone
    with pytest.raises(CommitConflictError, match="expired"):
        table.commit_files(written, mode="overwrite", base_snapshot_id=1)
    assert table.commit_files(written, base_snapshot_id=1).commit_kind is CommitKind.APPEND  # appends never conflict
    assert sorted_ids(table.scan().to_arrow()) == [0, 1, 2, 5, 10, 11, 12]


def test_a_retry_with_the_same_commit_identifier_returns_the_first_snapshot(table):
    first = table.commit_files(write_files(table, make_rows(range(3))), commit_user="job", commit_identifier=7)
    retry_files = write_files(table, make_rows(range(3)))
    again = table.commit_files(retry_files, commit_user="job", commit_identifier=7)
    assert again.id == first.id and [s.id for s in table.snapshots()] == [1]
    assert not set(f.path for f in retry_files) & set(f.path for f in table.scan().files())  # the caller's to delete
    with pytest.raises(InvalidArgumentError):
        table.commit_files([], commit_identifier=8)  # identifiers need a user


def test_a_retried_overwrite_returns_its_snapshot_even_after_its_base_expired(table):
    table.append(make_rows(range(3)))
    first = table.commit_files(write_files(table, make_rows([4])), mode="overwrite", base_snapshot_id=1,
                               commit_user="job", commit_identifier=1)
    table.append(make_rows([9]))
    table.append(make_rows([10]))
    table.expire_snapshots(retain_min=3, retain_max=3)  # snapshot 1, the base, is gone; 2-4 stay
    retry = write_files(table, make_rows([4]))
    again = table.commit_files(retry, mode="overwrite", base_snapshot_id=1, commit_user="job", commit_identifier=1)
    assert again.id == first.id == 2
    with pytest.raises(CommitConflictError, match="expired"):  # a new write against the expired base
        table.commit_files(retry, mode="overwrite", base_snapshot_id=1, commit_user="job", commit_identifier=2)
    assert [s.id for s in table.snapshots()] == [2, 3, 4]
    assert sorted_ids(table.scan().to_arrow()) == [4, 9, 10]


def test_commit_cost_does_not_grow_with_the_number_of_files(tmp_path):
    """Existence is not checked: committing 60 files costs the same storage operations as 3."""
    counts = []
    for writes in (1, 20):
        table = Table.create(str(tmp_path / f"t{writes}"), SCHEMA, partition_by=["p"])
        table.append(make_rows(range(3)))
        files = [f for i in range(writes) for f in write_files(table, make_rows(range(10 * i, 10 * i + 3)))]
        assert len(files) == 3 * writes
        table.storage.reset_counts()
        table.commit_files(files)
        counts.append(table.storage.snapshot_counts())
    assert counts[0] == counts[1]


def bad_inputs(table: Table, good: DataFile):
    p2 = f"data/p=2/{os.path.basename(good.path)}"
    return [
        (dict(added=[good], mode="upsert"), InvalidArgumentError),
        (dict(added=[good], partitions=[{"p": 2}]), InvalidArgumentError),  # partitions need overwrite
        (dict(added=[good], mode="overwrite", partitions=[{"q": 2}]), InvalidArgumentError),
        (dict(added=good), InvalidArgumentError),  # not a list
        (dict(added=[good.path]), InvalidArgumentError),
        (dict(added=[good, good]), InvalidArgumentError),
        (dict(added=[good], summary={"added_files": 0}), InvalidArgumentError),  # a standard key
        (dict(added=[good], summary={"engine": ["spark"]}), InvalidArgumentError),  # not a scalar
        (dict(added=[good], summary="engine=spark"), InvalidArgumentError),
        (dict(added=[replace(good, path="manifest/x.parquet")]), InvalidArgumentError),
        (dict(added=[replace(good, path="data/p=2/../../schema/x")]), InvalidArgumentError),
        (dict(added=[replace(good, path="/tmp/data/p=2/x.parquet")]), InvalidArgumentError),
        (dict(added=[replace(good, path="data/x.parquet")]), InvalidArgumentError),  # not in a partition directory
        (dict(added=[replace(good, path=p2.replace("p=2", "p=1"))]), SchemaMismatchError),  # directory of another partition
        (dict(added=[replace(good, partition=(2, 0))]), SchemaMismatchError),
        (dict(added=[replace(good, partition=("2",))]), SchemaMismatchError),  # a string where p is an int
        (dict(added=[replace(good, file_size=-1)]), InvalidArgumentError),
        (dict(added=[replace(good, record_count=True)]), InvalidArgumentError),
        (dict(added=[good], mode="overwrite", partitions=[{"p": 0}]), InvalidArgumentError),  # outside the partitions
        (dict(added=[good], base_snapshot_id=-1), InvalidArgumentError),
        (dict(added=[good], base_snapshot_id="1"), InvalidArgumentError),
    ]


def test_bad_input_raises_a_typed_error_and_writes_nothing(table):
    table.append(make_rows(range(6)))
    (good,) = write_files(table, make_rows([2]))
    assert good.partition == (2,)
    before = files_on_disk(table.uri)
    for arguments, error in bad_inputs(table, good):
        with pytest.raises(error) as raised:
            table.commit_files(**arguments)
        assert isinstance(raised.value, SnapTableError)
        assert files_on_disk(table.uri) == before, arguments
    assert [s.id for s in table.snapshots()] == [1]
    assert table.commit_files([good], mode="overwrite", partitions=[{"p": 2}]).id == 2  # the good file is fine


def test_unpartitioned_tables_take_files_directly_under_data(tmp_path):
    table = Table.create(str(tmp_path / "flat"), SCHEMA)
    files = write_files(table, make_rows(range(4)))
    assert all(f.path.count("/") == 1 for f in files)
    table.commit_files(files)
    with pytest.raises(InvalidArgumentError):
        table.commit_files([replace(files[0], path="data/p=1/" + os.path.basename(files[0].path))])
    assert sorted_ids(table.scan().to_arrow()) == list(range(4))
