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

A name is unique in a lake. Two paths can read as one name (``a.b/t`` and ``a/b/t``; a Paimon
``pm.db/t`` and our ``pm/t``): then neither table is maintained, each is listed with a
TableNameConflictError naming both locations (``LakeTable.problem``), since a policy section
naming it may be meant for either. The walk yields tables in name order, so the tables of one
name arrive together and the walk stays streamed.

Each real directory is visited once, and a table is named by one path: a symbolic link to a
directory inside the location is never followed (the directory is reached, and named, by its own
path; or deliberately not walked: hidden, too deep, inside a table), one to a directory outside it
is followed and names what it reaches, once (a second link to the same directory, a loop, is not
followed again). Object stores have no links: each prefix is one directory.

What a table is: what holds a table's files, never a directory's name. A directory holding
``schema/schema-<n>`` whose JSON is this package's schema (``arrowSchema``) or Paimon's
(``highestFieldId``) is a table of that format; a ``schema-<n>`` that cannot be read or parsed
is taken for this package's (opening it names the problem: reported, never skipped); a directory whose ``metadata/`` holds
Iceberg's ``*.metadata.json`` or ``version-hint.text`` is an Iceberg table (maintained through its
catalog, ``iceberg://``): not walked. Any other directory is walked, whatever its name.

Errors: a directory below the location that cannot be listed (a permission error, ``lost+found``)
is one entry with its problem; the rest of the lake is still walked. The location itself not
listable is a StorageError.

Cost: the walk is streamed (tables are yielded as they are found, one directory listing at a
time) and bounded in depth. The format comes from the table's schema file, the one read per
table. No table's history is read, and the walk never descends into a table, nor into hidden
(``.``, ``_``) directories.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from fsspec.implementations.local import LocalFileSystem

from airflow_snaptable.core.errors import (
    InvalidArgumentError,
    SnapTableError,
    StorageError,
    TableNameConflictError,
)
from airflow_snaptable.core.formats.foreign import ICEBERG_SCHEME, is_iceberg_uri
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.store import NATIVE_FORMAT

PAIMON_FORMAT = "paimon"
ICEBERG_FORMAT = "iceberg"
#: The format of an entry that could not be read far enough to tell (it always has a ``problem``).
UNKNOWN_FORMAT = "unknown"
#: Levels below the location a table may sit at (``LOCATION/a/b/c.db/t`` is at 4).
DEFAULT_MAX_DEPTH = 6
#: Levels of namespaces below the one a catalog location names.
MAX_NAMESPACE_DEPTH = 16
PAIMON_DATABASE_SUFFIX = ".db"
_SCHEMA_DIR = "schema"
_SCHEMA_FILE = re.compile(r"^schema-(\d+)$")
#: Iceberg keeps a table's metadata files here: ``<n>-<uuid>.metadata.json`` (``.gz.metadata.json``,
#: ``.metadata.json.gz``) and, for file-system tables, ``version-hint.text``.
_ICEBERG_METADATA_DIR = "metadata"
_ICEBERG_METADATA_FILE = re.compile(r"(\.metadata\.json(\.gz)?|^version-hint\.text)$")


@dataclass(frozen=True)
class LakeTable:
    """A table a location holds."""

    #: Dotted: ``sales.orders``, ``pm.clicks``, ``<namespace>.<table>``.
    name: str
    #: NATIVE_FORMAT (``"snaptable"``), ``"paimon"``, ``"iceberg"``, or ``"unknown"`` (with a problem).
    format: str
    #: What ``Table.open`` takes: the table's directory URL, or ``iceberg://<namespace>.<table>``.
    uri: str
    #: Why it cannot be maintained (``<ErrorType>: <message>``): its name is another table's too, its
    #: directory cannot be listed, its schema cannot be read. A run reports it failed and touches nothing.
    problem: str | None = None

    @property
    def namespace(self) -> str:
        """Everything before the last dot ("" for a table directly in the location)."""
        return self.name.rpartition(".")[0]

    def to_dict(self) -> dict[str, str]:
        doc = {"name": self.name, "format": self.format, "uri": self.uri}
        if self.problem is not None:
            doc["problem"] = self.problem
        return doc

    @classmethod
    def from_dict(cls, doc: Any) -> "LakeTable":
        """From :meth:`to_dict` (an XCom, a mapped task's argument); anything else is an error."""
        if not isinstance(doc, dict) or not {"name", "format", "uri"} <= set(doc) <= {"name", "format", "uri", "problem"} or not all(
            isinstance(value, str) and value for value in doc.values()
        ):
            raise InvalidArgumentError(
                f'a lake table is {{"name": ..., "format": ..., "uri": ...}} (non-empty strings, and a "problem" if it has one), got {doc!r}'
            )
        known = (NATIVE_FORMAT, PAIMON_FORMAT, ICEBERG_FORMAT) + ((UNKNOWN_FORMAT,) if "problem" in doc else ())
        if doc["format"] not in known:
            raise InvalidArgumentError(f"unknown table format {doc['format']!r}")
        return cls(doc["name"], doc["format"], doc["uri"], doc.get("problem"))


