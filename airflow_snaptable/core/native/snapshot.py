"""Snapshots and the manager that finds them.

Snapshot ids are contiguous from EARLIEST to LATEST. ``snapshot/LATEST`` and
``snapshot/EARLIEST`` are hints written after the fact; a reader checks each
hint with O(1) existence probes before trusting it and lists the directory
when the hint is missing, unreadable or stale.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Callable, Iterable, Iterator

from airflow_snaptable.core.errors import (
    CorruptMetadataError,
    SnapshotGapError,
    SnapshotNotFoundError,
    UnsupportedMetadataError,
)
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.io.table_paths import checked_file_name

SNAPSHOT_DIR = "snapshot"
LATEST_HINT = f"{SNAPSHOT_DIR}/LATEST"
EARLIEST_HINT = f"{SNAPSHOT_DIR}/EARLIEST"
#: Where ``unpublish`` renames snapshot ``{}``'s file: id listings skip it, orphan cleaning removes it as a leftover.
UNPUBLISHED = f"{SNAPSHOT_DIR}/.snapshot-{{}}.unpublished.tmp"
_SNAPSHOT_FILE = re.compile(r"^snapshot-(\d+)$")
#: The snapshot file format this code reads and writes; another one is refused, never half understood.
FORMAT_VERSION = 1
# How far past a stale LATEST hint we probe one id at a time before listing instead.
_MAX_FORWARD_PROBES = 8


class CommitKind(str, Enum):
    APPEND = "APPEND"
    OVERWRITE = "OVERWRITE"
    DELETE = "DELETE"
    COMPACT = "COMPACT"


@dataclass(frozen=True)
class FileCounts:
    """How many data files one commit added and deleted (what ``snaptable snapshots`` and the timeline show)."""

    added: int
    deleted: int
    #: Index files the snapshot lists (Paimon's dynamic-bucket hash indexes; None: not counted, or the format keeps none).
    index_files: int | None = None
    #: Changelog files the commit wrote (Paimon's ``changelogManifestList``; None: not counted, or the snapshot has none).
    changelog_files: int | None = None


@dataclass(frozen=True)
class Snapshot:
    """One immutable, numbered state of the table."""

    id: int
    parent_id: int | None
    schema_id: int
    commit_kind: CommitKind
    commit_user: str
    commit_identifier: int | None
    time_millis: int
    total_record_count: int
    delta_record_count: int
    watermark: int | None
    base_manifest_list: str
    delta_manifest_list: str
    summary: dict[str, Any] = field(default_factory=dict)
    #: The metadata files this commit wrote, with byte sizes: ``{"base_list": n, "delta_list": n,
    #: "delta_manifests": {name: n}, "merged_manifests": {name: n}}`` (merged: new manifests in the
    #: base list). Expiry reads these instead of every expired snapshot's lists. None in
    #: snapshots written before it existed; readers then read the lists.
    written_metadata: dict[str, Any] | None = None
    #: The parent's ``base_manifest_list``, unique to the commit attempt that made the parent: which
    #: snapshot this one was built on, where an id alone cannot tell (an expired id re-created by a
    #: stale writer). None for the first snapshot and in snapshots written before it existed.
    parent_base_manifest_list: str | None = None
    #: Where the commits below this one that may delete files are (core/native/deleting_commits.py):
    #: ``{"id": p, "base_manifest_list": name}`` names snapshot ``p`` of this snapshot's lineage, and
    #: every snapshot strictly between ``p`` and this one deletes no file (``deletes_no_file``);
    #: ``{"id": 0}``: none down to the first snapshot. None in snapshots written before it existed.
    may_delete_below: dict[str, Any] | None = None

    @property
    def deletes_no_file(self) -> bool:
        """An append that records deleting no file: its delta holds no DELETE entry. A snapshot that
        records nothing (another format's, or older) may delete."""
        return self.commit_kind is CommitKind.APPEND and (self.summary or {}).get("deleted_files") == 0

    def to_json(self) -> bytes:
        doc = asdict(self)
        doc["commit_kind"] = self.commit_kind.value
        doc["version"] = FORMAT_VERSION
        return json.dumps(doc, indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str = "snapshot") -> "Snapshot":
        try:
            doc = json.loads(data)
            version = doc.pop("version", FORMAT_VERSION)
            if version != FORMAT_VERSION:
                raise UnsupportedMetadataError(f"{where}: snapshot format version {version!r} is not {FORMAT_VERSION}")
            doc["commit_kind"] = CommitKind(doc["commit_kind"])
            snapshot = cls(**doc)
            if not isinstance(snapshot.id, int) or snapshot.id < 1:
                raise ValueError(f"bad id {snapshot.id!r}")
            _check_metadata_names(snapshot, where)
            return snapshot
        except (UnsupportedMetadataError, CorruptMetadataError):
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot parse snapshot file: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["commit_kind"] = self.commit_kind.value
        return doc


def _check_metadata_names(snapshot: Snapshot, where: str) -> None:
    """The metadata files a snapshot names (its lists, the manifests its commit wrote) are plain names
    in ``manifest/``: expiry deletes them by these names."""
    for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
        checked_file_name(name, "manifest list name", where)
    written = snapshot.written_metadata
    if written is None:
        return
    if not isinstance(written, dict):
        raise CorruptMetadataError(f"{where}: written_metadata is not an object")
    for key in ("delta_manifests", "merged_manifests"):
        names = written.get(key) or {}
        if not isinstance(names, dict):
            raise CorruptMetadataError(f"{where}: written_metadata.{key} is not an object")
        for name in names:
            checked_file_name(name, "manifest name", where)


def snapshot_path(snapshot_id: int) -> str:
    return f"{SNAPSHOT_DIR}/snapshot-{snapshot_id}"


def read_snapshot_files(storage: Storage, snapshot_ids: Iterable[int],
                        parse: Callable[[int, str, bytes], Snapshot]) -> dict[int, tuple[Snapshot, int]]:
    """Those snapshots with their file sizes, read in one ``Storage.read_many`` from the ``snapshot/`` layout
    ours shares with Paimon, each parsed by ``parse(id, path, data)`` (the format's reader); a missing one
    raises SnapshotNotFoundError (callers reading a range fail closed)."""
    paths = {snapshot_id: snapshot_path(snapshot_id) for snapshot_id in snapshot_ids}
    contents = storage.read_many(list(paths.values()))
    found = {}
    for snapshot_id, path in paths.items():
        data = contents.get(path)
        if data is None:
            raise SnapshotNotFoundError(f"snapshot {snapshot_id} does not exist in {storage.uri}")
        found[snapshot_id] = (parse(snapshot_id, path, data), len(data))
    return found


def parse_snapshot_id(name: str) -> int | None:
    match = _SNAPSHOT_FILE.match(name)
    return int(match.group(1)) if match else None


class SnapshotManager:
    """Reads snapshots and answers "which ids exist" with as few storage operations as it can."""

    def __init__(self, storage: Storage):
        self.storage = storage

    # -- single snapshots --------------------------------------------------

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self.snapshot_and_size(snapshot_id)[0]

    def snapshot_and_size(self, snapshot_id: int) -> tuple[Snapshot, int]:
        """The snapshot and its file's size in bytes."""
        path = snapshot_path(snapshot_id)
        try:
            data = self.storage.read_bytes(path)
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"snapshot {snapshot_id} does not exist in {self.storage.uri}") from None
        return self.parse(snapshot_id, path, data), len(data)

    def read_ids(self, snapshot_ids: Iterable[int]) -> dict[int, tuple[Snapshot, int]]:
        """Those snapshots with their file sizes (:func:`read_snapshot_files`)."""
        return read_snapshot_files(self.storage, snapshot_ids, self.parse)

    def parse(self, snapshot_id: int, path: str, data: bytes) -> Snapshot:
        """The snapshot in ``data``, read from ``path``; CorruptMetadataError if it is not snapshot ``snapshot_id``."""
        snapshot = Snapshot.from_json(data, where=self.storage.full_uri(path))
        if snapshot.id != snapshot_id:
            raise CorruptMetadataError(f"{path} holds snapshot id {snapshot.id}")
        return snapshot

    def exists(self, snapshot_id: int) -> bool:
        return self.storage.exists(snapshot_path(snapshot_id))

    def commit(self, snapshot: Snapshot) -> bool:
        """Publish ``snapshot`` atomically; False if its id is taken already."""
        return self.storage.create_exclusive(snapshot_path(snapshot.id), snapshot.to_json())

    @staticmethod
    def path(snapshot_id: int) -> str:
        """Where the snapshot's file is, relative to the table root."""
        return snapshot_path(snapshot_id)

    @staticmethod
    def identity(snapshot: Snapshot) -> str:
        """What tells this commit apart from another one under the same id (a rollback lets ids be
        reused): its base manifest list, whose name is unique to the commit attempt that wrote it."""
        return snapshot.base_manifest_list

    # -- unpublishing (the format's part of a deletion plan, core/lifecycle/plan_executor.py) --------

    def unpublish(self, snapshot_ids: Iterable[int]) -> list[str]:
        """Remove these snapshots from the history one file at a time in order (a crash leaves a prefix removed; one gone is
        success). Local disks rename each aside (7x cheaper than an unlink) and return those paths, on a rerun too, to delete."""
        aside = []
        for snapshot_id in snapshot_ids:
            aside.append(UNPUBLISHED.format(snapshot_id))
            if not self.storage.move_aside(snapshot_path(snapshot_id), aside[-1]):
                self.storage.delete(snapshot_path(snapshot_id))  # no cheap rename here (object stores)
                aside.pop()
        self.storage.sync_directory(SNAPSHOT_DIR)  # gone for good before the files they name are deleted
        return aside

    def restore(self, snapshot: Snapshot) -> None:
        """Publish an expired snapshot again (a rollback to a tag whose snapshot expired), below the
        retained ids. Nothing happens when it exists."""
        if self.exists(snapshot.id):
            return
        # The hint goes down before the snapshot reappears: below an existing EARLIEST there are
        # only ids a stale commit re-created (see earliest_id).
        self.write_earliest_hint(snapshot.id)
        self.storage.create_exclusive(snapshot_path(snapshot.id), snapshot.to_json())

    def republish(self, snapshot: Snapshot) -> bool:
        """Publish a snapshot a rollback discarded again, above the latest (undoing the rollback,
        core/lifecycle/noncurrent/undo.py); False, writing nothing, when a commit took the id meanwhile."""
        if not self.storage.create_exclusive(snapshot_path(snapshot.id), snapshot.to_json()):
            return False
        self.write_latest_hint(snapshot.id)
        return True

    # -- ids -----------------------------------------------------------------

    def list_ids(self) -> list[int]:
        ids = (parse_snapshot_id(name) for name in self.storage.list_names(SNAPSHOT_DIR))
        return sorted(i for i in ids if i is not None)

    def _read_hint(self, path: str) -> int | None:
        try:
            text = self.storage.read_bytes(path).decode().strip()
            value = int(text)
            return value if value >= 1 else None
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            return None

    def earliest_floor(self) -> int:
        """No retained snapshot is below this (the EARLIEST hint as written, unvalidated; 1 without one).

        Expiry raises the hint after unpublishing and before dropping its plan, so a
        snapshot file below it is one a stale commit re-created and is about to undo.
        """
        return self._read_hint(EARLIEST_HINT) or 1

    def latest_id(self) -> int | None:
        """Id of the newest snapshot, or None for an empty table. O(1) operations when the hint is fresh."""
        hint = self._read_hint(LATEST_HINT)
        if hint is not None:
            candidate = hint
            for _ in range(_MAX_FORWARD_PROBES):
                if not self.exists(candidate + 1):
                    # A hint past the end (damage, or a rollback that crashed) must not be trusted.
                    if candidate > hint or self.exists(candidate):
                        return candidate
                    break
                candidate += 1
        ids = self.list_ids()
        return ids[-1] if ids else None

    def earliest_id(self) -> int | None:
        """Id of the oldest snapshot still present, or None for an empty table."""
        hint = self._read_hint(EARLIEST_HINT)
        if hint is not None and self.exists(hint):
            if hint == 1 or not self.exists(hint - 1) or self._recreated_below(hint):
                return hint
            hint = None  # a damaged hint, too high: trust the listing
        # No hint, or a hint whose snapshot is gone (an expiry stopped before moving it).
        ids = self.list_ids()
        above = [i for i in ids if hint is None or i >= hint]
        ids = above or ids  # nothing at or above it: the hint is damaged (past the latest)
        return ids[0] if ids else None

    def _recreated_below(self, hint: int) -> bool:
        """Is snapshot ``hint - 1`` an expired id that a stale commit re-created (about to be undone)?

        Expiry raises the hint only after unpublishing and a rollback lowers it before
        restoring, so a retained snapshot below an existing hint means the hint is
        damaged, and then that snapshot is older than the hint's. A re-created id was
        committed after the hint's snapshot (commit times never go backwards).
        """
        try:
            return self.snapshot(hint - 1).time_millis > self.snapshot(hint).time_millis
        except (SnapshotNotFoundError, CorruptMetadataError):
            return True  # gone again already, or unreadable: not a retained snapshot to show

    def latest_snapshot(self) -> Snapshot | None:
        latest = self.latest_id()
        if latest is None:
            return None
        try:
            return self.snapshot(latest)
        except SnapshotNotFoundError:
            # The hint pointed past the end (e.g. after a rollback); trust the listing.
            ids = self.list_ids()
            return self.snapshot(ids[-1]) if ids else None

    def earliest_snapshot(self) -> Snapshot | None:
        earliest = self.earliest_id()
        return None if earliest is None else self.snapshot(earliest)

    def write_latest_hint(self, snapshot_id: int) -> None:
        self.storage.write_bytes(LATEST_HINT, str(snapshot_id).encode(), durable=False)

    def write_earliest_hint(self, snapshot_id: int) -> None:
        self.storage.write_bytes(EARLIEST_HINT, str(snapshot_id).encode(), durable=False)

    # -- history -------------------------------------------------------------

    def snapshots(self) -> Iterator[Snapshot]:
        """Every snapshot from earliest to latest (one listing, then one read each)."""
        for snapshot_id in self.list_ids():
            try:
                yield self.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                continue  # expired while we were iterating

    def snapshot_at(self, time_millis: int) -> Snapshot | None:
        """The latest snapshot committed at or before ``time_millis`` (binary search, O(log n) reads)."""
        return self._search(lambda s: s.time_millis <= time_millis)

    def snapshot_at_watermark(self, watermark: int) -> Snapshot | None:
        """The earliest snapshot whose watermark is >= ``watermark`` (watermarks never decrease)."""
        last_below = self._search(lambda s: s.watermark is None or s.watermark < watermark)
        latest = self.latest_id()
        if latest is None:
            return None
        candidate = self.earliest_id() if last_below is None else last_below.id + 1
        if candidate is None or candidate > latest:
            return None
        return self.snapshot(candidate)

    def _search(self, before: Any) -> Snapshot | None:
        """The last snapshot for which the monotone predicate ``before`` holds, or None.

        A binary search over EARLIEST..LATEST. An id missing in that range is a snapshot that
        expired under us (EARLIEST moved: search again) or a gap (an interrupted rollback to an
        expired snapshot restores it first, below the retained ones; or lost files). Across a gap
        the present snapshots are searched, and the answer stands unless a missing id could be it:
        then SnapshotGapError names the gap and the way out, instead of a wrong answer.
        """
        for _attempt in range(3):
            low, high = self.earliest_id(), self.latest_id()
            if low is None or high is None:
                return None
            try:
                return self._bisect(before, range(low, high + 1))
            except SnapshotNotFoundError:
                pass
            if self.earliest_id() != low:
                continue  # expiry moved EARLIEST under us; search again
            present = [i for i in self.list_ids() if low <= i <= high]
            if not present or present == list(range(low, high + 1)):
                continue  # no gap (any more): a race, search again
            try:
                found = self._bisect(before, present)
            except SnapshotNotFoundError:
                continue  # the gap is being closed right now
            after = present.index(found.id) + 1 if found is not None else 0
            if found is None or after == len(present) or present[after] == found.id + 1:
                return found  # nothing missing between the answer and its successor: the gap cannot matter
            raise self._gap_error(found.id, present[after])
        raise SnapshotNotFoundError("snapshots kept expiring during the search; try again")

    def _bisect(self, before: Any, ids) -> Snapshot | None:
        """The last snapshot among ``ids`` (ascending) for which ``before`` holds; raises if one is missing."""
        found: Snapshot | None = None
        low, high = 0, len(ids) - 1
        while low <= high:
            middle = (low + high) // 2
            snapshot = self.snapshot(ids[middle])
            if before(snapshot):
                found, low = snapshot, middle + 1
            else:
                high = middle - 1
        return found

    def _gap_error(self, below: int, above: int) -> SnapshotGapError:
        first, last = below + 1, above - 1
        what = f"snapshot {first} is" if first == last else f"snapshots {first}..{last} are"
        # Only an active plan can close a gap (a rollback restores its target after activating its plan).
        unfinished = any(name.startswith("plan-") for name in self.storage.list_names("plan"))  # core/lifecycle/deletion_plans.py PLAN_DIR
        if unfinished:
            remedy = (
                "an unfinished deletion plan is in plan/ (an interrupted rollback to an expired snapshot leaves such a "
                "gap): re-run that rollback, or run any expire_snapshots or rollback_to, which finish unfinished plans first"
            )
        else:
            remedy = (
                "no deletion plan is unfinished, so no rerun restores it: the snapshot files were lost (restore them "
                "from a backup), or a rollback is running right now (re-run this read once it is done)"
            )
        return SnapshotGapError(
            f"{what} missing (between {below} and {above}) in {self.storage.uri} and may hold the answer; {remedy}",
            first,
            last,
        )
