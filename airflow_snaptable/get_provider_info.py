"""Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from airflow_snaptable import __version__


def get_provider_info() -> dict:
    # package-name must be the canonical distribution name (dashes), or every
    # airflow command fails while loading providers.
    return {
        "package-name": "airflow-snaptable",
        "name": "Snapshot tables (snaptable)",
        "description": "Snapshot tables with tags, consumers, expiry and rollback, driven from Airflow and Spark.",
        "versions": [__version__],
    }
