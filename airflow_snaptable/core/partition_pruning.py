"""Partition pruning and data skipping: a filtered scan reads only the manifests and keeps only the files
whose partition values, and then whose column statistics (core/column_stats.py), can match the filter.

Arrow decides "can match": each manifest (by the bounds of its partition values, its list entry's
``partition_stats``) and each distinct partition value becomes a fragment whose partition expression
is what is known of it; ``get_fragments(filter)`` keeps those the filter may select. Skipping a manifest
is exact: every manifest holding an entry of a file in a matching partition has bounds around that
partition's values, so it is read, and the entries of each such file fold in their order. Of the
manifests read, only the entries of the partitions the filter may select are decoded (one decision per
distinct partition value), so a one-partition plan costs about what its partition's entries cost.

Column statistics are judged the same way, after the fold (a file's entries are never split): each
file with statistics becomes fragments whose expressions are what its statistics prove of the columns
the filter reads; a file without statistics is always kept.
"""

from __future__ import annotations

import functools
import json
import operator
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from airflow_snaptable.core.column_stats import Bounds, column_condition
from airflow_snaptable.core.errors import CorruptMetadataError, InvalidArgumentError
from airflow_snaptable.core.manifest import DataFile, ManifestFileMeta, ManifestIO, apply_entries, decode_manifest_table
from airflow_snaptable.core.schema import TableSchema, decode_partition, decode_partition_value


def _selected(schema: TableSchema, conditions: Sequence[pc.Expression | None], expression: pc.Expression) -> list[bool]:
    """For each condition (what is known of a partition; None: nothing), may ``expression`` select rows under it?"""
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


def _value_condition(schema: TableSchema, partition: tuple) -> pc.Expression:
    condition = None
    for key, value, t in zip(schema.partition_keys, partition, schema.partition_types()):
        term = pc.field(key).is_null() if value is None else pc.field(key) == pa.scalar(value, t)
        condition = term if condition is None else condition & term
    return condition


def _bounds_condition(schema: TableSchema, stats: str | None) -> pc.Expression | None:
    """What a manifest's ``partition_stats`` say of its partitions (None: nothing known)."""
    if stats is None:
        return None
    doc = json.loads(stats)
    condition = None
    for key, t, lower, upper, nulls in zip(schema.partition_keys, schema.partition_types(), doc["lower"], doc["upper"], doc["nulls"]):
        field = pc.field(key)
        term = None
        if lower is not None:
            term = (field >= pa.scalar(decode_partition_value(lower, t), t)) & (field <= pa.scalar(decode_partition_value(upper, t), t))
        if nulls:
            term = field.is_null() if term is None else term | field.is_null()
        if term is None:
            continue
        condition = term if condition is None else condition & term
    return condition


def prune_files(schema: TableSchema, files: list[DataFile], expression: pc.Expression | None) -> list[DataFile]:
    """The files that may hold rows matching ``expression``: by partition (one decision per distinct
    partition), then by column statistics (files without statistics are kept)."""
    if expression is None or not files:
        return files
    if schema.partition_keys:
        partitions = list(dict.fromkeys(f.partition for f in files))
        selected = _selected(schema, [_value_condition(schema, p) for p in partitions], expression)
        keep = {p for p, s in zip(partitions, selected) if s}
        files = [f for f in files if f.partition in keep]
    return _prune_by_stats(schema, files, expression)


def referenced_columns(schema: pa.Schema, expression: pc.Expression, candidates: Sequence[str] | None = None) -> list[str]:
    """The columns (of ``candidates``, default all) ``expression`` reads: those without which it no longer
    binds. Halving: a group it binds without holds none, so a wide schema costs a few binds per column read."""

    def binds_without(group: list[str]) -> bool:
        left_out = set(group)
        try:
            ds.dataset(pa.schema([f for f in schema if f.name not in left_out]).empty_table()).to_table(filter=expression)
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


#: Fragments per file at most: a column with nulls doubles them (its non-null rows and its null rows).
_MAX_ALTERNATIVES = 16
#: Files judged together first (their bounds' union); only the members of a block that may match are judged
#: one by one. Neighbours in a manifest were written together, so their bounds are often close.
_BLOCK = 64

Key = tuple  # per column the file's Bounds (or None: nothing known)


