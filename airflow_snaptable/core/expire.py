"""Snapshot expiry (Paimon's ExpireSnapshotsImpl rules, Iceberg's names for the same bounds).

Range rule, with ids contiguous from ``earliest`` to ``latest``:
- the ``retain_min`` newest snapshots are always kept; the latest never expires;
- snapshots older than the ``retain_max`` newest expire regardless of age;
- between those, snapshot ``id`` expires only if its successor was committed
  before ``now - time_retained`` (so the table's state at any time inside the
  window stays readable);
- a consumer's ``next_snapshot``, the snapshot before it (the base of its next change
  set) and everything after are kept;
- one run expires at most ``limit`` snapshots.

Cost: O(k) for k expired snapshots: only their snapshot files, manifest lists
and *delta* manifests are read, never the whole history.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_snaptable.core.checks import check_bool, check_exclusive, check_int
from airflow_snaptable.core.errors import InvalidArgumentError, MissingMetadataError, SnapshotNotFoundError
from airflow_snaptable.core.manifest import FileKind, manifest_path
from airflow_snaptable.core.options import parse_duration
from airflow_snaptable.core.plans import EXPIRE, DataCandidate, DeletionPlan, PlanManager
from airflow_snaptable.core.intents import IntentManager
from airflow_snaptable.core.snapshot import Snapshot, snapshot_path

if TYPE_CHECKING:
    from airflow_snaptable.core.table import Table


@dataclass
class ExpireResult:
    expired_snapshot_ids: list[int] = field(default_factory=list)
    deleted_data_files: int = 0
    deleted_manifest_files: int = 0
    deleted_snapshot_files: int = 0
    bytes_freed: int = 0
    earliest_before: int | None = None
    earliest_after: int | None = None
    dry_run: bool = False
    #: Files held by a tag and therefore kept.
    protected_data_files: int = 0
    #: Full lists of what was (dry run: would be) deleted; filled on dry runs only, to keep results small.
    data_files: list[str] = field(default_factory=list)
    manifest_files: list[str] = field(default_factory=list)
    snapshot_files: list[str] = field(default_factory=list)
    #: Files deleted while finishing plans an earlier, interrupted run left behind.
    recovered_data_files: int = 0
    #: skip_missing: metadata of the expired snapshots that was already gone (what it named is left for orphan cleaning).
    missing_metadata: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ExpireSettings:
    retain_min: int
    retain_max: int | None
    threshold_millis: int
    limit: int


def resolve_settings(
    table: "Table", *, retain_min=None, retain_max=None, time_retained=None, older_than=None, retain_last=None, limit=None,
    now_millis: int | None = None,
) -> ExpireSettings:
    """Explicit arguments over table options; Iceberg's names as aliases; every bound validated."""
    options = table.options
    now = table.clock() if now_millis is None else now_millis
    if retain_last is not None:
        if retain_min is not None and retain_min != retain_last:
            raise InvalidArgumentError("retain_last is another name for retain_min; give one of them")
        retain_min = retain_last
    retain_min = options.get("snapshot.num-retained.min") if retain_min is None else check_int(retain_min, "retain_min", 1)
    retain_max = options.get("snapshot.num-retained.max") if retain_max is None else check_int(retain_max, "retain_max", 1)
    if retain_max is not None and retain_max < retain_min:
        raise InvalidArgumentError(f"retain_max ({retain_max}) must be >= retain_min ({retain_min})")
    limit = options.get("snapshot.expire.limit") if limit is None else check_int(limit, "limit", 1)
    check_exclusive({"older_than": older_than, "time_retained": time_retained})  # two forms of the same bound
    if older_than is not None:
        threshold = table.to_millis(older_than)
        if threshold > now:
            raise InvalidArgumentError(f"older_than ({older_than}) is in the future")
    else:
        retained = options.get("snapshot.time-retained") if time_retained is None else _duration(time_retained)
        threshold = now - int(retained / timedelta(milliseconds=1))
    return ExpireSettings(retain_min, retain_max, threshold, limit)


def _duration(value) -> timedelta:
    try:
        return parse_duration(value, "time_retained")
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from exc


class _Snapshots:
    """Reads each snapshot file at most once during one expiry run."""

    def __init__(self, table: "Table"):
        self.manager = table.snapshot_manager
        self.cache: dict[int, tuple[Snapshot, int]] = {}

    def get(self, snapshot_id: int) -> Snapshot:
        return self._load(snapshot_id)[0]

    def file_size(self, snapshot_id: int) -> int:
        return self._load(snapshot_id)[1]

    def load(self, first: int, last: int) -> None:
        """Read the uncached snapshots of ``first..last`` in bulk."""
        self.cache.update(self.manager.read_ids([i for i in range(first, last + 1) if i not in self.cache]))

    def _load(self, snapshot_id: int) -> tuple[Snapshot, int]:
        loaded = self.cache.get(snapshot_id)
        if loaded is None:
            loaded = self.cache[snapshot_id] = self.manager.snapshot_and_size(snapshot_id)
        return loaded


