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
from airflow_snaptable.core.errors import (
    CorruptMetadataError,
    InvalidArgumentError,
    InvalidNameError,
    SnapTableError,
    TagNotFoundError,
)
from airflow_snaptable.core.manifest import MANIFEST_DIR, apply_entries, manifest_path
from airflow_snaptable.core.options import parse_duration
from airflow_snaptable.core.snapshot import snapshot_path
from airflow_snaptable.core.tags import tag_path
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
    #: Byte sizes the metadata records for those files: data files (manifest entries), manifests
    #: (their lists) and manifest lists (a snapshot's written_metadata, where it has one).
    recorded_sizes: dict[str, int] = field(default_factory=dict)

    def all_paths(self) -> set[str]:
        return set(self.data_files) | set(self.manifest_files)


def in_use(table: "Table") -> InUse:
    """Every data file and manifest a live snapshot or tag references. O(history) reads, in bulk; fails closed.

    Every retained snapshot must be readable: a missing or unreadable one raises (what it
    references is unknown, so nothing may be deleted on the strength of this set).
    """
    snapshots = table.snapshot_manager
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    history = [s for s, _size in snapshots.read_ids(range(earliest, latest + 1)).values()] if earliest is not None and latest is not None else []
    return referenced_by(table, history, table.tag_manager.tags())


def referenced_by(table: "Table", history: list, tags: list) -> InUse:
    """What the snapshots ``history`` (ascending ids, possibly with gaps) and ``tags`` reference.

    Every snapshot's and tag's lists are read (a missing one raises); of the manifests, only
    the states read whole (the first snapshot of each run of consecutive ids, and the tags')
    and the other commits' deltas: a later state's files are its run's first state's plus what
    the commits since added. Without gaps that run is the whole history (in_use); verify
    passes what it could read, so a gap or an unreadable snapshot splits a run.
    """
    used = InUse()
    manifests = table.manifest_io
    lists = manifests.read_lists(
        name for s in history + [t.snapshot for t in tags] for name in (s.base_manifest_list, s.delta_manifest_list)
    )

    def listed(snapshot, which: str = "both") -> list[str]:
        names = {"base": [snapshot.base_manifest_list], "delta": [snapshot.delta_manifest_list]}.get(
            which, [snapshot.base_manifest_list, snapshot.delta_manifest_list]
        )
        return [m.file_name for name in names for m in lists[name]]

    run_starts = {s.id for i, s in enumerate(history) if i == 0 or history[i - 1].id != s.id - 1}
    folded = [s for s in history if s.id in run_starts] + [t.snapshot for t in tags]  # states read whole
    entries = manifests.read_manifests(
        [name for s in folded for name in listed(s)]
        + [name for s in history if s.id not in run_starts for name in listed(s, "delta")]
    )

    def state(snapshot) -> dict:
        files: dict = {}
        for name in listed(snapshot):  # base manifests, then delta: the fold order
            apply_entries(files, entries[name])
        return files

    def reference_metadata(snapshot, owner: str) -> None:
        for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            used.manifest_files.setdefault(manifest_path(name), owner)
            for meta in lists[name]:
                used.manifest_files.setdefault(manifest_path(meta.file_name), owner)
                used.recorded_sizes.setdefault(manifest_path(meta.file_name), meta.file_size)
        for path, size in written_sizes(snapshot).items():
            used.recorded_sizes.setdefault(path, size)

    def reference_data(data_file, owner: str) -> None:
        used.data_files.setdefault(data_file.path, owner)
        used.recorded_sizes.setdefault(data_file.path, data_file.file_size)

    for snapshot in history:
        owner = f"snapshot {snapshot.id}"
        reference_metadata(snapshot, owner)
        if snapshot.id in run_starts:
            for data_file in state(snapshot).values():
                reference_data(data_file, owner)
        else:
            # Every file of a later state is in its run's first state or added since.
            for name in listed(snapshot, "delta"):
                for entry in entries[name]:
                    reference_data(entry.file, owner)
    for tag in tags:
        owner = f"tag {tag.name}"
        for data_file in state(tag.snapshot).values():
            reference_data(data_file, owner)
        reference_metadata(tag.snapshot, owner)
    return used


