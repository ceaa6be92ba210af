"""Helpers shared by the Spark front end: options, storage options, schema conversion, filters.

Nothing here holds table logic: tables are planned, read and written by core.
"""

from __future__ import annotations

import math

from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from airflow_snaptable.core.errors import InvalidArgumentError, SchemaMismatchError
from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.io.storage_options import parse_storage_options, storage_options_from_environment

#: Spark conf key read by the maintenance job (set it in a properties file, not on the command line).
STORAGE_OPTIONS_CONF = "spark.snaptable.storage-options"

#: Files smaller than this are packed together into one input partition (up to this size);
#: bigger files get one each. Small, so that a small table still spreads over the cores.
DEFAULT_SPLIT_SIZE = 8 * 1024 * 1024


# -- options -----------------------------------------------------------------------


def plain_options(options: Mapping[str, Any] | None) -> dict[str, str]:
    """Spark's case-insensitive options as a plain dict with lower-case keys (picklable, predictable)."""
    return {str(k).lower(): v for k, v in dict(options or {}).items()}


def table_uri(options: Mapping[str, str]) -> str:
    uri = options.get("path")
    if not uri:
        raise InvalidArgumentError("no table location: use .load(uri) / .save(uri) or the option 'path'")
    return str(uri)


def storage_options_from(options: Mapping[str, str]) -> dict[str, Any] | None:
    """The option ``storage-options``, else the environment variable SNAPTABLE_STORAGE_OPTIONS, else None.

    With neither, fsspec's own defaults apply (s3fs reads AWS_* variables and the usual AWS config).
    """
    if options.get("storage-options") is not None:
        return parse_storage_options(options.get("storage-options"), "option 'storage-options'")
    return storage_options_from_environment()


