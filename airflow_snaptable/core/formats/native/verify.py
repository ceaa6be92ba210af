"""verify(): what is wrong with a native table, reported, never raised.

It reports what a reader or a maintenance call would trip on (docs/lifecycle.md,
"Orphans and verification"): files a retained snapshot or tag references that are
gone, files nothing references, files whose size is not the one the metadata
records, metadata files that cannot be parsed, gaps in the snapshot ids and
snapshots stamped in the future. It reads the native format's files directly, as
it checks them, and the in-use pass is the orphan clean's (NativeFiles.referenced_by).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable
from datetime import timedelta

from airflow_snaptable.core.native.consumers import CONSUMER_DIR, CONSUMER_PREFIX, Consumer
from airflow_snaptable.core.errors import CorruptMetadataError, InvalidNameError
from airflow_snaptable.core.lifecycle.intents import INTENT_DIR, INTENT_PREFIX, Intent
from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.formats.native.files import NativeFiles, written_sizes
from airflow_snaptable.core.lifecycle.deletion_plans import PLAN_DIR, DeletionPlan
from airflow_snaptable.core.lifecycle.noncurrent.journal import JOURNAL_DIR, JournalEntry, NoncurrentJournal, run_of_entry
from airflow_snaptable.core.lifecycle.readds import READD_DIR, is_entry_name, parse_entry
from airflow_snaptable.core.native.snapshot import Snapshot, SnapshotManager, snapshot_path
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.native.tags import Tag, TagManager, tag_path


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


def verify(
    storage: Storage,
    snapshots: SnapshotManager,
    files: NativeFiles,
    tags: TagManager,
    max_clock_skew: timedelta,
    *,
    lifecycle: Storage | None = None,
    parse_consumer: Callable[[bytes, str], object] = Consumer.from_json,
) -> VerifyResult:
    """Everything wrong with the table's files that a reader or the maintenance calls would trip on.

    Reports (never raises on) missing and unreferenced files, files whose size is not the
    recorded one, unparsable metadata, gaps in the snapshot ids and snapshots stamped in the
    future. Cost: one listing per directory (sizes come from the listings), the reads of an
    orphan clean's in-use pass, and one small read per lifecycle file.

    Another format's store (core/lifecycle/store.py) passes its pieces: ``snapshots`` with
    ``parse(id, path, data)`` for ``snapshot/snapshot-<id>``, ``lifecycle`` where the engine's
    plans and intents are, ``parse_consumer(data, where)`` for its ``consumer/`` files.
    """
    result = VerifyResult()
    present = {found.path: found.size for found in files.listed_files()}
    leftovers = [found.path for found in files.leftover_files()]
    history = _read_history(storage, snapshots, result)
    readable_tags = _read_tags(tags, result)
    result.corrupt_metadata += _corrupt_lifecycle_files(storage, lifecycle or storage, parse_consumer)
    # Commit times never go backwards, so a snapshot from the future makes later commits fail
    # (ClockSkewError) or carry its time, and time travel and time-based expiry go wrong until
    # the real clock catches up. The tolerance is the one commits apply; the clock is the real
    # one, not table.clock: a writer's clock is the suspect.
    now = time.time() * 1000
    tolerance = max_clock_skew.total_seconds() * 1000
    result.future_snapshots = [
        {"snapshot_id": s.id, "time_millis": s.time_millis, "ahead_millis": int(s.time_millis - now)}
        for s in history
        if s.time_millis > now + tolerance
    ]
    # Sizes the snapshots recorded for what their commits wrote need no read: checked even when
    # a damaged manifest makes the in-use pass fail.
    written = {path: (size, f"snapshot {s.id}") for s in history for path, size in written_sizes(s).items()}
    try:
        used = files.referenced_by(history, readable_tags)
    except CorruptMetadataError as exc:
        result.missing_files.append({"path": str(exc), "referenced_by": "metadata"})
        used = None
    # No merged copies of the per-file dicts (a table of a million files): each check walks them once.
    def check_size(path: str, size: int, owner: str) -> None:
        if path in present and present[path] != size:
            result.size_mismatches.append({"path": path, "recorded_size": size, "actual_size": present[path], "referenced_by": owner})

    if used is not None:
        for path, size in used.recorded_sizes.items():  # a data file's owner before a metadata file's
            check_size(path, size, used.data_files[path] if path in used.data_files else used.metadata_files.get(path, "metadata"))
    for path, (size, owner) in written.items():
        if used is None or path not in used.recorded_sizes:
            check_size(path, size, owner)
    result.size_mismatches.sort(key=lambda m: m["path"])
    if used is None:
        return result
    for path, owner in used.data_files.items():
        if path not in present and path not in used.metadata_files:  # a metadata file's owner wins
            result.missing_files.append({"path": path, "referenced_by": owner})
    for path, owner in used.metadata_files.items():
        if path not in present:
            result.missing_files.append({"path": path, "referenced_by": owner})
    result.missing_files.sort(key=lambda m: m["path"])
    unreferenced = {path for path in present if path not in used.data_files and path not in used.metadata_files}
    unreferenced = sorted(unreferenced.union(leftovers))
    try:
        # Noncurrent files (a run's with a retention, undoable until purged) are kept on purpose.
        noncurrent = NoncurrentJournal(lifecycle or storage).held_paths()
    except CorruptMetadataError:
        noncurrent = None  # the entry is reported corrupt above; its files are reported as they are
    if noncurrent is not None and unreferenced:
        unreferenced = [p for p, held in zip(unreferenced, noncurrent.contains(unreferenced).tolist()) if not held]
    result.unreferenced_files = unreferenced
    return result


def _read_history(storage: Storage, snapshots: SnapshotManager, result: VerifyResult) -> list[Snapshot]:
    """The readable snapshots from EARLIEST to LATEST; gaps and unparsable ones go into ``result``."""
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
    contents = _read_files(storage, list(paths.values()), result.corrupt_metadata)
    history = []
    for snapshot_id, path in paths.items():
        data = contents.get(path)
        if data is None:
            continue  # expired or rolled back since the listing
        try:
            history.append(snapshots.parse(snapshot_id, path, data))
        except CorruptMetadataError as exc:
            result.corrupt_metadata.append({"path": path, "error": str(exc)})
    return history


def _read_tags(manager: TagManager, result: VerifyResult) -> list[Tag]:
    """The readable tags; unreadable ones (unparsable, or a name no tag may have: every tags() call
    fails on it) go into ``result``."""
    tags = manager.tags(
        unreadable=lambda name, exc: result.corrupt_metadata.append({"path": tag_path(name), "error": str(exc)})
    )
    result.tags = [t.name for t in tags]
    return tags


def _corrupt_lifecycle_files(storage: Storage, lifecycle: Storage, parse_consumer: Callable[[bytes, str], object]) -> list[dict]:
    """Consumer, plan, intent and re-add files that cannot be parsed, each with its parser's error.

    The same files (and names) the managers read: any of them failing makes expiry, tag
    deletion and rollback fail closed, so verify names them instead.
    """

    def check_consumer(rel: str, data: bytes) -> None:
        # ConsumerManager.consumers() validates each id from its file name before parsing.
        validate_name(rel.rsplit("/", 1)[-1][len(CONSUMER_PREFIX):], "consumer")
        parse_consumer(data, storage.full_uri(rel))

    checks = [
        (storage, CONSUMER_DIR, lambda n: n.startswith(CONSUMER_PREFIX), check_consumer),
        (lifecycle, PLAN_DIR, lambda n: n.endswith(".json"), lambda rel, data: DeletionPlan.from_json(data, lifecycle.full_uri(rel))),
        (lifecycle, INTENT_DIR, lambda n: n.startswith(INTENT_PREFIX) and n.endswith(".json"),
         lambda rel, data: Intent.from_json(data, lifecycle.full_uri(rel))),
        (lifecycle, READD_DIR, is_entry_name, lambda rel, data: parse_entry(data, lifecycle.full_uri(rel))),
        (lifecycle, JOURNAL_DIR, lambda n: run_of_entry(n) is not None,
         lambda rel, data: JournalEntry.from_json(data, lifecycle.full_uri(rel))),
    ]
    corrupt: list[dict] = []
    for root, directory, wanted, parse in checks:
        rels = [f"{directory}/{name}" for name in root.list_names(directory) if wanted(name)]
        contents = _read_files(root, rels, corrupt)
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
