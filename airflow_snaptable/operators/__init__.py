"""Airflow operators for snapshot table maintenance (each one runs one core action)."""

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
    SnapshotExpireOperator,
    SnapTableBaseOperator,
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
    "SnapTableBaseOperator",
    "SnapshotExpireOperator",
]