def lowest_consumer_position(table: "Table", earliest: int) -> int | None:
    """The lowest ``next_snapshot`` of the consumers and of consumer positions being published (intents).

    An intent below ``earliest`` was abandoned (see core/intents.py) and holds nothing back.
    """
    # Intents first: an intent is withdrawn only after its consumer file is written.
    positions = [c.next_snapshot for c in IntentManager(table.storage).consumers() if c.next_snapshot >= earliest]
    positions += [c.next_snapshot for c in table.consumer_manager.consumers()]
    return min(positions, default=None)


def expire_range(table: "Table", settings: ExpireSettings, read=None, earliest: int | None = None) -> tuple[int, int] | None:
    """``(earliest, end)``: snapshots ``earliest .. end-1`` expire; None if nothing does.

    ``earliest`` overrides the table's (a dry run starts where unfinished plans will have left it).
    """
    snapshots = table.snapshot_manager
    latest = snapshots.latest_id()
    if earliest is None:
        earliest = snapshots.earliest_id()
    if latest is None or earliest is None:
        return None
    lowest = earliest if settings.retain_max is None else max(latest - settings.retain_max + 1, earliest)
    end_bound = latest - settings.retain_min + 1
    consumer_next = lowest_consumer_position(table, earliest)
    if consumer_next is not None:
        # Keep the consumer's last read snapshot too: its changes since then are read as changes(next - 1, ...).
        end_bound = min(end_bound, consumer_next - 1)
    end_bound = min(end_bound, earliest + settings.limit)
    end = end_bound
    read = read or _Snapshots(table)
    for snapshot_id in range(lowest, end_bound):
        if read.get(snapshot_id + 1).time_millis > settings.threshold_millis:
            end = snapshot_id
            break
    if end <= earliest:
        return None
    return earliest, end


def plan_expiry(table: "Table", earliest: int, end: int, read=None, missing: list[str] | None = None) -> DeletionPlan:
    """Candidates: files deleted by snapshots earliest+1 .. end (unused by ``end`` and later),
    and manifests of the expired snapshots that ``end`` does not use.

    The manifests the expired snapshots use are those of ``earliest`` plus what each
    later commit wrote (a base list holds the previous base, the previous delta and
    manifests merged from them), so with ``written_metadata`` in the snapshots only
    ``earliest``'s and ``end``'s lists and the delta manifests are read, in bulk
    (``Storage.read_many``: threads on remote stores, executors in the Spark job).

    ``missing`` (the repair path, ``skip_missing=True``): metadata of the *expired*
    snapshots that is already gone is skipped and its path appended there; what it
    named is left for orphan cleaning. ``end``'s metadata must still read, and no
    candidate ``end`` references is kept, since a skipped delta may have added it back.
    """
    read = read or _Snapshots(table)
    manifests = table.manifest_io
    read.load(earliest, end)
    snaps = {i: read.get(i) for i in range(earliest, end + 1)}

    # Lists: those of the first and the kept snapshot, and every list of a snapshot that does not record its metadata.
    kept_lists = (snaps[end].base_manifest_list, snaps[end].delta_manifest_list)
    lists = manifests.read_lists(kept_lists)
    lists.update(_read_some(manifests.read_lists, (
        name
        for i, snapshot in snaps.items()
        if i == earliest or (i < end and snapshot.written_metadata is None)
        for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list)
    ), missing))

    def delta_manifests(snapshot: Snapshot) -> list[str]:
        written = snapshot.written_metadata
        if written is not None:
            return list(written["delta_manifests"])
        return [m.file_name for m in lists.get(snapshot.delta_manifest_list, [])]

    deltas = {i: delta_manifests(snaps[i]) for i in range(earliest + 1, end + 1)}
    entries_of = _read_some(manifests.read_manifests, (name for names in deltas.values() for name in names), missing)

    # A file's last event in the range decides: deleted (a candidate, held by what held it at
    # its last deletion) or added back (live at ``end``: not a candidate). A file deleted and
    # added back within the range has several live intervals, and the candidate says so.
    data: dict[str, DataCandidate] = {}
    readded: set[str] = set()
    for snapshot_id in range(earliest + 1, end + 1):
        entries = [e for name in deltas[snapshot_id] for e in entries_of.get(name, [])]
        added_here = {e.file.path for e in entries if e.kind is FileKind.ADD}
        for path in added_here:
            if data.pop(path, None) is not None:
                readded.add(path)
        for entry in entries:
            path = entry.file.path
            if entry.kind is FileKind.DELETE and path not in added_here:
                data[path] = DataCandidate(path, entry.file.file_size, below=snapshot_id, readded=path in readded)
    if missing:
        for path in manifests.read_state(snaps[end]):
            data.pop(path, None)

    def sizes(snapshot: Snapshot) -> dict[str, int]:
        """Its lists and their manifests with byte sizes; a skipped (missing) list contributes nothing."""
        found = {}
        for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            if list_name in lists:
                found.update((m.file_name, m.file_size) for m in lists[list_name])
                found[list_name] = manifests.list_size(list_name) or 0
        return found

    kept = set(sizes(snaps[end]))
    manifest_sizes = sizes(snaps[earliest])
    for snapshot_id in range(earliest + 1, end):
        snapshot = snaps[snapshot_id]
        written = snapshot.written_metadata
        if written is None:
            manifest_sizes.update(sizes(snapshot))
            continue
        manifest_sizes[snapshot.base_manifest_list] = written["base_list"] or 0
        manifest_sizes[snapshot.delta_manifest_list] = written["delta_list"] or 0
        manifest_sizes.update(written["delta_manifests"])
        manifest_sizes.update(written["merged_manifests"])
    manifest_files = sorted((name, size) for name, size in manifest_sizes.items() if name not in kept)
    return DeletionPlan(
        kind=EXPIRE,
        fence=end,
        snapshot_ids=list(range(earliest, end)),
        data_files=sorted(data.values(), key=lambda c: c.path),
        manifest_files=manifest_files,
    )