def _conditions(schema: TableSchema, columns: list[str], key: Key) -> list[pc.Expression | None]:
    """Conditions that together cover every row of a file (each row satisfies one of them)."""
    combos: list[list[pc.Expression]] = [[]]
    for name, bounds in zip(columns, key):
        alternatives = column_condition(name, schema.arrow_schema.field(name).type, bounds)
        if alternatives is None or len(combos) * len(alternatives) > _MAX_ALTERNATIVES:
            continue  # nothing known of this column (still a correct, weaker, description of the rows)
        combos = [combo + [a] for combo in combos for a in alternatives]
    return [functools.reduce(operator.and_, combo) if combo else None for combo in combos]


def _may_match(schema: TableSchema, columns: list[str], keys: list[Key], expression: pc.Expression) -> list[bool]:
    """For each key, may ``expression`` select rows of a file it describes?"""
    flat = [(i, c) for i, key in enumerate(keys) for c in _conditions(schema, columns, key)]
    selected = [False] * len(keys)
    for (i, _), chosen in zip(flat, _selected(schema, [c for _, c in flat], expression)):
        selected[i] = selected[i] or chosen
    return selected


def _union(keys: list[Key]) -> Key:
    united = []
    for per_column in zip(*keys):
        try:
            united.append(None if any(b is None for b in per_column) else functools.reduce(Bounds.union, per_column))
        except TypeError:  # bounds that do not compare: nothing known
            united.append(None)
    return tuple(united)


def _key(data_file: DataFile, columns: list[str]) -> Key | None:
    """What a file's statistics say of ``columns`` (None: no statistics, or unreadable ones: the file is read)."""
    if data_file.stats is None:
        return None
    try:
        doc = json.loads(data_file.stats)
        rows, stats = doc["rows"], doc["columns"]
        return tuple(Bounds.of(stats.get(c), rows) for c in columns)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _prune_by_stats(schema: TableSchema, files: list[DataFile], expression: pc.Expression) -> list[DataFile]:
    """The files whose column statistics do not prove that no row matches: one decision per distinct
    statistics of the (non-partition) columns the filter reads, judged a block of files at a time first."""
    if all(f.stats is None for f in files):
        return files
    columns = referenced_columns(schema.arrow_schema, expression, [c for c in schema.arrow_schema.names if c not in schema.partition_keys])
    if not columns:
        return files
    keys = [_key(f, columns) for f in files]
    distinct = [k for k in dict.fromkeys(keys) if k is not None]
    candidates = distinct
    if len(distinct) > 2 * _BLOCK:
        blocks = [distinct[i : i + _BLOCK] for i in range(0, len(distinct), _BLOCK)]
        chosen = _may_match(schema, columns, [_union(block) for block in blocks], expression)
        candidates = [k for block, c in zip(blocks, chosen) if c for k in block]
    kept = {k for k, c in zip(candidates, _may_match(schema, columns, candidates, expression)) if c}
    return [f for f, k in zip(files, keys) if k is None or k in kept]


def pruned_state(manifests: ManifestIO, schema: TableSchema, snapshot, expression: pc.Expression | None) -> dict[str, DataFile]:
    """The snapshot's live files in the partitions ``expression`` may select, reading only the manifests
    whose partition bounds may match (all of them for lists written before there were bounds).
    Without a filter or partition keys: every live file."""
    if expression is None or not schema.partition_keys:
        return manifests.read_state(snapshot)
    metas: list[ManifestFileMeta] = []
    for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
        metas += manifests.read_list(list_name)
    selected = _selected(schema, [_bounds_condition(schema, m.partition_stats) for m in metas], expression)
    wanted = [m.file_name for m, s in zip(metas, selected) if s]
    tables = manifests.read_manifest_tables(wanted)
    # One decision per distinct partition; only the entries of kept partitions become objects.
    texts = list(dict.fromkeys(text for t in tables.values() for text in pc.unique(t["partition"]).to_pylist()))
    types = schema.partition_types()
    try:
        values = [decode_partition(text, types) for text in texts]
    except (TypeError, ValueError) as exc:
        raise CorruptMetadataError(f"{snapshot.base_manifest_list}: a manifest holds unreadable partition values: {exc}") from exc
    kept = pa.array([t for t, s in zip(texts, _selected(schema, [_value_condition(schema, v) for v in values], expression)) if s], pa.string())
    state: dict[str, DataFile] = {}
    for name in wanted:
        table = tables[name]
        apply_entries(state, decode_manifest_table(table.filter(pc.is_in(table["partition"], value_set=kept)), types, name))
    return state