def int_option(options: Mapping[str, str], key: str, minimum: int | None = None) -> int | None:
    value = options.get(key)
    if value is None or str(value).strip() == "":
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(str(value).strip())
    except ValueError:
        raise InvalidArgumentError(f"option {key!r} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise InvalidArgumentError(f"option {key!r} must be >= {minimum}, got {number}")
    return number


def bool_option(options: Mapping[str, str], key: str, default: bool = False) -> bool:
    value = options.get(key)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise InvalidArgumentError(f"option {key!r} must be true or false, got {value!r}")


def size_option(options: Mapping[str, str], key: str, default: int) -> int:
    value = options.get(key)
    if value is None:
        return default
    from airflow_snaptable.core.arguments.table_options import parse_size

    try:
        return parse_size(str(value), key)
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from None


# -- schemas -----------------------------------------------------------------------


def spark_type_for(t: pa.DataType):
    """The Spark type holding an Arrow type without loss (unsigned ints widen)."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_type

    if pa.types.is_uint8(t):
        return T.ShortType()
    if pa.types.is_uint16(t):
        return T.IntegerType()
    if pa.types.is_uint32(t):
        return T.LongType()
    if pa.types.is_uint64(t):
        return T.DecimalType(20, 0)
    if pa.types.is_float16(t):
        return T.FloatType()
    if pa.types.is_date64(t):
        return T.DateType()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return T.ArrayType(spark_type_for(t.value_type), containsNull=t.value_field.nullable)
    if pa.types.is_map(t):
        return T.MapType(spark_type_for(t.key_type), spark_type_for(t.item_type), valueContainsNull=t.item_field.nullable)
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, spark_type_for(f.type), f.nullable) for f in t])
    if pa.types.is_dictionary(t):
        return spark_type_for(t.value_type)
    try:
        return from_arrow_type(t)
    except Exception as exc:  # noqa: BLE001 - pyspark raises its own error types
        raise SchemaMismatchError(f"Arrow type {t} has no Spark equivalent: {exc}") from None


def spark_schema_for(arrow_schema: pa.Schema):
    """The Spark schema of a table's Arrow schema (names, nullability kept)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, spark_type_for(f.type), f.nullable) for f in arrow_schema])


def arrow_schema_for(spark_schema) -> pa.Schema:
    """Exactly the Arrow schema Spark expects from a Python data source for ``spark_schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema, timezone="UTC")


def cast_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` (columns by name) with the exact types and field order of ``target``."""
    if batch.schema.equals(target):
        return batch
    arrays = []
    for field in target:
        column = batch.column(batch.schema.get_field_index(field.name))
        if not column.type.equals(field.type):
            column = column.cast(field.type)
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def check_castable(source: pa.Schema, target: pa.Schema, where: str) -> None:
    """Raise SchemaMismatchError unless ``source`` has exactly ``target``'s columns with castable types."""
    missing = [n for n in target.names if n not in source.names]
    extra = [n for n in source.names if n not in target.names]
    if missing or extra:
        raise SchemaMismatchError(f"{where}: columns do not match the table: missing {missing}, unexpected {extra}")
    for field in target:
        got = source.field(field.name).type
        if got.equals(field.type):
            continue
        try:
            pa.array([], got).cast(field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            raise SchemaMismatchError(f"{where}: column {field.name!r} has type {got}, the table has {field.type}") from None


# -- planning ----------------------------------------------------------------------


def group_files(files: Sequence[DataFile], split_size: int) -> list[list[DataFile]]:
    """One group per file, except that files smaller than ``split_size`` are packed up to it."""
    groups: list[list[DataFile]] = []
    current: list[DataFile] = []
    current_size = 0
    for data_file in files:
        if data_file.file_size >= split_size:
            groups.append([data_file])
            continue
        if current and current_size + data_file.file_size > split_size:
            groups.append(current)
            current, current_size = [], 0
        current.append(data_file)
        current_size += data_file.file_size
    if current:
        groups.append(current)
    return groups


# -- filter pushdown -----------------------------------------------------------------


def skippable_in_spark(t: pa.DataType) -> bool:
    """Whether Spark filters on a column of this type may skip files by column statistics: the types whose
    Spark literals mean the same value in Arrow (not timestamps: Spark may hand them over in local time)."""
    return pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_date32(t) or pa.types.is_boolean(t)


def filter_to_expression(spark_filter, partition_types: Mapping[str, pa.DataType]) -> pc.Expression | None:
    """A pyarrow expression equivalent to a Spark filter on one of the given columns, or None.

    Only filters whose result is decided by the column's value are translated, so
    pruning files by their partition values applies them exactly (with Spark's
    null semantics: a comparison with a null partition value drops the row), and
    skipping files by column statistics never skips a file Spark would take a row from.
    A NaN literal is not translated: Spark orders NaN above every number, Arrow never matches it.
    """
    from pyspark.sql import datasource as D

    def column_of(f) -> str | None:
        attribute = getattr(f, "attribute", None)
        if isinstance(attribute, tuple) and len(attribute) == 1 and attribute[0] in partition_types:
            return attribute[0]
        return None

    def literal(value, t):
        if value is None:
            raise ValueError("null literal")
        if isinstance(value, float) and math.isnan(value):
            raise ValueError("NaN literal")
        return pa.scalar(value, t)

    def translate(f, negated: bool):
        name = column_of(f)
        if name is None:
            return None
        t = partition_types[name]
        field = pc.field(name)
        if isinstance(f, D.IsNull):
            return field.is_valid() if negated else field.is_null()
        if isinstance(f, D.IsNotNull):
            return field.is_null() if negated else field.is_valid()
        if isinstance(f, D.EqualNullSafe) and not negated:
            return field.is_null() if f.value is None else (field == literal(f.value, t))
        comparisons = {
            D.EqualTo: lambda v: field == v,
            D.GreaterThan: lambda v: field > v,
            D.GreaterThanOrEqual: lambda v: field >= v,
            D.LessThan: lambda v: field < v,
            D.LessThanOrEqual: lambda v: field <= v,
        }
        for kind, build in comparisons.items():
            if type(f) is kind:
                expression = build(literal(f.value, t))
                # NOT (p op v) is null, so false, when p is null: keep that explicit.
                return (~expression & field.is_valid()) if negated else expression
        if isinstance(f, D.In):
            values = list(f.value)
            if any(v is None for v in values):
                return None  # three-valued IN with a null literal: leave it to Spark
            expression = field.isin(pa.array(values, t))
            return (~expression & field.is_valid()) if negated else expression
        return None

    try:
        if isinstance(spark_filter, D.Not):
            return translate(spark_filter.child, True)
        return translate(spark_filter, False)
    except (ValueError, TypeError, OverflowError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
