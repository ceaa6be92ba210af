"""Maintaining a whole lake by policy: every table under a location or in a catalog, with each job's status.

- discovery.py: which tables a location holds, and their dotted names;
- policy.py: the policy document (defaults, namespaces, tables) and its precedence.
"""

from airflow_snaptable.core.lake.discovery import LakeTable, discover
from airflow_snaptable.core.lake.policy import JOBS, Policy, ResolvedJob

__all__ = ["JOBS", "LakeTable", "Policy", "ResolvedJob", "discover"]
