"""Data files written outside the table's writers (``Table.commit_files``): checked, then committed.

Rules:
- Shape: each file is a DataFile under ``data/`` in the directory of its partition,
  whose values have the schema's types; no path twice; an overwrite of some
  partitions adds files only to those.
- A path the table knows is never committed again. Every deletion rule relies on a
  file, once deleted, never being added back under its name (only a keep-history
  rollback re-adds, and it registers what it re-adds: core/lifecycle/readds.py), so a path
  that a retained snapshot, a tag or an unfinished deletion plan references is
  refused. The one exception is a live file given again to an overwrite of its own
  partition: it stays as it is, neither deleted nor added (Paimon's in-place upgrade).
- Not checked: that the files exist, their sizes and row counts. The caller has just
  written them; checking costs a storage round trip per file.

Cost: the known-path check reads the latest snapshot's lists, the delta lists of the retained
commits that may delete (found by links, core/native/deleting_commits.py: not one read per append; lists
cached by name) and, of the manifests, only those whose partition bounds may hold the committed
files' partitions.

Whether such a commit landed after it failed ambiguously: core/incremental.py ``added_after``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_snaptable.core.arguments.checks import check_int
from airflow_snaptable.core.native.column_stats import check_stats
from airflow_snaptable.core.native.commit_request import WHOLE_TABLE
from airflow_snaptable.core.native.deleting_commits import deleting_commits
from airflow_snaptable.core.errors import (
    CommitConflictError,
    CorruptMetadataError,
    InvalidArgumentError,
    SchemaMismatchError,
    SnapshotNotFoundError,
)
from airflow_snaptable.core.lifecycle.expiry.parts import candidates_among
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.native.partition_bounds import PartitionBounds
from airflow_snaptable.core.lifecycle.deletion_plans import read_plans
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot
from airflow_snaptable.core.lifecycle.store import TableStore
from airflow_snaptable.core.write.rows import TableWrite, check_commit_arguments, check_summary
from airflow_snaptable.core.native.data_files import DATA_DIR


def commit_external_files(
    write: TableWrite,
    store: TableStore,
    added: Sequence[DataFile],
    *,
    mode: str,
    partitions: list[dict] | None,
    base_snapshot_id: int | None,
    commit_user: str | None,
    commit_identifier: int | None,
    watermark: int | None,
    summary: dict[str, Any] | None,
) -> Snapshot:
    """``Table.commit_files``: check the files (the module rules), then commit them as one snapshot."""
    if mode not in ("append", "overwrite"):
        raise InvalidArgumentError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    if partitions is not None and mode != "overwrite":
        raise InvalidArgumentError("partitions are only for mode='overwrite'")
    specs = write.check_partition_specs(partitions, allow_none=True)
    files = check_shapes(write.schema, added, specs)
    check_commit_arguments(commit_user, commit_identifier, watermark)
    if commit_user is not None and commit_identifier is not None:
        # A retry of a commit that landed returns it before its files count as known paths.
        done = write.new_commit().find_committed(commit_user, commit_identifier)
        if done is not None:
            return done

    def expired_base(snapshot_id: int) -> CommitConflictError | Snapshot:
        # A retried job whose first attempt committed returns that snapshot, however old its base.
        if commit_user is not None and commit_identifier is not None:
            done = write.new_commit().find_committed(commit_user, commit_identifier)
            if done is not None:
                return done
        return CommitConflictError(f"snapshot {snapshot_id}, which this overwrite was written against, has expired")

    snapshots = write.snapshots
    if base_snapshot_id is None:
        base = snapshots.latest_snapshot()
    elif check_int(base_snapshot_id, "base_snapshot_id (0: the empty table)", minimum=0) == 0:
        base = None
    else:
        try:
            base = snapshots.snapshot(base_snapshot_id)
        except SnapshotNotFoundError:
            if mode == "overwrite":
                outcome = expired_base(base_snapshot_id)
                if isinstance(outcome, Snapshot):
                    return outcome
                raise outcome from None
            base = snapshots.latest_snapshot()  # appends never conflict: any newer base will do
    extra = check_summary(summary)
    if mode == "append":
        refuse_known_paths(store, files)
        return write.commit(
            CommitKind.APPEND, files, [], base, commit_user, commit_identifier, watermark, extra_summary=extra, new_paths=True
        )
    scope = WHOLE_TABLE if specs is None else specs
    try:
        replaced = write.files_in_scope(base, scope)
    except CorruptMetadataError as exc:
        if base is None or snapshots.exists(base.id):
            raise
        outcome = expired_base(base.id)  # it expired while we read it
        if isinstance(outcome, Snapshot):
            return outcome
        raise outcome from exc
    files, deleted = split_kept(files, replaced)
    refuse_known_paths(store, files)
    return write.commit(
        CommitKind.OVERWRITE, files, deleted, base, commit_user, commit_identifier, watermark, scope, extra_summary=extra,
        new_paths=True, replan=len(deleted) == len(replaced),  # kept files must not be compacted away under us
    )


def check_shapes(schema: TableSchema, added, specs: list[dict] | None) -> list[DataFile]:
    """The files as a list, each checked against the table's layout; raises on the first bad one."""
    if isinstance(added, (DataFile, str, bytes)) or not isinstance(added, Sequence):
        raise InvalidArgumentError(f"added must be a list of DataFile, got {type(added).__name__}")
    keys = schema.partition_keys
    seen: set[str] = set()
    for data_file in added:
        if not isinstance(data_file, DataFile):
            raise InvalidArgumentError(f"added must hold DataFile objects, got {type(data_file).__name__}")
        path = data_file.path
        if not isinstance(path, str) or path in seen:
            raise InvalidArgumentError(f"data file path {path!r} is not a string or is given twice")
        seen.add(path)
        parts = path.split("/")
        if parts[0] != DATA_DIR or len(parts) != len(keys) + 2 or any(p in ("", ".", "..") for p in parts):
            raise InvalidArgumentError(
                f"data file {path!r} must be data/{'<key>=<value>/' * len(keys)}<name> relative to the table root"
            )
        partition = data_file.partition
        if not isinstance(partition, tuple) or len(partition) != len(keys):
            raise SchemaMismatchError(f"data file {path}: partition {partition!r} does not match the partition keys {list(keys)}")
        directory = "/".join(parts[1:-1])
        # The directory names the values as the writer would; decoding it checks their types too.
        if directory != schema.partition_dir(partition) or schema.partition_from_dir(directory) != partition:
            raise SchemaMismatchError(
                f"data file {path}: partition {partition!r} does not match its directory or the types of {list(keys)}"
            )
        for name, value in (("record_count", data_file.record_count), ("file_size", data_file.file_size)):
            check_int(value, f"data file {path}: {name}", minimum=0)
        check_stats(data_file.stats, f"data file {path}")
        if specs is not None and not schema.partition_matches(partition, specs):
            raise InvalidArgumentError(
                f"data file {path} is in partition {dict(zip(keys, partition))}, "
                f"which is not among the overwritten partitions {specs}"
            )
    return list(added)


