"""What a Spark read task gets and does: a partition of a table's data files, and the reader of them.

Shared by batch reads (:mod:`airflow_snaptable.spark.datasource`) and streaming reads
(:mod:`airflow_snaptable.spark.streaming`). Both objects are pickled into every task, so
they hold only what the task needs to open the table's storage and read.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from airflow_snaptable.core.errors import SchemaMismatchError
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.native.scan import read_files
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.spark._common import arrow_schema_for, cast_batch


class FilesPartition(InputPartition):
    """One read task: some data files of the table (paths relative to its root)."""

    def __init__(self, files: list[DataFile]):
        super().__init__(None)
        self.files = files

    def __repr__(self) -> str:
        return f"FilesPartition({len(self.files)} files)"


class TableFiles:
    """What every reader task needs to read files of one table; small and picklable."""

    def __init__(self, uri: str, storage_options: dict | None, table_schema: TableSchema, spark_schema):
        self.uri = uri
        self.storage_options = storage_options
        self.table_schema = table_schema
        self.spark_schema = spark_schema
        names = [f.name for f in spark_schema.fields]
        unknown = [n for n in names if n not in table_schema.arrow_schema.names]
        if unknown:
            raise SchemaMismatchError(f"columns {unknown} are not in the table ({table_schema.arrow_schema.names})")
        self.columns = names

    def read(self, files: list[DataFile]) -> Iterator[pa.RecordBatch]:
        if not files:
            return
        storage = Storage.from_uri(self.uri, self.storage_options)
        target = arrow_schema_for(self.spark_schema)
        for batch in read_files(storage, self.table_schema, files, self.columns):
            if batch.num_rows:
                yield cast_batch(batch, target)
