"""Airflow triggers for snapshot tables (deferrable sensor, AssetWatcher)."""

from airflow_snaptable.triggers.snaptable import SnapTableNewSnapshotTrigger, SnapTableSnapshotEventTrigger

__all__ = ["SnapTableNewSnapshotTrigger", "SnapTableSnapshotEventTrigger"]
