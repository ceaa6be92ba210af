"""Where a file is relative to its table, decided on normal forms: the check before anything is deleted.

Every path the lifecycle deletes comes from metadata: a native or Paimon manifest names files
relative to the table root, an Iceberg manifest by absolute URI. A file is inside the table only
when the *normal form* of its path is under the table's root at a component boundary. A plain
prefix test is not enough: ``<location>/../other/x`` starts with ``<location>/`` and is outside,
``/wh/tbl2/x`` starts with ``/wh/tbl`` and is outside, ``<location>//data/./x`` is the listed
``data/x``.

The rules (one function each, used by every format, orphan cleaning, expiry, rollback, Hudi
cleaning, verify and ``Storage``'s deletes):

- Normal form is POSIX's, lexically (as Java's ``URI.normalize`` and Hadoop's ``Path`` do):
  empty and ``.`` components dropped, ``..`` removes the component before it; above ``/`` it
  stays at ``/``, at the start of a relative path it is kept (the path climbs out).
- A URI is ``scheme://authority/path``: the scheme case-folded and the equivalent ones (``s3``,
  ``s3a``, ``s3n``; ``gs``, ``gcs``) folded; ``file:/x``, ``file:///x`` and ``/x`` are one path.
  Nothing else is parsed: ``?``, ``#`` and ``%XX`` are characters of the name, as every FileIO
  here (pyiceberg's and fsspec's) opens them, so ``%2e%2e`` is a name, never a ``..``, and a file
  named ``a#b`` is matched as ``a#b`` (a URL parser would cut it to ``a``).
- Paths the native and Paimon formats write are already normal: one that is not is corrupt
  metadata (two spellings of one file would let orphan cleaning delete a live file under the
  spelling nobody references); one that leaves the root is :class:`PathOutsideTableError`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from airflow_snaptable.core.errors import CorruptMetadataError, PathOutsideTableError, UnsupportedMetadataError

#: Schemes that name the same store (Iceberg's ``DeleteOrphanFiles`` equivalences).
EQUIVALENT_SCHEMES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfss": "abfs", "wasbs": "wasb"}
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(.*)", re.DOTALL)
#: A relative path that is not in normal form or leaves the root: what the vectorised screen flags
#: (RE2 syntax, for pyarrow's compute functions).
_NOT_NORMAL = r"^$|^/|/$|//|(^|/)\.\.?(/|$)"


class UriParts(NamedTuple):
    scheme: str
    authority: str
    #: The normal form of the path part (absolute for a URI or an absolute path).
    path: str


def normal_path(path: str) -> str:
    """``path``'s normal form (see the module rules). A relative path that climbs above its start keeps
    its leading ``..``; the root of a relative path is ``""``."""
    absolute = path.startswith("/")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not absolute:
                parts.append("..")
            continue
        parts.append(part)
    body = "/".join(parts)
    return "/" + body if absolute else body


def split_uri(uri: str) -> UriParts:
    """(scheme, authority, normal path) of a URI or a bare path (a bare path, and a Windows drive
    letter, are ``file``)."""
    match = _SCHEME.fullmatch(uri)
    if match is None or len(match.group(1)) == 1:
        scheme, rest = "file", uri
    else:
        scheme, rest = match.group(1).lower(), match.group(2)
    authority = ""
    if rest.startswith("//"):
        authority, _slash, path = rest[2:].partition("/")
        path = "/" + path
    else:
        path = rest
    scheme = EQUIVALENT_SCHEMES.get(scheme, scheme)
    if scheme == "file":
        authority = ""  # file://host/x is /x on that host: the only host a local path can name
    return UriParts(scheme, authority, normal_path(path))


def relative_to_location(uri: str, location: str) -> str | None:
    """``uri`` as a normal path relative to ``location``, or None when it is not strictly inside it
    (another store, another bucket, a sibling such as ``<location>2``, or ``..`` out of it)."""
    base, found = split_uri(location), split_uri(uri)
    if (found.scheme, found.authority) != (base.scheme, base.authority):
        return None
    prefix = base.path if base.path.endswith("/") else base.path + "/"
    if not found.path.startswith(prefix) or len(found.path) == len(prefix):
        return None
    return found.path[len(prefix):]


def is_normal_relative(path: str) -> bool:
    """Fast: a non-empty relative path without empty, ``.`` or ``..`` components (most paths pass the
    first line: a dot only in file extensions)."""
    if not path or path[0] == "/" or path[-1] == "/" or "//" in path:
        return False
    if "/." not in path and path[0] != ".":
        return True
    return all(part not in (".", "..") for part in path.split("/"))


def checked_relative_path(path: object, what: str, where: str = "") -> str:
    """``path`` if it is a normal path relative to the table root and inside it.

    Raises PathOutsideTableError when it leaves the root (absolute, or ``..`` above it), and
    CorruptMetadataError when it is not text, names the root itself or is not in normal form.
    ``what`` names the path's role and ``where`` the file it came from, for the message.
    """
    at = f"{where}: " if where else ""
    if not isinstance(path, str):
        raise CorruptMetadataError(f"{at}{what} {path!r} is not a path")
    if is_normal_relative(path):
        return path
    normal = normal_path(path)
    if path.startswith("/") or normal == ".." or normal.startswith("../"):
        raise PathOutsideTableError(
            f"{at}{what} {path!r} is outside the table (it resolves to {normal!r} from the table root): "
            "files there are never deleted"
        )
    if not normal:
        raise CorruptMetadataError(f"{at}{what} {path!r} names the table root, not a file")
    raise CorruptMetadataError(
        f"{at}{what} {path!r} is not in normal form ({normal!r}): this format never writes such a path"
    )


def checked_file_name(name: object, what: str, where: str = "") -> str:
    """``name`` if it is one plain path component (a manifest or data file in its directory).

    A name that climbs out of its directory raises PathOutsideTableError; one with a ``/`` that stays
    inside UnsupportedMetadataError (a layout this code does not know); anything else that is not a
    name (not text, empty, ``.``) CorruptMetadataError.
    """
    if isinstance(name, str) and name and "/" not in name and name not in (".", ".."):
        return name
    at = f"{where}: " if where else ""
    if isinstance(name, str) and (name == ".." or "/" in name):
        normal = normal_path(name)
        if name.startswith("/") or normal == ".." or normal.startswith("../"):
            raise PathOutsideTableError(f"{at}{what} {name!r} leads out of its directory: files there are never deleted")
        raise UnsupportedMetadataError(f"{at}{what} {name!r} is not a plain file name in its directory")
    raise CorruptMetadataError(f"{at}{what} {name!r} is not a plain file name")


def check_deletable(rels, where: str) -> None:
    """The last guard of "nothing outside the table is deleted": every path ``Storage`` is asked to delete
    passes :func:`checked_relative_path`, all of them before the first delete (the formats check
    their metadata's paths where they read them, before planning)."""
    for rel in rels:
        checked_relative_path(rel, "file to delete", where)


def check_relative_column(paths: pa.Array | pa.ChunkedArray, what: str, where: str) -> pa.Array | pa.ChunkedArray:
    """``paths`` (an Arrow column of relative paths) if every value passes :func:`checked_relative_path`.

    Screened in one vectorised pass (a manifest of millions of entries costs a regex scan, not a
    Python call per path); the first flagged value raises its error.
    """
    if paths.null_count:
        raise CorruptMetadataError(f"{where}: a {what} is missing (null)")
    flagged = pc.match_substring_regex(paths, _NOT_NORMAL)
    if not pc.any(flagged).as_py():
        return paths
    first = pc.index(flagged, True).as_py()
    checked_relative_path(paths[first].as_py(), what, where)
    raise AssertionError(f"{where}: {paths[first].as_py()!r} flagged but accepted")  # pragma: no cover - the two rules agree
