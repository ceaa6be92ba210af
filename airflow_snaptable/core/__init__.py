"""The snapshot table format: pure Python on pyarrow, fsspec and pendulum.

Nothing here imports airflow or pyspark; the Spark job, the CLI and the Airflow
operators are front ends over these calls.
"""

from airflow_snaptable.core.errors import (
    ProtectedSnapshotError,
    UnsupportedOperationError,
    ClockSkewError,
    CommitConflictError,
    CommitFailedError,
    ConsumerNotFoundError,
    CorruptMetadataError,
    InvalidArgumentError,
    InvalidNameError,
    InvalidOptionError,
    SchemaMismatchError,
    SnapshotGapError,
    SnapshotNotFoundError,
    SnapTableError,
    StorageError,
    StreamPositionLostError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
    UnsupportedStorageError,
)
from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.lifecycle.expiry.run import ExpireResult
from airflow_snaptable.core.lifecycle.changes import ChangeSet, StreamPlan, StreamScan
from airflow_snaptable.core.native.manifest import DataFile, FileKind, ManifestEntry
from airflow_snaptable.core.lifecycle.orphans import OrphanResult
from airflow_snaptable.core.lifecycle.periodic_tags import PeriodicTagResult
from airflow_snaptable.core.lifecycle.rollback import RollbackResult
from airflow_snaptable.core.native.scan import TableScan
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.table import Table
from airflow_snaptable.core.native.tags import Tag
from airflow_snaptable.core.formats.native.verify import VerifyResult

__all__ = [
    "ProtectedSnapshotError",
    "UnsupportedOperationError",
    "ChangeSet",
    "Consumer",
    "ExpireResult",
    "OrphanResult",
    "PeriodicTagResult",
    "RollbackResult",
    "Tag",
    "VerifyResult",
    "ClockSkewError",
    "CommitConflictError",
    "CommitFailedError",
    "CommitKind",
    "ConsumerNotFoundError",
    "CorruptMetadataError",
    "DataFile",
    "FileKind",
    "InvalidArgumentError",
    "InvalidNameError",
    "InvalidOptionError",
    "ManifestEntry",
    "SchemaMismatchError",
    "SnapTableError",
    "Snapshot",
    "SnapshotGapError",
    "SnapshotNotFoundError",
    "Storage",
    "StorageError",
    "StreamPlan",
    "StreamPositionLostError",
    "StreamScan",
    "Table",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "TableScan",
    "TagAlreadyExistsError",
    "TagNotFoundError",
    "UnsupportedStorageError",
]
