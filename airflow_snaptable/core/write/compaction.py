"""Compaction: rewriting each partition's small files into fewer, bigger ones (commit kind COMPACT).

A partition is compacted when it has at least ``min_file_num`` files smaller than
``target_file_size`` (options ``compaction.min.file-num``, ``target-file-size``). A
COMPACT snapshot changes no row: incremental readers skip it (core/lifecycle/changes.py), and a
concurrent overwrite of the same partitions re-plans instead of conflicting
(core/native/commit_conflicts.py).
"""

from __future__ import annotations

from typing import Callable, Sequence

import pyarrow as pa

from airflow_snaptable.core.arguments.checks import check_int
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.arguments.table_options import parse_size
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot
from airflow_snaptable.core.write.rows import TableWrite, check_commit_arguments


def compact(
    write: TableWrite,
    read_rows: Callable[[Sequence[DataFile]], pa.Table],
    partitions: list[dict] | None = None,
    target_file_size: int | str | None = None,
    min_file_num: int | None = None,
    commit_user: str | None = None,
) -> Snapshot | None:
    """Compact the qualifying partitions (all, or those among ``partitions``) in one snapshot.

    Returns None, committing nothing, when no partition qualifies.
    """
    options, schema = write.options, write.schema
    check_commit_arguments(commit_user, None, None)
    specs = write.check_partition_specs(partitions, allow_none=True)
    target = options.get("target-file-size") if target_file_size is None else _size_argument(target_file_size)
    if min_file_num is None:
        min_files = options.get("compaction.min.file-num")
        if min_files < 2:
            raise InvalidArgumentError(f"option compaction.min.file-num must be >= 2 to compact, got {min_files}")
    else:
        min_files = check_int(min_file_num, "min_file_num", minimum=2)
    base = write.snapshots.latest_snapshot()
    if base is None:
        return None
    by_partition: dict[tuple, list[DataFile]] = {}
    for data_file in write.manifests.read_state(base).values():
        if data_file.file_size < target and (specs is None or schema.partition_matches(data_file.partition, specs)):
            by_partition.setdefault(data_file.partition, []).append(data_file)
    chosen = {p: files for p, files in by_partition.items() if len(files) >= min_files}
    if not chosen:
        return None
    groups = []
    deleted: list[DataFile] = []
    for partition, files in sorted(chosen.items(), key=lambda item: str(item[0])):
        files.sort(key=lambda f: f.path)
        groups.append((partition, read_rows(files)))
        deleted.extend(files)
    added = write.write(groups, target)
    return write.commit(CommitKind.COMPACT, added, deleted, base, commit_user, None, None, written_here=True)


def _size_argument(value) -> int:
    """An argument, not a table option: a bad size is an InvalidArgumentError."""
    try:
        return parse_size(value, "target_file_size")
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from exc
