"""Data files written outside the table's writers (``Table.commit_files``): checked before they are
committed, and looked for in the history when it is unsure whether their commit landed.

Rules:
- Shape: each file is a DataFile under ``data/`` in the directory of its partition,
  whose values have the schema's types; no path twice; an overwrite of some
  partitions adds files only to those.
- A path the table knows is never committed again. Every deletion rule relies on a
  file, once deleted, never being added back under its name (only a keep-history
  rollback re-adds, and it registers what it re-adds: core/readds.py), so a path
  that a retained snapshot, a tag or an unfinished deletion plan references is
  refused. The one exception is a live file given again to an overwrite of its own
  partition: it stays as it is, neither deleted nor added (Paimon's in-place upgrade).
- Not checked: that the files exist, their sizes and row counts. The caller has just
  written them; checking costs a storage round trip per file.

Cost: the known-path check reads the retained history's metadata once
(``orphans.in_use``, in bulk), like an orphan clean's in-use pass.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from airflow_snaptable.core.checks import check_int
from airflow_snaptable.core.errors import InvalidArgumentError, SchemaMismatchError
from airflow_snaptable.core.manifest import DataFile, FileKind
from airflow_snaptable.core.orphans import in_use
from airflow_snaptable.core.plans import read_plans
from airflow_snaptable.core.schema import TableSchema
from airflow_snaptable.core.writer import DATA_DIR

if TYPE_CHECKING:
    from airflow_snaptable.core.snapshot import Snapshot
    from airflow_snaptable.core.table import Table


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
        if specs is not None and not schema.partition_matches(partition, specs):
            raise InvalidArgumentError(
                f"data file {path} is in partition {dict(zip(keys, partition))}, "
                f"which is not among the overwritten partitions {specs}"
            )
    return list(added)


def split_kept(files: list[DataFile], replaced: list[DataFile]) -> tuple[list[DataFile], list[DataFile]]:
    """For an overwrite: ``(files to add, files to delete)`` once live files given again are kept as they are."""
    live = {f.path: f for f in replaced}
    for data_file in files:
        if data_file.path in live and live[data_file.path] != data_file:
            raise InvalidArgumentError(
                f"data file {data_file.path} is already known to the table with other metadata "
                f"({live[data_file.path]}); a path is never committed twice"
            )
    kept = {f.path for f in files if f.path in live}
    return [f for f in files if f.path not in kept], [f for f in replaced if f.path not in kept]


def refuse_known_paths(table: "Table", files: list[DataFile]) -> None:
    """Raise if the table knows any of these paths (see the module rules); fails closed on unreadable metadata."""
    if not files:
        return
    paths = {f.path for f in files}
    known = {path: f"deleted by an unfinished {plan.kind} plan" for plan in read_plans(table.storage)
             for path in (c.path for c in plan.data_files) if path in paths}
    referenced = in_use(table).data_files
    known.update((path, f"referenced by {referenced[path]}") for path in paths if path in referenced)
    if known:
        path = min(known)
        raise InvalidArgumentError(
            f"data file {path} is already known to the table ({known[path]}"
            f"{f' and {len(known) - 1} more' if len(known) > 1 else ''}); a path is never committed twice: "
            "write the rows to a new file"
        )


# -- after the commit: did it land? (files written by Spark tasks, committed by the driver) --------


def snapshot_adds(table: "Table", snapshot: "Snapshot", paths: Collection[str]) -> bool:
    """Does ``snapshot`` add any of ``paths``? (A retried commit with an identifier returns the
    snapshot of the run that landed first: the files of this run are then in no snapshot.)"""
    wanted = set(paths)
    return any(entry.kind is FileKind.ADD and entry.file.path in wanted for entry in table.manifest_io.read_delta(snapshot))


def added_after(table: "Table", after_snapshot_id: int, paths: Collection[str]) -> bool:
    """Does a snapshot after ``after_snapshot_id`` add any of ``paths``? (A commit that failed
    ambiguously may have landed: its files are then the table's, not leftovers to delete.)"""
    manager = table.snapshot_manager
    latest = manager.latest_id() or 0
    return any(snapshot_adds(table, manager.snapshot(i), paths) for i in range(after_snapshot_id + 1, latest + 1))
