"""Data skipping: of many data files, those whose column statistics (core/native/column_stats.py) do not prove that no
row matches a filter, decided column-wise without a Python object per file.

1. Parse: the statistics texts of all the files are parsed at once by Arrow's JSON reader, with a schema made
   from the table's types of the columns the filter reads only (the others are skipped unparsed), into per-file
   arrays of row count, null count, NaN flag and bounds.
2. Judge blocks: files are judged in nested blocks of neighbours (``_FANOUT`` ** k files, coarsest first) by the
   union of their bounds, computed with Arrow's group-by; only the members of the blocks that may match go on to
   the next level. Neighbours are files close along a Z-order curve of the filtered columns' lower bounds, so
   a block's bounds are tight on each of them whatever order the files were written in: nearly every file is
   ruled out with its block, at a cost of about one JSON parse per file (a block level judges at most
   ``_FANOUT`` times the blocks kept at the level above).
3. Judge files: the members of the blocks left, one decision per distinct statistics.

A filter whose top level is an OR is judged term by term (core/native/filter_terms.py), each term on its own columns
and with neighbours along its own columns (a file is kept if a term may select its rows): a curve over two
columns makes blocks wide on each, so an OR on two columns left several times the matching files to step 3.

The same judgment decides which manifests to read, on their column bounds (core/native/column_bounds.py: the union
of their files' statistics), so it must be monotone: bounds that hold a file's never prove more than the
file's (``_conditions``), or a manifest holding a file's DELETE entry could be skipped while the file is kept.

A block or a file is judged by Arrow: what its bounds prove of each column becomes a fragment whose partition
expression is that guarantee (column_stats.column_condition), and ``get_fragments(filter)`` keeps those the
filter may select. When in doubt a file is kept: no statistics, statistics that are not the format's or whose
bounds do not parse as the column's type, a column with a NaN (no guarantee describes NaN).
"""

from __future__ import annotations

import functools
import operator
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.json as pj

from airflow_snaptable.core.native import arrow_values, dnf_pruning
from airflow_snaptable.core.native.column_stats import Bounds, bound_type, column_condition
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.native.filter_terms import or_terms
from airflow_snaptable.core.native.schema import TableSchema

#: Columns described with two alternatives at most (a column with nulls: its non-null rows and its null rows),
#: so 2 ** 4 = 16 fragments per file at most.
_PAIRED = 4
#: Blocks per block of the next coarser level, and files per block of the finest; a level of blocks of
#: ``size`` files is used when more than ``2 * size`` files are left to judge (fewer: judging them costs
#: about as much). A small fan-out judges few more blocks than match at each level.
_FANOUT = 8


def may_select(schema: TableSchema, conditions: Sequence[pc.Expression | None], expression: pc.Expression) -> list[bool]:
    """For each condition (what is known of some rows; None: nothing), may ``expression`` select rows under it?"""
    import pyarrow.dataset as ds  # here, not at import: it imports pandas (a quarter second)
    file_format = ds.ParquetFileFormat()
    placeholder_fs = pafs.LocalFileSystem()  # fragments are never opened here
    fragments = [
        file_format.make_fragment(f"/{i}", filesystem=placeholder_fs, partition_expression=c if c is not None else pc.scalar(True))
        for i, c in enumerate(conditions)
    ]
    dataset = ds.FileSystemDataset(fragments, schema.arrow_schema, file_format, placeholder_fs)
    try:
        kept = {int(fragment.path[1:]) for fragment in dataset.get_fragments(filter=expression)}
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise InvalidArgumentError(f"filter {expression} does not fit the table schema: {exc}") from exc
    return [i in kept for i in range(len(conditions))]


def binds(schema: pa.Schema, expression: pc.Expression) -> None:
    """Raise Arrow's error unless ``expression`` is a filter of rows of ``schema``: its columns exist, its types
    compare, it is boolean. Bound by filtering no rows with Acero (pyarrow._acero: pyarrow.acero and a dataset
    would import pandas), which binds the expression as every read does."""
    try:
        from pyarrow._acero import Declaration, FilterNodeOptions, TableSourceNodeOptions
    except ImportError:  # a pyarrow built without Acero: a dataset binds it (and imports pandas)
        import pyarrow.dataset as ds

        ds.dataset(schema.empty_table()).to_table(filter=expression)
        return
    # No rows, built from null arrays: ``Schema.empty_table`` imports pandas (pyarrow 26).
    empty = pa.table([pa.nulls(0, f.type) for f in schema], schema=schema)
    source = Declaration("table_source", TableSourceNodeOptions(empty))
    Declaration.from_sequence([source, Declaration("filter", FilterNodeOptions(expression))]).to_table(use_threads=False)


