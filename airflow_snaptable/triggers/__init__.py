"""Airflow triggers for snapshot tables (deferrable sensor, AssetWatcher)."""

from airflow_snaptable.triggers.snaptable import (
    NewSnapshotTrigger,
    SnapshotEventTrigger,
    SnapTableNewSnapshotTrigger,
    SnapTableSnapshotEventTrigger,
)

__all__ = ["NewSnapshotTrigger", "SnapshotEventTrigger", "SnapTableNewSnapshotTrigger", "SnapTableSnapshotEventTrigger"]
