"""Reading a snapshot: plan its files (with partition pruning), then read them."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_snaptable.core.errors import CorruptMetadataError, InvalidArgumentError
from airflow_snaptable.core.native import arrow_values
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.native.data_skipping import binds, referenced_columns
from airflow_snaptable.core.native.schema import TableSchema
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.io.storage import Storage

Filter = Any  # a pyarrow.compute.Expression, or DNF tuples as pyarrow.parquet takes them


#: DNF operators, as pyarrow.parquet's ``filters`` take them.
_COMPARISONS = {
    "=": operator.eq, "==": operator.eq, "!=": operator.ne,
    "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
}


def _predicate(term: Any) -> pc.Expression:
    if not isinstance(term, (list, tuple)) or len(term) != 3 or not isinstance(term[0], str):
        raise ValueError(f"a predicate is (column, operator, value), got {term!r}")
    column, op, value = term
    field = pc.field(column)
    if op in _COMPARISONS:
        return _COMPARISONS[op](field, arrow_values.literal(value))
    if op in ("in", "not in"):
        # Literals built from buffers (core/native/arrow_values.py): pyarrow's own conversion imports pandas.
        selected = field.isin(arrow_values.literal_array(value) if isinstance(value, (list, tuple)) else value)
        return selected if op == "in" else ~selected
    raise ValueError(f"{op!r} is not a valid operator in predicates")


def dnf_expression(filter: Sequence[Any]) -> pc.Expression:
    """DNF tuples as an Expression, built with pyarrow.compute: what ``pyarrow.parquet.filters_to_expression``
    makes of them, without it (it imports pyarrow.dataset, and that imports pandas: a third of a second of the
    first filtered plan of a process, a sensor poke or a CLI call; tests/test_no_pandas_imports.py). Its literals
    are built from buffers (core/native/arrow_values.py): pyarrow's own conversion of a Python value imports pandas."""
    if not filter or any(not isinstance(c, (list, tuple)) or len(c) == 0 for c in filter):
        raise ValueError("malformed filters: give [(column, op, value), ...] or [[...], [...]]")
    disjunction = [filter] if isinstance(filter[0][0], str) else filter
    return functools.reduce(
        operator.or_, [functools.reduce(operator.and_, [_predicate(term) for term in conjunction]) for conjunction in disjunction]
    )


def to_expression(filter: Filter) -> pc.Expression | None:
    """Normalise a filter: a pyarrow Expression, or DNF such as ``[("p", "=", 3)]`` / ``[[...], [...]]``."""
    if filter is None:
        return None
    if isinstance(filter, pc.Expression):
        return filter
    if isinstance(filter, (list, tuple)) and filter:
        try:
            return dnf_expression(list(filter))
        except Exception as exc:  # noqa: BLE001 - turn pyarrow's message into ours
            raise InvalidArgumentError(f"invalid filter {filter!r}: {exc}") from exc
    raise InvalidArgumentError(
        f"filter must be a pyarrow.compute.Expression or DNF tuples like [('p', '=', 3)], got {filter!r}"
    )


def check_columns(schema: TableSchema, columns: Sequence[str] | None) -> list[str] | None:
    if columns is None:
        return None
    if not isinstance(columns, (list, tuple)):
        raise InvalidArgumentError(f"columns must be a list of column names, got {columns!r}")
    unknown = [c for c in columns if not isinstance(c, str) or c not in schema.arrow_schema.names]
    if unknown:
        raise InvalidArgumentError(f"unknown columns {unknown}; the table has {schema.arrow_schema.names}")
    if len(set(columns)) != len(columns):
        raise InvalidArgumentError(f"columns must not name a column twice, got {list(columns)}")
    return list(columns)


