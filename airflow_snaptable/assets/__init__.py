"""Airflow assets for snapshot tables."""

from airflow_snaptable.assets.snaptable import create_asset, sanitize_uri, table_asset_uri, table_uri_of_asset

__all__ = ["create_asset", "sanitize_uri", "table_asset_uri", "table_uri_of_asset"]
