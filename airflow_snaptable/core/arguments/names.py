"""Validation of names that become file or directory names (tags, consumers, partition keys)."""

from __future__ import annotations

import unicodedata

from airflow_snaptable.core.errors import InvalidNameError

#: In UTF-8 bytes: file names are limited in bytes (255 on most file systems), and a
#: name gets a prefix and, while it is written, a temp-file suffix.
MAX_NAME_LENGTH = 200
#: The longest file or directory name most file systems take, in bytes.
MAX_PATH_COMPONENT_BYTES = 255
#: Unicode categories refused anywhere in a name: control (C0, DEL, C1), format (invisible,
#: e.g. zero-width space, bidi overrides, BOM), surrogate (not encodable), line and paragraph
#: separators. They make names that look alike but differ, or break listings and logs.
_REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def validate_name(name: object, what: str) -> str:
    """Return ``name`` if it is safe as one path component, else raise InvalidNameError.

    Rejected: non-strings, empty or blank names, leading/trailing spaces, path
    separators, ``..``, control/format/separator characters (see ``_REFUSED_CATEGORIES``),
    and names over 200 bytes in UTF-8.
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"{what} name must be a string, got {type(name).__name__}")
    if not name or not name.strip():
        raise InvalidNameError(f"{what} name must not be empty")
    for char in name:
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise InvalidNameError(
                f"{what} name {name!r} must not contain control, format or line-separator characters "
                f"(U+{ord(char):04X})"
            )
    if name != name.strip():
        raise InvalidNameError(f"{what} name {name!r} must not start or end with spaces")
    if "/" in name or "\\" in name:
        raise InvalidNameError(f"{what} name {name!r} must not contain path separators")
    if ".." in name:
        raise InvalidNameError(f"{what} name {name!r} must not contain '..'")
    if name == ".":
        raise InvalidNameError(f"{what} name must not be '.'")
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_LENGTH:
        raise InvalidNameError(f"{what} name is {size} bytes in UTF-8, over the limit of {MAX_NAME_LENGTH} bytes")
    return name


def validate_partition_key(key: object) -> str:
    """A partition key names the directories ``<key>=<value>``: a name, without ``=`` and not hidden.

    Values are percent-encoded, keys are not: a ``=`` would move the split between key
    and value, and a leading ``.`` hides the directory from listings (Spark and Hive skip it).
    """
    validate_name(key, "partition key")
    if "=" in key:
        raise InvalidNameError(f"partition key name {key!r} must not contain '=' (directories are <key>=<value>)")
    if key.startswith("."):
        raise InvalidNameError(f"partition key name {key!r} must not start with '.' (a hidden directory)")
    return key