def _read_some(read_many, names, missing: list[str] | None) -> dict[str, list]:
    """``read_many(names)``; with ``missing`` a list, the names that do not exist are appended to it instead."""
    names = list(dict.fromkeys(names))
    if missing is None:
        return read_many(names)
    try:
        return read_many(names)
    except MissingMetadataError:
        found: dict[str, list] = {}
        for name in names:
            try:
                found.update(read_many([name]))
            except MissingMetadataError:
                missing.append(manifest_path(name))
        return found


#: Planning starts over when a consumer moves into the range or another expiry overtakes this one;
#: each retry follows progress someone else made.
_MAX_PLANNING_ATTEMPTS = 10


def _expired_meanwhile(table: "Table", plans: PlanManager, start: int | None) -> bool:
    """Did another expiry remove (or start removing) snapshot ``start`` since this run read it as the earliest?

    Then missing metadata below its fence is that run's progress, not damage.
    """
    if start is None:
        return False
    return not table.snapshot_manager.exists(start) or plans.fence() > start


def _planned(table: "Table", bounds: tuple[int, int], read, missing: list[str] | None) -> DeletionPlan:
    """plan_expiry, with the way out named when metadata of the expired range is missing."""
    try:
        return plan_expiry(table, *bounds, read=read, missing=missing)
    except MissingMetadataError as exc:
        raise MissingMetadataError(
            f"{exc}. Expiry deletes nothing it cannot plan from. If this file belongs to a snapshot being "
            "expired (verify() lists what is missing), expire with skip_missing=True (CLI: --skip-missing): "
            "missing metadata of the expired snapshots is skipped, what it named is left for orphan cleaning"
        ) from exc


