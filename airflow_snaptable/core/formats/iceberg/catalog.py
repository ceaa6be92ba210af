"""Addressing an Apache Iceberg table: ``iceberg://<namespace>.<table>`` in a pyiceberg catalog.

The catalog properties are what ``pyiceberg.catalog.load_catalog`` takes (``{"type": "sql",
"uri": "sqlite:///c.db", "warehouse": "file:///wh"}``; REST, Glue, Hive by configuration).
Every failure to reach the table is a typed error before anything changes: a bad URI or
properties InvalidArgumentError (a wrong catalog property: CatalogPropertyError, naming it; see
catalog_checks.py), an unknown namespace or table TableNotFoundError, an unreachable catalog
StorageError.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from airflow_snaptable.core.errors import (
    CatalogPropertyError,
    InvalidArgumentError,
    StorageError,
    TableNotFoundError,
    UnsupportedOperationError,
)
from airflow_snaptable.core.formats.iceberg.catalog_checks import (
    catalog_failure,
    check_implementations,
    check_sql_uri,
    raised_making_file_io,
)

SCHEME = "iceberg://"
#: One identifier part: any name a catalog holds (spaces, any script: ``my table``, ``événements``) but
#: ``.`` (it separates the parts), ``/`` and ``\\`` (the name is a directory of the maintenance status) and
#: control characters. What a catalog itself refuses, it refuses with its own error.
_PART = re.compile(r"^[^./\\\x00-\x1f\x7f]+\Z")
PART_RULE = "each part non-empty, without '.', '/', '\\' or control characters"


def parse_identifier(uri: str) -> tuple[str, ...]:
    """``iceberg://db.orders`` -> ``("db", "orders")``; nested namespaces ``iceberg://a.b.t`` -> ``("a", "b", "t")``."""
    if not isinstance(uri, str) or not uri.startswith(SCHEME):
        raise InvalidArgumentError(f"not an Iceberg table URI (iceberg://<namespace>.<table>): {uri!r}")
    parts = tuple(uri[len(SCHEME):].split("."))
    if len(parts) < 2 or not all(_PART.match(p) for p in parts):
        raise InvalidArgumentError(
            f"{uri!r}: an Iceberg table is iceberg://<namespace>.<table>, {PART_RULE}"
        )
    return parts


def _check_properties(uri: str, properties: Any) -> dict[str, str]:
    if properties is None:
        raise InvalidArgumentError(
            f"{uri}: an Iceberg table needs its catalog's properties (--catalog '<json>', catalog=, or the connection's extra)"
        )
    if not isinstance(properties, Mapping) or not properties:
        raise InvalidArgumentError(f"{uri}: catalog properties must be a non-empty JSON object, got {properties!r}")
    bad = [k for k, v in properties.items() if not isinstance(k, str) or isinstance(v, (dict, list))]
    if bad:
        raise InvalidArgumentError(f"{uri}: catalog properties are flat string settings; not: {bad}")
    return {k: str(v) for k, v in properties.items()}


def _is_sql_catalog(props: dict[str, str]) -> bool:
    """pyiceberg's SQL catalog: ``type`` sql, or no type and a URI it infers the SQL catalog from."""
    kind = props.get("type")
    if kind is not None:
        return kind.lower() == "sql"
    return "py-catalog-impl" not in props and props.get("uri", "").startswith(("sqlite", "postgresql"))


#: Catalog properties under this prefix are this package's settings (the lake's status location,
#: core/lake/), never passed to the catalog.
PACKAGE_PROPERTY_PREFIX = "snaptable."


def load_catalog(where: str, properties: Any):
    """The pyiceberg catalog the properties describe; ``where`` names what needs it in errors."""
    try:
        from pyiceberg.catalog import load_catalog as pyiceberg_load_catalog
    except ImportError as exc:  # pragma: no cover - an install without the extra
        raise UnsupportedOperationError(
            f"{where}: Iceberg tables need pyiceberg: pip install 'airflow-snaptable[iceberg]'"
        ) from exc
    props = {k: v for k, v in _check_properties(where, properties).items() if not k.startswith(PACKAGE_PROPERTY_PREFIX)}
    # The catalog name matters to some catalogs (the SQL catalog keys its tables by it): pyiceberg's default.
    name = props.pop("name", None) or "default"
    check_implementations(where, props)
    if _is_sql_catalog(props):
        check_sql_uri(where, props.get("uri"))
    try:
        return pyiceberg_load_catalog(name, **props)
    except (ValueError, TypeError, NotImplementedError, KeyError) as exc:
        raise InvalidArgumentError(f"{where}: cannot load the catalog: {exc}") from exc
    except ImportError as exc:
        raise InvalidArgumentError(f"{where}: the catalog needs a module that is not installed: {exc}") from exc
    except OSError as exc:
        raise StorageError(f"{where}: cannot reach the catalog: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - a catalog's own failures (database, HTTP) arrive untyped
        raise catalog_failure(where, props, exc) from exc


def catalog_call(where: str, call: Callable[[], Any]) -> Any:
    """``call()`` on a catalog, its failures typed: a missing namespace or table TableNotFoundError, a
    catalog's own failure (database, HTTP) StorageError."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        return call()
    except (NoSuchTableError, NoSuchNamespaceError) as exc:
        raise TableNotFoundError(f"{where}: not in the catalog: {exc}") from exc
    except ValueError as exc:
        raise InvalidArgumentError(f"{where}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - a catalog's own failures (database, HTTP) arrive untyped
        if isinstance(exc, OSError) or type(exc).__module__.startswith(("sqlalchemy", "requests", "botocore", "pyiceberg")):
            raise StorageError(f"{where}: the catalog failed: {type(exc).__name__}: {exc}") from exc
        raise


def load_table(uri: str, properties: Any):
    """The pyiceberg catalog and table ``uri`` names (typed errors for everything that is not there)."""
    identifier = parse_identifier(uri)
    catalog = load_catalog(uri, properties)
    return catalog, reload_table(uri, catalog, identifier)


def reload_table(uri: str, catalog, identifier) -> Any:
    """The table as ``catalog`` has it now: on opening, and on every refresh of an open table (the catalog
    may have lost the table, or its database gone, since it was opened): typed errors, never raw ones."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    from pyiceberg.io import FileIO

    try:
        table = catalog.load_table(identifier)
    except (NoSuchTableError, NoSuchNamespaceError) as exc:
        raise TableNotFoundError(f"{uri}: no such table in the catalog: {exc}") from exc
    except ValueError as exc:
        raise InvalidArgumentError(f"{uri}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - a catalog's own failures (database, HTTP) arrive untyped
        if raised_making_file_io(exc):  # a table property py-io-impl overrides the catalog's
            raise CatalogPropertyError(f"{uri}: py-io-impl (a table or catalog property) cannot make a FileIO: {type(exc).__name__}: {exc}") from exc
        if isinstance(exc, OSError) or type(exc).__module__.startswith(("sqlalchemy", "requests", "botocore", "pyiceberg")):
            raise StorageError(f"{uri}: the catalog failed: {type(exc).__name__}: {exc}") from exc
        raise
    if not isinstance(table.io, FileIO):
        raise CatalogPropertyError(f"{uri}: py-io-impl (a table property) made a {type(table.io).__name__}, not a pyiceberg FileIO")
    return table
