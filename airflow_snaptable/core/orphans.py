"""Orphan files: cleaning what nothing references (what is missing: core/verify.py).

Rules (Paimon OrphanFilesClean, and its bugs not repeated):
- list the candidates *before* building the in-use set, so a file committed in
  between is in the in-use set (Paimon #3074);
- only files older than the window are candidates (default 1 day; a window
  ending in the future is an error), files of unknown age never are; the window
  ends no later than the real clock, whatever ``now`` a caller passes, as file
  ages come from the storage's clock, and a commit in flight has young files;
- any read failure while building the in-use set aborts the run, and a table
  with snapshots but an empty in-use set is an error, never "delete
  everything" (Paimon #7715).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Callable

from airflow_snaptable.core.checks import check_bool
from airflow_snaptable.core.errors import CorruptMetadataError, InvalidArgumentError
from airflow_snaptable.core.options import parse_duration
from airflow_snaptable.core.progress import delete_with_progress
from airflow_snaptable.core.store import InUse, TableStore
from airflow_snaptable.core.timeutil import to_millis

DEFAULT_ORPHAN_WINDOW = timedelta(days=1)


def files_in_use(store: TableStore) -> InUse:
    """Every data and metadata file a retained snapshot or a tag references. O(history) reads, in bulk; fails closed.

    Every retained snapshot must be readable: a missing or unreadable one raises (what it
    references is unknown, so nothing may be deleted on the strength of this set).
    """
    snapshots = store.snapshots
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    history = [s for s, _size in snapshots.read_ids(range(earliest, latest + 1)).values()] if earliest is not None and latest is not None else []
    return store.files.referenced_by(history, store.tags.tags())


@dataclass
class OrphanResult:
    orphan_files: list[str] = field(default_factory=list)
    orphan_count: int = 0
    bytes: int = 0
    older_than_millis: int = 0
    dry_run: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


class OrphanFilesClean:
    """Removes the files of one table that nothing references (Paimon's OrphanFilesClean)."""

    def __init__(self, store: TableStore, clock: Callable[[], int]):
        self.store = store
        self.clock = clock

    def clean(self, older_than=None, dry_run: bool = True, now=None) -> OrphanResult:
        """Delete (or, on a dry run, list) files under the table that nothing references and that are
        older than ``older_than`` (a time, or a duration back from now; default 1 day)."""
        check_bool(dry_run, "dry_run")
        cutoff = cutoff_millis(self.clock() if now is None else to_millis(now), older_than)

        files = self.store.files
        # Candidates first, then the in-use set: a file committed in between is in the set.
        listed = files.listed_files() + files.leftover_files()
        candidates = [(rel, size) for rel, size, mtime in listed if mtime is not None and mtime * 1000 < cutoff]
        del listed  # the listing's records are the size of the table: keep only the candidates
        used_paths = files_in_use(self.store).all_paths()  # one set of paths; the per-file records go at once
        if not used_paths and self.store.snapshots.latest_id() is not None:
            raise CorruptMetadataError("the table has snapshots but no file is in use: refusing to delete anything")
        result = OrphanResult(older_than_millis=cutoff, dry_run=dry_run)
        for rel, size in candidates:
            if rel in used_paths:
                continue
            result.orphan_files.append(rel)
            result.bytes += size
        if not dry_run:
            delete_with_progress("deleting orphan files", result.orphan_files, files.delete)
        result.orphan_count = len(result.orphan_files)
        return result


def cutoff_millis(now_millis: int, older_than) -> int:
    """Files modified before this (epoch millis) may be deleted.

    A ``now`` later than the real clock never moves the cutoff later: file ages come from
    the storage, where a commit in flight has files only seconds old, so the window the
    caller asked for is measured back from ``min(now, real clock)``, and an absolute
    ``older_than`` after it is an error.
    """
    reference = min(now_millis, int(time.time() * 1000))
    if older_than is None:
        return reference - int(DEFAULT_ORPHAN_WINDOW.total_seconds() * 1000)
    if isinstance(older_than, timedelta) or (isinstance(older_than, str) and _is_duration(older_than)):
        return reference - int(parse_duration(older_than, "older_than").total_seconds() * 1000)
    cutoff = to_millis(older_than)
    if cutoff > reference:
        raise InvalidArgumentError(
            f"older_than ({older_than}) is in the future (of now or of the real clock): files being written now could be deleted"
        )
    return cutoff


def _is_duration(text: str) -> bool:
    try:
        parse_duration(text)
        return True
    except ValueError:
        return False
