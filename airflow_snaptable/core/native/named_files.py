"""Reading the file of a named tag or consumer: the name is checked before any read, and a missing file is
the kind's typed not-found error, never "none" (reads fail closed)."""

from __future__ import annotations

from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.errors import SnapTableError
from airflow_snaptable.core.io.storage import Storage


def read_named_file(storage: Storage, kind: str, name: str, path: str, missing: type[SnapTableError]) -> bytes:
    """The bytes of ``path``, the file of the ``kind`` (``"tag"``, ``"consumer"``) called ``name``;
    ``missing`` when there is no such file (InvalidNameError before any read for a bad name)."""
    validate_name(name, kind)
    try:
        return storage.read_bytes(path)
    except FileNotFoundError:
        raise missing(f"{kind} {name!r} does not exist in {storage.uri}") from None