def discover(
    location: str, storage_options: dict[str, Any] | None = None, catalog: dict[str, Any] | None = None,
    *, max_depth: int = DEFAULT_MAX_DEPTH,
) -> Iterator[LakeTable]:
    """The tables ``location`` holds, streamed in name order (a catalog's: namespace by namespace, in
    name order); each name once, or every table holding it with a TableNameConflictError problem."""
    if is_iceberg_uri(location):
        yield from _catalog_tables(location, catalog)
        return
    if catalog is not None:
        raise InvalidArgumentError(f"catalog properties are for iceberg:// locations, not for {location!r}")
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise InvalidArgumentError(f"max_depth must be an integer >= 0, got {max_depth!r}")
    yield from unique_names(_directory_tables(Storage.from_uri(location, storage_options), max_depth))


def unique_names(tables: Iterable[LakeTable]) -> Iterator[LakeTable]:
    """``tables`` (in name order: one name's tables adjacent), the tables sharing a name each given a
    TableNameConflictError problem naming every location of that name."""
    for name, group in itertools.groupby(tables, key=lambda table: table.name):
        same = list(group)
        if len(same) == 1:
            yield same[0]
            continue
        where = ", ".join(f"{table.uri} ({table.format})" for table in same)
        problem = _problem(TableNameConflictError(
            f"the name {name!r} is not unique: {len(same)} entries of the lake have it: {where}; a name is the path "
            f"below the location with '/' read as '.' (a Paimon database directory <db>.db as <db>), so a policy "
            f"section naming it is ambiguous: none is maintained until one is renamed"
        ))
        for table in same:
            yield table if table.problem is not None else LakeTable(table.name, table.format, table.uri, problem)


