"""The data source on S3 (moto on 127.0.0.1), storage options, and the Hadoop path mapping of read_table."""

from __future__ import annotations

import json

import pytest

from airflow_snaptable.core import Table, UnsupportedStorageError
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.spark.fastread import hadoop_path
from tests.conftest import make_rows
from tests.spark.helpers import FORMAT, arrow_rows, rows_of

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def moto():
    from tests.s3_servers import make_server

    with make_server("moto") as server:
        yield server


def test_write_and_read_on_s3_with_storage_options_that_never_leak(spark, moto):
    from tests.s3_servers import SECRET_KEY

    uri = f"s3://{moto.create_bucket('spark')}/orders"
    options = json.dumps(moto.storage_options())
    df = spark.createDataFrame(make_rows(range(30)).to_pandas()).repartition(2)
    df.write.format(FORMAT).option("storage-options", options).option("partition-by", "p").mode("append").save(uri)
    table = Table.open(uri, moto.storage_options())
    assert [s.id for s in table.snapshots()] == [1]

    source = spark.read.format(FORMAT).option("storage-options", options)
    assert rows_of(source.load(uri).filter("p = 2")) == arrow_rows(table.scan(filter=[("p", "=", 2)]).to_arrow())
    with pytest.raises(Exception) as failure:
        spark.read.format(FORMAT).option("storage-options", options).option("snapshot-id", "9").load(uri).collect()
    assert "SnapshotNotFoundError" in str(failure.value) and SECRET_KEY not in str(failure.value)
    plan = source.load(uri).filter("p = 1")._jdf.queryExecution().toString()
    assert SECRET_KEY not in plan
    with pytest.raises(Exception) as failure:
        spark.read.format(FORMAT).option("storage-options", options[:-1]).load(uri).collect()
    assert "not valid JSON" in str(failure.value) and SECRET_KEY not in str(failure.value)


def test_hadoop_paths_for_read_table(tmp_path, moto):
    local = Storage.from_uri(str(tmp_path / "t"))
    assert hadoop_path(local, "data/p=1/x.parquet") == f"file://{tmp_path}/t/data/p=1/x.parquet"
    s3 = Storage.from_uri("s3://bucket/warehouse/t", moto.storage_options())
    assert hadoop_path(s3, "data/p=1/x.parquet") == "s3a://bucket/warehouse/t/data/p=1/x.parquet"
    with pytest.raises(UnsupportedStorageError, match="snaptable"):
        hadoop_path(Storage.from_uri("memory://t"), "data/x.parquet")
