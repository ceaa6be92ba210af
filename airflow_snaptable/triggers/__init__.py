"""Airflow triggers for snapshot tables (deferrable sensor, AssetWatcher)."""

from airflow_snaptable.triggers.snaptable import NewSnapshotTrigger, SnapshotEventTrigger

__all__ = ["NewSnapshotTrigger", "SnapshotEventTrigger"]
