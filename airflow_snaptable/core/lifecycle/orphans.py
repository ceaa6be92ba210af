"""Orphan files: cleaning what nothing references (what is missing: core/formats/native/verify.py).

Rules (Paimon OrphanFilesClean, and its bugs not repeated):
- list the candidates *before* building the in-use set, so a file committed in
  between is in the in-use set (Paimon #3074);
- only files older than the window are candidates (default 1 day; a window
  ending in the future is an error), files of unknown age never are; the window
  ends no later than the real clock, whatever ``now`` a caller passes, as file
  ages come from the storage's clock, and a commit in flight has young files;
- any read failure while building the in-use set aborts the run, and a table
  with snapshots but an empty in-use set is an error, never "delete
  everything" (Paimon #7715);
- noncurrent files (an earlier run's, undoable) are not orphans; a deleting run holds
  a deleting mark from before its first read to after its last delete and reads the
  undo marks right before each batch, so no undo brings a file back meanwhile
  (core/lifecycle/noncurrent/journal.py).
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Callable, Iterable, Iterator

import pyarrow as pa

from airflow_snaptable.core.arguments.checks import check_bool
from airflow_snaptable.core.errors import CorruptMetadataError, InvalidArgumentError
from airflow_snaptable.core.arguments.table_options import parse_duration
from airflow_snaptable.core.io.path_set import PathHashSet
from airflow_snaptable.core.lifecycle.noncurrent.journal import REMOVE_ORPHANS, DeletingMark, NoncurrentJournal, NoncurrentRun, entry_key
from airflow_snaptable.core.lifecycle.noncurrent.record import record_removed
from airflow_snaptable.core.lifecycle.progress import delete_with_progress
from airflow_snaptable.core.lifecycle.store import InUse, StoredFile, TableStore
from airflow_snaptable.core.arguments.times import is_epoch_millis_text, to_millis

DEFAULT_ORPHAN_WINDOW = timedelta(days=1)
#: Listed files checked against the in-use set at once.
ORPHAN_BATCH = 65_536
#: Orphans gathered before a deleting run deletes them (``delete_with_progress``: 10 chunks of 10,000).
DELETE_BUFFER = 100_000
#: Orphan paths a result lists at most (``orphan_count`` and ``bytes`` count every one): a dry
#: run of a million orphans returns counts and the first paths, not a million strings.
MAX_LISTED_ORPHANS = 10_000

#: Where each orphan's path goes as it is found, besides the result (``listing_to``): a full list
#: that no cap shortens, e.g. a file the task writes.
_listing: ContextVar[Callable[[str], None] | None] = ContextVar("snaptable_orphan_listing", default=None)


@contextmanager
def listing_to(sink: Callable[[str], None]) -> Iterator[None]:
    """Send the path of every orphan the cleans in this block find (deleted or, on a dry run, listed) to ``sink``."""
    token = _listing.set(sink)
    try:
        yield
    finally:
        _listing.reset(token)


def _history(store: TableStore) -> list:
    snapshots = store.snapshots
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    return [s for s, _size in snapshots.read_ids(range(earliest, latest + 1)).values()] if earliest is not None and latest is not None else []


def files_in_use(store: TableStore) -> InUse:
    """Every data and metadata file a retained snapshot or a tag references. O(history) reads, in bulk; fails closed.

    Every retained snapshot must be readable: a missing or unreadable one raises (what it
    references is unknown, so nothing may be deleted on the strength of this set).
    """
    return store.files.referenced_by(_history(store), store.tags.tags())


def paths_in_use(store: TableStore) -> PathHashSet:
    """:func:`files_in_use` as a compact set of paths (8 bytes per file, core/io/path_set.py); fails closed alike."""
    return store.files.paths_in_use(_history(store), store.tags.tags())


@dataclass
class OrphanResult:
    #: The orphans' paths, in listing order, at most ``MAX_LISTED_ORPHANS`` of them.
    orphan_files: list[str] = field(default_factory=list)
    orphan_count: int = 0
    bytes: int = 0
    older_than_millis: int = 0
    dry_run: bool = True
    #: True when ``orphan_files`` lists fewer paths than ``orphan_count`` (the cap).
    orphan_files_truncated: bool = False
    #: A run with a retention: the orphans stay, noncurrent, undoable by this id until purged.
    run_id: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def add(self, path: str, size: int) -> None:
        """Count an orphan; list it while under the cap."""
        self.orphan_count += 1
        self.bytes += size
        sink = _listing.get()
        if sink is not None:
            sink(path)
        if len(self.orphan_files) < MAX_LISTED_ORPHANS:
            self.orphan_files.append(path)
        else:
            self.orphan_files_truncated = True


class OrphanFilesClean:
    """Removes the files of one table that nothing references (Paimon's OrphanFilesClean).

    Memory does not grow with the listing: the candidates are spilled to a local temporary file
    (:class:`CandidateSpill`) while the tree is listed a directory at a time, the in-use set is
    8 bytes per referenced file (core/io/path_set.py), and the candidates are read back and checked
    ``batch`` at a time.
    """

    def __init__(
        self, store: TableStore, clock: Callable[[], int], batch: int | None = None, noncurrent: NoncurrentRun | None = None
    ):
        """:param batch: listed files checked against the in-use set at once (default ``ORPHAN_BATCH``).
        :param noncurrent: a run with a retention: the orphans are recorded as noncurrent, not deleted."""
        self.store = store
        self.noncurrent = noncurrent
        self.clock = clock
        self.batch = batch or ORPHAN_BATCH

    def clean(self, older_than=None, dry_run: bool = True, now=None) -> OrphanResult:
        """Delete (or, on a dry run, list) files under the table that nothing references and that are
        older than ``older_than`` (a time, or a duration back from now; default 1 day)."""
        check_bool(dry_run, "dry_run")
        cutoff = cutoff_millis(self.clock() if now is None else to_millis(now), older_than)

        files = self.store.files
        result = OrphanResult(older_than_millis=cutoff, dry_run=dry_run)
        journal = NoncurrentJournal(self.store.lifecycle)
        with CandidateSpill(self.batch) as candidates, (nullcontext() if dry_run else DeletingMark(journal, REMOVE_ORPHANS)) as mark:
            # Candidates first, then the in-use set: a file committed in between is in the set.
            listed = itertools.chain(files.listed_files(), files.leftover_files())
            candidates.write(found for found in listed if found.modified is not None and found.modified * 1000 < cutoff)
            # Noncurrent files (an earlier run's, undoable) are not orphans. Read before the files in use (an undo
            # that finished before the mark committed what it restores before it dropped its entries) and after
            # them (a run with a retention that unpublishes meanwhile recorded first); the mark keeps undos out.
            held_before = journal.held_paths()
            used = paths_in_use(self.store)
            if not len(used) and self.store.snapshots.latest_id() is not None:
                raise CorruptMetadataError("the table has snapshots but no file is in use: refusing to delete anything")
            held_after = journal.held_paths()
            if not dry_run:
                mark.check(self.store.uri, "no orphan was removed")
            doomed: list[tuple[str, int]] = []
            for paths, sizes in candidates.batches():
                kept = used.contains(paths) | held_before.contains(paths) | held_after.contains(paths)
                for path, size, in_use in zip(paths, sizes, kept.tolist()):
                    if in_use:
                        continue
                    result.add(path, size)
                    if not dry_run:
                        doomed.append((path, size))
                if len(doomed) >= DELETE_BUFFER:
                    self._remove(doomed, mark)
                    doomed = []
            self._remove(doomed, mark)  # nothing on a dry run
        if self.noncurrent is not None and not dry_run and result.orphan_count:
            result.run_id = self.noncurrent.run_id  # recorded: undoable by this id
        return result

    def _remove(self, doomed: list[tuple[str, int]], mark: DeletingMark) -> None:
        """Delete a batch of orphans, or, in a run with a retention, record them as noncurrent (one entry a batch)."""
        if not doomed:
            return
        mark.check(self.store.uri, "no orphan of this batch was removed")
        if self.noncurrent is not None:
            record_removed(self.store, self.noncurrent, entry_key("orphans", doomed[0][0], str(len(doomed))), files=doomed)
            return
        delete_with_progress("deleting orphan files", [path for path, _size in doomed], self.store.files.delete)


class CandidateSpill:
    """The orphan candidates (path, size), written to a local temporary Arrow IPC file as they are
    listed and read back ``batch`` rows at a time: the listing of a table of millions of files is
    never in memory. The file goes when the ``with`` block ends."""

    _SCHEMA = pa.schema([("path", pa.string()), ("size", pa.int64())])

    def __init__(self, batch: int):
        self.batch = batch
        self._file = None

    def __enter__(self) -> "CandidateSpill":
        self._file = tempfile.TemporaryFile(prefix="snaptable-orphans-")
        return self

    def __exit__(self, *exc) -> None:
        self._file.close()

    def write(self, found: Iterable[StoredFile]) -> None:
        with pa.ipc.new_stream(self._file, self._SCHEMA) as writer:
            found = iter(found)
            while chunk := list(itertools.islice(found, self.batch)):
                writer.write_batch(pa.record_batch([[f.path for f in chunk], [f.size for f in chunk]], schema=self._SCHEMA))

    def batches(self) -> Iterator[tuple[list[str], list[int]]]:
        self._file.seek(0)
        with pa.ipc.open_stream(self._file) as reader:
            for batch in reader:
                yield batch.column("path").to_pylist(), batch.column("size").to_pylist()


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
    # The text of an integer is a time in epoch millis, as the integer is (not a duration in seconds).
    if isinstance(older_than, timedelta) or (
        isinstance(older_than, str) and not is_epoch_millis_text(older_than) and _is_duration(older_than)
    ):
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
