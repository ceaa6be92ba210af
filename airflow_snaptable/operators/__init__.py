"""Airflow operators for snapshot table maintenance (each one runs one core action).

Every name carries the integration prefix (``SnapTableExpireSnapshotsOperator``), as Airflow's
providers name theirs. The 0.1 names without it were dropped before 1.0: one name per class.
"""

from airflow_snaptable.operators.snaptable import (
    SnapTableAdvanceConsumerOperator,
    SnapTableBaseOperator,
    SnapTableCleanOperator,
    SnapTableCompactOperator,
    SnapTableCreateSavepointOperator,
    SnapTableCreateTagOperator,
    SnapTableDeleteSavepointOperator,
    SnapTableDeleteTagOperator,
    SnapTableExpireConsumersOperator,
    SnapTableExpireDataOperator,
    SnapTableExpireSnapshotsOperator,
    SnapTableExpireTagsOperator,
    SnapTablePeriodicTagOperator,
    SnapTableRemoveOrphanFilesOperator,
    SnapTableRenameTagOperator,
    SnapTableRewriteManifestsOperator,
    SnapTableRestoreSavepointOperator,
    SnapTableRollbackOperator,
    SnapTablePurgeOperator,
    SnapTableUndoOperator,
)

__all__ = [
    "SnapTablePurgeOperator",
    "SnapTableUndoOperator",
    "SnapTableAdvanceConsumerOperator",
    "SnapTableBaseOperator",
    "SnapTableCleanOperator",
    "SnapTableCompactOperator",
    "SnapTableCreateSavepointOperator",
    "SnapTableCreateTagOperator",
    "SnapTableDeleteSavepointOperator",
    "SnapTableDeleteTagOperator",
    "SnapTableExpireConsumersOperator",
    "SnapTableExpireDataOperator",
    "SnapTableExpireSnapshotsOperator",
    "SnapTableExpireTagsOperator",
    "SnapTablePeriodicTagOperator",
    "SnapTableRemoveOrphanFilesOperator",
    "SnapTableRenameTagOperator",
    "SnapTableRewriteManifestsOperator",
    "SnapTableRestoreSavepointOperator",
    "SnapTableRollbackOperator",
]