def referenced_columns(schema: pa.Schema, expression: pc.Expression, candidates: Sequence[str] | None = None) -> list[str]:
    """The columns (of ``candidates``, default all) ``expression`` reads: those without which it no longer
    binds (:func:`binds`). Halving: a group it binds without holds none, so a wide schema costs a few binds per
    column read."""

    def binds_without(group: list[str]) -> bool:
        left_out = set(group)
        try:
            binds(pa.schema([f for f in schema if f.name not in left_out]), expression)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return False
        return True

    def search(group: list[str]) -> list[str]:
        if not group or binds_without(group):
            return []
        if len(group) == 1:
            return group
        return search(group[: len(group) // 2]) + search(group[len(group) // 2 :])

    return search(list(schema.names if candidates is None else candidates))


# -- 1. parse --------------------------------------------------------------------------------------------


def _json_schema(schema: TableSchema, columns: list[str]) -> pa.Schema:
    """The statistics' JSON, limited to ``columns``, each bound typed as the column's bounds are stored."""
    fields = []
    for name in columns:
        t = bound_type(schema.arrow_schema.field(name).type)
        fields.append(pa.field(name, pa.struct([("nulls", pa.int64()), ("lower", t), ("upper", t), ("nan", pa.bool_())])))
    return pa.schema([("rows", pa.int64()), ("columns", pa.struct(fields))])


#: One thread (threads were no faster on a busy two-core machine, measured); large blocks: fewer chunks to combine.
_READ = pj.ReadOptions(use_threads=False, block_size=1 << 24)


def _parse(texts: pa.Array, json_schema: pa.Schema) -> pa.Table:
    """One row per text (no nulls); a text that does not parse with ``json_schema`` (one object) gives a row
    of nulls: unknown. All texts in one read; on a failure, each half again (a bad text costs O(log n) reads)."""
    if len(texts) == 0:
        return pa.table([pa.nulls(0, f.type) for f in json_schema], schema=json_schema)  # empty_table() imports pandas
    parse = pj.ParseOptions(explicit_schema=json_schema, unexpected_field_behavior="ignore")
    try:
        joined = pc.binary_join(pa.ListArray.from_arrays(arrow_values.array([0, len(texts)], pa.int32()), texts), arrow_values.scalar("\n", texts.type))
        parsed = pj.read_json(pa.BufferReader(joined[0].as_buffer()), read_options=_READ, parse_options=parse)
        if parsed.num_rows == len(texts):  # one object per text (a text of two objects or none shifts rows)
            return parsed
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    if len(texts) == 1:
        return pa.table([pa.nulls(1, f.type) for f in json_schema], schema=json_schema)  # a row of nulls: unknown
    half = len(texts) // 2
    return pa.concat_tables([_parse(texts[:half], json_schema), _parse(texts[half:], json_schema)])


def _file_bounds(texts: pa.Array, columns: list[str], json_schema: pa.Schema) -> pa.Table:
    """Per file: ``index`` (its position in ``texts``), ``parsed`` (it has statistics of the format's shape and
    the columns' types; if not, nothing is known of it), and per column ``c``: ``c.known`` (the statistics say
    it has no NaN), ``c.all_null``, ``c.has_nulls``, ``c.lower`` / ``c.upper`` (null when all null or unknown)
    and ``c.lower_missing`` / ``c.upper_missing`` (not all null and the bound unknown)."""
    parsed = _parse(pc.fill_null(texts, arrow_values.scalar("{}", texts.type)), json_schema).combine_chunks()
    rows = parsed["rows"].chunk(0) if parsed.num_rows else arrow_values.array([], pa.int64())
    has_stats = pc.is_valid(rows)
    out = {"index": arrow_values.array(range(len(texts)), pa.int64())}
    stats = parsed["columns"].chunk(0) if parsed.num_rows else pa.nulls(0, json_schema.field("columns").type)
    false = arrow_values.scalar(False, pa.bool_())
    for name in columns:
        column = pc.struct_field(stats, name)
        nulls, lower, upper, nan = (pc.struct_field(column, f) for f in ("nulls", "lower", "upper", "nan"))
        # A null anywhere below (no such column, no null count, NaN flag unknown) leaves the column unknown.
        known = pc.fill_null(pc.and_(pc.and_(has_stats, pc.is_valid(nulls)), pc.equal(nan, false)), false)
        all_null = pc.fill_null(pc.and_(known, pc.greater_equal(nulls, rows)), false)
        present = pc.and_(known, pc.invert(all_null))
        out[f"{name}.known"] = known
        out[f"{name}.all_null"] = all_null
        out[f"{name}.has_nulls"] = pc.or_(all_null, pc.fill_null(pc.and_(known, pc.greater(nulls, arrow_values.scalar(0, nulls.type))), false))
        for bound, values in (("lower", lower), ("upper", upper)):
            out[f"{name}.{bound}"] = pc.if_else(present, values, pa.nulls(len(values), values.type))
            out[f"{name}.{bound}_missing"] = pc.and_(present, pc.is_null(values))
    out["parsed"] = has_stats
    return pa.table(out)


# -- 2. and 3. judge ----------------------------------------------------------------------------------------

Key = tuple  # per column the Bounds of a file or block (None: nothing known)


def _conditions(schema: TableSchema, columns: list[str], key: Key) -> list[pc.Expression | None]:
    """Conditions that together cover every row described by ``key`` (each row satisfies one of them).

    Monotone: wider bounds (a block's, a manifest's) never give a condition that proves more than a member's
    do, since a manifest is skipped only when the files inside would be (core/native/partition_pruning.py). So which
    columns are described depends on the column's place, never on what other columns' bounds are: the first
    ``_PAIRED`` columns with their alternatives (a column with nulls has two), any later column only when it
    has one (no nulls, or all null: then so has every member's)."""
    combos: list[list[pc.Expression]] = [[]]
    for place, (name, bounds) in enumerate(zip(columns, key)):
        alternatives = column_condition(name, schema.arrow_schema.field(name).type, bounds)
        if alternatives is None or (place >= _PAIRED and len(alternatives) > 1):
            continue  # nothing known of this column (still a correct, weaker, description of the rows)
        combos = [combo + [a] for combo in combos for a in alternatives]
    return [functools.reduce(operator.and_, combo) if combo else None for combo in combos]


def _may_match(schema: TableSchema, columns: list[str], keys: list[Key], expression: pc.Expression | dnf_pruning.Conjunction) -> list[bool]:
    """For each key, may ``expression`` select rows it describes? A conjunction of a DNF filter (its literals as
    bounds are stored) is judged from its terms (core/native/dnf_pruning.py), an Expression by Arrow."""
    if isinstance(expression, tuple):
        return [dnf_pruning.may_select([expression], dict(zip(columns, key))) for key in keys]
    flat = [(i, c) for i, key in enumerate(keys) for c in _conditions(schema, columns, key)]
    selected = [False] * len(keys)
    for (i, _), chosen in zip(flat, may_select(schema, [c for _, c in flat], expression)):
        selected[i] = selected[i] or chosen
    return selected


def _keys(rows: list[dict], columns: list[str]) -> list[Key]:
    """The Bounds of each file or block (a row of ``_file_bounds``' columns)."""
    keys = []
    for row in rows:
        key = []
        for c in columns:
            if not row[f"{c}.known"]:
                key.append(None)
            elif row[f"{c}.all_null"]:
                key.append(Bounds(None, None, True, True))
            else:
                lower = None if row[f"{c}.lower_missing"] else row[f"{c}.lower"]
                upper = None if row[f"{c}.upper_missing"] else row[f"{c}.upper"]
                key.append(Bounds(lower, upper, row[f"{c}.has_nulls"], False))
        keys.append(tuple(key))
    return keys


#: How a block's column follows from its files': known and all null if so in every file; the smallest lower and
#: largest upper bound of the files not all null (nulls skipped), missing if missing in one; nulls if in one.
_UNION = (
    ("known", "all"), ("all_null", "all"), ("has_nulls", "any"),
    ("lower", "min"), ("lower_missing", "any"), ("upper", "max"), ("upper_missing", "any"),
)
_PARTS = tuple(part for part, _how in _UNION)


def _judge_blocks(schema: TableSchema, columns: list[str], files: pa.Table, size: int, expression: pc.Expression) -> pa.Table:
    """The files of the blocks of ``size`` neighbours whose bounds' union the filter may select."""
    block = pc.divide(files["order"], size)  # integer division: neighbours share a block
    aggregates = [(f"{c}.{part}", how) for c in columns for part, how in _UNION]
    united = files.append_column("block", block).group_by("block", use_threads=False).aggregate(aggregates)
    rows = [{name: row[f"{name}_{how}"] for name, how in aggregates} for row in united.to_pylist()]  # "<column>_<aggregate>"
    chosen = [b for b, c in zip(united["block"].to_pylist(), _may_match(schema, columns, _keys(rows, columns), expression)) if c]
    return files.filter(pc.is_in(block, value_set=arrow_values.array(chosen, pa.int64())))


def _neighbour_order(files: pa.Table, columns: list[str]) -> pa.Array:
    """The order that puts files with close bounds side by side: along a Z-order curve of the ranks of the
    columns' lower bounds (for one column: by its lower bound). A block of neighbours then spans a small part
    of every column's range, whatever order the files were written in, so a condition on any of the columns
    (an ``OR`` of conditions on several too) rules out whole blocks. Ties (unknown bounds, last) keep file order."""
    one = arrow_values.scalar(1, pa.uint64())
    needed = max(1, files.num_rows.bit_length())
    bits = min(needed, 63 // len(columns))  # per column: the key fits 63 bits (coarser ranks for many columns)
    ranks = [
        pc.shift_right(pc.rank(files[f"{c}.lower"].combine_chunks(), sort_keys="ascending", tiebreaker="first"), arrow_values.scalar(needed - bits, pa.uint64()))
        for c in columns
    ]
    key = arrow_values.array([0] * files.num_rows, pa.uint64())
    for bit in reversed(range(bits)):  # interleave the ranks' bits, most significant first
        for rank in ranks:
            key = pc.bit_wise_or(pc.shift_left(key, one), pc.bit_wise_and(pc.shift_right(rank, arrow_values.scalar(bit, pa.uint64())), one))
    return pc.sort_indices(key)


def _judge(schema: TableSchema, columns: list[str], files: pa.Table, expression: pc.Expression) -> list[int]:
    """The ``index`` of the files (rows of ``_file_bounds``' columns for ``columns``) ``expression`` may select:
    blocks of neighbours first, coarsest first, then the members of the blocks left one by one."""
    files = files.take(_neighbour_order(files, columns))
    files = files.append_column("order", arrow_values.array(range(files.num_rows), pa.int64()))
    sizes = [_FANOUT]
    while 2 * sizes[0] * _FANOUT < files.num_rows:
        sizes.insert(0, sizes[0] * _FANOUT)
    for size in sizes:  # coarsest first; a level is skipped when few files are left
        if files.num_rows > 2 * size:
            files = _judge_blocks(schema, columns, files, size, expression)
    keys = _keys(files.drop_columns(["index", "order"]).to_pylist(), columns)
    distinct = list(dict.fromkeys(keys))
    kept = {k for k, c in zip(distinct, _may_match(schema, columns, distinct, expression)) if c}
    return [i for i, k in zip(files["index"].to_pylist(), keys) if k in kept]


def may_match(schema: TableSchema, stats: pa.Array | pa.ChunkedArray, expression: pc.Expression, filter=None) -> pa.BooleanArray:
    """For each data file's statistics text (``DataFile.stats``; null: unknown), may ``expression`` select rows
    of the file? True unless its statistics prove that no row matches. ``filter``: the DNF filter ``expression``
    was made of, if it was: then judged from its terms, without pyarrow.dataset (and pandas), when every term on
    a column with statistics can be (core/native/dnf_pruning.py)."""
    everything = arrow_values.array([True] * len(stats), pa.bool_())
    if stats.null_count == len(stats):
        return everything
    candidates = [c for c in schema.arrow_schema.names if c not in schema.partition_keys and bound_type(schema.arrow_schema.field(c).type) is not None]
    # Each term of a top-level OR on its own columns (core/native/filter_terms.py): a file may match if it may match a term.
    conjunctions = None if filter is None else dnf_pruning.stats_conjunctions(filter, {c: schema.arrow_schema.field(c).type for c in candidates})
    if conjunctions is not None:  # each conjunction a term, on the columns with statistics it names
        terms = [(conjunction, [c for c in dict.fromkeys(t.column for t in conjunction) if c in candidates]) for conjunction in conjunctions]
    else:
        terms = [(term, referenced_columns(schema.arrow_schema, term, candidates)) for term in or_terms(expression)]
    if any(not columns for _term, columns in terms):
        return everything  # a term on no column with statistics may select rows of any file
    columns = list(dict.fromkeys(c for _term, term_columns in terms for c in term_columns))
    texts = stats.combine_chunks() if isinstance(stats, pa.ChunkedArray) else stats
    every_file = _file_bounds(texts, columns, _json_schema(schema, columns))
    files = every_file.filter(every_file["parsed"]).drop_columns(["parsed"])
    chosen: set[int] = set()
    for term, term_columns in terms:
        parts = [f"{c}.{part}" for c in term_columns for part in _PARTS]
        chosen.update(_judge(schema, term_columns, files.select(["index", *parts]), term))
    return pc.or_(pc.invert(every_file["parsed"]), pc.is_in(every_file["index"], value_set=arrow_values.array(sorted(chosen), pa.int64()))).combine_chunks()
