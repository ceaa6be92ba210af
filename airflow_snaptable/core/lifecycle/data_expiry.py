"""Data expiry: the rows (or whole partitions) of a table older than a retention, by a time column.

Paimon's ``partition.expiration-time``, Amoro's ``data-expire.*`` and S3 Tables' record expiration
do this: a row whose time column is before ``now - retention`` goes, in one commit that readers
see like any delete. A file all of whose rows are old is dropped whole (a partition of old rows
is dropped with its files); a file holding old and new rows is rewritten with the new ones
(copy-on-write); a row whose time is null has no age and stays. The snapshots before the
commit still hold the rows until snapshot expiry frees them.

The formats run it in their own write path: this package's tables in core/write/data_expiry.py,
Iceberg tables through pyiceberg's delete (core/formats/iceberg/data_expiry.py). A Paimon table
fails closed (UnsupportedOperationError): its rows are its own engine's to write.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from airflow_snaptable.core.errors import InvalidArgumentError


@dataclass
class DataExpiryResult:
    """What a data expiry removed (or, ``dry_run``, would remove)."""

    column: str
    #: Rows whose ``column`` is before this time (epoch milliseconds, UTC) go.
    cutoff_millis: int
    dry_run: bool
    rows_deleted: int = 0
    #: Data files the commit takes out of the table: dropped whole, or rewritten without their old rows
    #: (a dry run on an Iceberg table: those whose column metrics say they may hold an old row).
    data_files_removed: list[str] = field(default_factory=list)
    #: Data files written with the rows kept of the rewritten ones (none in a dry run).
    data_files_added: list[str] = field(default_factory=list)
    #: Partitions left with no file (this package's tables: their values by partition key).
    partitions_dropped: list[dict[str, Any]] = field(default_factory=list)
    #: The snapshot the expiry committed; None for a dry run or when nothing was old.
    snapshot_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "column": self.column, "cutoff_millis": self.cutoff_millis, "dry_run": self.dry_run,
            "rows_deleted": self.rows_deleted, "data_files_removed": list(self.data_files_removed),
            "data_files_added": list(self.data_files_added), "partitions_dropped": list(self.partitions_dropped),
            "snapshot_id": self.snapshot_id,
        }


def cutoff_millis(retention: Any, now_millis: int) -> int:
    """``now - retention``: the time before which a row is old (``retention``: a duration, e.g. ``"30 d"``)."""
    from airflow_snaptable.core.arguments.times import duration_argument, millis

    span = duration_argument(retention, "retention")
    if span.total_seconds() <= 0:
        raise InvalidArgumentError(f"retention must be a positive duration, got {retention!r}")
    return now_millis - millis(span)


def check_column(column: Any) -> str:
    if not isinstance(column, str) or not column:
        raise InvalidArgumentError(f"column must be a column name, got {column!r}")
    return column


def cutoff_scalar(arrow_type: pa.DataType, cutoff_millis: int, column: str) -> pa.Scalar:
    """The cutoff as a value of the column's type: a timestamp (any unit, with or without a zone:
    a naive one is read as UTC) or a date (a row of day d is old when d is before the cutoff's day)."""
    when = dt.datetime.fromtimestamp(cutoff_millis / 1000, tz=dt.timezone.utc)
    if pa.types.is_timestamp(arrow_type):
        value = when if arrow_type.tz is not None else when.replace(tzinfo=None)
        return pa.scalar(value, type=pa.timestamp("us", tz=arrow_type.tz)).cast(arrow_type, safe=False)
    if pa.types.is_date(arrow_type):
        return pa.scalar(when.date(), type=pa.date32()).cast(arrow_type)
    raise InvalidArgumentError(f"column {column!r} is {arrow_type}: data expiry needs a timestamp or date column")


def old_rows(values: pa.Array | pa.ChunkedArray, cutoff: pa.Scalar) -> pa.Array:
    """True where the value is before the cutoff; a null time is not old."""
    import pyarrow.compute as pc

    return pc.fill_null(pc.less(values, cutoff), False)
