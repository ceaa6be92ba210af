"""Which snapshots and refs an expiry keeps: Iceberg's ``RemoveSnapshots`` rules.

- A ref other than ``main`` whose snapshot is older than its ``max-ref-age-ms`` (else the
  table's ``history.expire.max-ref-age-ms``, default forever) is removed; ``main`` never is.
- Every retained ref's snapshot stays.
- Each retained branch keeps its ancestors while fewer than ``min-snapshots-to-keep`` are kept
  or they are not older than ``now - max-snapshot-age-ms`` (the branch's own settings, else
  ``retain_last`` / ``older_than``, else the table's ``history.expire.min-snapshots-to-keep``,
  default 1, and ``history.expire.max-snapshot-age-ms``, default 5 days).
- A snapshot no branch reaches and no tag names stays while it is not older than ``older_than``.
- ``snapshot_ids`` are removed besides, unless a retained ref names them (an error).

On top of Iceberg's rules, this package's own bounds apply to ``main``'s ancestry:
``retain_max`` keeps at most that many of its newest ancestors (never fewer than the minimum),
and ``limit`` expires at most that many snapshots in one run, oldest first. Consumers
(core/formats/iceberg/consumers.py) keep ``main``'s ancestors from what they read last on, over every rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_snaptable.core.errors import InvalidArgumentError, ProtectedSnapshotError

MAIN = "main"
#: Consumers' refs (core/formats/iceberg/consumers.py): never removed by age, the consumer's expiration decides.
CONSUMER_REF_PREFIX = "snaptable-consumer-"
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
_DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3600 * 1000
_DEFAULT_MIN_SNAPSHOTS_TO_KEEP = 1
_FOREVER = 2**63 - 1


@dataclass
class RetentionSettings:
    now: int
    older_than: int | None = None  # millis
    retain_last: int | None = None
    retain_max: int | None = None
    limit: int | None = None
    snapshot_ids: list[int] = field(default_factory=list)


@dataclass
class Retention:
    expired_ids: list[int]
    removed_refs: list[str]


def _int_property(properties: dict, key: str, default: int, minimum: int) -> int:
    raw = properties.get(key)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidArgumentError(f"table property {key}={raw!r} is not an integer") from None
    if value < minimum:
        raise InvalidArgumentError(f"table property {key}={raw!r} must be at least {minimum}")
    return value


def ancestors(metadata, snapshot_id: int | None) -> list:
    """The snapshot and its ancestors, newest first, while they are in the metadata."""
    # One index per walk: ``snapshot_by_id`` scans the list, n times over a history of n.
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    found = []
    while snapshot_id is not None and len(found) <= len(by_id):
        snapshot = by_id.get(snapshot_id)
        if snapshot is None:
            break
        found.append(snapshot)
        snapshot_id = snapshot.parent_snapshot_id
    return found


def plan_retention(metadata, settings: RetentionSettings, held: dict[int, str] | None = None) -> Retention:
    """``held``: snapshot id -> the consumer that holds it (core/formats/iceberg/consumers.py); those always stay."""
    held = held or {}
    props = dict(metadata.properties or {})
    now = settings.now
    default_older_than = (
        settings.older_than if settings.older_than is not None
        else now - _int_property(props, MAX_SNAPSHOT_AGE_MS, _DEFAULT_MAX_SNAPSHOT_AGE_MS, 0)
    )
    default_min = settings.retain_last or _int_property(props, MIN_SNAPSHOTS_TO_KEEP, _DEFAULT_MIN_SNAPSHOTS_TO_KEEP, 1)
    default_max_ref_age = _int_property(props, MAX_REF_AGE_MS, _FOREVER, 1)

    retained_refs: dict[str, object] = {}
    removed_refs: list[str] = []
    for name, ref in sorted(metadata.refs.items()):
        snapshot = metadata.snapshot_by_id(ref.snapshot_id)
        max_ref_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_max_ref_age
        if name == MAIN or name.startswith(CONSUMER_REF_PREFIX) or (snapshot is not None and now - snapshot.timestamp_ms <= max_ref_age):
            retained_refs[name] = ref
        else:
            removed_refs.append(name)

    keep: set[int] = {ref.snapshot_id for ref in retained_refs.values()} | set(held)
    for snapshot_id in settings.snapshot_ids:
        if metadata.snapshot_by_id(snapshot_id) is None:
            raise InvalidArgumentError(f"snapshot {snapshot_id} does not exist")
        if snapshot_id in held:
            raise ProtectedSnapshotError(f"cannot expire snapshot {snapshot_id}: consumer {held[snapshot_id]!r} has not read past it")
        names = sorted(n for n, r in retained_refs.items() if r.snapshot_id == snapshot_id)
        if names:
            raise ProtectedSnapshotError(f"cannot expire snapshot {snapshot_id}: still referenced by refs {names}")

    reached_by_refs: set[int] = set()
    for name, ref in retained_refs.items():
        if ref.snapshot_ref_type.value != "branch":
            reached_by_refs.add(ref.snapshot_id)
            continue
        older_than = now - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else default_older_than
        minimum = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else default_min
        lineage = ancestors(metadata, ref.snapshot_id)
        reached_by_refs.update(s.snapshot_id for s in lineage)
        kept = []
        for snapshot in lineage:
            if len(kept) < minimum or snapshot.timestamp_ms >= older_than:
                kept.append(snapshot.snapshot_id)
            else:
                break
        if name == MAIN and settings.retain_max is not None:
            kept = kept[: max(settings.retain_max, minimum)]
        keep.update(kept)
    for snapshot in metadata.snapshots:
        if snapshot.snapshot_id not in reached_by_refs and snapshot.timestamp_ms >= default_older_than:
            keep.add(snapshot.snapshot_id)

    explicit = set(settings.snapshot_ids)
    if explicit:
        # Explicit ids only: like Iceberg's expireSnapshotId, the age rules do not add to them.
        expired = [s for s in metadata.snapshots if s.snapshot_id in explicit]
    else:
        expired = [s for s in metadata.snapshots if s.snapshot_id not in keep]
    expired.sort(key=lambda s: (s.timestamp_ms, s.sequence_number or 0))
    if settings.limit is not None:
        expired = expired[: settings.limit]
    return Retention([s.snapshot_id for s in expired], removed_refs)
