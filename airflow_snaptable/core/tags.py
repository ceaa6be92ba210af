"""Tags: named, durable references to a snapshot's state (``tag/tag-<name>``).

A tag file holds a copy of the snapshot it names, so the tagged state stays
readable after the snapshot itself expires. Expiry never deletes a file that
a tag still holds, and deleting a tag frees the files only it held.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from airflow_snaptable.core.checks import check_exclusive, check_int
from airflow_snaptable.core.errors import CorruptMetadataError, InvalidArgumentError, TagAlreadyExistsError, TagNotFoundError
from airflow_snaptable.core.names import validate_name
from airflow_snaptable.core.snapshot import Snapshot
from airflow_snaptable.core.storage import Storage

TAG_DIR = "tag"
TAG_PREFIX = "tag-"
MANUAL = "manual"
PERIODIC = "periodic"
#: What creating a tag does when a tag of that name exists.
IF_EXISTS = ("fail", "skip")


@dataclass(frozen=True)
class Tag:
    name: str
    snapshot: Snapshot
    create_time_millis: int
    time_retained_millis: int | None = None
    source: str = MANUAL  # MANUAL or PERIODIC: only periodic tags are pruned by tag.num-retained-max

    @property
    def snapshot_id(self) -> int:
        return self.snapshot.id

    @property
    def expires_at_millis(self) -> int | None:
        if self.time_retained_millis is None:
            return None
        return self.create_time_millis + self.time_retained_millis

    def is_expired(self, now_millis: int) -> bool:
        expires = self.expires_at_millis
        return expires is not None and now_millis > expires

    def to_json(self) -> bytes:
        doc = {
            "name": self.name,
            "snapshot": self.snapshot.to_dict(),
            "tagCreateTime": self.create_time_millis,
            "tagTimeRetainedMillis": self.time_retained_millis,
            "source": self.source,
        }
        return json.dumps(doc, indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "Tag":
        try:
            doc = json.loads(data)
            snapshot = Snapshot.from_json(json.dumps(doc["snapshot"]).encode(), where=where)
            return cls(
                name=str(doc["name"]),
                snapshot=snapshot,
                create_time_millis=int(doc["tagCreateTime"]),
                time_retained_millis=None if doc.get("tagTimeRetainedMillis") is None else int(doc["tagTimeRetainedMillis"]),
                source=str(doc.get("source", MANUAL)),
            )
        except CorruptMetadataError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot parse tag file: {exc}") from exc

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "snapshot_id": self.snapshot_id,
            "snapshot_time_millis": self.snapshot.time_millis,
            "create_time_millis": self.create_time_millis,
            "time_retained_millis": self.time_retained_millis,
            "expires_at_millis": self.expires_at_millis,
            "source": self.source,
            "record_count": self.snapshot.total_record_count,
        }


def tag_path(name: str) -> str:
    return f"{TAG_DIR}/{TAG_PREFIX}{name}"


def retained_millis(time_retained) -> int | None:
    if time_retained is None:
        return None
    from airflow_snaptable.core.options import parse_duration

    return int(parse_duration(time_retained, "time_retained") / timedelta(milliseconds=1))


class TagManager:
    """Reads and writes tag files. Reading is fail-closed: an unreadable tag is an error, never "no tag"."""

    def __init__(self, storage: Storage):
        self.storage = storage

    def names(self) -> list[str]:
        names = []
        for entry in self.storage.list_names(TAG_DIR):
            if entry.startswith(TAG_PREFIX):  # temp files of atomic writes start with "."
                names.append(entry[len(TAG_PREFIX):])
        return names

    def tag(self, name: str) -> Tag:
        validate_name(name, "tag")
        path = tag_path(name)
        try:
            data = self.storage.read_bytes(path)
        except FileNotFoundError:
            raise TagNotFoundError(f"tag {name!r} does not exist in {self.storage.uri}") from None
        return Tag.from_json(data, where=self.storage.full_uri(path))

    def exists(self, name: str) -> bool:
        return self.storage.exists(tag_path(validate_name(name, "tag")))

    def tags(self) -> list[Tag]:
        """Every tag, ordered by snapshot id then name. Raises if any tag file cannot be read."""
        found = []
        for name in self.names():
            try:
                found.append(self.tag(name))
            except TagNotFoundError:
                continue  # deleted while we listed
        return sorted(found, key=lambda t: (t.snapshot_id, t.name))

    def create(self, tag: Tag) -> bool:
        return self.storage.create_exclusive(tag_path(tag.name), tag.to_json())

    def replace(self, tag: Tag) -> None:
        self.storage.write_bytes(tag_path(tag.name), tag.to_json())

    def delete(self, name: str) -> None:
        self.storage.delete(tag_path(name))


# -- operations on a table (checked against deletion plans; see core/plans.py) --------
# core/intents.py imports this module, so these operations import it when called.


def create_tag(
    table, name: str, snapshot_id: int | None = None, time_retained=None, source: str = MANUAL, now_millis: int | None = None
) -> Tag:
    """Tag a snapshot (default: the latest). A snapshot that expired can be tagged while another tag holds it."""
    from airflow_snaptable.core.errors import SnapshotNotFoundError
    from airflow_snaptable.core.intents import TAG as TAG_INTENT, Intent, IntentManager

    validate_name(name, "tag")
    if time_retained is None and table.options.get("tag.default-time-retained") is not None:
        time_retained = table.options.get("tag.default-time-retained")
    retained = retained_millis(time_retained)
    if snapshot_id is None:
        snapshot = table.latest_snapshot()
        if snapshot is None:
            raise SnapshotNotFoundError("the table has no snapshot to tag")
    else:
        snapshot = _snapshot_or_tagged(table, check_int(snapshot_id, "snapshot_id", minimum=1))
    tag = Tag(name, snapshot, table.clock() if now_millis is None else now_millis, retained, source)
    if table.tag_manager.exists(name):
        raise TagAlreadyExistsError(f"tag {name!r} exists already")
    # Announce, check, publish (core/intents.py): a crash at any point leaves no broken tag.
    intents = IntentManager(table.storage)
    intent = intents.announce(Intent(TAG_INTENT, tag=tag))
    try:
        if not _still_held(table, tag):
            raise SnapshotNotFoundError(f"snapshot {snapshot.id} was expired while the tag was being created")
        if not table.tag_manager.create(tag):
            raise TagAlreadyExistsError(f"tag {name!r} exists already")
    finally:
        intents.withdraw(intent)
    return tag


def create_or_keep_tag(
    table, name: str, snapshot_id: int | None = None, *, as_of=None, time_retained=None, if_exists: str = "fail"
) -> tuple[Tag, bool]:
    """Tag ``snapshot_id``, or the latest snapshot at ``as_of``, or the latest; returns (the tag, kept).

    ``as_of`` picks the snapshot by time, so a late or backfilled run tags the state at a period's
    boundary. ``if_exists="skip"`` makes re-runs idempotent: when the tag exists and points at the
    requested snapshot, that tag is the result (kept: True); when it points elsewhere,
    TagAlreadyExistsError. It never checks before creating: the create is an atomic
    create-if-absent, and only its "exists already" answer leads to the skip.
    """
    check_exclusive({"snapshot_id": snapshot_id, "as_of": as_of})
    if if_exists not in IF_EXISTS:
        raise InvalidArgumentError(f"if_exists must be one of {', '.join(IF_EXISTS)}, got {if_exists!r}")
    if as_of is not None:
        snapshot = table.snapshot_at(as_of)
        if snapshot is None:
            raise InvalidArgumentError(f"no retained snapshot at or before {as_of}")
        snapshot_id = snapshot.id
    try:
        return create_tag(table, name, snapshot_id, time_retained), False
    except TagAlreadyExistsError:
        if if_exists != "skip":
            raise
        existing = table.tag(name)  # the create lost to this tag: it exists (or was deleted since: an error)
        requested = table.snapshot_manager.latest_id() if snapshot_id is None else snapshot_id
        if existing.snapshot_id != requested:
            raise TagAlreadyExistsError(
                f"tag {existing.name!r} exists already and points at snapshot {existing.snapshot_id}, "
                f"not at the requested snapshot {requested}: not skipped (delete or rename the tag)"
            ) from None
        return existing, True


def _snapshot_or_tagged(table, snapshot_id: int) -> Snapshot:
    from airflow_snaptable.core.errors import SnapshotNotFoundError

    try:
        return table.snapshot_manager.snapshot(snapshot_id)
    except SnapshotNotFoundError:
        for tag in table.tag_manager.tags():
            if tag.snapshot_id == snapshot_id:
                return tag.snapshot
        raise


def _still_held(table, tag: Tag) -> bool:
    """After writing ``tag``: is its snapshot still kept by the table or by another tag nobody is deleting?

    Either an expiry plan's executor reads tags after this tag was written (and so
    protects its files), or this check sees that plan's fence and backs out.
    """
    from airflow_snaptable.core.plans import PlanManager

    plans = PlanManager(table)
    snapshots = table.snapshot_manager
    ceiling = plans.ceiling()
    if ceiling is not None and tag.snapshot_id > ceiling:
        return False  # a rollback is discarding that snapshot
    latest = snapshots.latest_id()
    if latest is None or tag.snapshot_id > latest:
        return False  # a commit a rollback discarded, about to undo itself
    if tag.snapshot_id >= max(plans.fence(), snapshots.earliest_floor()) and snapshots.exists(tag.snapshot_id):
        return True
    doomed = plans.doomed_tags()
    return any(
        other.snapshot_id == tag.snapshot_id and other.name != tag.name and other.name not in doomed
        for other in table.tag_manager.tags()
    )


def delete_tag(table, name: str) -> list[str]:
    """Delete a tag; if its snapshot expired, also the files only this tag still held. Returns deleted paths."""
    from airflow_snaptable.core.plans import PlanManager

    validate_name(name, "tag")
    plans = PlanManager(table)
    # An unfinished plan (maybe this very deletion, interrupted) decides what is still used: finish it first.
    interrupted = name in {n for p in plans.plans() for n in p.tag_names}
    finished = plans.finish_all()
    if interrupted and not table.tag_manager.exists(name):
        return finished.deleted_data_files  # a crashed run of this same call, now complete
    tag = table.tag_manager.tag(name)
    plan = _release_plan(table, plans, tag, delete_tag_file=True)
    if plan is None:
        table.tag_manager.delete(name)  # the snapshot still holds everything; expiry frees it later
        return []
    return run_plan(plans, plan).deleted_data_files


def replace_tag(table, name: str, snapshot_id: int, time_retained=None) -> Tag:
    """Point an existing tag at another snapshot in one write, then free what only the old target held."""
    from airflow_snaptable.core.errors import SnapshotNotFoundError
    from airflow_snaptable.core.intents import TAG as TAG_INTENT, Intent, IntentManager
    from airflow_snaptable.core.plans import PlanManager

    validate_name(name, "tag")
    plans = PlanManager(table)
    plans.finish_all()
    old = table.tag_manager.tag(name)
    target = table.snapshot(snapshot_id)  # a live snapshot, checked before anything changes
    retained = retained_millis(time_retained) if time_retained is not None else old.time_retained_millis
    new = Tag(name, target, table.clock(), retained, old.source)
    plan = _release_plan(table, plans, old, delete_tag_file=False)
    if plan is not None:
        # Active at once: whoever finishes it (this call, or the next maintenance run after a
        # crash) frees only what no tag holds then, the old or the new version of this one.
        plans.publish(plan)
    intents = IntentManager(table.storage)
    intent = intents.announce(Intent(TAG_INTENT, tag=new))
    try:
        if not _still_held(table, new):
            raise SnapshotNotFoundError(f"snapshot {target.id} was expired while the tag was being replaced")
        table.tag_manager.replace(new)
    finally:
        intents.withdraw(intent)
    if plan is not None:
        plans.execute(plan)
    return new


def _release_plan(table, plans, tag: Tag, delete_tag_file: bool):
    """The plan freeing the files only ``tag`` holds, or None while its snapshot is still retained."""
    from airflow_snaptable.core.errors import CorruptMetadataError, SnapshotNotFoundError
    from airflow_snaptable.core.plans import DELETE_TAG, DataCandidate, DeletionPlan

    if tag.snapshot_id >= plans.fence() and table.snapshot_manager.exists(tag.snapshot_id):
        return None
    for attempt in range(3):
        try:
            earliest = table.snapshot_manager.earliest_snapshot()
            kept_files = set() if earliest is None else set(table.manifest_io.read_state(earliest))
            kept_manifests = set() if earliest is None else table.manifest_io.names_of(earliest)
            break
        except (SnapshotNotFoundError, CorruptMetadataError):
            if attempt == 2:
                raise  # not a moving EARLIEST: real damage
    data = [
        DataCandidate(f.path, f.file_size, below=tag.snapshot_id + 1, from_id=tag.snapshot_id)
        for f in table.manifest_io.read_state(tag.snapshot).values()
        if f.path not in kept_files
    ]
    manifest_files = sorted((n, s) for n, s in table.manifest_io.sizes_of(tag.snapshot).items() if n not in kept_manifests)
    return DeletionPlan(
        kind=DELETE_TAG,
        fence=0,
        snapshot_ids=[],
        data_files=data,
        manifest_files=manifest_files,
        tag_names=[tag.name] if delete_tag_file else [],
        tag_create_times={tag.name: tag.create_time_millis} if delete_tag_file else {},
    )


def run_plan(plans, plan):
    """Publish ``plan`` pending, read what protects (fail closed: drop the plan on error), then execute it."""
    plans.publish_pending(plan)
    try:
        protection = plans.protection(plan)
    except BaseException:
        plans.discard_pending(plan)
        raise
    plans.activate(plan)
    return plans.execute(plan, protection)
