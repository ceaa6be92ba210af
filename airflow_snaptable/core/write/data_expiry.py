"""Data expiry on this package's tables (the rules: core/lifecycle/data_expiry.py).

Every live data file's time column is read; a file of old rows only is deleted, a file with old
and new rows is rewritten with the new ones, and both go into one OVERWRITE commit on the
snapshot they were read from. The commit names exactly the files it replaces: a concurrent
commit that deleted or replaced one of them fails it (CommitConflictError), while concurrent
appends land beside it untouched.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.lifecycle.data_expiry import DataExpiryResult, cutoff_scalar, old_rows
from airflow_snaptable.core.native.commit_request import WHOLE_TABLE
from airflow_snaptable.core.native.data_files import split_by_partition
from airflow_snaptable.core.native.snapshot import CommitKind
from airflow_snaptable.core.write.rows import TableWrite


def expire_data(write: TableWrite, read_files, column: str, cutoff_millis: int, dry_run: bool) -> DataExpiryResult:
    schema = write.schema
    arrow_schema = schema.arrow_schema
    if column not in arrow_schema.names:
        raise InvalidArgumentError(f"column {column!r} is not in the table (columns: {', '.join(arrow_schema.names)})")
    cutoff = cutoff_scalar(arrow_schema.field(column).type, cutoff_millis, column)
    result = DataExpiryResult(column=column, cutoff_millis=cutoff_millis, dry_run=dry_run)
    base = write.snapshots.latest_snapshot()
    files = write.files_in_scope(base, WHOLE_TABLE)
    deleted, rewritten, kept_rows = [], [], []
    for data_file in files:
        old = old_rows(read_files([data_file], columns=[column]).column(column), cutoff)
        count = pc.sum(old).as_py() or 0
        if count == 0:
            continue
        result.rows_deleted += count
        if count == len(old):
            deleted.append(data_file)
            continue
        rows = read_files([data_file])
        kept_rows.append(rows.filter(pc.invert(old_rows(rows.column(column), cutoff))))
        rewritten.append(data_file)
    result.data_files_removed = sorted(f.path for f in deleted + rewritten)
    gone = {f.path for f in deleted}
    left = {f.partition for f in files if f.path not in gone}
    result.partitions_dropped = [
        dict(zip(schema.partition_keys, p)) for p in sorted({f.partition for f in deleted} - left, key=repr)
    ] if schema.partition_keys else []
    if dry_run or not (deleted or rewritten):
        return result
    added = write.write(split_by_partition(pa.concat_tables(kept_rows), schema)) if kept_rows else []
    snapshot = write.commit(
        CommitKind.OVERWRITE, added, deleted + rewritten, base, None, None, None, written_here=True,
        extra_summary={"data-expiry.column": column, "data-expiry.cutoff-millis": str(cutoff_millis)},
    )
    result.snapshot_id = snapshot.id
    result.data_files_added = sorted(f.path for f in added)
    return result
