"""The snapshot table format and its lifecycle: pure Python on pyarrow, fsspec and pendulum.

Nothing here imports airflow or pyspark; the Spark job, the CLI and the Airflow operators are
front ends over these calls.

The public surface is what this module exports: ``Table``, every error, the values tables hand
back (snapshots, tags, consumers, results), and the actions (``actions``, ``run_action``).
Everything else is importable but internal: its place and names may change. The layers
(docs/architecture.md), lowest first:

- ``errors.py``: every error raised on purpose;
- ``arguments/``: strict argument types, names, times, table options;
- ``io/``: storage and what it stands on;
- ``native/``: the native table format, and the engine's vocabulary;
- ``lifecycle/``: the engine (expiry, tags, consumers, rollback, orphans, clean) and its store
  seam (``lifecycle/store.py``);
- ``write/``: the write path of native tables;
- ``formats/``: the native, Paimon and Iceberg stores;
- ``table.py``: ``Table``, the front door;
- ``actions/``, ``incremental.py``, ``timeline/``: built on ``Table``.
"""

from airflow_snaptable.core.errors import (
    ClockSkewError,
    CommitConflictError,
    CommitFailedError,
    ConsumerNotFoundError,
    CorruptMetadataError,
    InvalidArgumentError,
    InvalidNameError,
    InvalidOptionError,
    MissingMetadataError,
    ProtectedSnapshotError,
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
    UnsupportedMetadataError,
    UnsupportedOperationError,
    UnsupportedStorageError,
)
from airflow_snaptable.core.formats.native.verify import VerifyResult
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.changes import ChangeSet, StreamPlan, StreamScan
from airflow_snaptable.core.lifecycle.expiry.run import ExpireResult
from airflow_snaptable.core.lifecycle.orphans import OrphanResult
from airflow_snaptable.core.lifecycle.periodic_tags import PeriodicTagResult
from airflow_snaptable.core.lifecycle.rollback import RollbackResult
from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.native.manifest import DataFile, FileKind, ManifestEntry
from airflow_snaptable.core.native.scan import TableScan
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot
from airflow_snaptable.core.native.tags import Tag
from airflow_snaptable.core.table import Table
from airflow_snaptable.core import actions
from airflow_snaptable.core.actions import Action, action_from_json, build_action, run_action

__all__ = [
    # the front door
    "Table",
    # the actions
    "Action",
    "action_from_json",
    "actions",
    "build_action",
    "run_action",
    # values tables hand back
    "ChangeSet",
    "CommitKind",
    "Consumer",
    "DataFile",
    "ExpireResult",
    "FileKind",
    "ManifestEntry",
    "OrphanResult",
    "PeriodicTagResult",
    "RollbackResult",
    "Snapshot",
    "Storage",
    "StreamPlan",
    "StreamScan",
    "TableScan",
    "Tag",
    "VerifyResult",
    # errors
    "ClockSkewError",
    "CommitConflictError",
    "CommitFailedError",
    "ConsumerNotFoundError",
    "CorruptMetadataError",
    "InvalidArgumentError",
    "InvalidNameError",
    "InvalidOptionError",
    "MissingMetadataError",
    "ProtectedSnapshotError",
    "SchemaMismatchError",
    "SnapshotGapError",
    "SnapshotNotFoundError",
    "SnapTableError",
    "StorageError",
    "StreamPositionLostError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "TagAlreadyExistsError",
    "TagNotFoundError",
    "UnsupportedMetadataError",
    "UnsupportedOperationError",
    "UnsupportedStorageError",
]
