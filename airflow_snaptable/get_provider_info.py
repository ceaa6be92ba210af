"""Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point.

Checked against Airflow's ``provider_info.schema.json`` by tests/airflow/test_provider.py.
The connection form is declarative (``conn-fields`` / ``ui-field-behaviour``): hooks no
longer define widget methods.
"""

from __future__ import annotations

from airflow_snaptable import __version__

INTEGRATION = "Snapshot tables (snaptable)"


def get_provider_info() -> dict:
    # package-name must be the canonical distribution name (dashes), or every
    # airflow command fails while loading providers.
    return {
        "package-name": "airflow-snaptable",
        "name": "Snapshot tables (snaptable)",
        "description": "Snapshot tables with tags, consumers, expiry and rollback, driven from Airflow and Spark.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://github.com/airflow-snaptable/airflow-snaptable",
                "tags": ["software"],
            }
        ],
        "operators": [{"integration-name": INTEGRATION, "python-modules": ["airflow_snaptable.operators.snaptable"]}],
        "sensors": [{"integration-name": INTEGRATION, "python-modules": ["airflow_snaptable.sensors.snaptable"]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": ["airflow_snaptable.hooks.snaptable"]}],
        "triggers": [{"integration-name": INTEGRATION, "python-modules": ["airflow_snaptable.triggers.snaptable"]}],
        "connection-types": [
            {
                "connection-type": "snaptable",
                "hook-class-name": "airflow_snaptable.hooks.snaptable.SnapTableHook",
                "hook-name": "Snapshot table (snaptable)",
                "conn-fields": {
                    "root": {
                        "label": "Table root / warehouse URI",
                        "description": "Tables given by name live under it, e.g. s3://bucket/warehouse or /data/tables",
                        "schema": {"type": ["string", "null"]},
                    },
                    "storage_options": {
                        "label": "Storage options (JSON)",
                        "description": 'fsspec storage options, e.g. {"client_kwargs": {"verify": false}}',
                        "schema": {"type": ["string", "null"]},
                    },
                    "endpoint_url": {
                        "label": "S3 endpoint URL",
                        "description": "S3-compatible endpoint (alternative to Host), e.g. http://minio:9000",
                        "schema": {"type": ["string", "null"]},
                    },
                    "region_name": {
                        "label": "S3 region",
                        "schema": {"type": ["string", "null"]},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema"],
                    "relabeling": {
                        "host": "S3 endpoint (optional)",
                        "port": "S3 endpoint port (optional)",
                        "login": "S3 access key id (optional)",
                        "password": "S3 secret access key (optional)",
                    },
                    "placeholders": {
                        "host": "http://127.0.0.1:9000 (empty: AWS)",
                        "login": "AKIA...",
                        "root": "s3://bucket/warehouse",
                        "storage_options": "{}",
                    },
                },
            }
        ],
    }
