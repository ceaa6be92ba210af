"""Airflow sensors for snapshot tables (``NewSnapshotSensor`` is a public name of the same class)."""

from airflow_snaptable.sensors.snaptable import NewSnapshotSensor, SnapTableNewSnapshotSensor

__all__ = ["SnapTableNewSnapshotSensor", "NewSnapshotSensor"]