def written_sizes(snapshot) -> dict[str, int]:
    """Byte sizes of the metadata files ``snapshot``'s commit wrote, as it recorded them (no I/O; {} without the record)."""
    written = snapshot.written_metadata or {}
    sizes = {}
    for key, name in (("base_list", snapshot.base_manifest_list), ("delta_list", snapshot.delta_manifest_list)):
        if isinstance(written.get(key), int):
            sizes[manifest_path(name)] = written[key]
    for key in ("delta_manifests", "merged_manifests"):
        for name, size in (written.get(key) or {}).items():
            if isinstance(size, int):
                sizes[manifest_path(name)] = size
    return sizes


@dataclass
class VerifyResult:
    missing_files: list[dict] = field(default_factory=list)  # {"path", "referenced_by"}
    unreferenced_files: list[str] = field(default_factory=list)
    snapshot_ids: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    #: Files whose size differs from the size the metadata records (truncated or overwritten):
    #: {"path", "recorded_size", "actual_size", "referenced_by"}.
    size_mismatches: list[dict] = field(default_factory=list)
    #: Metadata files that exist but cannot be parsed (snapshot, tag, consumer, plan, intent,
    #: re-add entry); expiry and the other maintenance calls fail on them: {"path", "error"}.
    corrupt_metadata: list[dict] = field(default_factory=list)
    #: Runs of snapshot ids missing between EARLIEST and LATEST (an interrupted rollback to an
    #: expired snapshot, or lost files): {"first_missing", "last_missing", "after", "before"}.
    snapshot_gaps: list[dict] = field(default_factory=list)
    #: Snapshots committed more than ``commit.max-clock-skew`` after the real clock (clock skew):
    #: {"snapshot_id", "time_millis", "ahead_millis"}.
    future_snapshots: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.missing_files or self.unreferenced_files or self.size_mismatches or self.corrupt_metadata
            or self.snapshot_gaps or self.future_snapshots
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def verify(table: "Table") -> VerifyResult:
    """Everything wrong with the table's files that a reader or the maintenance calls would trip on.

    Reports (never raises on) missing and unreferenced files, files whose size is not the
    recorded one, unparsable metadata, gaps in the snapshot ids and snapshots stamped in the
    future. Cost: one listing per directory (sizes come from the listings), the reads of an
    orphan clean's in-use pass, and one small read per lifecycle file.
    """
    result = VerifyResult()
    storage = table.storage
    present = {rel: size for rel, size, _mtime in storage.list_files(DATA_DIR) + storage.list_files(MANIFEST_DIR)}
    leftovers = [rel for rel, _s, _m in _metadata_leftovers(table)]
    history = _read_history(table, result)
    tags = _read_tags(table, result)
    result.corrupt_metadata += _corrupt_lifecycle_files(table)
    # Commit times never go backwards, so a snapshot from the future makes later commits fail
    # (ClockSkewError) or carry its time, and time travel and time-based expiry go wrong until
    # the real clock catches up. The tolerance is the one commits apply; the clock is the real
    # one, not table.clock: a writer's clock is the suspect.
    now = time.time() * 1000
    tolerance = table.options.get("commit.max-clock-skew").total_seconds() * 1000
    result.future_snapshots = [
        {"snapshot_id": s.id, "time_millis": s.time_millis, "ahead_millis": int(s.time_millis - now)}
        for s in history
        if s.time_millis > now + tolerance
    ]
    # Sizes the snapshots recorded for what their commits wrote need no read: checked even when
    # a damaged manifest makes the in-use pass fail.
    written = {path: (size, f"snapshot {s.id}") for s in history for path, size in written_sizes(s).items()}
    try:
        used = referenced_by(table, history, tags)
    except CorruptMetadataError as exc:
        result.missing_files.append({"path": str(exc), "referenced_by": "metadata"})
        used = None
    recorded = dict(written)
    if used is not None:
        owners = {**used.manifest_files, **used.data_files}
        recorded.update((path, (size, owners.get(path, "metadata"))) for path, size in used.recorded_sizes.items())
    for path, (size, owner) in sorted(recorded.items()):
        if path in present and present[path] != size:
            result.size_mismatches.append({"path": path, "recorded_size": size, "actual_size": present[path], "referenced_by": owner})
    if used is None:
        return result
    for path, owner in sorted({**used.data_files, **used.manifest_files}.items()):
        if path not in present:
            result.missing_files.append({"path": path, "referenced_by": owner})
    result.unreferenced_files = sorted((set(present) - used.all_paths()) | set(leftovers))
    return result


