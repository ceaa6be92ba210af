"""What the table references, what it is missing, and cleaning what nothing references.

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
from typing import TYPE_CHECKING

from airflow_snaptable.core.checks import check_bool
from airflow_snaptable.core.errors import CorruptMetadataError, InvalidArgumentError
from airflow_snaptable.core.manifest import MANIFEST_DIR, apply_entries, manifest_path
from airflow_snaptable.core.options import parse_duration
from airflow_snaptable.core.writer import DATA_DIR

if TYPE_CHECKING:
    from airflow_snaptable.core.table import Table

DEFAULT_ORPHAN_WINDOW = timedelta(days=1)
# Directories whose leftovers from interrupted writes (temp files) are candidates too.
_METADATA_DIRS = ("snapshot", "tag", "consumer", "plan", "intent", "schema", "readd", "_probe")


@dataclass
class InUse:
    data_files: dict[str, str] = field(default_factory=dict)  # path -> what references it
    manifest_files: dict[str, str] = field(default_factory=dict)

    def all_paths(self) -> set[str]:
        return set(self.data_files) | set(self.manifest_files)


def in_use(table: "Table") -> InUse:
    """Every data file and manifest a live snapshot or tag references. O(history) reads, in bulk; fails closed.

    Every snapshot's and tag's lists are read (a missing one aborts the run); of the
    manifests, only the earliest state's, the tags' and the commits' deltas: a later
    state's files are the earliest state's plus what the commits since added.
    """
    used = InUse()
    snapshots = table.snapshot_manager
    manifests = table.manifest_io
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    history = [s for s, _size in snapshots.read_ids(range(earliest, latest + 1)).values()] if earliest is not None and latest is not None else []
    tags = table.tag_manager.tags()
    lists = manifests.read_lists(
        name for s in history + [t.snapshot for t in tags] for name in (s.base_manifest_list, s.delta_manifest_list)
    )

    def listed(snapshot, which: str = "both") -> list[str]:
        names = {"base": [snapshot.base_manifest_list], "delta": [snapshot.delta_manifest_list]}.get(
            which, [snapshot.base_manifest_list, snapshot.delta_manifest_list]
        )
        return [m.file_name for name in names for m in lists[name]]

    folded = history[:1] + [t.snapshot for t in tags]  # states read whole
    entries = manifests.read_manifests(
        [name for s in folded for name in listed(s)] + [name for s in history[1:] for name in listed(s, "delta")]
    )

    def state(snapshot) -> dict:
        files: dict = {}
        for name in listed(snapshot):  # base manifests, then delta: the fold order
            apply_entries(files, entries[name])
        return files

    def referenced(snapshot) -> list[str]:
        return [snapshot.base_manifest_list, snapshot.delta_manifest_list] + listed(snapshot)

    if history:
        first = history[0]
        for path in state(first):
            used.data_files.setdefault(path, f"snapshot {first.id}")
        for snapshot in history:
            for name in referenced(snapshot):
                used.manifest_files.setdefault(manifest_path(name), f"snapshot {snapshot.id}")
            if snapshot is not first:
                # Every file of a later state is in the earliest state or added since.
                for name in listed(snapshot, "delta"):
                    for entry in entries[name]:
                        used.data_files.setdefault(entry.file.path, f"snapshot {snapshot.id}")
    for tag in tags:
        for path in state(tag.snapshot):
            used.data_files.setdefault(path, f"tag {tag.name}")
        for name in referenced(tag.snapshot):
            used.manifest_files.setdefault(manifest_path(name), f"tag {tag.name}")
    return used


@dataclass
class VerifyResult:
    missing_files: list[dict] = field(default_factory=list)  # {"path", "referenced_by"}
    unreferenced_files: list[str] = field(default_factory=list)
    snapshot_ids: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing_files and not self.unreferenced_files

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def verify(table: "Table") -> VerifyResult:
    """Every file a live snapshot or tag references that is missing, and every file nothing references."""
    result = VerifyResult()
    storage = table.storage
    present = {rel for rel, _size, _mtime in storage.list_files(DATA_DIR) + storage.list_files(MANIFEST_DIR)}
    leftovers = [rel for rel, _s, _m in _metadata_leftovers(table)]
    try:
        used = in_use(table)
    except CorruptMetadataError as exc:
        result.missing_files.append({"path": str(exc), "referenced_by": "metadata"})
        return result
    for path, owner in sorted({**used.data_files, **used.manifest_files}.items()):
        if path not in present:
            result.missing_files.append({"path": path, "referenced_by": owner})
    result.unreferenced_files = sorted((present - used.all_paths()) | set(leftovers))
    result.snapshot_ids = table.snapshot_manager.list_ids()
    result.tags = [t.name for t in table.tag_manager.tags()]
    return result


def _metadata_leftovers(table: "Table") -> list[tuple[str, int, float | None]]:
    """Temp files of interrupted atomic writes in the metadata directories."""
    found = []
    for directory in _METADATA_DIRS:
        for rel, size, mtime in table.storage.list_files(directory):
            name = rel.rsplit("/", 1)[-1]
            if (name.startswith(".") and name.endswith(".tmp")) or directory == "_probe":
                found.append((rel, size, mtime))
    return found


@dataclass
class OrphanResult:
    orphan_files: list[str] = field(default_factory=list)
    orphan_count: int = 0
    bytes: int = 0
    older_than_millis: int = 0
    dry_run: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


def remove_orphan_files(table: "Table", older_than=None, dry_run: bool = True, now=None) -> OrphanResult:
    """Delete (or, on a dry run, list) files under the table that nothing references and that are
    older than ``older_than`` (a time, or a duration back from now; default 1 day)."""
    check_bool(dry_run, "dry_run")
    cutoff = _cutoff_millis(table, older_than, now)

    storage = table.storage
    # Candidates first, then the in-use set: a file committed in between is in the set.
    listed = storage.list_files(DATA_DIR) + storage.list_files(MANIFEST_DIR) + _metadata_leftovers(table)
    candidates = [(rel, size) for rel, size, mtime in listed if mtime is not None and mtime * 1000 < cutoff]
    used = in_use(table)
    if not used.all_paths() and table.snapshot_manager.latest_id() is not None:
        raise CorruptMetadataError("the table has snapshots but no file is in use: refusing to delete anything")
    used_paths = used.all_paths()
    result = OrphanResult(older_than_millis=cutoff, dry_run=dry_run)
    for rel, size in candidates:
        if rel in used_paths:
            continue
        result.orphan_files.append(rel)
        result.bytes += size
    if not dry_run:
        storage.delete_files(result.orphan_files)
    result.orphan_count = len(result.orphan_files)
    return result


def _cutoff_millis(table: "Table", older_than, now) -> int:
    """Files modified before this (epoch millis) may be deleted.

    A ``now`` later than the real clock never moves the cutoff later: file ages come from
    the storage, where a commit in flight has files only seconds old, so the window the
    caller asked for is measured back from ``min(now, real clock)``, and an absolute
    ``older_than`` after it is an error.
    """
    now_millis = table.clock() if now is None else table.to_millis(now)
    reference = min(now_millis, int(time.time() * 1000))
    if older_than is None:
        return reference - int(DEFAULT_ORPHAN_WINDOW.total_seconds() * 1000)
    if isinstance(older_than, timedelta) or (isinstance(older_than, str) and _is_duration(older_than)):
        return reference - int(parse_duration(older_than, "older_than").total_seconds() * 1000)
    cutoff = table.to_millis(older_than)
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
