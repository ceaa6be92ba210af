"""Airflow sensors for snapshot tables."""

from airflow_snaptable.sensors.snaptable import NewSnapshotSensor, SnapTableNewSnapshotSensor

__all__ = ["NewSnapshotSensor", "SnapTableNewSnapshotSensor"]
