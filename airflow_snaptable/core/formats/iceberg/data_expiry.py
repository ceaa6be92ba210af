"""Data expiry on an Iceberg table (the rules: core/lifecycle/data_expiry.py), through pyiceberg's
``Table.delete(filter)``: files whose column metrics put every row before the cutoff are dropped
whole, the others holding old rows are rewritten without them (copy-on-write), in one snapshot
that pyiceberg, Spark and every Iceberg reader see. pyiceberg validates the commit against the
snapshot it planned on, as Iceberg's ``OverwriteFiles`` does.
"""

from __future__ import annotations

import pyarrow.compute as pc

from airflow_snaptable.core.errors import InvalidArgumentError, UnsupportedMetadataError
from airflow_snaptable.core.lifecycle.data_expiry import DataExpiryResult, cutoff_scalar, old_rows


def expire_data(table, column: str, cutoff_millis: int, dry_run: bool) -> DataExpiryResult:
    from pyiceberg.expressions import LessThan
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = table.schema()
    try:
        field = schema.find_field(column)
    except ValueError:
        raise InvalidArgumentError(f"column {column!r} is not in the table (columns: {', '.join(schema.column_names)})") from None
    arrow_type = schema_to_pyarrow(field.field_type)
    cutoff = cutoff_scalar(arrow_type, cutoff_millis, column)
    result = DataExpiryResult(column=column, cutoff_millis=cutoff_millis, dry_run=dry_run)
    if table.current_snapshot() is None:
        return result
    predicate = LessThan(column, cutoff.as_py().isoformat())
    scan = table.scan(row_filter=predicate, selected_fields=(column,))
    for task in scan.plan_files():
        if task.delete_files:
            # pyiceberg's delete would rewrite such a file without applying its deletes first.
            raise UnsupportedMetadataError(f"{task.file.file_path}: a data file with delete files: not expired here yet")
        result.data_files_removed.append(task.file.file_path)
    rows = scan.to_arrow()  # the row filter is applied to each row: exactly the old ones
    result.rows_deleted = int(pc.sum(old_rows(rows.column(column), cutoff)).as_py() or 0) if rows.num_rows else 0
    if dry_run or result.rows_deleted == 0:
        return result
    before = {task.file.file_path for task in table.scan().plan_files()}
    table.delete(delete_filter=predicate)
    table = table.refresh()
    after = {task.file.file_path for task in table.scan().plan_files()}
    result.data_files_removed = sorted(before - after)
    result.data_files_added = sorted(after - before)
    result.snapshot_id = table.current_snapshot().snapshot_id
    return result
