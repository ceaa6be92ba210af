"""Ref commits on an Iceberg table (tags, rollback, consumers): one catalog commit each, checked on the
metadata the commit is made on.

A ref change is made anew on every attempt: its updates and requirements are built from the
metadata that attempt read, and say with a typed error what is gone since the call began (a
snapshot an expiry removed: SnapshotNotFoundError; a tag deleted meanwhile: TagNotFoundError)
instead of a commit that can never pass. The catalog applies the updates to *its* current
metadata, which may have changed again after the attempt read it: pyiceberg then raises a bare
ValueError ("cannot set ... to unknown snapshot"), and the next attempt reads the metadata again.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from airflow_snaptable.core.errors import CommitConflictError, CommitFailedError, SnapshotNotFoundError, TagNotFoundError

#: Attempts of one ref change before a conflict is reported.
REF_ATTEMPTS = 5


class KeptRef(Exception):
    """Raised by a requirement builder when the wanted ref is already in place: nothing to commit."""


def commit_refs(table, updates: Callable[[Any], tuple], requirements: Callable[[Any], tuple]):
    """Commit ``updates(metadata)`` under ``requirements(metadata)`` on ``table`` (an IcebergTable),
    made again on the new metadata after a conflict."""
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(REF_ATTEMPTS):
        current = table.refresh()
        try:
            return current.catalog.commit_table(current, requirements(current.metadata), updates(current.metadata))
        except CommitFailedException as exc:
            if attempt == REF_ATTEMPTS - 1:
                raise CommitConflictError(f"{table.uri}: concurrent commits kept changing the refs: {exc}") from exc
            time.sleep(0.05 * 2**attempt)
        except ValueError as exc:  # the catalog's metadata moved on after this attempt read it: read it again
            if attempt == REF_ATTEMPTS - 1:
                raise CommitFailedError(f"{table.uri}: the catalog refused the ref change: {exc}") from exc


def existing_snapshot(table, metadata, snapshot_id: int, doing: str) -> int:
    """``snapshot_id`` if ``metadata`` still has it."""
    if metadata.snapshot_by_id(snapshot_id) is None:
        raise SnapshotNotFoundError(f"snapshot {snapshot_id} no longer exists in {table.uri} (expired while {doing})")
    return snapshot_id


def existing_tag(table, metadata, name: str, snapshot_id: int | None = None):
    """The requirement that the tag ``name`` still points where it did (``snapshot_id``; default: where
    ``metadata`` has it). TagNotFoundError when ``metadata`` has no such tag."""
    from pyiceberg.table.update import AssertRefSnapshotId

    ref = metadata.refs.get(name)
    if ref is None or ref.snapshot_ref_type.value != "tag":
        raise TagNotFoundError(f"tag {name!r} does not exist in {table.uri}")
    return AssertRefSnapshotId(ref=name, snapshot_id=ref.snapshot_id if snapshot_id is None else snapshot_id)
