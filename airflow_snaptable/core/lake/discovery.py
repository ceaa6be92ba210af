"""Which tables a location holds, and their dotted names (docs/maintenance.md, "Locations").

A location is

- a directory or object-store prefix (a local path or an fsspec URL): this package's tables
  anywhere below it, and Apache Paimon warehouses (``<db>.db/<table>``) among them;
- ``iceberg://`` (every namespace of a catalog) or ``iceberg://<namespace>`` (that namespace and
  the namespaces below it), with the catalog's properties as everywhere else.

Names: a table's name is its path below the location with ``/`` read as ``.``, and a Paimon
database directory ``<db>.db`` read as ``<db>``: ``LOCATION/sales/orders`` (ours) is
``sales.orders``, ``LOCATION/pm.db/clicks`` (Paimon) ``pm.clicks``; an Iceberg table is
``<namespace>.<table>``. Its namespace is everything before the last dot.

Cost: the walk is streamed (tables are yielded as they are found, one directory listing at a
time) and bounded in depth. A directory is a table when it holds ``schema/schema-<n>`` (the
layout this package and Paimon share); its format comes from that schema file, the one read per
table. No table's history is read, and the walk never descends into a table, nor into hidden
(``.``, ``_``) directories or another engine's table (``metadata/``: Iceberg).
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Iterator

from airflow_snaptable.core.errors import CorruptMetadataError, InvalidArgumentError
from airflow_snaptable.core.formats.foreign import ICEBERG_SCHEME, is_iceberg_uri
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.store import NATIVE_FORMAT

PAIMON_FORMAT = "paimon"
ICEBERG_FORMAT = "iceberg"
#: Levels below the location a table may sit at (``LOCATION/a/b/c.db/t`` is at 4).
DEFAULT_MAX_DEPTH = 6
#: Levels of namespaces below the one a catalog location names.
MAX_NAMESPACE_DEPTH = 16
PAIMON_DATABASE_SUFFIX = ".db"
_SCHEMA_DIR = "schema"
_SCHEMA_FILE = re.compile(r"^schema-(\d+)$")
#: Directories that mark another engine's table: never a table here, never descended into.
_FOREIGN_TABLE_DIRS = {"metadata"}


@dataclass(frozen=True)
class LakeTable:
    """A table a location holds."""

    #: Dotted: ``sales.orders``, ``pm.clicks``, ``<namespace>.<table>``.
    name: str
    #: NATIVE_FORMAT (``"snaptable"``), ``"paimon"`` or ``"iceberg"``.
    format: str
    #: What ``Table.open`` takes: the table's directory URL, or ``iceberg://<namespace>.<table>``.
    uri: str

    @property
    def namespace(self) -> str:
        """Everything before the last dot ("" for a table directly in the location)."""
        return self.name.rpartition(".")[0]

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "format": self.format, "uri": self.uri}

    @classmethod
    def from_dict(cls, doc: Any) -> "LakeTable":
        """From :meth:`to_dict` (an XCom, a mapped task's argument); anything else is an error."""
        if not isinstance(doc, dict) or set(doc) != {"name", "format", "uri"} or not all(
            isinstance(value, str) and value for value in doc.values()
        ):
            raise InvalidArgumentError(f'a lake table is {{"name": ..., "format": ..., "uri": ...}} (non-empty strings), got {doc!r}')
        if doc["format"] not in (NATIVE_FORMAT, PAIMON_FORMAT, ICEBERG_FORMAT):
            raise InvalidArgumentError(f"unknown table format {doc['format']!r}")
        return cls(doc["name"], doc["format"], doc["uri"])


def discover(
    location: str, storage_options: dict[str, Any] | None = None, catalog: dict[str, Any] | None = None,
    *, max_depth: int = DEFAULT_MAX_DEPTH,
) -> Iterator[LakeTable]:
    """The tables ``location`` holds, streamed: a directory's in name order, depth first; a catalog's
    namespace by namespace, in name order."""
    if is_iceberg_uri(location):
        yield from _catalog_tables(location, catalog)
        return
    if catalog is not None:
        raise InvalidArgumentError(f"catalog properties are for iceberg:// locations, not for {location!r}")
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise InvalidArgumentError(f"max_depth must be an integer >= 0, got {max_depth!r}")
    yield from _directory_tables(Storage.from_uri(location, storage_options), max_depth)


# -- directories ---------------------------------------------------------------------------------


def _directory_tables(storage: Storage, max_depth: int) -> Iterator[LakeTable]:
    pending = [("", 0)]  # (directory relative to the location, its depth); a stack: depth first
    while pending:
        rel, depth = pending.pop()
        _files, directories = storage.list_directory(rel)
        names = sorted(posixpath.basename(d.rstrip("/")) for d in directories)
        schema_ids = _schema_ids(storage, _join(rel, _SCHEMA_DIR)) if _SCHEMA_DIR in names else []
        if schema_ids:
            yield _directory_table(storage, rel, schema_ids[-1])
            continue
        if _FOREIGN_TABLE_DIRS.intersection(names) or depth >= max_depth:
            continue
        children = [_join(rel, name) for name in names if not name.startswith((".", "_"))]
        pending.extend((child, depth + 1) for child in reversed(children))


def _schema_ids(storage: Storage, schema_dir: str) -> list[int]:
    files, _directories = storage.list_directory(schema_dir)
    found = (_SCHEMA_FILE.match(posixpath.basename(path)) for path, _size, _mtime in files)
    return sorted(int(m.group(1)) for m in found if m)


def _directory_table(storage: Storage, rel: str, schema_id: int) -> LakeTable:
    table_format = _format_of(storage, _join(rel, f"{_SCHEMA_DIR}/schema-{schema_id}"))
    parts = rel.split("/") if rel else [posixpath.basename(storage.root.rstrip("/")) or storage.root]
    if table_format == PAIMON_FORMAT and len(parts) >= 2 and parts[-2].endswith(PAIMON_DATABASE_SUFFIX):
        parts[-2] = parts[-2][: -len(PAIMON_DATABASE_SUFFIX)]
    return LakeTable(".".join(parts), table_format, storage.full_uri(rel))


def _format_of(storage: Storage, schema_file: str) -> str:
    """Paimon's schema has field ids and ``highestFieldId``, ours ``arrowSchema`` (core/formats/paimon/schema.py).

    A schema that cannot be read is reported as this package's format: opening the table names
    what is wrong with it, and the table is reported Failed, never skipped.
    """
    from airflow_snaptable.core.formats.paimon.schema import is_paimon_schema

    try:
        doc = json.loads(storage.read_bytes(schema_file))
    except (OSError, ValueError, CorruptMetadataError):
        return NATIVE_FORMAT
    return PAIMON_FORMAT if is_paimon_schema(doc) else NATIVE_FORMAT


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


# -- catalogs ------------------------------------------------------------------------------------


def catalog_namespace(location: str) -> tuple[str, ...]:
    """``iceberg://`` -> ``()`` (every namespace); ``iceberg://a.b`` -> ``("a", "b")``."""
    from airflow_snaptable.core.formats.iceberg.catalog import _PART

    rest = location[len(ICEBERG_SCHEME):].strip("/")
    if not rest:
        return ()
    parts = tuple(rest.split("."))
    if not all(_PART.match(part) for part in parts):
        raise InvalidArgumentError(
            f"{location!r}: a catalog location is iceberg:// or iceberg://<namespace>, each part letters, digits, '_', '-' or '$'"
        )
    return parts


def _catalog_tables(location: str, properties: dict[str, Any] | None) -> Iterator[LakeTable]:
    from airflow_snaptable.core.formats.iceberg.catalog import catalog_call, load_catalog

    top = catalog_namespace(location)
    catalog = load_catalog(location, properties)
    if top:
        # A namespace that does not exist is an error, not an empty lake: a typo must not pass as "nothing to do".
        catalog_call(location, lambda: catalog.load_namespace_properties(top))
    pending = [(top, 0)]
    while pending:
        namespace, depth = pending.pop()
        if namespace:
            for identifier in sorted(catalog_call(location, lambda: catalog.list_tables(namespace))):
                name = ".".join(identifier)
                yield LakeTable(name, ICEBERG_FORMAT, ICEBERG_SCHEME + name)
        if depth < MAX_NAMESPACE_DEPTH:
            children = sorted(tuple(child) for child in catalog_call(location, lambda: catalog.list_namespaces(namespace)))
            pending.extend((child, depth + 1) for child in reversed(children) if child != namespace)
