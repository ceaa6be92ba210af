"""Validation of names that become file names (tags, consumers)."""

from __future__ import annotations

from airflow_snaptable.core.errors import InvalidNameError

MAX_NAME_LENGTH = 200


def validate_name(name: object, what: str) -> str:
    """Return ``name`` if it is safe as one path component, else raise InvalidNameError.

    Rejected: non-strings, empty or blank names, leading/trailing spaces, path
    separators, ``.``/``..``, control characters, and names over 200 bytes (UTF-8).
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"{what} name must be a string, got {type(name).__name__}")
    if not name or not name.strip():
        raise InvalidNameError(f"{what} name must not be empty")
    if name != name.strip():
        raise InvalidNameError(f"{what} name {name!r} must not start or end with spaces")
    if "/" in name or "\\" in name:
        raise InvalidNameError(f"{what} name {name!r} must not contain path separators")
    if name in (".", "..") or ".." in name:
        raise InvalidNameError(f"{what} name {name!r} must not contain '..'")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidNameError(f"{what} name {name!r} must not contain control characters")
    if len(name.encode("utf-8")) > MAX_NAME_LENGTH:
        # File names are limited in bytes (255 on most file systems, with our prefix and suffixes).
        raise InvalidNameError(f"{what} name is longer than {MAX_NAME_LENGTH} bytes in UTF-8")
    return name
