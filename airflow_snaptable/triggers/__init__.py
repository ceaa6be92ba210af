"""Airflow triggers for snapshot tables (deferrable sensor, AssetWatcher); the short names are public
names of the same classes."""

from airflow_snaptable.triggers.snaptable import (
    NewSnapshotTrigger,
    SnapshotEventTrigger,
    SnapTableNewSnapshotTrigger,
    SnapTableSnapshotEventTrigger,
)

__all__ = ["SnapTableNewSnapshotTrigger", "SnapTableSnapshotEventTrigger", "NewSnapshotTrigger", "SnapshotEventTrigger"]
