"""Orphan-file removal on an Iceberg table (Iceberg's ``DeleteOrphanFiles``).

Everything under the table location that no metadata version references is an orphan once it
is older than the safety window (default 3 days, Iceberg's): valid are every file any snapshot
in the current metadata reaches (manifest lists, manifests, live data and delete files), the
statistics files, every metadata file of the metadata log and the current one, and
``version-hint.text``. Paths are compared under Iceberg's scheme and prefix equivalences
(files.py). This package's own directory (``snaptable/``) is never a candidate.

The valid files are those of the metadata loaded after the listing, and of every version committed
while they were read: the metadata is loaded again until it holds still (a few rounds, reading only
what is new). A commit can make an old file valid again (``add_files`` adopting an unreferenced
file), and the age window does not protect it.

Noncurrent files (an earlier run's, undoable) are not orphans; a deleting run holds a deleting mark
from before its first read to after its delete, so no undo brings a file back meanwhile
(core/lifecycle/noncurrent/journal.py).
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import timedelta

from airflow_snaptable.core.formats.iceberg.files import LIFECYCLE_DIR, Locator, ManifestReader, reach, statistics_entries
from airflow_snaptable.core.lifecycle.orphans import OrphanResult, cutoff_millis
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.noncurrent.journal import REMOVE_ORPHANS, DeletingMark, JournalEntry, NoncurrentRun, entry_key
from airflow_snaptable.core.formats.iceberg.journal import journal_of

DEFAULT_WINDOW = timedelta(days=3)
#: Loads of the metadata after the first, while commits keep coming during the read of the valid files.
RECHECKS = 3


def valid_files(table, storage: Storage, reader: ManifestReader | None = None) -> set[str]:
    metadata = table.metadata
    locator = Locator(table.location())
    reached = reach(reader or ManifestReader(storage, locator), metadata.snapshots, only_live=True)
    valid = reached.all()
    named = [f.statistics_path for f in statistics_entries(metadata)] + [e.metadata_file for e in metadata.metadata_log] + [table.metadata_location]
    valid.update(rel for rel in (locator.relative(p) for p in named) if rel is not None)
    valid.add("metadata/version-hint.text")
    return valid


def remove_orphan_files(
    table_loader, storage: Storage, now_millis: int, older_than=None, dry_run: bool = True, noncurrent: NoncurrentRun | None = None
) -> OrphanResult:
    """``noncurrent``: a run with a retention records the orphans (core/lifecycle/noncurrent/) instead of deleting them.
    Noncurrent files of earlier runs are never orphans."""
    cutoff = cutoff_millis(now_millis, DEFAULT_WINDOW if older_than is None else older_than)
    journal = journal_of(storage)
    with nullcontext() if dry_run else DeletingMark(journal, REMOVE_ORPHANS) as mark:
        # Candidates first, then what is valid: a file committed in between is valid.
        candidates = [
            f for f in storage.iter_files("")
            if not f[0].startswith(LIFECYCLE_DIR + "/") and f[2] is not None and f[2] * 1000 < cutoff
        ]
        # Noncurrent files are read before the valid files and after them: an expiry with a retention records
        # before it commits, and the deleting mark keeps undos out (an undo that finished before it committed
        # what it restores before it dropped its entries): every file either moves is in one of the three reads.
        held_before = journal.held_paths()
        table = table_loader()
        reader = ManifestReader(storage, Locator(table.location()))  # lists and manifests are immutable: read once
        valid = valid_files(table, storage, reader)
        for _ in range(RECHECKS):
            latest = table_loader()
            if latest.metadata_location == table.metadata_location:
                break
            table = latest
            valid |= valid_files(table, storage, reader)
        held_after = journal.held_paths()
        orphans = sorted(
            (rel, size) for rel, size, _mtime in candidates if rel not in valid and rel not in held_before and rel not in held_after
        )
        result = OrphanResult(older_than_millis=cutoff, dry_run=dry_run)
        if not dry_run:
            mark.check(table.location(), "no orphan was removed")
            if noncurrent is not None and orphans:
                journal.write(JournalEntry(noncurrent, entry_key("orphans", orphans[0][0], str(len(orphans))), data_files=orphans))
                result.run_id = noncurrent.run_id
            elif noncurrent is None:
                storage.delete_files([rel for rel, _size in orphans])
    for rel, size in orphans:
        result.add(rel, size)  # lists at most MAX_LISTED_ORPHANS, counts all
    return result
