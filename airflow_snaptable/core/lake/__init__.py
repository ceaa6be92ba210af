"""Maintaining a whole lake by policy: every table under a location or in a catalog, with each job's status.

- discovery.py: which tables a location holds, and their dotted names.
"""

from airflow_snaptable.core.lake.discovery import LakeTable, discover

__all__ = ["LakeTable", "discover"]
