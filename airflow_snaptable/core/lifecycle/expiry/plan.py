"""Which snapshots expire, and the deletion plan that expires them (Paimon's ExpireSnapshotsImpl rules).

Range rule, with ids contiguous from ``earliest`` to ``latest``:
- the ``retain_min`` newest snapshots are always kept; the latest never expires;
- snapshots older than the ``retain_max`` newest expire regardless of age;
- between those, snapshot ``id`` expires only if its successor was committed
  before ``now - time_retained`` (so the table's state at any time inside the
  window stays readable);
- a consumer's ``next_snapshot``, the snapshot before it (the base of its next change
  set) and everything after are kept;
- one run expires at most ``limit`` snapshots.

Candidates: a file's last event in the expired range decides. Deleted at snapshot ``s``:
a candidate, held by what held it at its last deletion (core/lifecycle/protection.py). Added back:
live in the first kept snapshot, not a candidate. Deleted and added back within the range:
it has several live intervals, and the candidate says so.

Cost: O(k) for k expired snapshots: only their snapshot files and their deltas are read
(the store reads what else it needs, core/lifecycle/store.py ``FileStore.expiring``), never the whole history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from airflow_snaptable.core.arguments.checks import check_exclusive, check_int
from airflow_snaptable.core.errors import InvalidArgumentError, ProtectedSnapshotError, SnapshotNotFoundError
from airflow_snaptable.core.lifecycle.intents import IntentManager
from airflow_snaptable.core.native.manifest import FileKind
from airflow_snaptable.core.arguments.table_options import TableOptions
from airflow_snaptable.core.lifecycle.deletion_plans import EXPIRE, DataCandidate, DeletionPlan
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot
from airflow_snaptable.core.lifecycle.store import SnapshotStore, TableStore
from airflow_snaptable.core.arguments.times import duration_argument, millis, to_millis


@dataclass(frozen=True)
class ExpireSettings:
    retain_min: int
    retain_max: int | None
    threshold_millis: int
    limit: int
    #: Given ids (Iceberg's expireSnapshotId) instead of the retain rules: the oldest retained ones.
    snapshot_ids: tuple[int, ...] | None = None
    #: Keep this snapshot and everything after it (a clean policy's earliest commit to retain).
    keep_from: int | None = None


def resolve_settings(
    options: TableOptions, clock: Callable[[], int], *, retain_min=None, retain_max=None, time_retained=None,
    older_than=None, retain_last=None, limit=None, now_millis: int | None = None, snapshot_ids=None,
) -> ExpireSettings:
    """Explicit arguments over table options; Iceberg's names as aliases; every bound validated.

    A minimum nobody set (the default of ``snapshot.num-retained.min``) follows a lower maximum: ``retain_max=5``
    keeps 5. A minimum the caller or the table set is kept, and a maximum below it is an error naming it.
    """
    now = clock() if now_millis is None else now_millis
    if snapshot_ids is not None:
        return _given_ids(snapshot_ids, retain_min, retain_max, time_retained, older_than, retain_last, limit)
    if retain_last is not None:
        if retain_min is not None and retain_min != retain_last:
            raise InvalidArgumentError("retain_last is another name for retain_min; give one of them")
        retain_min = retain_last
    explicit_min = retain_min is not None
    retain_min = options.get("snapshot.num-retained.min") if retain_min is None else check_int(retain_min, "retain_min", 1)
    retain_max = options.get("snapshot.num-retained.max") if retain_max is None else check_int(retain_max, "retain_max", 1)
    if retain_max is not None and retain_max < retain_min and not explicit_min and not options.is_set("snapshot.num-retained.min"):
        # Nobody asked for this minimum (neither the caller nor the table): it is the default, and a caller
        # who says "keep 5" means 5. A minimum someone set still refuses a maximum below it.
        retain_min = retain_max
    if retain_max is not None and retain_max < retain_min:
        raise InvalidArgumentError(f"retain_max ({retain_max}) must be >= {_retain_min_source(options, explicit_min, retain_min)}")
    limit = options.get("snapshot.expire.limit") if limit is None else check_int(limit, "limit", 1)
    check_exclusive({"older_than": older_than, "time_retained": time_retained})  # two forms of the same bound
    if older_than is not None:
        threshold = to_millis(older_than)
        if threshold > now:
            raise InvalidArgumentError(f"older_than ({older_than}) is in the future")
    else:
        retained = options.get("snapshot.time-retained") if time_retained is None else duration_argument(time_retained, "time_retained")
        threshold = now - millis(retained)
    return ExpireSettings(retain_min, retain_max, threshold, limit)


def _given_ids(snapshot_ids, *bounds) -> ExpireSettings:
    if any(bound is not None for bound in bounds):
        raise InvalidArgumentError(
            "snapshot_ids names the snapshots to expire: give it without retain_min, retain_max, time_retained, "
            "older_than, retain_last and limit"
        )
    if not isinstance(snapshot_ids, (list, tuple)) or not snapshot_ids:
        raise InvalidArgumentError(f"snapshot_ids must be a non-empty list of snapshot ids, got {snapshot_ids!r}")
    ids = tuple(sorted({check_int(i, "snapshot id", 1) for i in snapshot_ids}))
    return ExpireSettings(retain_min=1, retain_max=None, threshold_millis=0, limit=len(ids), snapshot_ids=ids)


def given_range(store: TableStore, ids: tuple[int, ...], earliest: int | None) -> tuple[int, int] | None:
    """``(earliest, end)`` expiring exactly ``ids``, or a typed error naming why they cannot expire.

    The history stays contiguous (readers and time travel rely on it), so the ids must be the
    oldest retained snapshots, ``earliest .. k``; ids expired already count as done. The latest
    never expires, nor what a consumer holds (its next snapshot and the one before).
    """
    latest = store.snapshots.latest_id()
    if latest is None or earliest is None:
        raise SnapshotNotFoundError(f"snapshots {list(ids)} do not exist: the table has no snapshot")
    pending = [i for i in ids if i >= earliest]
    if not pending:
        return None  # all expired already: nothing to do, as a rerun expects
    if pending[-1] > latest:
        raise SnapshotNotFoundError(f"snapshot {pending[-1]} does not exist (latest is {latest})")
    if latest in pending:
        raise ProtectedSnapshotError(f"snapshot {latest} is the latest: it never expires")
    if pending != list(range(earliest, pending[-1] + 1)):
        gaps = sorted(set(range(earliest, pending[-1] + 1)) - set(pending))
        raise InvalidArgumentError(
            f"snapshots {gaps} are older than {pending[-1]} and not in snapshot_ids: a table's history stays "
            f"contiguous, so expire the oldest ones first (from {earliest} on)"
        )
    consumer_next = lowest_consumer_position(store, earliest)
    if consumer_next is not None and pending[-1] >= consumer_next - 1:
        raise ProtectedSnapshotError(
            f"snapshot {max(earliest, consumer_next - 1)} is held by a consumer (it reads from snapshot {consumer_next} "
            "on): move or delete the consumer first"
        )
    return earliest, pending[-1] + 1


def _retain_min_source(options: TableOptions, explicit: bool, retain_min: int) -> str:
    """Where the retain_min a retain_max fell below came from, and how to change it."""
    if explicit:
        return f"retain_min ({retain_min})"
    # A default minimum follows a lower maximum (resolve_settings): only one set on the table stands here.
    return (
        f"retain_min ({retain_min}: table option snapshot.num-retained.min, set on the table); pass a lower "
        "retain_min with it, or change the option"
    )


class SnapshotCache:
    """Reads each snapshot at most once during one expiry run (with its size: the bytes expiry frees)."""

    def __init__(self, snapshots: SnapshotStore):
        self.snapshots = snapshots
        self.cache: dict[int, tuple[Snapshot, int]] = {}

    def get(self, snapshot_id: int) -> Snapshot:
        return self._load(snapshot_id)[0]

    def file_size(self, snapshot_id: int) -> int:
        return self._load(snapshot_id)[1]

    def drop_below(self, snapshot_id: int) -> None:
        """Let go of the snapshots below ``snapshot_id`` (expired by an earlier sub-range)."""
        for cached in [i for i in self.cache if i < snapshot_id]:
            del self.cache[cached]

    def load(self, first: int, last: int) -> None:
        """Read the uncached snapshots of ``first..last`` in bulk."""
        self.cache.update(self.snapshots.read_ids([i for i in range(first, last + 1) if i not in self.cache]))

    def _load(self, snapshot_id: int) -> tuple[Snapshot, int]:
        loaded = self.cache.get(snapshot_id)
        if loaded is None:
            loaded = self.cache[snapshot_id] = self.snapshots.read_ids([snapshot_id])[snapshot_id]
        return loaded


def lowest_consumer_position(store: TableStore, earliest: int) -> int | None:
    """The lowest ``next_snapshot`` of the consumers and of consumer positions being published (intents).

    An intent below ``earliest`` was abandoned (see core/lifecycle/intents.py) and holds nothing back.
    """
    # Intents first: an intent is withdrawn only after its consumer file is written.
    positions = [c.next_snapshot for c in IntentManager(store.lifecycle).consumers() if c.next_snapshot >= earliest]
    positions += [c.next_snapshot for c in store.consumers.consumers()]
    return min(positions, default=None)


@dataclass(frozen=True)
class ExpireRule:
    """The range rule resolved against the table, before any snapshot is read.

    Snapshot ``id`` expires iff ``id < end_bound`` and (``id < lowest``, or its successor was committed
    at or before ``threshold_millis``); the first that does not ends the range. Walking the range in
    order therefore finds its end lazily (core/lifecycle/expiry/subranges.py), holding one sub-range at a time.
    """

    earliest: int
    lowest: int
    end_bound: int
    threshold_millis: int

    def expires(self, read: SnapshotCache, snapshot_id: int) -> bool:
        if snapshot_id >= self.end_bound:
            return False
        return snapshot_id < self.lowest or read.get(snapshot_id + 1).time_millis <= self.threshold_millis


def expire_rule(store: TableStore, settings: ExpireSettings, earliest: int | None = None) -> ExpireRule | None:
    """The rule deciding which snapshots from ``earliest`` on expire; None if none can.

    ``earliest`` overrides the table's (a dry run starts where unfinished plans will have left it).
    """
    latest = store.snapshots.latest_id()
    if earliest is None:
        earliest = store.snapshots.earliest_id()
    if settings.snapshot_ids is not None:
        given = given_range(store, settings.snapshot_ids, earliest)
        return None if given is None else ExpireRule(given[0], given[1], given[1], settings.threshold_millis)
    if latest is None or earliest is None:
        return None
    lowest = earliest if settings.retain_max is None else max(latest - settings.retain_max + 1, earliest)
    end_bound = latest - settings.retain_min + 1
    consumer_next = lowest_consumer_position(store, earliest)
    if consumer_next is not None:
        # Keep the consumer's last read snapshot too: its changes since then are read as changes(next - 1, ...).
        end_bound = min(end_bound, consumer_next - 1)
    end_bound = min(end_bound, earliest + settings.limit)
    if settings.keep_from is not None:
        end_bound = min(end_bound, settings.keep_from)
    if end_bound <= earliest:
        return None
    return ExpireRule(earliest, lowest, end_bound, settings.threshold_millis)


def expire_range(
    store: TableStore, settings: ExpireSettings, read: SnapshotCache, earliest: int | None = None
) -> tuple[int, int] | None:
    """``(earliest, end)``: snapshots ``earliest .. end-1`` expire; None if nothing does (the whole range at once)."""
    rule = expire_rule(store, settings, earliest)
    if rule is None:
        return None
    end = rule.earliest
    while rule.expires(read, end):
        end += 1
    return None if end <= rule.earliest else (rule.earliest, end)


def first_deleting(snapshots: dict[int, Snapshot], first: int, end: int) -> int:
    """The first of snapshots ``first..end`` whose delta may delete a file (``end`` if none before it).

    Candidates are the files the deltas delete; a delta's additions matter only once a candidate
    exists (a file deleted, then added back). So the deltas before the first that deletes add
    nothing to the plan and are not read: an append recording that it deleted no file. A snapshot
    that records nothing (another format's, or older) may delete.
    """
    for snapshot_id in range(first, end):
        snapshot = snapshots[snapshot_id]
        if not snapshot.deletes_no_file:
            return snapshot_id
    return end


def plan_expiry(
    store: TableStore, earliest: int, end: int, read: SnapshotCache | None = None, missing: list[str] | None = None
) -> DeletionPlan:
    """The plan expiring snapshots ``earliest .. end-1``: candidates are the files deleted by snapshots
    ``earliest+1 .. end`` (unused by ``end`` and later), and the metadata only the expired snapshots use.

    ``missing`` (the repair path, ``skip_missing=True``): metadata of the *expired* snapshots that is
    already gone is skipped and its path appended there; what it named is left for orphan cleaning.
    ``end``'s metadata must still read, and no candidate ``end`` references is kept, since a skipped
    delta may have added it back.
    """
    read = read or SnapshotCache(store.snapshots)
    read.load(earliest, end)
    snaps = {i: read.get(i) for i in range(earliest, end + 1)}
    first_delete = first_deleting(snaps, earliest + 1, end)
    expiring = store.files.expiring(snaps, missing, changes_from=first_delete)
    changes, metadata_files = expiring.changes, expiring.metadata_files
    del expiring

    data: dict[str, DataCandidate] = {}
    readded: set[str] = set()
    for snapshot_id in range(first_delete, end + 1):
        # One pass over the snapshot's entries (a store may decode them as they are iterated):
        # only paths and sizes are kept, and only candidates accumulate over the range.
        added_here: set[str] = set()
        deleted_here: dict[str, int] = {}  # path -> size of its last DELETE entry here
        for entry in changes.pop(snapshot_id):
            if entry.kind is FileKind.ADD:
                added_here.add(entry.file.path)
            else:
                deleted_here[entry.file.path] = entry.file.file_size
        for path in added_here:
            if data.pop(path, None) is not None:
                readded.add(path)
        for path, size in deleted_here.items():
            if path not in added_here:
                data[path] = DataCandidate(path, size, below=snapshot_id, readded=path in readded)
        del added_here, deleted_here  # let go before the next snapshot is decoded
    if missing:
        for path in store.files.state(snaps[end]):
            data.pop(path, None)
    del readded
    candidates = list(data.values())
    del data
    candidates.sort(key=_candidate_path)
    return DeletionPlan(
        kind=EXPIRE,
        fence=end,
        snapshot_ids=list(range(earliest, end)),
        data_files=candidates,
        manifest_files=metadata_files,
    )


def _candidate_path(candidate: DataCandidate) -> str:
    return candidate.path