def _identity(data_file: DataFile) -> tuple:
    return data_file.path, data_file.partition, data_file.record_count, data_file.file_size


def split_kept(files: list[DataFile], replaced: list[DataFile]) -> tuple[list[DataFile], list[DataFile]]:
    """For an overwrite: ``(files to add, files to delete)`` once live files given again are kept as they are."""
    live = {f.path: f for f in replaced}
    for data_file in files:
        # Statistics are not identity: a live file given again with or without them is the same file.
        if data_file.path in live and _identity(live[data_file.path]) != _identity(data_file):
            raise InvalidArgumentError(
                f"data file {data_file.path} is already known to the table with other metadata "
                f"({live[data_file.path]}); a path is never committed twice"
            )
    kept = {f.path for f in files if f.path in live}
    return [f for f in files if f.path not in kept], [f for f in replaced if f.path not in kept]


def refuse_known_paths(store: TableStore, files: list[DataFile]) -> None:
    """Raise if the table knows any of these paths (see the module rules); fails closed on unreadable metadata."""
    if not files:
        return
    paths = {f.path for f in files}
    known = {path: f"deleted by an unfinished {plan.kind} plan" for plan in read_plans(store.lifecycle)
             for path in candidates_among(store, plan, paths)}
    referenced = known_data_paths(store, {f.partition for f in files}, paths)
    known.update((path, f"named by the metadata of {owner}") for path, owner in referenced.items())
    if known:
        path = min(known)
        holder = _holder(store, path, referenced[path]) if path in referenced else None
        if holder is not None:
            known[path] = f"referenced by {holder}"
        raise InvalidArgumentError(
            f"data file {path} is already known to the table ({known[path]}"
            f"{f' and {len(known) - 1} more' if len(known) > 1 else ''}); a path is never committed twice: "
            "write the rows to a new file"
        )


