"""Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point.

Checked against Airflow's ``provider_info.schema.json`` by tests/airflow/test_provider.py.
The connection form is declarative (``conn-fields`` / ``ui-field-behaviour``): hooks no
longer define widget methods.
"""

from __future__ import annotations

from airflow_snaptable import __version__

INTEGRATION = "Snapshot tables (snaptable)"
#: The package's documentation: its README on the package index (pyproject.toml's project.urls).
DOCUMENTATION_URL = "https://pypi.org/project/airflow-snaptable/"


S3_SECTION = "S3 (only for s3:// tables)"


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
                # This package's documentation (pyproject.toml's Documentation URL), not the formats' sites.
                "external-doc-url": DOCUMENTATION_URL,
                "tags": ["software"],
            }
        ],
        "operators": [{"integration-name": INTEGRATION, "python-modules": ["airflow_snaptable.operators.snaptable", "airflow_snaptable.operators.lake"]}],
        "sensors": [{"integration-name": INTEGRATION, "python-modules": ["airflow_snaptable.sensors.snaptable"]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": ["airflow_snaptable.hooks.snaptable"]}],
        "triggers": [{"integration-name": INTEGRATION, "python-modules": ["airflow_snaptable.triggers.snaptable"]}],
        "extra-links": ["airflow_snaptable.operators.links.TableTimelineLink", "airflow_snaptable.operators.links.LakeHealthLink"],
        "asset-uris": [
            {
                "schemes": ["snaptable"],
                "handler": "airflow_snaptable.assets.snaptable.sanitize_uri",
                "factory": "airflow_snaptable.assets.snaptable.create_asset",
            }
        ],
        "connection-types": [
            {
                "connection-type": "snaptable",
                "hook-class-name": "airflow_snaptable.hooks.snaptable.SnapTableHook",
                "hook-name": "Snapshot table (snaptable)",
                # The form: Airflow draws its standard fields first, so they are all hidden here and every
                # setting is an extra field, in this order: the table root and the catalog, then the S3
                # fields in their own section (the schema's "section"). Connections made with the CLI or a
                # variable may still use host / port / login / password (hooks/snaptable.py reads them).
                "conn-fields": {
                    "root": {
                        "label": "Table root / warehouse URI",
                        "description": "Tables given by name live under it, e.g. s3://bucket/warehouse or /data/tables",
                        "schema": {"type": ["string", "null"]},
                    },
                    "catalog": {
                        "label": "Iceberg catalog properties (JSON)",
                        "description": "For iceberg://<namespace>.<table> tables: pyiceberg load_catalog properties, "
                        'e.g. {"type": "rest", "uri": "https://catalog:8181", "credential": "..."}',
                        "schema": {"type": ["string", "null"]},
                    },
                    "storage_options": {
                        "label": "Storage options (JSON)",
                        "description": 'fsspec storage options, e.g. {"client_kwargs": {"verify": false}}',
                        "schema": {"type": ["string", "null"]},
                    },
                    "endpoint_url": {
                        "label": "S3 endpoint",
                        "description": "An S3-compatible endpoint, e.g. http://minio:9000 (empty: AWS)",
                        "schema": {"type": ["string", "null"], "section": S3_SECTION},
                    },
                    "region_name": {
                        "label": "S3 region",
                        "schema": {"type": ["string", "null"], "section": S3_SECTION},
                    },
                    "aws_access_key_id": {
                        "label": "S3 access key id",
                        "schema": {"type": ["string", "null"], "section": S3_SECTION},
                    },
                    "aws_secret_access_key": {
                        "label": "S3 secret access key",
                        "schema": {"type": ["string", "null"], "format": "password", "section": S3_SECTION},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "host", "port", "login", "password"],
                    "relabeling": {},
                    "placeholders": {
                        "root": "s3://bucket/warehouse",
                        "storage_options": "{}",
                        "catalog": '{"type": "sql", "uri": "sqlite:////data/catalog.db", "warehouse": "file:///data/wh"}',
                        "endpoint_url": "http://127.0.0.1:9000",
                        "aws_access_key_id": "AKIA...",
                    },
                },
            }
        ],
    }
