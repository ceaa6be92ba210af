"""Hudi's cleaning policies and savepoints, on the snapshot model (Hudi's ``CleanPlanner``).

A Hudi clean picks the *earliest commit to retain* and removes the file versions only older
commits need, keeping the latest version before it so that a query at that commit still
works. Expiry keeps every retained snapshot completely readable in the same way, so each
policy is a rule for the earliest snapshot to retain, and the clean is an expiry up to it:
the same crash-safe deletion plan (pending = Hudi's *requested*, active = *inflight*,
finished = *completed*, recorded with its earliest retained commit under ``clean/``), the
same protection by tags, savepoints and consumers, and the same incremental reading (only
the deltas from the earliest retained snapshot on, which the previous clean left).

- ``KEEP_LATEST_COMMITS`` (``commits_retained`` N, Hudi's default 10): the N newest snapshots.
- ``KEEP_LATEST_BY_HOURS`` (``hours_retained`` H): every snapshot whose state was current in
  the last H hours, i.e. from the last one committed before ``now - H`` on.
- ``KEEP_LATEST_FILE_VERSIONS`` (``file_versions_retained`` N, default 3): a file group is a
  partition, and a partition's versions begin at each commit that adds or deletes files in it
  (a partition present at the earliest retained snapshot has a version from then). Each
  partition keeps its N newest versions: the earliest snapshot to retain is the latest
  "N-th newest version start" over the partitions. A partition untouched for many commits has
  one version and constrains nothing, so its old file stays. Hudi leaves time travel to a
  commit whose older file versions were cleaned broken; here such snapshots expire with the
  files, so every retained snapshot still reads completely.

  Example, N = 2: commits 1 (p=a, p=b), 2 (p=a), 3 (p=a), 4 (p=b). Versions: a from 1, 2, 3;
  b from 1, 4. The 2nd newest starts: a -> 2, b -> 1. Snapshots before 2 expire: snapshot 1
  and the files of a's first version go; b's first file stays (snapshots 2 and 3 use it).

A savepoint is a tag with Hudi's rules (source ``savepoint``, named ``savepoint-<id>``, no
time to live, never pruned by periodic tag retention): tags already keep their files from
any clean or expiry, and restoring a savepoint is a rollback to that tag.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Callable

from airflow_snaptable.core.arguments.checks import check_bool, check_int
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.lifecycle.expiry.run import ExpireResult, SnapshotExpiry
from airflow_snaptable.core.lifecycle.expiry.plan import ExpireSettings
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
    #: The snapshot the clean kept everything from (Hudi's earliest commit to retain).
    earliest_commit_retained: int | None
    expire: ExpireResult

    def to_dict(self) -> dict:
        return {"policy": self.policy, "earliest_commit_retained": self.earliest_commit_retained, **asdict(self.expire)}


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
        self, policy: str, *, commits_retained=None, hours_retained=None, file_versions_retained=None, dry_run: bool = False
    ) -> CleanResult:
        policy, value = check_policy(policy, commits_retained, hours_retained, file_versions_retained)
        check_bool(dry_run, "dry_run")
        now = self.clock()
        if policy == KEEP_LATEST_COMMITS:
            settings = ExpireSettings(retain_min=value, retain_max=None, threshold_millis=now, limit=_NO_LIMIT)
        elif policy == KEEP_LATEST_BY_HOURS:
            settings = ExpireSettings(retain_min=1, retain_max=None, threshold_millis=now - value * _HOUR, limit=_NO_LIMIT)
        else:
            keep_from = self.earliest_with_file_versions(value)
            settings = ExpireSettings(retain_min=1, retain_max=None, threshold_millis=now, limit=_NO_LIMIT, keep_from=keep_from)
        expired = self.expiry.run(settings, dry_run=dry_run)
        retained = expired.earliest_after if not dry_run else self._retained_after(expired)
        result = CleanResult(policy, retained, expired)
        if not dry_run:
            self._record(result, value)
        return result

    def earliest_with_file_versions(self, versions: int) -> int | None:
        """The earliest snapshot whose state keeps only each partition's ``versions`` newest versions."""
        snapshots, files = self.store.snapshots, self.store.files
        earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
        if earliest is None or latest is None:
            return None
        starts: dict[tuple, list[int]] = {}
        first = snapshots.snapshot(earliest)
        for data_file in files.state(first).values():
            starts.setdefault(data_file.partition, [earliest])
        read = snapshots.read_ids(range(earliest + 1, latest + 1)) if latest > earliest else {}
        for snapshot_id in range(earliest + 1, latest + 1):
            for partition in {entry.file.partition for entry in files.delta(read[snapshot_id][0])}:
                found = starts.setdefault(partition, [])
                if not found or found[-1] != snapshot_id:
                    found.append(snapshot_id)
        keep = [found[-versions] for found in starts.values() if len(found) >= versions]
        return max(keep, default=earliest)

    def _retained_after(self, expired: ExpireResult) -> int | None:
        ids = expired.expired_snapshot_ids
        return (max(ids) + 1) if ids else self.store.snapshots.earliest_id()

    def _record(self, result: CleanResult, value: int) -> None:
        """Hudi's completed clean instant: the policy and the earliest commit retained."""
        doc = {
            "policy": result.policy,
            POLICIES[result.policy]: value,
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


def savepoint_name(snapshot_id: int) -> str:
    return f"{SAVEPOINT_PREFIX}{check_int(snapshot_id, 'snapshot_id', minimum=1)}"
