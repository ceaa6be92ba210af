"""Partition pruning and data skipping: a filtered scan reads only the manifests and keeps only the files
whose partition values, and then whose column statistics (core/native/data_skipping.py), can match the filter.

A DNF filter (what users, the CLI and the sensor give; passed as ``filter`` next to its ``expression``) is judged
from its terms (core/native/dnf_pruning.py), without pyarrow.dataset, whose import imports pandas; an Expression,
or a DNF term that cannot be judged there, as follows.

Arrow decides "can match": each manifest (by the bounds of its partition values, its list entry's
``partition_stats``) and each distinct partition value becomes a fragment whose partition expression
is what is known of it; ``get_fragments(filter)`` keeps those the filter may select. Skipping a manifest
is exact: every manifest holding an entry of a file in a matching partition has bounds around that
partition's values, so it is read, and the entries of each such file fold in their order. Of the
manifests read, only the entries of the partitions the filter may select, and then the ADD entries whose
statistics may match (judged column-wise on the manifests' ``stats`` column), become objects, so a
selective plan costs about what its kept entries cost plus one parse of each entry's statistics.

Dropping an ADD entry whose statistics prove no row matches before the fold is exact too: DELETE entries
are all kept, so a file is in the result only if it is live, and a live file that may match keeps its
last entry (an ADD).

A manifest is also skipped unread when its column bounds (``column_stats``: the union of its entries'
statistics, core/native/column_bounds.py), judged by the same code as files' statistics, prove no row matches.
Its ADD entries would all have been dropped; its DELETE entries are of files whose statistics lie inside
those bounds, and the judgment is monotone (bounds that rule out a manifest rule out every file inside;
core/native/data_skipping.py keeps it so), so each such file's ADD entries are dropped too.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from airflow_snaptable.core.native import arrow_values, dnf_pruning
from airflow_snaptable.core.native.column_bounds import check_column_stats
from airflow_snaptable.core.native.column_stats import Bounds
from airflow_snaptable.core.native.data_skipping import may_match, may_select
from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.native.manifest import DataFile, FileKind, ManifestFileMeta, ManifestIO, apply_entries, decode_manifest_table
from airflow_snaptable.core.native.partition_bounds import parsed_bounds
from airflow_snaptable.core.native.schema import TableSchema, decode_partition


def _value_condition(schema: TableSchema, partition: tuple) -> pc.Expression:
    condition = None
    for key, value, t in zip(schema.partition_keys, partition, schema.partition_types()):
        term = pc.field(key).is_null() if value is None else pc.field(key) == arrow_values.scalar(value, t)
        condition = term if condition is None else condition & term
    return condition


def _bounds_condition(schema: TableSchema, stats: str | None) -> pc.Expression | None:
    """What a manifest's ``partition_stats`` say of its partitions (None: nothing known)."""
    if stats is None:
        return None
    lower, upper, nulls = parsed_bounds(stats, tuple(schema.partition_types()))
    condition = None
    for key, t, low, high, has_null in zip(schema.partition_keys, schema.partition_types(), lower, upper, nulls):
        field = pc.field(key)
        term = None
        if low is not None:
            term = (field >= arrow_values.scalar(low, t)) & (field <= arrow_values.scalar(high, t))
        if has_null:
            term = field.is_null() if term is None else term | field.is_null()
        if term is None:
            continue
        condition = term if condition is None else condition & term
    return condition


def _bounds_known(schema: TableSchema, stats: str | None) -> dict[str, Bounds | None]:
    """What a manifest's ``partition_stats`` say of each partition key (absent: nothing), as Arrow reads
    ``_bounds_condition``: bounds of a key with nulls too are an OR, which Arrow does not use, so neither is it
    used here (what Arrow judges, the same or more is kept: tests/core/test_dnf_pruning.py)."""
    if stats is None:
        return {}
    lower, upper, nulls = parsed_bounds(stats, tuple(schema.partition_types()))
    known: dict[str, Bounds | None] = {}
    for key, low, high, has_null in zip(schema.partition_keys, lower, upper, nulls):
        if low is not None and not has_null:
            known[key] = Bounds(low, high, False, False)
        elif low is None and has_null:
            known[key] = Bounds(None, None, True, True)
    return known


def _dnf(schema: TableSchema, filter: Any) -> list[dnf_pruning.Conjunction] | None:
    """The DNF ``filter``'s conjunctions when its partition terms are judged in Python (core/native/dnf_pruning.py)."""
    if filter is None:
        return None
    return dnf_pruning.dnf_conjunctions(filter, dict(zip(schema.partition_keys, schema.partition_types())))