def known_data_paths(store: TableStore, partitions: set[tuple], paths: set[str]) -> dict[str, str]:
    """Those of ``paths`` (data files in ``partitions``) that a manifest of the latest snapshot, a
    deleting commit since the earliest retained one, or a tag names, with the snapshot or tag naming it.

    A file a retained snapshot references is live in the latest snapshot or was deleted since, by a
    commit whose delta names it: so the latest state's manifests, the deltas of the retained commits
    that may delete (not the appends that record deleting nothing) and the tags' states cover every
    retained state. Those commits are found by following the snapshots' links (core/native/deleting_commits.py),
    so a long history of appends costs one snapshot read, not one per snapshot. A data file
    lives in the directory of its partition, so only the manifests whose partition bounds (the
    list's ``partition_stats``) may hold one of ``partitions`` are read, as path sets (cached by
    manifest name: a manifest never changes). A path named by any such manifest counts, whatever
    the entry's kind: a superset of the retained states' files, which only ever refuses more.
    Fails closed: a missing or unreadable snapshot, list or manifest raises.
    """
    snapshots = store.snapshots
    earliest, latest = snapshots.earliest_id(), snapshots.latest_snapshot()
    list_names = []
    if earliest is not None and latest is not None:
        list_names = [(f"snapshot {latest.id}", name) for name in (latest.base_manifest_list, latest.delta_manifest_list)]
        list_names += [(f"snapshot {s.id - 1}", s.delta_manifest_list) for s in deleting_commits(snapshots, earliest, latest)]
    list_names += [(f"tag {t.name}", name) for t in store.tags.tags() for name in (t.snapshot.base_manifest_list, t.snapshot.delta_manifest_list)]
    manifests = store.files.manifests
    lists = manifests.read_lists(name for _owner, name in list_names)
    holds = PartitionBounds(manifests.partition_types, partitions)
    wanted: dict[str, str] = {}  # manifest name -> its first owner
    for owner, list_name in list_names:
        for meta in lists[list_name]:
            if meta.file_name not in wanted and holds.may_hold(meta):
                wanted[meta.file_name] = owner
    named = manifests.read_paths(wanted)
    known: dict[str, str] = {}
    for name, owner in wanted.items():
        for path in named[name] & paths:
            known.setdefault(path, owner)
    return known


def _holder(store: TableStore, path: str, owner: str) -> str | None:
    """The snapshot or tag whose state holds ``path``, for the error message only: ``owner`` (what
    known_data_paths found naming it) or, for a snapshot, the one after it (the delta it was found
    in may add the path), else a tag. Reads two snapshots' states and the tags', whatever the
    history's length."""
    kind, _, name = owner.partition(" ")
    candidates = []
    for snapshot_id in (int(name), int(name) + 1) if kind == "snapshot" else ():
        try:
            candidates.append((f"snapshot {snapshot_id}", store.snapshots.snapshot(snapshot_id)))
        except SnapshotNotFoundError:
            continue
    candidates += [(f"tag {t.name}", t.snapshot) for t in store.tags.tags()]
    for holder, snapshot in candidates:
        if path in store.files.state(snapshot):
            return holder
    return None
