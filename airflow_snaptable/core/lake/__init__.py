"""Maintaining a whole lake by policy: every table under a location or in a catalog, with each job's status.

- discovery.py: which tables a location holds, and their dotted names;
- policy.py: the policy document (defaults, namespaces, tables) and its precedence;
- jobs.py: a policy job on one table as one of the existing actions (core/actions/maintenance.py), after the
  table's own retention had its say;
- lease.py: one run per table at a time;
- status.py: each table's per-job status, stored with the table;
- run.py: :func:`maintain` and :func:`lake_status`; report.py: what they return.

docs/maintenance.md explains the policy, the precedence, the status and the command line.
"""

from airflow_snaptable.core.lake.discovery import LakeTable, discover
from airflow_snaptable.core.lake.policy import JOBS, Policy, ResolvedJob
from airflow_snaptable.core.lake.report import LakeReport, TableReport
from airflow_snaptable.core.lake.run import lake_status, list_tables, maintain, maintain_table, maintain_tables
from airflow_snaptable.core.lake.status import DISABLED, FAILED, NOT_YET_RUN, SUCCESSFUL

__all__ = [
    "DISABLED",
    "FAILED",
    "JOBS",
    "LakeReport",
    "LakeTable",
    "NOT_YET_RUN",
    "Policy",
    "ResolvedJob",
    "SUCCESSFUL",
    "TableReport",
    "discover",
    "lake_status",
    "list_tables",
    "maintain",
    "maintain_table",
    "maintain_tables",
]