def partitions_may_select(schema: TableSchema, partitions: Sequence[tuple], expression: pc.Expression, filter: Any = None) -> list[bool]:
    """For each partition (its values), may the filter select its rows? A DNF ``filter`` (the one ``expression``
    was made of) is judged from its terms, without pyarrow.dataset (and pandas); an Expression by Arrow."""
    conjunctions = _dnf(schema, filter)
    if conjunctions is not None:
        return [dnf_pruning.may_select(conjunctions, {k: dnf_pruning.exact(v) for k, v in zip(schema.partition_keys, p)}) for p in partitions]
    return may_select(schema, [_value_condition(schema, p) for p in partitions], expression)


def manifests_may_select(schema: TableSchema, partition_stats: Sequence[str | None], expression: pc.Expression, filter: Any = None) -> list[bool]:
    """For each manifest (its ``partition_stats``), may the filter select rows of its partitions?"""
    conjunctions = _dnf(schema, filter)
    if conjunctions is not None:
        return [dnf_pruning.may_select(conjunctions, _bounds_known(schema, s)) for s in partition_stats]
    return may_select(schema, [_bounds_condition(schema, s) for s in partition_stats], expression)


def prune_files(schema: TableSchema, files: list[DataFile], expression: pc.Expression | None, filter: Any = None) -> list[DataFile]:
    """The files that may hold rows matching ``expression``: by partition (one decision per distinct
    partition), then by column statistics (files without statistics are kept). ``filter``: the DNF filter
    ``expression`` was made of, if it was (then planned without pandas: core/native/dnf_pruning.py)."""
    if expression is None or not files:
        return files
    if schema.partition_keys:
        partitions = list(dict.fromkeys(f.partition for f in files))
        selected = partitions_may_select(schema, partitions, expression, filter)
        keep = {p for p, s in zip(partitions, selected) if s}
        files = [f for f in files if f.partition in keep]
    if all(f.stats is None for f in files):
        return files
    matching = may_match(schema, arrow_values.array([f.stats for f in files], pa.string()), expression, filter).to_pylist()
    return [f for f, m in zip(files, matching) if m]


def _by_column_bounds(schema: TableSchema, metas: list[ManifestFileMeta], expression: pc.Expression, filter: Any = None) -> list[ManifestFileMeta]:
    """The manifests whose column bounds (``column_stats``, core/native/column_bounds.py) may hold a matching row,
    judged as files are (``may_match``: the bounds are statistics of the union of the manifest's files)."""
    texts = [m.column_stats for m in metas]
    if all(text is None for text in texts):
        return metas
    for text in texts:
        if text is not None:
            check_column_stats(text)
    matching = may_match(schema, arrow_values.array(texts, pa.string()), expression, filter).to_pylist()
    return [m for m, keep in zip(metas, matching) if keep]


def pruned_state(manifests: ManifestIO, schema: TableSchema, snapshot, expression: pc.Expression | None, filter: Any = None) -> dict[str, DataFile]:
    """The snapshot's live files that ``expression`` may select (``prune_files``' result), reading only the
    manifests whose partition bounds, and then column bounds, may match (all of them for lists written
    before there were bounds) and decoding only the entries kept. Without a filter: every live file.
    ``filter``: the DNF filter ``expression`` was made of, if it was (partitions then judged without pandas)."""
    if expression is None:
        return manifests.read_state(snapshot)
    metas: list[ManifestFileMeta] = []
    for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
        metas += manifests.read_list(list_name)
    if schema.partition_keys:
        metas = [m for m, s in zip(metas, manifests_may_select(schema, [m.partition_stats for m in metas], expression, filter)) if s]
    metas = _by_column_bounds(schema, metas, expression, filter)
    wanted = list(dict.fromkeys(m.file_name for m in metas))
    tables = manifests.read_manifest_tables(wanted)
    types = schema.partition_types()
    entries = pa.concat_tables([tables[name] for name in wanted]) if wanted else None
    if entries is None or entries.num_rows == 0:
        return {}
    keep = pc.is_valid(entries["kind"])  # every entry
    if schema.partition_keys:
        # One decision per distinct partition.
        texts = pc.unique(entries["partition"]).to_pylist()
        try:
            values = [decode_partition(text, types) for text in texts]
        except (TypeError, ValueError) as exc:
            raise CorruptMetadataError(f"{snapshot.base_manifest_list}: a manifest holds unreadable partition values: {exc}") from exc
        selected = partitions_may_select(schema, values, expression, filter)
        keep = pc.is_in(entries["partition"], value_set=arrow_values.array([t for t, s in zip(texts, selected) if s], pa.string()))
    # Then by statistics: the ADD entries left (DELETE entries are all kept: they only take files out).
    adds = pc.and_(keep, pc.equal(entries["kind"], arrow_values.scalar(int(FileKind.ADD), pa.int8())))
    keep = pc.and_(keep, may_match(schema, pc.if_else(adds, entries["stats"], arrow_values.scalar(None, pa.string())), expression, filter))
    state: dict[str, DataFile] = {}
    start = 0
    for name in wanted:
        table = tables[name]
        mask = keep.slice(start, table.num_rows)
        start += table.num_rows
        apply_entries(state, decode_manifest_table(table.filter(mask), types, name))
    return state
