"""Which format a table URI names, and opening a table another engine writes through its store.

- ``iceberg://<namespace>.<table>``: an Apache Iceberg table in a pyiceberg catalog, whose
  properties (as ``pyiceberg.catalog.load_catalog`` takes them) come with the URI
  (core/formats/iceberg/).
- a directory (local path or fsspec URL) holding an Apache Paimon table: its
  ``schema/schema-<id>`` is Paimon's JSON (core/formats/paimon/).
- any other directory: this package's own format (core/table.py).
"""

from __future__ import annotations

from typing import Any, Callable

from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.store import FormatTable

ICEBERG_SCHEME = "iceberg://"


def is_iceberg_uri(uri: str) -> bool:
    return isinstance(uri, str) and uri.startswith(ICEBERG_SCHEME)


def open_foreign(
    uri: str, storage: Storage | None, catalog: dict[str, Any] | None, clock: Callable[[], int]
) -> Any:
    """The table at ``uri`` if another engine's format holds it, else None (this package's format):
    a FormatTable for a Paimon directory, an ``IcebergTable`` (core/formats/iceberg/table.py) for an
    ``iceberg://`` URI.

    ``storage`` is the directory's storage (None for a catalog URI); ``catalog`` the catalog
    properties of an ``iceberg://`` URI (an error for a directory: it has no catalog).
    """
    if is_iceberg_uri(uri):
        from airflow_snaptable.core.formats.iceberg import open_iceberg_table

        return open_iceberg_table(uri, catalog, clock)
    if catalog is not None:
        raise InvalidArgumentError(f"catalog properties are for iceberg:// table URIs, not for {uri!r}")
    if storage is None:
        return None
    from airflow_snaptable.core.formats.paimon import is_paimon_table, open_paimon_table

    if is_paimon_table(storage):
        return open_paimon_table(storage, clock)
    return None
