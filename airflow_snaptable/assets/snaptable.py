"""Assets: a snapshot table as an Airflow asset, ``snaptable://<filesystem>/<path>``.

The asset URI names where the table is, whatever its format:

- ``/data/orders`` (a local path)         -> ``snaptable://file/data/orders``
- ``s3://bucket/orders`` (also ``s3a://``) -> ``snaptable://s3/bucket/orders``
- ``gs://bucket/orders``, ``abfs://...``   -> ``snaptable://gs/bucket/orders``, ...
- ``iceberg://db.orders``                  -> ``snaptable://iceberg/db.orders``

so ``Asset(uri=table_asset_uri(table))`` is the same asset in the DAG that changes the table
and in the DAG scheduled on it. The operators that change a table attach what they did to
the asset event when the asset is among their outlets (operators/snaptable.py).
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING

from airflow_snaptable.core.errors import InvalidArgumentError

if TYPE_CHECKING:
    from airflow.sdk import Asset

SCHEME = "snaptable"
#: fsspec protocols that name the same filesystem.
_SAME_FILESYSTEM = {"s3a": "s3", "s3n": "s3", "local": "file", "gcs": "gs", "abfss": "abfs"}


def table_asset_uri(table_uri: str) -> str:
    """The asset URI of the table at ``table_uri`` (a full table URI, as the hook resolves it)."""
    if not isinstance(table_uri, str) or not table_uri.strip():
        raise InvalidArgumentError(f"a table URI is a non-empty string, got {table_uri!r}")
    table_uri = table_uri.strip().rstrip("/")
    if "://" in table_uri:
        protocol, rest = table_uri.split("://", 1)
    elif table_uri.startswith("/"):
        protocol, rest = "file", table_uri.lstrip("/")
    else:
        raise InvalidArgumentError(f"{table_uri!r} is not a full table URI (a URL or an absolute path)")
    protocol = _SAME_FILESYSTEM.get(protocol.lower(), protocol.lower())
    if protocol == "file":
        rest = rest.lstrip("/")
    if not rest:
        raise InvalidArgumentError(f"{table_uri!r} names no table")
    return f"{SCHEME}://{protocol}/{rest}"


def table_uri_of_asset(asset_uri: str) -> str:
    """The table URI an asset URI names (the inverse of :func:`table_asset_uri`)."""
    parts = urllib.parse.urlsplit(asset_uri)
    if parts.scheme != SCHEME or not parts.netloc or parts.path in ("", "/"):
        raise InvalidArgumentError(f"{asset_uri!r} is not a snaptable asset URI (snaptable://<filesystem>/<path>)")
    if parts.netloc == "file":
        return parts.path
    return f"{parts.netloc}://{parts.path.lstrip('/')}"


def sanitize_uri(uri: urllib.parse.SplitResult) -> urllib.parse.SplitResult:
    """Airflow's normalizer for ``snaptable://`` asset URIs (provider info ``asset-uris``)."""
    if not uri.netloc:
        raise ValueError("a snaptable asset URI names its filesystem: snaptable://<filesystem>/<path>")
    if uri.path in ("", "/"):
        raise ValueError("a snaptable asset URI names a table: snaptable://<filesystem>/<path>")
    netloc = uri.netloc.lower()
    return uri._replace(netloc=_SAME_FILESYSTEM.get(netloc, netloc))


def create_asset(table_uri: str, *, name: str | None = None, extra: dict | None = None) -> "Asset":
    """The asset of a table (provider info ``factory``): ``create_asset("s3://bucket/orders")``."""
    from airflow.sdk import Asset

    uri = table_asset_uri(table_uri)
    return Asset(uri=uri, name=name or uri, extra=extra or {})
