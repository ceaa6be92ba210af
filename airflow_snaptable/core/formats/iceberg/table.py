"""An Apache Iceberg table's lifecycle, with Iceberg's own semantics, behind the actions' contract.

``Table.open("iceberg://db.orders", catalog={...})`` returns an :class:`IcebergTable`: the
methods the actions (core/actions/maintenance.py) call, with the same arguments and result types as on
this package's tables, carried out the way Iceberg does them:

- snapshots are Iceberg's (random 64-bit ids); ``snapshots()`` lists the current branch's
  ancestry, oldest first, which is what a retain rule counts;
- tags are Iceberg tag refs (``time_retained`` is the ref's ``max-ref-age-ms``, counted, as
  Iceberg counts it, from the tagged snapshot's commit time); every ref change is one catalog
  commit, so a rename is atomic;
- rollback moves ``main`` (Iceberg's ``rollbackTo`` / ``setCurrentSnapshot``): later snapshots
  are kept until an expiry removes them, as in Iceberg, so it never deletes files;
- expiry (expire.py) and orphan removal (orphans.py) delete files.

Why not the numbered-snapshot engine of core/: Iceberg's history is a graph of random ids
(branches, rollbacks, cherry-picks), not a contiguous sequence, and its retention is per ref.
What is shared is the contract: the actions, their checks, results and front ends.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.errors import (
    InvalidArgumentError,
    SnapshotNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
    UnsupportedOperationError,
)
from airflow_snaptable.core.lifecycle.expiry.run import ExpireResult
from airflow_snaptable.core.formats.iceberg import catalog as catalogs
from airflow_snaptable.core.formats.iceberg.expire import IcebergExpiry, journaled_expired_ids
from airflow_snaptable.core.formats.iceberg.files import storage_for
from airflow_snaptable.core.formats.iceberg.orphans import remove_orphan_files
from airflow_snaptable.core.formats.iceberg.consumers import IcebergConsumers
from airflow_snaptable.core.formats.iceberg.periodic import periodic_tagging, tag_options
from airflow_snaptable.core.formats.iceberg.positions import IcebergPositions, new_snapshots
from airflow_snaptable.core.formats.iceberg.refs import KeptRef, commit_refs, existing_snapshot, existing_tag
from airflow_snaptable.core.formats.iceberg.retention import CONSUMER_REF_PREFIX, MAIN, RetentionSettings, ancestors
from airflow_snaptable.core.formats.iceberg.snapshots import snapshot_of
from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.lifecycle.orphans import OrphanResult
from airflow_snaptable.core.lifecycle.rollback import RollbackResult
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.lifecycle.periodic_tags import PeriodicTagResult, resolve_sources
from airflow_snaptable.core.native.tags import IF_EXISTS, UNRECORDED, Tag
from airflow_snaptable.core.arguments.times import duration_argument, millis, to_millis
from airflow_snaptable.core.formats.native.verify import VerifyResult
from airflow_snaptable.core.arguments.checks import check_int
from airflow_snaptable.core.formats.iceberg.journal import journal_of
from airflow_snaptable.core.formats.iceberg.noncurrent import IcebergNoncurrent, record_refs
from airflow_snaptable.core.lifecycle.noncurrent.journal import JournalEntry, NoncurrentJournal, NoncurrentRun, entry_key
from airflow_snaptable.core.lifecycle.noncurrent.purge import PurgeResult
from airflow_snaptable.core.lifecycle.noncurrent.trash import RunSummary, trash
from airflow_snaptable.core.lifecycle.noncurrent.undo import UndoResult

#: The table property giving deleting runs a retention in days (core/lifecycle/noncurrent/), as the option
#: ``noncurrent-days`` does on this package's and Paimon tables.
NONCURRENT_DAYS_PROPERTY = "snaptable.noncurrent-days"

FORMAT = "iceberg"


class IcebergTable:
    format = FORMAT
    #: The run with a retention the deleting calls inside :meth:`retaining_noncurrent` belong to (None: they delete).
    _noncurrent: NoncurrentRun | None = None

    def __init__(self, uri: str, catalog_properties: dict[str, Any], clock: Callable[[], int]):
        self._uri = uri
        self._properties = catalog_properties
        self.clock = clock
        self.catalog, self.iceberg = catalogs.load_table(uri, catalog_properties)
        self.storage = storage_for(self.iceberg)
        #: Runs a compaction's file groups, ``(groups, rewrite_one) -> [added files per group]``: None runs them
        #: in turn here; the Spark maintenance job sets one that runs a task per group on the executors.
        self.group_runner = None

    # -- reading --------------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self._uri

    def __repr__(self) -> str:
        return f"IcebergTable({self._uri!r})"

    def refresh(self):
        self.iceberg = catalogs.reload_table(self._uri, self.catalog, self.iceberg.name())
        return self.iceberg

    @property
    def arrow_schema(self):
        return self.iceberg.schema().as_arrow()

    @property
    def properties(self) -> dict[str, str]:
        """The table's properties (Iceberg's options: ``history.expire.*``, ``write.*``, ...), as the catalog has them now."""
        return dict(self.refresh().metadata.properties or {})

    @property
    def partition_keys(self) -> tuple[str, ...]:
        schema = self.iceberg.schema()
        return tuple(schema.find_column_name(f.source_id) for f in self.iceberg.spec().fields)

    def snapshots(self) -> list[Snapshot]:
        """The current branch's history, oldest first."""
        metadata = self.refresh().metadata
        return [snapshot_of(s) for s in reversed(ancestors(metadata, metadata.current_snapshot_id))]

    def snapshot(self, snapshot_id: int) -> Snapshot:
        found = self.iceberg.metadata.snapshot_by_id(snapshot_id) or self.refresh().metadata.snapshot_by_id(snapshot_id)
        if found is None:
            raise SnapshotNotFoundError(f"snapshot {snapshot_id} does not exist in {self._uri}")
        return snapshot_of(found)

    def latest_snapshot(self) -> Snapshot | None:
        current = self.refresh().metadata.current_snapshot()
        return snapshot_of(current) if current else None

    def earliest_snapshot(self) -> Snapshot | None:
        history = self.snapshots()
        return history[0] if history else None

    def snapshot_at(self, when) -> Snapshot | None:
        millis = to_millis(when)
        found = [s for s in self.snapshots() if s.time_millis <= millis]
        return found[-1] if found else None

    def scan(self, *args, **kwargs):
        raise UnsupportedOperationError(f"{self._uri}: read Iceberg tables with pyiceberg or Spark; this package runs their lifecycle")

    def compact(self, partitions=None, target_file_size=None, min_file_num=None, *, min_input_files=None, dry_run: bool = False, **kwargs):
        """Bin-pack compaction into one ``replace`` snapshot (core/formats/iceberg/compaction.py).
        ``min_file_num`` is this package's name for Iceberg's ``min_input_files``."""
        from airflow_snaptable.core.formats.iceberg.compaction import compact_iceberg

        if min_file_num is not None and min_input_files is not None and min_file_num != min_input_files:
            raise InvalidArgumentError("min_file_num is this package's name for min_input_files: give one")
        kwargs.setdefault("rewrite_groups", self.group_runner)
        return compact_iceberg(
            self, partitions, target_file_size, min_input_files if min_input_files is not None else min_file_num, dry_run, **kwargs,
        )

    def rewrite_manifests(self, *, target_manifest_size=None, dry_run: bool = False):
        """Cluster the current snapshot's data manifests by partition (core/formats/iceberg/manifest_rewrite.py)."""
        from airflow_snaptable.core.formats.iceberg.manifest_rewrite import rewrite_manifests

        return rewrite_manifests(self, target_manifest_size, dry_run)

    # -- tags -----------------------------------------------------------------------------------

    def tags(self) -> list[Tag]:
        """Every tag ref, each periodic or manual as the table's period properties tell (core/lifecycle/periodic_tags.py)."""
        options = tag_options(dict(self.refresh().metadata.properties))
        return resolve_sources(self.tag_refs(), options, self.clock())

    def tag_refs(self) -> list[Tag]:
        """Every tag ref as it is: a ref records no source (UNRECORDED)."""
        metadata = self.refresh().metadata
        found = []
        for name, ref in metadata.refs.items():
            if ref.snapshot_ref_type.value != "tag" or name.startswith(CONSUMER_REF_PREFIX):
                continue  # a consumer's ref is its mark (core/formats/iceberg/consumers.py), listed as a consumer
            snapshot = metadata.snapshot_by_id(ref.snapshot_id)
            if snapshot is None:
                continue
            found.append(Tag(name, snapshot_of(snapshot), snapshot.timestamp_ms, ref.max_ref_age_ms, UNRECORDED))
        return sorted(found, key=lambda t: (t.snapshot.time_millis, t.name))

    def tag(self, name: str) -> Tag:
        for tag in self.tags():
            if tag.name == name:
                return tag
        raise TagNotFoundError(f"tag {name!r} does not exist in {self._uri}")

    @property
    def snapshot_manager(self) -> IcebergPositions:
        """Positions in ``main``'s history for sensing new snapshots: data sequence numbers (core/formats/iceberg/positions.py)."""
        return IcebergPositions(self)

    def new_snapshots(self, baseline: int, kinds_wanted, with_changes: bool, checked_through: int | None, ref: str | None = None):
        """``find_new_snapshots`` (core/incremental.py) on this table, by sequence numbers along ``ref`` (``main``)."""
        return new_snapshots(self, baseline, kinds_wanted, with_changes, checked_through, ref)

    @property
    def consumer_manager(self) -> IcebergConsumers:
        return IcebergConsumers(self, lambda: journaled_expired_ids(self.storage))

    def tag_lifecycle(self) -> "IcebergTable":
        return self

    def ref_commit(self, updates: Callable[[Any], tuple], requirements: Callable[[Any], tuple]):
        """One catalog commit of ref changes (core/formats/iceberg/refs.py)."""
        return commit_refs(self, updates, requirements)

    def _tag_update(self, name: str, snapshot_id: int, time_retained):
        from pyiceberg.table.refs import SnapshotRefType
        from pyiceberg.table.update import SetSnapshotRefUpdate

        max_age = None if time_retained is None else millis(duration_argument(time_retained, "time_retained"))
        if max_age is not None and max_age <= 0:
            raise InvalidArgumentError(f"time_retained must be positive, got {time_retained!r}")
        return SetSnapshotRefUpdate(ref_name=name, type=SnapshotRefType.TAG, snapshot_id=snapshot_id, max_ref_age_ms=max_age)

    def create_tag(self, name: str, snapshot_id: int | None = None, *, time_retained=None) -> Tag:
        return self.create_or_keep(name, snapshot_id, time_retained=time_retained)[0]

    def create_or_keep(self, name: str, snapshot_id: int | None = None, *, as_of=None, time_retained=None, if_exists: str = "fail") -> tuple[Tag, bool]:
        from pyiceberg.table.update import AssertRefSnapshotId

        validate_name(name, "tag")
        if if_exists not in IF_EXISTS:
            raise InvalidArgumentError(f"if_exists must be one of {', '.join(IF_EXISTS)}, got {if_exists!r}")
        if snapshot_id is not None and as_of is not None:
            raise InvalidArgumentError("give snapshot_id or as_of, not both")
        if as_of is not None:
            found = self.snapshot_at(as_of)
            if found is None:
                raise InvalidArgumentError(f"no snapshot at or before {as_of}")
            snapshot_id = found.id
        metadata = self.refresh().metadata
        if snapshot_id is None:
            if metadata.current_snapshot_id is None:
                raise SnapshotNotFoundError(f"{self._uri} has no snapshot to tag")
            snapshot_id = metadata.current_snapshot_id
        self.snapshot(snapshot_id)
        update = self._tag_update(name, snapshot_id, time_retained)

        def absent(m) -> tuple:
            if name in m.refs:  # also when another writer created it since the first read
                existing = m.refs[name]
                if if_exists == "skip" and existing.snapshot_ref_type.value == "tag" and existing.snapshot_id == snapshot_id:
                    raise KeptRef()
                raise TagAlreadyExistsError(f"ref {name!r} exists already in {self._uri} (snapshot {existing.snapshot_id})")
            return (AssertRefSnapshotId(ref=name, snapshot_id=None),)

        def tagging(m) -> tuple:
            return (update.model_copy(update={"snapshot_id": existing_snapshot(self, m, snapshot_id, f"tag {name!r} was created")}),)

        try:
            self.ref_commit(tagging, absent)
        except KeptRef:
            return self.tag(name), True
        return self.tag(name), False

    def replace_tag(self, name: str, snapshot_id: int, *, time_retained=None) -> Tag:
        self.tag(name)
        self.snapshot(snapshot_id)
        update = self._tag_update(name, snapshot_id, time_retained)
        def moving(m) -> tuple:
            return (update.model_copy(update={"snapshot_id": existing_snapshot(self, m, snapshot_id, f"tag {name!r} was replaced")}),)

        # The tag is replaced, never created again: one deleted meanwhile stays deleted.
        self.ref_commit(moving, lambda m: (existing_tag(self, m, name),))
        return self.tag(name)

    def rename_tag(self, name: str, new_name: str) -> Tag:
        from pyiceberg.table.update import AssertRefSnapshotId, RemoveSnapshotRefUpdate

        validate_name(new_name, "tag")
        old = self.tag(name)
        if new_name in self.iceberg.metadata.refs:
            raise TagAlreadyExistsError(f"ref {new_name!r} exists already in {self._uri}")
        update = self._tag_update(new_name, old.snapshot_id, None)
        update = update.model_copy(update={"max_ref_age_ms": old.time_retained_millis})
        self.ref_commit(
            lambda m: (update, RemoveSnapshotRefUpdate(ref_name=name)),
            lambda m: (AssertRefSnapshotId(ref=new_name, snapshot_id=None), existing_tag(self, m, name, old.snapshot_id)),
        )
        return self.tag(new_name)

    def delete_tag(self, name: str) -> list[str]:
        """Remove the tag ref. Its snapshot's files go with the next expiry that removes the snapshot
        (Iceberg: a tag holds a snapshot in the metadata, not files)."""
        from pyiceberg.table.update import RemoveSnapshotRefUpdate

        tag = self.tag(name)
        if self._noncurrent is not None:
            record_refs(self.storage, self._noncurrent, entry_key("tag", name), self.refresh().metadata, [name], {name: None})
        self.ref_commit(
            lambda m: (RemoveSnapshotRefUpdate(ref_name=name),),
            lambda m: (existing_tag(self, m, name, tag.snapshot_id),),
        )
        return [name]

    def expire_tags(self, *, now=None) -> list[str]:
        """Remove the tags older than their ``max-ref-age-ms`` (the snapshots stay until an expiry), in one
        commit that holds only on the refs it judged: a tag replaced or given a longer life meanwhile
        is judged again."""
        from pyiceberg.table.update import RemoveSnapshotRefUpdate

        from airflow_snaptable.core.formats.iceberg.requirements import unchanged_since

        now_ms = self.clock() if now is None else to_millis(now)
        expired: list[str] = []

        def past_their_age(metadata) -> tuple:
            expired[:] = sorted(
                name for name, ref in metadata.refs.items()
                if ref.snapshot_ref_type.value == "tag" and ref.max_ref_age_ms is not None
                and (snapshot := metadata.snapshot_by_id(ref.snapshot_id)) is not None
                and now_ms - snapshot.timestamp_ms > ref.max_ref_age_ms
            )
            return tuple(RemoveSnapshotRefUpdate(ref_name=name) for name in expired)

        if past_their_age(self.refresh().metadata):
            if self._noncurrent is not None:
                # Every tag past its age now; one a concurrent change kept is found back at undo.
                record_refs(self.storage, self._noncurrent, entry_key("tags", *expired), self.iceberg.metadata, list(expired),
                            dict.fromkeys(expired))
            self.ref_commit(past_their_age, lambda m: unchanged_since(self.iceberg))
        return list(expired)

    # -- rollback -------------------------------------------------------------------------------

    def rollback_to(self, snapshot_id: int | None = None, *, tag: str | None = None, as_of=None, keep_history: bool = False, force: bool = False) -> RollbackResult:
        """Point ``main`` at a snapshot, a tag's snapshot, or the latest ancestor at a time.

        A snapshot must be an ancestor of the current one (Iceberg's ``rollbackTo``); a tag may
        point anywhere (``setCurrentSnapshot``). Nothing is deleted: the snapshots after the
        target stay until an expiry removes them (``keep_history`` is what Iceberg always does).
        """
        from pyiceberg.table.refs import SnapshotRefType
        from pyiceberg.table.update import AssertRefSnapshotId, SetSnapshotRefUpdate

        given = [k for k, v in {"snapshot_id": snapshot_id, "tag": tag, "as_of": as_of}.items() if v is not None]
        if len(given) != 1:
            raise InvalidArgumentError(f"give exactly one of snapshot_id, tag, as_of (got {given or 'none'})")
        metadata = self.refresh().metadata
        history = ancestors(metadata, metadata.current_snapshot_id)
        if tag is not None:
            target = self.tag(tag).snapshot_id
        elif as_of is not None:
            found = self.snapshot_at(as_of)
            if found is None:
                raise InvalidArgumentError(f"no snapshot of {self._uri} at or before {as_of}")
            target = found.id
        else:
            if metadata.snapshot_by_id(snapshot_id) is None:
                raise SnapshotNotFoundError(f"snapshot {snapshot_id} does not exist in {self._uri}")
            if snapshot_id not in {s.snapshot_id for s in history}:
                raise InvalidArgumentError(f"snapshot {snapshot_id} is not an ancestor of the current snapshot of {self._uri}")
            target = snapshot_id
        current = metadata.current_snapshot_id
        if self._noncurrent is not None:
            record_refs(self.storage, self._noncurrent, entry_key("rollback", str(current)), metadata, [MAIN], {MAIN: target})
        self.ref_commit(
            lambda m: (SetSnapshotRefUpdate(
                ref_name=MAIN, type=SnapshotRefType.BRANCH, snapshot_id=existing_snapshot(self, m, target, "main was rolled back to it"),
            ),),
            lambda m: (AssertRefSnapshotId(ref=MAIN, snapshot_id=current),),
        )
        return RollbackResult(target_snapshot_id=target, latest_snapshot_id=target, keep_history=True, discarded_snapshot_ids=[])

    # -- expiry and orphans -------------------------------------------------------------------------

    def expire_snapshots(
        self, *, retain_min=None, retain_max=None, time_retained=None, older_than=None, retain_last=None, limit=None,
        dry_run: bool = False, now=None, skip_missing: bool = False, snapshot_ids=None, delete_files: bool = True,
    ) -> ExpireResult:
        if retain_min is not None and retain_last is not None and retain_min != retain_last:
            raise InvalidArgumentError("retain_last is Iceberg's name for retain_min: give one")
        if time_retained is not None and older_than is not None:
            raise InvalidArgumentError("give time_retained or older_than, not both")
        if retain_min is not None and retain_max is not None and retain_max < retain_min:
            raise InvalidArgumentError(f"retain_max ({retain_max}) must be at least retain_min ({retain_min})")
        now_ms = self.clock() if now is None else to_millis(now)
        cutoff = None
        if older_than is not None:
            cutoff = to_millis(older_than)
        elif time_retained is not None:
            cutoff = now_ms - millis(duration_argument(time_retained, "time_retained"))
        settings = RetentionSettings(
            now=now_ms, older_than=cutoff, retain_last=retain_min or retain_last, retain_max=retain_max, limit=limit,
            snapshot_ids=list(snapshot_ids or []),
        )
        return IcebergExpiry(self.refresh, self.storage, self._noncurrent).run(settings, dry_run=dry_run, delete_files=delete_files)

    # -- recoverable deletes (core/formats/iceberg/noncurrent.py) ---------------------------------------

    @contextmanager
    def retaining_noncurrent(self, days: int | None, operation: str) -> Iterator[NoncurrentRun | None]:
        """As ``Table.retaining_noncurrent``; ``days`` None: the table property ``snaptable.noncurrent-days``."""
        if days is None:
            days = self.properties.get(NONCURRENT_DAYS_PROPERTY)
        days = None if days is None else check_int(int(days) if isinstance(days, str) and days.isdigit() else days, "noncurrent_days", minimum=0)
        previous = self._noncurrent
        self._noncurrent = None if days is None else NoncurrentRun.start(days, operation)
        try:
            yield self._noncurrent
        finally:
            self._noncurrent = previous

    def noncurrent_journal(self) -> NoncurrentJournal:
        return journal_of(self.storage)

    def undo(self, run_id: str) -> UndoResult:
        return IcebergNoncurrent(self).undo(run_id)

    def abandon_undo(self, run_id: str) -> UndoResult:
        """Abandon an interrupted undo of the run (its one catalog commit happened or not: only the mark goes)."""
        return IcebergNoncurrent(self).abandon(run_id)

    def purge(self, *, now=None) -> PurgeResult:
        return IcebergNoncurrent(self).purge(None if now is None else to_millis(now))

    def trash(self) -> list[RunSummary]:
        return trash(None, journal_of(self.storage))

    def expire_data(self, column: str, retention, *, dry_run: bool = False, now=None):
        """Delete the rows whose time ``column`` is older than ``retention`` before ``now``, through
        pyiceberg's delete (core/formats/iceberg/data_expiry.py)."""
        from airflow_snaptable.core.formats.iceberg.data_expiry import expire_data
        from airflow_snaptable.core.lifecycle.data_expiry import check_column, cutoff_millis

        cutoff = cutoff_millis(retention, self.clock() if now is None else to_millis(now))
        if not isinstance(dry_run, bool):
            raise InvalidArgumentError(f"dry_run must be True or False, got {dry_run!r}")
        return expire_data(self.refresh(), check_column(column), cutoff, dry_run)

    def verify(self) -> VerifyResult:
        """What is wrong with the table, reported, never raised (core/formats/iceberg/verify.py)."""
        from airflow_snaptable.core.formats.iceberg.verify import verify_iceberg

        return verify_iceberg(self)

    def remove_orphan_files(self, *, older_than=None, dry_run: bool = True, now=None) -> OrphanResult:
        now_ms = self.clock() if now is None else to_millis(now)
        return remove_orphan_files(self.refresh, self.storage, now_ms, older_than, dry_run, self._noncurrent)

    # -- what is not there yet ---------------------------------------------------------------------

    def _unsupported(self, what: str):
        raise UnsupportedOperationError(f"{self._uri}: {what} on Iceberg tables is not supported yet")

    def create_periodic_tags(self, period=None, **kwargs) -> PeriodicTagResult:
        """Paimon's automatic tags on Iceberg tag refs (core/formats/iceberg/periodic.py): the options come from the
        table's properties; each period's tag holds ``main``'s state at the period's end."""
        return periodic_tagging(self).create(period, **kwargs)

    # -- consumers (core/formats/iceberg/consumers.py) -----------------------------------------------------

    def consumers(self) -> list[Consumer]:
        return self.consumer_manager.consumers()

    def consumer(self, consumer_id: str) -> Consumer:
        return self.consumer_manager.consumer(consumer_id)

    def update_consumer(self, consumer_id: str, next_snapshot: int) -> Consumer:
        return self.consumer_manager.update(consumer_id, next_snapshot)

    def delete_consumer(self, consumer_id: str) -> None:
        self.consumer_manager.delete(consumer_id)

    def expire_consumers(self, *, now=None, expiration_time=None) -> list[str]:
        run = self._noncurrent
        record = None if run is None else (
            lambda expired: journal_of(self.storage).write(
                JournalEntry(run, "consumers", consumers=[c.to_json().decode() for c in expired]))
        )
        return self.consumer_manager.expire(self.clock() if now is None else to_millis(now), expiration_time, record)

    def clean(self, *args, **kwargs):
        self._unsupported("Hudi cleaning policies")

    def create_savepoint(self, *args, **kwargs):
        self._unsupported("savepoints")

    def savepoints(self):
        self._unsupported("savepoints")

    def delete_savepoint(self, *args, **kwargs):
        self._unsupported("savepoints")

    def restore_savepoint(self, *args, **kwargs):
        self._unsupported("savepoints")


def open_iceberg_table(uri: str, catalog: dict[str, Any] | None, clock: Callable[[], int]) -> IcebergTable:
    return IcebergTable(uri, catalog, clock)
