"""Airflow hooks for snapshot tables."""

from airflow_snaptable.hooks.snaptable import SnapTableHook

__all__ = ["SnapTableHook"]
