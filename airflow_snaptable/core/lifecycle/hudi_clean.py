"""Hudi's cleaning policies and savepoints, on the snapshot model (Hudi's ``CleanPlanner``).

A Hudi clean removes the file versions no retained query needs. Expiry keeps every retained
snapshot completely readable, so each policy here is a rule for the earliest snapshot to keep,
and the clean is an expiry up to it: the same crash-safe deletion plan (pending = Hudi's
*requested*, active = *inflight*, finished = *completed*, recorded under ``clean/``), the same
protection by tags, savepoints and consumers, and the same incremental reading (only the
deltas from the earliest retained snapshot on, which the previous clean left).

- ``KEEP_LATEST_COMMITS`` (``commits_retained`` N, Hudi's default 10): Hudi's *earliest commit
  to retain* is the N-th newest, and Hudi also keeps each file group's last version before it
  ("we have to keep 1 version before the latest commit time to keep": a query started before
  that commit still reads it). So the snapshot before the earliest commit to retain stays too:
  the N + 1 newest snapshots. Nothing is cleaned until there are more than N commits.
- ``KEEP_LATEST_BY_HOURS`` (``hours_retained`` H): the earliest commit to retain is the first
  committed at or after ``now - H``, with the same version before it: every state current in
  the last H hours stays. Without a commit in the last H hours Hudi has no earliest commit to
  retain, and cleans nothing.
- ``KEEP_LATEST_FILE_VERSIONS`` (``file_versions_retained`` N, default 3): a file group is a
  partition, its versions begin at each commit that adds or deletes files in it (a partition
  present at the earliest retained snapshot has a version from then), and a partition dropped
  (left without files) is Hudi's replaced file group: none of its versions need keeping, and a
  partition written again later is a new file group. Each live partition keeps its N newest
  versions (all of them when it has fewer): its oldest kept version stays readable in the last
  snapshot before the next version begins, so the earliest snapshot to keep is the lowest of
  those over the live partitions. A version can only go with every snapshot that reads it, and
  a snapshot reads every partition, so a partition that still needs an old snapshot keeps the
  other partitions' versions it reads (more than N of them, or a dropped partition's) until it
  gains versions: Hudi deletes those at once and leaves time travel to that commit broken.

  Example, N = 2: commits 1 (p=a, p=b, p=c), 2 (a), 3 (a), 4 (b). Versions: a from 1, 2, 3;
  b from 1, 4; c from 1. a's 2 newest need snapshot 2 on (its version from 2 is current until
  3), b's snapshot 3 on, c's only version is current everywhere: snapshot 1 expires, and with it
  a's first file; b's first file stays (snapshots 2 and 3 read it).

A savepoint is a tag with Hudi's rules (source ``savepoint``, named ``savepoint-<id>``, no
time to live, never pruned by periodic tag retention): tags already keep their files from
any clean or expiry (Hudi never cleans a savepointed file, under every policy), and
restoring a savepoint is a rollback to that tag.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Callable

from airflow_snaptable.core.arguments.checks import check_bool, check_int
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.lifecycle.expiry.run import ExpireResult, SnapshotExpiry
from airflow_snaptable.core.lifecycle.expiry.plan import ExpireSettings
from airflow_snaptable.core.native.manifest import FileKind
from airflow_snaptable.core.lifecycle.store import TableStore

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
#: Policy -> the one parameter it takes.
POLICIES = {
    KEEP_LATEST_COMMITS: "commits_retained",
    KEEP_LATEST_BY_HOURS: "hours_retained",
    KEEP_LATEST_FILE_VERSIONS: "file_versions_retained",
}
#: Hudi's defaults (hoodie.cleaner.commits.retained, hoodie.cleaner.fileversions.retained).
DEFAULTS = {"commits_retained": 10, "file_versions_retained": 3}
CLEAN_DIR = "clean"
SAVEPOINT = "savepoint"
SAVEPOINT_PREFIX = "savepoint-"
_HOUR = 3_600_000
_NO_LIMIT = 2**62


@dataclass
class CleanResult:
    policy: str
    #: The snapshot the table now starts from: every state from it on stays readable.
    earliest_commit_retained: int | None
    expire: ExpireResult
    #: Hudi's earliest commit to retain (KEEP_LATEST_COMMITS, KEEP_LATEST_BY_HOURS): the snapshot
    #: before it stays too. None: the policy keeps every commit, or has none (KEEP_LATEST_FILE_VERSIONS).
    earliest_commit_to_retain: int | None = None
    #: When the floor (``retain_min``, ``time_retained``) kept more than the policy would: the snapshot it
    #: kept the table from, and which bound did (:class:`Floor`). None: the policy decided.
    floor_kept_from: int | None = None
    floor_kept_by: str | None = None

    def to_dict(self) -> dict:
        return {
            "policy": self.policy,
            "earliest_commit_to_retain": self.earliest_commit_to_retain,
            "earliest_commit_retained": self.earliest_commit_retained,
            "floor_kept_from": self.floor_kept_from,
            "floor_kept_by": self.floor_kept_by,
            **asdict(self.expire),
        }


@dataclass(frozen=True)
class Floor:
    """What a clean keeps whatever its policy says (a table's own ``snapshot.num-retained.min`` and
    ``snapshot.time-retained``, as the lake's clean job passes them): the ``retain_min`` newest snapshots, and
    every state of the last ``time_retained_millis`` (as expiry keeps them)."""

    retain_min: int | None = None
    time_retained_millis: int | None = None

    def keep_from(self, snapshots, now: int) -> tuple[int, str] | None:
        """The earliest snapshot the floor keeps and the bound that keeps it (the lower of the two); None: no bound."""
        latest = snapshots.latest_id()
        if latest is None:
            return None
        bounds = []
        if self.retain_min is not None:
            bounds.append((latest - self.retain_min + 1, "retain_min"))
        if self.time_retained_millis is not None:
            current = snapshots.snapshot_at(now - self.time_retained_millis)  # the state when the window began
            bounds.append((snapshots.earliest_id() if current is None else current.id, "time_retained"))
        return min(bounds, default=None)


@dataclass(frozen=True)
class Retention:
    """What a policy keeps: Hudi's earliest commit to retain, and the earliest snapshot whose state
    stays whole (None: every snapshot)."""

    earliest_commit_to_retain: int | None
    keep_from: int | None


#: The policy keeps every snapshot (not enough commits, or none in the window).
_KEEP_ALL = Retention(None, None)


def check_policy(policy, commits_retained=None, hours_retained=None, file_versions_retained=None) -> tuple[str, int]:
    """The policy and its parameter (Hudi's default when not given); any other parameter is an error."""
    if policy not in POLICIES:
        raise InvalidArgumentError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    given = {"commits_retained": commits_retained, "hours_retained": hours_retained, "file_versions_retained": file_versions_retained}
    wanted = POLICIES[policy]
    wrong = [name for name, value in given.items() if value is not None and name != wanted]
    if wrong:
        raise InvalidArgumentError(f"policy {policy} takes {wanted}, not {', '.join(wrong)}")
    value = given[wanted] if given[wanted] is not None else DEFAULTS.get(wanted)
    if value is None:
        raise InvalidArgumentError(f"policy {policy} needs {wanted}")
    return policy, check_int(value, wanted, minimum=1)


class Clean:
    """Runs one clean policy on a table (``Table.clean``)."""

    def __init__(self, store: TableStore, expiry: SnapshotExpiry, clock: Callable[[], int]):
        self.store = store
        self.expiry = expiry
        self.clock = clock

    def clean(
        self, policy: str, *, commits_retained=None, hours_retained=None, file_versions_retained=None, dry_run: bool = False,
        floor: Floor | None = None,
    ) -> CleanResult:
        """Run ``policy``; ``floor``: what stays whatever the policy says (the result says when it kept more)."""
        policy, value = check_policy(policy, commits_retained, hours_retained, file_versions_retained)
        check_bool(dry_run, "dry_run")
        now = self.clock()
        retention = self.retention(policy, value, now)
        # keep_from 0: no snapshot expires, but the run still finishes what an interrupted clean left.
        keep_from = 0 if retention.keep_from is None else retention.keep_from
        kept = None if floor is None else floor.keep_from(self.store.snapshots, now)
        if kept is not None and kept[0] < keep_from:
            keep_from = max(kept[0], 0)
        else:
            kept = None
        settings = ExpireSettings(retain_min=1, retain_max=None, threshold_millis=now, limit=_NO_LIMIT, keep_from=keep_from)
        expired = self.expiry.run(settings, dry_run=dry_run)
        retained = expired.earliest_after if not dry_run else self._retained_after(expired)
        result = CleanResult(policy, retained, expired, retention.earliest_commit_to_retain,
                             *(kept if kept is not None else (None, None)))
        if not dry_run:
            self._record(result, value)
        return result

    def retention(self, policy: str, value: int, now: int) -> Retention:
        """What ``policy`` with its parameter ``value`` keeps of the table now."""
        if policy == KEEP_LATEST_COMMITS:
            return self.latest_commits(value)
        if policy == KEEP_LATEST_BY_HOURS:
            return self.latest_by_hours(value, now)
        return Retention(None, self.earliest_with_file_versions(value))

    def latest_commits(self, commits: int) -> Retention:
        """Hudi: the ``commits``-th newest commit is the earliest to retain, once there are more."""
        latest = self.store.snapshots.latest_id()
        if latest is None or latest <= commits:
            return _KEEP_ALL
        earliest_to_retain = latest - commits + 1
        return Retention(earliest_to_retain, earliest_to_retain - 1)

    def latest_by_hours(self, hours: int, now: int) -> Retention:
        """Hudi: the first commit at or after ``now - hours`` is the earliest to retain; none, no clean."""
        snapshots = self.store.snapshots
        window_start = now - hours * _HOUR
        latest = snapshots.latest_snapshot()
        if latest is None or latest.time_millis < window_start:
            return _KEEP_ALL
        before = snapshots.snapshot_at(window_start - 1)  # the state current when the window began
        if before is None:
            return Retention(snapshots.earliest_id(), None)
        return Retention(before.id + 1, before.id)

    def earliest_with_file_versions(self, versions: int) -> int | None:
        """The earliest snapshot to keep so that each live partition keeps its ``versions`` newest versions."""
        snapshots = self.store.snapshots
        earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
        if earliest is None or latest is None:
            return None
        needed = [
            last_needed for starts in self.partition_versions(earliest, latest).values()
            if (last_needed := oldest_kept_version_end(starts, versions)) is not None
        ]
        return min(needed, default=latest)

    def partition_versions(self, earliest: int, latest: int) -> dict[tuple, list[int]]:
        """The live partitions of ``latest`` -> the snapshots where their versions begin, from ``earliest`` on.

        A partition left without files is dropped: its versions go (Hudi cleans a replaced file
        group whole), and a later write to it begins a new file group.
        """
        snapshots, files = self.store.snapshots, self.store.files
        state = files.state(snapshots.snapshot(earliest))
        live = set(state)
        counts = Counter(data_file.partition for data_file in state.values())
        del state
        starts = {partition: [earliest] for partition in counts}
        read = snapshots.read_ids(range(earliest + 1, latest + 1)) if latest > earliest else {}
        for snapshot_id in range(earliest + 1, latest + 1):
            touched = set()
            for entry in files.delta(read.pop(snapshot_id)[0]):
                path, partition = entry.file.path, entry.file.partition
                touched.add(partition)
                if entry.kind is FileKind.ADD:
                    if path not in live:
                        live.add(path)
                        counts[partition] += 1
                elif path in live:
                    live.remove(path)
                    counts[partition] -= 1
            for partition in touched:
                if counts[partition] > 0:
                    starts.setdefault(partition, []).append(snapshot_id)
                else:
                    starts.pop(partition, None)
                    del counts[partition]
        return starts

    def _retained_after(self, expired: ExpireResult) -> int | None:
        ids = expired.expired_snapshot_ids
        return (max(ids) + 1) if ids else self.store.snapshots.earliest_id()

    def _record(self, result: CleanResult, value: int) -> None:
        """Hudi's completed clean instant: the policy and the earliest commit retained."""
        doc = {
            "policy": result.policy,
            POLICIES[result.policy]: value,
            "earliest_commit_to_retain": result.earliest_commit_to_retain,
            "earliest_commit_retained": result.earliest_commit_retained,
            "expired_snapshot_ids": result.expire.expired_snapshot_ids,
            "deleted_data_files": result.expire.deleted_data_files,
            "completed_millis": int(time.time() * 1000),
        }
        self.store.lifecycle.write_bytes(f"{CLEAN_DIR}/clean-{doc['completed_millis']}.json", json.dumps(doc).encode())

    def cleans(self) -> list[dict]:
        """The completed cleans, oldest first."""
        names = sorted(n for n in self.store.lifecycle.list_names(CLEAN_DIR) if n.endswith(".json"))
        return [json.loads(self.store.lifecycle.read_bytes(f"{CLEAN_DIR}/{name}")) for name in names]


def oldest_kept_version_end(starts: list[int], versions: int) -> int | None:
    """The last snapshot reading the oldest of the ``versions`` newest versions beginning at ``starts``
    (all of them when fewer); None when that is the current version, which every later snapshot reads."""
    oldest_kept = max(len(starts) - versions, 0)
    if oldest_kept == len(starts) - 1:
        return None
    return starts[oldest_kept + 1] - 1


def savepoint_name(snapshot_id: int) -> str:
    return f"{SAVEPOINT_PREFIX}{check_int(snapshot_id, 'snapshot_id', minimum=1)}"
