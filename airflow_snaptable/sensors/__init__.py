"""Airflow sensors for snapshot tables."""

from airflow_snaptable.sensors.snaptable import SnapTableNewSnapshotSensor

__all__ = ["SnapTableNewSnapshotSensor"]
