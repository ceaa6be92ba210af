"""What a deletion plan must not delete: the files and metadata tags hold, and files live again.

Rules (docs/lifecycle.md, "Expiry"):
- A candidate data file deleted from the table at snapshot ``s`` with one live
  interval ``[a, s)`` can only be in a tag inside it, and the newest tag below ``s``
  is the only one that can be: that tag is asked. For a deleted tag at ``t``, its
  neighbours decide (the newest below and the oldest at or above).
- A file that was deleted and added back (a keep-history rollback, the only operation
  that re-adds) has several live intervals, and a tag in any of them holds it: every
  tag is asked. Such files are in the re-add registry (core/lifecycle/readds.py) until the file
  itself is deleted.
- A file a retained snapshot at or after ``s`` re-added is live again: kept.
- Tags being created right now (intents, core/lifecycle/intents.py) hold their files like tags.
- Everything is read before anything is unpublished, and any unreadable tag, manifest or
  registry entry raises (fail closed): what cannot be read may be what holds a file.
- A tag's files are asked through a compact set of their path hashes (core/lifecycle/path_hashes.py,
  8 bytes a file, built by streaming the tag's manifests where the store can): a collision
  only keeps a file, never deletes a referenced one. A plan in parts (core/lifecycle/expiry/parts.py)
  asks :meth:`ProtectionReader.protected` one part at a time with the same Protection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from airflow_snaptable.core.errors import MissingMetadataError, TagNotFoundError
from airflow_snaptable.core.lifecycle.intents import IntentManager
from airflow_snaptable.core.native.manifest import FileKind, ManifestEntry
from airflow_snaptable.core.lifecycle.path_hashes import PathHashSet
from airflow_snaptable.core.lifecycle.deletion_plans import ROLLBACK, DataCandidate, DeletionPlan
from airflow_snaptable.core.lifecycle.readds import ReaddEntry, ReaddRegistry
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.lifecycle.store import FileStore, TableStore
from airflow_snaptable.core.native.tags import Tag


@dataclass
class Protection:
    """What a plan must not delete, computed (fail closed) before anything is unpublished."""

    held_manifests: set[str]
    protected_paths: set[str]
    #: Re-add entries of snapshots a rollback discards: retired once it has run.
    discarded_readds: list[ReaddEntry]
    #: What each candidate is checked against (also part by part, for a plan in parts).
    tags: tuple[Tag, ...] = ()
    readds: tuple[ReaddEntry, ...] = ()
    multi_interval: frozenset[str] = frozenset()


class ProtectionReader:
    """Reads tags, announced tags, their file sets and the re-add registry for one plan at a time."""

    def __init__(self, store: TableStore):
        self.store = store
        self.intents = IntentManager(store.lifecycle)
        self.readds = ReaddRegistry(store.lifecycle)
        self._files_by_tag: dict[tuple, PathHashSet] = {}

    def read(self, plan: DeletionPlan) -> Protection:
        """Raises on anything unreadable."""
        self._files_by_tag = {}
        doomed = self.doomed_tag_names(plan)
        # Intents first: a writer withdraws its intent only after publishing the tag, so
        # one of the two listings sees every tag whose writer passed its check.
        announced = self._announced_tags()
        tags = [t for t in self.store.tags.tags() if t.name not in doomed] + announced
        tags.sort(key=lambda t: (t.snapshot_id, t.name))
        readds = self.readds.entries()
        multi_interval = ReaddRegistry.multi_interval(readds)  # discarded re-adds included: the intervals were real
        discarded = []
        if plan.kind == ROLLBACK and plan.ceiling is not None:
            # Liveness at discarded snapshots was accounted for when the rollback was planned.
            discarded = [e for e in readds if e.live and e.snapshot_id is not None and e.snapshot_id > plan.ceiling]
        # A re-add at an expired snapshot says nothing about files live now (its entry stays as a marker).
        earliest = self.store.snapshots.earliest_id() or 0
        readds = [e for e in readds if e not in discarded and (e.pending or (e.live and e.snapshot_id >= earliest))]
        protection = Protection(
            held_manifests=self._metadata_held_by(tags),
            protected_paths=set(),
            discarded_readds=discarded,
            tags=tuple(tags),
            readds=tuple(readds),
            multi_interval=multi_interval,
        )
        protection.protected_paths = self.protected(plan.data_files, protection)
        if plan.parted is not None:
            # A plan in parts asks its tags part by part, after unpublishing: read the tags its
            # candidates' deletions have below them now, so an unreadable one stops it here.
            for deleted_at in range(plan.parted["changes_from"], plan.fence + 1):
                below = [t for t in tags if t.snapshot_id < deleted_at]
                if below:
                    self._tag_files(below[-1])
        return protection

    def protected(self, candidates: Iterable[DataCandidate], protection: Protection) -> set[str]:
        """The paths of ``candidates`` that ``protection`` holds (a plan's, or one part's of a plan in parts)."""
        tags, readds, multi = list(protection.tags), list(protection.readds), protection.multi_interval
        return {c.path for c in candidates if self.is_protected(c, tags, readds, multi)}

    def doomed_tag_names(self, plan: DeletionPlan) -> set[str]:
        """The plan's tags that are still the very tags it planned for (a new tag of the same name is not)."""
        doomed = set()
        for name in plan.tag_names:
            expected = plan.tag_create_times.get(name)
            try:
                current = self.store.tags.tag(name)
            except TagNotFoundError:
                continue
            if expected is None or current.create_time_millis == expected:
                doomed.add(name)
        return doomed

    def _announced_tags(self) -> list[Tag]:
        """Tags being created right now: they hold their files like tags.

        An intent with a missing manifest was abandoned (an intent that passed its
        check never loses a file), so it protects nothing and must not fail the plan.
        """
        announced = []
        for tag in self.intents.tags():
            try:
                self._tag_files(tag)
                self.store.files.metadata_files(tag.snapshot)
            except MissingMetadataError:
                continue
            announced.append(tag)
        return announced

    def is_protected(self, candidate: DataCandidate, tags: list[Tag], readds: list[ReaddEntry], multi_interval: frozenset[str]) -> bool:
        """Held by a tag, or live again at or after its deletion (a re-add).

        A file with one live interval [added, below) can only be in the newest tag below
        ``below``. A file added back has several intervals, and a tag in any of them
        holds it: for those every tag is asked.
        """
        if any(e.protects(candidate.path, candidate.below) for e in readds):
            return True
        if candidate.readded or candidate.path in multi_interval:
            return any(candidate.path in self._tag_files(tag) for tag in tags)
        return self._held(candidate, tags)

    def _held(self, candidate: DataCandidate, tags: list[Tag]) -> bool:
        below = [t for t in tags if t.snapshot_id < candidate.below]
        if below and candidate.path in self._tag_files(below[-1]):
            return True
        if candidate.from_id is not None:
            above = [t for t in tags if t.snapshot_id >= candidate.from_id]
            if above and candidate.path in self._tag_files(above[0]):
                return True
        return False

    def _tag_files(self, tag: Tag) -> PathHashSet:
        key = (tag.name, tag.create_time_millis, tag.snapshot_id)  # an announced tag may share a name with a tag
        files = self._files_by_tag.get(key)
        if files is None:
            files = self._files_by_tag[key] = PathHashSet.of_live(state_entries(self.store.files, tag.snapshot))
        return files

    def _metadata_held_by(self, tags: list[Tag]) -> set[str]:
        held: set[str] = set()
        for tag in tags:
            held |= set(self.store.files.metadata_files(tag.snapshot))
        return held


def state_entries(files: FileStore, snapshot: Snapshot) -> Iterator[ManifestEntry]:
    """The entries folding to ``snapshot``'s state: streamed where the store can (the native
    store's ``state_entries``), else its state as ADDs (a store that reads states whole)."""
    stream = getattr(files, "state_entries", None)
    if stream is not None:
        return stream(snapshot)
    return (ManifestEntry(FileKind.ADD, data_file) for data_file in files.state(snapshot).values())
