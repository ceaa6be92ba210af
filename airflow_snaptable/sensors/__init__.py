"""Airflow sensors for snapshot tables."""

from airflow_snaptable.sensors.snaptable import NewSnapshotSensor

__all__ = ["NewSnapshotSensor"]