def _problem(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# -- directories ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Directory:
    rel: str
    depth: int
    #: Reached through a link out of the location (its real directory may be reached by another link).
    linked: bool = False


def _directory_tables(storage: Storage, max_depth: int) -> Iterator[LakeTable]:
    """The walk, best first by the names below each directory: tables come out in name order.

    A heap holds directories still to list, keyed by the least name a table at or below them can
    have (:func:`_least_name`), and tables found, keyed by their name. Every key pushed is at least
    the key popped, so what is popped never decreases and a table popped has the least name left.
    """
    visits = _Visits(storage)
    root_name = posixpath.basename(storage.root.rstrip("/")) or storage.root
    try:
        _files, top = storage.list_directory("", follow_links=True)
        top_names = sorted(posixpath.basename(d.rstrip("/")) for d in top)
        found = _table_at(storage, "", top_names, root_name)
        foreign = found is None and _is_iceberg_table(storage, "", top_names)
    except Exception as exc:  # noqa: BLE001 - the location itself: the whole answer is missing
        raise StorageError(f"location {storage.uri}: cannot list it: {_problem(exc)}") from exc
    if found is not None:
        yield found
        return
    if foreign:
        raise InvalidArgumentError(
            f"location {storage.uri} is an Apache Iceberg table's directory: Iceberg tables are maintained "
            f"through their catalog (iceberg://<namespace> with its properties)"
        )
    order = itertools.count()
    heap: list[tuple[str, int, Any]] = []
    _push_children(heap, order, _Directory("", 0), top_names, max_depth)
    while heap:
        _key, _n, item = heapq.heappop(heap)
        if isinstance(item, LakeTable):
            yield item
            continue
        linked = visits.first_visit(item)
        if linked is None:
            continue
        try:
            _files, directories = storage.list_directory(item.rel, follow_links=True)  # by the rule of _Visits
            names = sorted(posixpath.basename(d.rstrip("/")) for d in directories)
            table = _table_at(storage, item.rel, names)
            if table is None and _is_iceberg_table(storage, item.rel, names):
                continue  # another engine's table, maintained through its catalog
        except Exception as exc:  # noqa: BLE001 - one unreadable directory is one entry, never the end of the walk
            table = LakeTable(_name(item.rel.split("/")), UNKNOWN_FORMAT, storage.full_uri(item.rel),
                              _problem(exc) + " (a directory of the lake that cannot be read)")
        if table is not None:
            heapq.heappush(heap, (table.name, next(order), table))
            continue
        _push_children(heap, order, _Directory(item.rel, item.depth, linked), names, max_depth)


def _push_children(heap: list, order, parent: _Directory, names: list[str], max_depth: int) -> None:
    if parent.depth >= max_depth:
        return
    for name in names:
        if not name.startswith((".", "_")):
            child = _join(parent.rel, name)
            heapq.heappush(heap, (_least_name(child.split("/")), next(order), _Directory(child, parent.depth + 1, parent.linked)))


def _name(parts: list[str], paimon: bool = False) -> str:
    """The dotted name of a table at ``parts``: Paimon's ``<db>.db`` read as ``<db>``."""
    parts = list(parts)
    if paimon and len(parts) >= 2 and parts[-2].endswith(PAIMON_DATABASE_SUFFIX):
        parts[-2] = parts[-2][: -len(PAIMON_DATABASE_SUFFIX)]
    return ".".join(parts)


def _least_name(parts: list[str]) -> str:
    """A lower bound of the names of the tables at or below the directory ``parts``: its dotted path
    (every name below extends it), or the shorter form a Paimon database's suffix gives (the directory
    is a Paimon table in ``<db>.db``, or is ``<db>.db`` itself)."""
    candidates = [".".join(parts), _name(parts, paimon=True)]
    if parts[-1].endswith(PAIMON_DATABASE_SUFFIX):
        candidates.append(".".join(parts[:-1] + [parts[-1][: -len(PAIMON_DATABASE_SUFFIX)]]) + ".")
    return min(candidates)


def _table_at(storage: Storage, rel: str, names: list[str], root_name: str | None = None) -> LakeTable | None:
    """The table the directory ``rel`` is (its subdirectories ``names``), or None: ours or Paimon's by
    the JSON of its latest ``schema/schema-<n>``."""
    if _SCHEMA_DIR not in names:
        return None
    schema_ids = _schema_ids(storage, _join(rel, _SCHEMA_DIR))
    if not schema_ids:
        return None
    parts = rel.split("/") if rel else [root_name]
    schema_file = _join(rel, f"{_SCHEMA_DIR}/schema-{schema_ids[-1]}")
    try:
        doc = json.loads(storage.read_bytes(schema_file))
    except (OSError, ValueError, RecursionError, SnapTableError):
        # Reported as this package's format: opening the table names what is wrong with it (a deeply
        # nested document too), and each of its jobs is reported Failed, never skipped.
        return LakeTable(_name(parts), NATIVE_FORMAT, storage.full_uri(rel))
    from airflow_snaptable.core.formats.paimon.schema import is_paimon_schema

    if is_paimon_schema(doc):
        return LakeTable(_name(parts, paimon=True), PAIMON_FORMAT, storage.full_uri(rel))
    if isinstance(doc, dict) and "arrowSchema" in doc:
        return LakeTable(_name(parts), NATIVE_FORMAT, storage.full_uri(rel))
    return None  # a directory named schema holding other JSON: not a table's


def _is_iceberg_table(storage: Storage, rel: str, names: list[str]) -> bool:
    """Iceberg's table: its ``metadata/`` holds a metadata file, not merely a directory of that name."""
    if _ICEBERG_METADATA_DIR not in names:
        return False
    files, _directories = storage.list_directory(_join(rel, _ICEBERG_METADATA_DIR))
    return any(_ICEBERG_METADATA_FILE.search(posixpath.basename(path)) for path, _size, _mtime in files)


def _schema_ids(storage: Storage, schema_dir: str) -> list[int]:
    files, _directories = storage.list_directory(schema_dir)
    found = (_SCHEMA_FILE.match(posixpath.basename(path)) for path, _size, _mtime in files)
    return sorted(int(m.group(1)) for m in found if m)


class _Visits:
    """Each real directory once (the module's rule on links). Local files only: an object store's
    prefixes have no links, each is one directory."""

    def __init__(self, storage: Storage):
        self._storage = storage
        self._local = isinstance(storage.fs, LocalFileSystem)
        self._root = os.path.realpath(storage.root) if self._local else ""
        #: The real directories listed through links out of the location (the tree below the location
        #: reaches each of its own directories by one path: only those need remembering).
        self._seen: set[tuple[int, int]] = set()

    def first_visit(self, directory: _Directory) -> bool | None:
        """None: do not list ``directory`` (a link into the location; a real directory already listed
        through another link, or a loop out there); else whether it is reached through a link out of
        the location."""
        if not self._local:
            return False
        path = self._storage.full_path(directory.rel)
        linked = directory.linked
        if os.path.islink(path):
            real = os.path.realpath(path)
            if real == self._root or real.startswith(self._root.rstrip(os.sep) + os.sep):
                return None
            linked = True
        if not linked:
            return False
        try:
            info = os.stat(path)
        except OSError:
            return True  # listing it reports the problem
        identity = (info.st_dev, info.st_ino)
        if identity in self._seen:
            return None
        self._seen.add(identity)
        return True


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


# -- catalogs ------------------------------------------------------------------------------------


def catalog_namespace(location: str) -> tuple[str, ...]:
    """``iceberg://`` -> ``()`` (every namespace); ``iceberg://a.b`` -> ``("a", "b")``."""
    from airflow_snaptable.core.formats.iceberg.catalog import _PART, PART_RULE

    rest = location[len(ICEBERG_SCHEME):].strip("/")
    if not rest:
        return ()
    parts = tuple(rest.split("."))
    if not all(_PART.match(part) for part in parts):
        raise InvalidArgumentError(
            f"{location!r}: a catalog location is iceberg:// or iceberg://<namespace>, {PART_RULE}"
        )
    return parts


def _catalog_tables(location: str, properties: dict[str, Any] | None) -> Iterator[LakeTable]:
    """A catalog's tables. A namespace below the location that cannot be listed is one entry with its
    problem (the rest are still listed); an identifier part holding a ``.`` is one too (its dotted name
    could not address it); the location's own namespace not listable is the run's error."""
    from airflow_snaptable.core.formats.iceberg.catalog import catalog_call, load_catalog

    top = catalog_namespace(location)
    catalog = load_catalog(location, properties)
    if top:
        # A namespace that does not exist is an error, not an empty lake: a typo must not pass as "nothing to do".
        catalog_call(location, lambda: catalog.load_namespace_properties(top))
    pending = [(top, 0)]
    while pending:
        namespace, depth = pending.pop()
        failure: Exception | None = None
        identifiers: list = []
        children: list = []
        try:
            if namespace:
                identifiers = sorted(catalog_call(location, lambda: catalog.list_tables(namespace)))
        except Exception as exc:  # noqa: BLE001 - one namespace that cannot be listed is one entry
            failure = exc
        try:
            if depth < MAX_NAMESPACE_DEPTH:
                children = sorted(tuple(child) for child in catalog_call(location, lambda: catalog.list_namespaces(namespace)))
        except Exception as exc:  # noqa: BLE001
            failure = failure or exc
        if failure is not None:
            if namespace == top:
                raise failure
            name = ".".join(namespace)
            yield LakeTable(name, UNKNOWN_FORMAT, ICEBERG_SCHEME + name,
                            _problem(failure) + " (a namespace of the catalog that cannot be listed)")
        for identifier in identifiers:
            name = ".".join(identifier)
            problem = None
            if any("." in part for part in identifier):
                problem = _problem(InvalidArgumentError(
                    f"the catalog's table {tuple(identifier)!r} has a '.' inside a part: iceberg://{name} would name another table"
                ))
            yield LakeTable(name, ICEBERG_FORMAT, ICEBERG_SCHEME + name, problem)
        pending.extend((child, depth + 1) for child in reversed(children) if child != namespace)
