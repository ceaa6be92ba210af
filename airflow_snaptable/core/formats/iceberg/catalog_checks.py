"""Catalog properties checked before pyiceberg uses them, and the catalog's own failures typed.

pyiceberg hands on what its dependencies raise: SQLAlchemy's ``ArgumentError`` for a ``uri`` that
is no database URL, ``NoSuchModuleError`` for an unknown driver, ``OperationalError`` or
``DatabaseError`` for a SQLite database that cannot be opened; a ``TypeError`` or
``AttributeError`` for a ``py-io-impl`` that is no FileIO class. Each becomes
CatalogPropertyError, naming the property (a database URL's password is never shown). A SQLite
catalog file that does not exist is not created (SQLite and pyiceberg would create it, and its
tables): no table can be in it, so TableNotFoundError, and nothing on storage changes.
"""

from __future__ import annotations

import importlib
import os
import traceback

from airflow_snaptable.core.errors import CatalogPropertyError, StorageError, TableNotFoundError

#: The catalog properties that name a class, and the pyiceberg class each must be.
_CLASS_PROPERTIES = {"py-io-impl": ("pyiceberg.io", "FileIO"), "py-catalog-impl": ("pyiceberg.catalog", "Catalog")}


def check_implementations(uri: str, props: dict[str, str]) -> None:
    """``py-io-impl`` and ``py-catalog-impl`` name an importable subclass of pyiceberg's FileIO or Catalog."""
    for prop, (module_name, base_name) in _CLASS_PROPERTIES.items():
        value = props.get(prop)
        if value is None:
            continue
        module_path, _dot, class_name = value.rpartition(".")
        if not module_path or not class_name:
            raise CatalogPropertyError(f"{uri}: catalog property {prop!r} must be a full class path (module.Class), got {value!r}")
        try:
            found = getattr(importlib.import_module(module_path), class_name)
        except (ImportError, AttributeError) as exc:
            raise CatalogPropertyError(f"{uri}: catalog property {prop!r}: cannot import {value!r}: {exc}") from None
        base = getattr(importlib.import_module(module_name), base_name)
        if not (isinstance(found, type) and issubclass(found, base)):
            raise CatalogPropertyError(f"{uri}: catalog property {prop!r}: {value!r} is not a subclass of {module_name}.{base_name}")


def shown_url(raw: str) -> str:
    """A database URL for a message, without its password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(raw).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - unparsable: shown only if it cannot hold a password
        return repr(raw) if "@" not in raw else "(not shown: it may hold a password)"


def check_sql_uri(uri: str, raw: str | None) -> None:
    """The SQL catalog's ``uri``: a database URL of a known driver; for SQLite, a database file that exists."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    if not raw:
        raise CatalogPropertyError(f"{uri}: catalog property 'uri' is required by the SQL catalog (a database URL, e.g. sqlite:///catalog.db)")
    try:
        url = make_url(raw)
    except ArgumentError:
        raise CatalogPropertyError(f"{uri}: catalog property 'uri' is not a database URL (dialect+driver://...): {shown_url(raw)}") from None
    try:
        url.get_dialect()
    except NoSuchModuleError:
        raise CatalogPropertyError(f"{uri}: catalog property 'uri' names an unknown database driver {url.drivername!r}") from None
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:") or url.query.get("uri"):
        return
    path = os.path.abspath(url.database)
    if not os.path.isdir(os.path.dirname(path)):
        raise CatalogPropertyError(f"{uri}: catalog property 'uri': the directory of the SQLite database {path} does not exist")
    if os.path.isdir(path):
        raise CatalogPropertyError(f"{uri}: catalog property 'uri': {path} is a directory, not a SQLite database")
    if not os.path.exists(path):
        raise TableNotFoundError(f"{uri}: no such table: the SQLite catalog database {path} (catalog property 'uri') does not exist")


def catalog_failure(uri: str, props: dict[str, str], exc: Exception) -> Exception:
    """The typed error of a catalog that failed to start (pyiceberg's ``load_catalog``); ``exc`` itself when
    it is nothing this package can name."""
    module = type(exc).__module__
    raw = props.get("uri", "")
    if module.startswith("sqlalchemy"):
        from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

        if isinstance(exc, (ArgumentError, NoSuchModuleError)):
            return CatalogPropertyError(f"{uri}: catalog property 'uri' ({shown_url(raw)}): {exc}")
        cause = exc.orig if isinstance(exc, DBAPIError) else exc
        if raw.startswith("sqlite"):  # a local file: what fails is the property, not a server
            return CatalogPropertyError(f"{uri}: catalog property 'uri': cannot use the SQLite database {shown_url(raw)}: {cause}")
        return StorageError(f"{uri}: catalog property 'uri': cannot use the catalog database {shown_url(raw)}: {cause}")
    if module.startswith("pyiceberg"):
        # NoSuchPropertyException (a required property missing), NotInstalledError (a driver's package).
        return CatalogPropertyError(f"{uri}: the catalog's properties: {type(exc).__name__}: {exc}")
    if module.startswith(("requests", "botocore")):
        return StorageError(f"{uri}: cannot reach the catalog: {type(exc).__name__}: {exc}")
    return exc


def raised_making_file_io(exc: BaseException) -> bool:
    """Whether ``exc`` came from pyiceberg making the FileIO that ``py-io-impl`` names (its constructor,
    or a class that is no FileIO)."""
    return isinstance(exc, (TypeError, AttributeError)) and any(
        frame.name in ("_import_file_io", "load_file_io") for frame in traceback.extract_tb(exc.__traceback__)
    )
