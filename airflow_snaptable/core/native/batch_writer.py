"""Writing a stream of record batches into new data files, with bounded memory.

The Spark data source's write tasks get their rows as a stream of small Arrow
batches (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows each, 10,000 by
default). Each batch is split by partition as it arrives (a small sort, no Python
object per row), and the pieces are buffered per partition; when the buffered
rows reach the target file size, every partition's rows are written as data
files, the partitions concurrently.
"""

from __future__ import annotations

import pyarrow as pa

from airflow_snaptable.core.io.pool import map_io
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.native.data_files import split_by_partition, write_partition_files


class PartitionedBatchWriter:
    """Buffers conformed batches by partition and writes them as data files (names never reused).

    ``written`` lists every file written so far, so that a failing caller can
    delete them: none of them is part of a snapshot until the caller commits them.
    """

    def __init__(self, storage: Storage, schema: TableSchema, target_file_size: int, compression: str):
        """:param storage: the table's storage.
        :param schema: the table schema; batches must conform to it (:meth:`TableSchema.conform`).
        :param target_file_size: buffered Arrow bytes that trigger writing (files come out at or below it).
        :param compression: Parquet codec (option ``file.compression``).
        """
        self.storage = storage
        self.schema = schema
        self.target_file_size = target_file_size
        self.compression = compression
        self.written: list[DataFile] = []
        self._pieces: dict[tuple, list[pa.Table]] = {}
        self._buffered_bytes = 0

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Buffer the rows of ``batch`` (any schema :meth:`TableSchema.conform` accepts); write if the buffer is full.

        :raises SchemaMismatchError: the batch does not conform (nothing of it is buffered).
        :raises InvalidArgumentError: a partition value cannot be a directory name.
        """
        if batch.num_rows == 0:
            return
        rows = self.schema.conform(pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch)
        groups = split_by_partition(rows, self.schema)
        for partition, _group in groups:
            if partition not in self._pieces:
                self.schema.partition_dir(partition)  # a bad value fails before anything of it is written
        for partition, group in groups:
            self._pieces.setdefault(partition, []).append(group)
        self._buffered_bytes += rows.nbytes
        if self._buffered_bytes >= self.target_file_size:
            self.flush()

    def flush(self) -> None:
        """Write every buffered row now."""
        if not self._pieces:
            return
        groups = [(partition, pa.concat_tables(pieces)) for partition, pieces in self._pieces.items()]
        groups.sort(key=lambda item: tuple((v is None, str(v)) for v in item[0]))
        self._pieces, self._buffered_bytes = {}, 0

        def write(group: tuple[tuple, pa.Table]) -> None:
            files = write_partition_files(self.storage, self.schema, group[0], group[1], self.target_file_size, self.compression)
            self.written.extend(files)  # at once: a failure in another partition must not hide these from cleanup

        # Partitions concurrently: each file costs an fsync (local) or a round trip (S3); encoding releases the GIL.
        map_io(write, groups)

    def finish(self) -> list[DataFile]:
        """Write what is left; return every file written."""
        self.flush()
        return self.written