def expire_snapshots(
    table: "Table",
    *,
    retain_min: int | None = None,
    retain_max: int | None = None,
    time_retained=None,
    older_than=None,
    retain_last: int | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    now=None,
    skip_missing: bool = False,
) -> ExpireResult:
    """Expire old snapshots and delete the files nothing retained still uses (``Table.expire_snapshots``).

    Defaults come from the options ``snapshot.num-retained.min`` / ``.max``, ``snapshot.time-retained``
    and ``snapshot.expire.limit``. ``older_than`` (a time) and ``retain_last`` are Iceberg's names for
    the time bound and ``retain_min``. Tags and consumers always protect what they hold. ``now``: the
    time expiry runs at (default: the table's clock). ``skip_missing=True`` is the repair path when
    metadata of the snapshots being expired is already gone (:func:`plan_expiry`). The action
    ``ExpireSnapshots`` (core/actions.py) documents each argument for the CLI and the operators.
    """
    check_bool(dry_run, "dry_run")
    check_bool(skip_missing, "skip_missing")
    now_millis = None if now is None else table.to_millis(now)
    settings = resolve_settings(
        table, retain_min=retain_min, retain_max=retain_max, time_retained=time_retained, older_than=older_than,
        retain_last=retain_last, limit=limit, now_millis=now_millis,
    )
    plans = PlanManager(table)
    result = ExpireResult(dry_run=dry_run)
    missing = result.missing_metadata if skip_missing else None
    if dry_run:
        return _dry_run(table, plans, settings, result, missing)
    result.recovered_data_files = len(plans.finish_all().deleted_data_files)
    result.earliest_before = table.snapshot_manager.earliest_id()

    for _attempt in range(_MAX_PLANNING_ATTEMPTS):
        read = _Snapshots(table)
        start = table.snapshot_manager.earliest_id()
        try:
            bounds = expire_range(table, settings, read, earliest=start)
            if bounds is None:
                result.earliest_after = table.snapshot_manager.earliest_id()
                return result
            del result.missing_metadata[:]
            plan = _planned(table, bounds, read, missing)
        except (MissingMetadataError, SnapshotNotFoundError):
            if not _expired_meanwhile(table, plans, start):
                raise
            continue  # another expiry removed what this one was reading: plan again from where it left off
        # Pending first: the fence is up, so from now on new tags and consumers below it
        # back out; then re-check the consumers that came in before, and read what protects.
        plans.publish_pending(plan)
        try:
            lowest = lowest_consumer_position(table, bounds[0])
            if lowest is not None and lowest < plan.fence:
                plans.discard_pending(plan)
                continue  # a consumer moved into the range: plan again
            protection = plans.protection(plan)
        except BaseException:
            plans.discard_pending(plan)
            raise
        plans.activate(plan)
        outcome = plans.execute(plan, protection)
        result.expired_snapshot_ids = plan.snapshot_ids
        result.deleted_snapshot_files = outcome.deleted_snapshot_files
        result.deleted_data_files = len(outcome.deleted_data_files)
        result.deleted_manifest_files = len(outcome.deleted_manifest_files)
        result.bytes_freed = outcome.bytes_freed + sum(read.file_size(i) for i in plan.snapshot_ids)
        result.protected_data_files = outcome.protected_data_files
        result.earliest_after = plan.fence
        return result
    result.earliest_after = table.snapshot_manager.earliest_id()
    return result


def _dry_run(
    table: "Table", plans: PlanManager, settings: ExpireSettings, result: ExpireResult, missing: list[str] | None
) -> ExpireResult:
    """What the real run with the same arguments deletes, deleting nothing.

    The real run first finishes the plans an interrupted run left behind, then
    expires from where they end; so does this, reading instead of deleting.
    """
    earliest = result.earliest_before = table.snapshot_manager.earliest_id()
    snapshot_ids: set[int] = set()
    manifest_files: dict[str, int] = {}
    data_files: dict[str, int] = {}
    for leftover in plans.plans():
        # Files of an interrupted plan may be gone already: list only what is still there.
        effect = plans.effect(leftover, plans.protection(leftover))
        snapshot_ids.update(i for i in leftover.snapshot_ids if table.snapshot_manager.exists(i))
        manifest_files.update((manifest_path(n), size) for n, size in effect.manifest_files if table.storage.exists(manifest_path(n)))
        data_files.update((c.path, c.size) for c in effect.data_files if table.storage.exists(c.path))
        result.protected_data_files += effect.protected_data_files
        if leftover.kind == EXPIRE and leftover.snapshot_ids:
            earliest = max(earliest or 0, leftover.fence)
    result.recovered_data_files = len(data_files)

    read = _Snapshots(table)
    bounds = expire_range(table, settings, read, earliest=earliest)
    if bounds is not None:
        plan = _planned(table, bounds, read, missing)
        effect = plans.effect(plan, plans.protection(plan))
        result.expired_snapshot_ids = plan.snapshot_ids
        snapshot_ids.update(plan.snapshot_ids)
        manifest_files.update((manifest_path(n), size) for n, size in effect.manifest_files)
        data_files.update((c.path, c.size) for c in effect.data_files)
        result.protected_data_files += effect.protected_data_files
        result.bytes_freed += sum(read.file_size(i) for i in plan.snapshot_ids)
        earliest = plan.fence

    result.snapshot_files = [snapshot_path(i) for i in sorted(snapshot_ids)]
    result.manifest_files = sorted(manifest_files)
    result.data_files = sorted(data_files)
    result.deleted_snapshot_files = len(snapshot_ids)
    result.deleted_manifest_files = len(manifest_files)
    result.deleted_data_files = len(data_files)
    result.bytes_freed += sum(manifest_files.values()) + sum(data_files.values())
    result.earliest_after = earliest
    return result
