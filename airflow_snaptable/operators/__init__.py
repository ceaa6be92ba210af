"""Airflow operators for snapshot table maintenance (each one runs one core action).

Names carry the integration prefix (``SnapTableExpireSnapshotsOperator``); the names without
it (``SnapshotExpireOperator``) are the same classes, kept for existing DAGs.
"""

from airflow_snaptable.operators.snaptable import (
    AdvanceConsumerOperator,
    CompactOperator,
    CreateTagOperator,
    DeleteTagOperator,
    ExpireConsumersOperator,
    ExpireTagsOperator,
    PeriodicTagOperator,
    RemoveOrphanFilesOperator,
    RollbackOperator,
    SnapTableAdvanceConsumerOperator,
    SnapTableBaseOperator,
    SnapTableCompactOperator,
    SnapTableCreateTagOperator,
    SnapTableDeleteTagOperator,
    SnapTableExpireConsumersOperator,
    SnapTableExpireSnapshotsOperator,
    SnapTableExpireTagsOperator,
    SnapTablePeriodicTagOperator,
    SnapTableRemoveOrphanFilesOperator,
    SnapTableRenameTagOperator,
    SnapTableRollbackOperator,
    SnapshotExpireOperator,
)

__all__ = [
    "AdvanceConsumerOperator",
    "CompactOperator",
    "CreateTagOperator",
    "DeleteTagOperator",
    "ExpireConsumersOperator",
    "ExpireTagsOperator",
    "PeriodicTagOperator",
    "RemoveOrphanFilesOperator",
    "RollbackOperator",
    "SnapTableAdvanceConsumerOperator",
    "SnapTableBaseOperator",
    "SnapTableCompactOperator",
    "SnapTableCreateTagOperator",
    "SnapTableDeleteTagOperator",
    "SnapTableExpireConsumersOperator",
    "SnapTableExpireSnapshotsOperator",
    "SnapTableExpireTagsOperator",
    "SnapTablePeriodicTagOperator",
    "SnapTableRemoveOrphanFilesOperator",
    "SnapTableRenameTagOperator",
    "SnapTableRollbackOperator",
    "SnapshotExpireOperator",
]