def check_filter(schema: TableSchema, expression: pc.Expression | None) -> pc.Expression | None:
    """``expression`` if it fits the table's schema (columns exist, types compare, result is boolean).

    Checked against no rows, before any file is read, so an error while reading a file
    is the file's fault, never the filter's.
    """
    if expression is None:
        return None
    try:
        binds(schema.arrow_schema, expression)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise InvalidArgumentError(f"filter {expression} does not fit the table schema: {exc}") from exc
    return expression


def read_files(
    storage: Storage,
    schema: TableSchema,
    files: Sequence[DataFile],
    columns: list[str] | None = None,
    expression: pc.Expression | None = None,
) -> Iterator[pa.RecordBatch]:
    """Rows of ``files`` in order, projected and filtered, with the table's exact types."""
    target = schema.arrow_schema if columns is None else pa.schema([schema.arrow_schema.field(c) for c in columns])
    check_filter(schema, expression)
    # Parquet's row-group statistics leave NaN out, and Arrow then skips row groups whose NaN rows a negated
    # comparison selects (NOT (x <= 1.5) keeps NaN): a filter reading a float column is applied in memory.
    floats = [f.name for f in schema.arrow_schema if pa.types.is_floating(f.type)]
    in_memory = expression is not None and bool(referenced_columns(schema.arrow_schema, expression, floats))
    read_columns = columns
    if in_memory and columns is not None:
        read_columns = list(dict.fromkeys([*columns, *referenced_columns(schema.arrow_schema, expression)]))
    read_schema = schema.arrow_schema if read_columns is None else pa.schema([schema.arrow_schema.field(c) for c in read_columns])
    for data_file in files:
        try:
            handle = storage.open_read(data_file.path)
        except FileNotFoundError:
            raise CorruptMetadataError(f"data file {storage.full_uri(data_file.path)} is referenced but missing") from None
        with handle:
            try:
                if in_memory:
                    table = pq.read_table(handle, columns=read_columns).select(read_schema.names).cast(read_schema)
                    table = table.filter(expression).select(target.names)
                else:
                    table = pq.read_table(handle, columns=columns, filters=expression)
                    table = table.select(target.names).cast(target)
            except (pa.ArrowException, OSError) as exc:
                # The filter fits the schema (checked above): the file is truncated, damaged or not
                # the table's (a page that does not decode is a plain OSError).
                raise CorruptMetadataError(
                    f"data file {storage.full_uri(data_file.path)} cannot be read (truncated or damaged?): {exc}"
                ) from exc
        yield from table.to_batches()


def read_table(
    storage: Storage,
    schema: TableSchema,
    files: Sequence[DataFile],
    columns: list[str] | None = None,
    expression: pc.Expression | None = None,
) -> pa.Table:
    """:func:`read_files` as one Arrow table (of the projected schema, also when no file has rows)."""
    target = schema.arrow_schema if columns is None else pa.schema([schema.arrow_schema.field(c) for c in columns])
    return pa.Table.from_batches(list(read_files(storage, schema, files, columns, expression)), schema=target)


@dataclass
class TableScan:
    """The files and rows of one snapshot, optionally filtered and projected.

    ``all_files``: the snapshot's live files that the filter may select (all of them without a filter).
    """

    storage: Storage
    schema: TableSchema
    snapshot: Snapshot | None
    all_files: list[DataFile]
    expression: pc.Expression | None
    columns: list[str] | None

    @property
    def snapshot_id(self) -> int | None:
        return None if self.snapshot is None else self.snapshot.id

    def files(self) -> list[DataFile]:
        """The files to read: ``all_files``, which ``Table.scan`` planned with the filter's partition pruning and
        data skipping already applied (core/native/partition_pruning.py: ``pruned_state``, ``prune_files``' result)."""
        return list(self.all_files)

    def output_schema(self) -> pa.Schema:
        if self.columns is None:
            return self.schema.arrow_schema
        return pa.schema([self.schema.arrow_schema.field(c) for c in self.columns])

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return read_files(self.storage, self.schema, self.files(), self.columns, self.expression)

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.output_schema())