def _read_history(table: "Table", result: VerifyResult) -> list:
    """The readable snapshots from EARLIEST to LATEST; gaps and unparsable ones go into ``result``."""
    snapshots = table.snapshot_manager
    result.snapshot_ids = snapshots.list_ids()
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    if earliest is None or latest is None:
        return []
    # Ids below EARLIEST are ones a stale commit re-created and is about to undo (SnapshotManager.earliest_id).
    retained = [i for i in result.snapshot_ids if earliest <= i <= latest]
    result.snapshot_gaps = [
        {"first_missing": a + 1, "last_missing": b - 1, "after": a, "before": b} for a, b in zip(retained, retained[1:]) if b > a + 1
    ]
    paths = {i: snapshot_path(i) for i in retained}
    contents = _read_files(table.storage, list(paths.values()), result.corrupt_metadata)
    history = []
    for snapshot_id, path in paths.items():
        data = contents.get(path)
        if data is None:
            continue  # expired or rolled back since the listing
        try:
            history.append(snapshots._parse(snapshot_id, path, data))
        except CorruptMetadataError as exc:
            result.corrupt_metadata.append({"path": path, "error": str(exc)})
    return history


def _read_tags(table: "Table", result: VerifyResult) -> list:
    """The readable tags (ordered as TagManager.tags()); unreadable ones go into ``result``."""
    tags = []
    for name in table.tag_manager.names():
        try:
            tags.append(table.tag_manager.tag(name))
        except TagNotFoundError:
            continue  # deleted since the listing
        except SnapTableError as exc:  # unparsable, or a name no tag may have: every tags() call fails on it
            result.corrupt_metadata.append({"path": tag_path(name), "error": str(exc)})
    result.tags = [t.name for t in sorted(tags, key=lambda t: (t.snapshot_id, t.name))]
    return sorted(tags, key=lambda t: (t.snapshot_id, t.name))


def _corrupt_lifecycle_files(table: "Table") -> list[dict]:
    """Consumer, plan, intent and re-add files that cannot be parsed, each with its parser's error.

    The same files (and names) the managers read: any of them failing makes expiry, tag
    deletion and rollback fail closed, so verify names them instead.
    """
    from airflow_snaptable.core.consumers import CONSUMER_DIR, CONSUMER_PREFIX, Consumer
    from airflow_snaptable.core.intents import INTENT_DIR, INTENT_PREFIX, Intent
    from airflow_snaptable.core.names import validate_name
    from airflow_snaptable.core.plans import PLAN_DIR, DeletionPlan
    from airflow_snaptable.core.readds import READD_DIR, is_entry_name, parse_entry

    storage = table.storage

    def parse_consumer(rel: str, data: bytes) -> None:
        # ConsumerManager.consumers() validates each id from its file name before parsing.
        validate_name(rel.rsplit("/", 1)[-1][len(CONSUMER_PREFIX):], "consumer")
        Consumer.from_json(data, storage.full_uri(rel))

    checks = [
        (CONSUMER_DIR, lambda n: n.startswith(CONSUMER_PREFIX), parse_consumer),
        (PLAN_DIR, lambda n: n.endswith(".json"), lambda rel, data: DeletionPlan.from_json(data, storage.full_uri(rel))),
        (INTENT_DIR, lambda n: n.startswith(INTENT_PREFIX) and n.endswith(".json"),
         lambda rel, data: Intent.from_json(data, storage.full_uri(rel))),
        (READD_DIR, is_entry_name, lambda rel, data: parse_entry(data, storage.full_uri(rel))),
    ]
    corrupt: list[dict] = []
    for directory, wanted, parse in checks:
        rels = [f"{directory}/{name}" for name in storage.list_names(directory) if wanted(name)]
        contents = _read_files(storage, rels, corrupt)
        for rel in rels:
            if contents.get(rel) is None:
                continue  # finished or withdrawn since the listing
            try:
                parse(rel, contents[rel])
            except (CorruptMetadataError, InvalidNameError) as exc:
                corrupt.append({"path": rel, "error": str(exc)})
    return corrupt


def _read_files(storage, rels: list[str], corrupt: list[dict]) -> dict[str, bytes]:
    """``Storage.read_many``, except that a path which is no file (a directory) goes into ``corrupt``
    instead of failing the whole read; missing files are absent, as there."""
    try:
        return storage.read_many(rels)
    except CorruptMetadataError:
        pass
    contents = {}
    for rel in rels:
        try:
            contents[rel] = storage.read_bytes(rel)
        except FileNotFoundError:
            continue
        except CorruptMetadataError as exc:
            corrupt.append({"path": rel, "error": str(exc)})
    return contents


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
