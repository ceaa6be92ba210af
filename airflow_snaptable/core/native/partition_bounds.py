"""A manifest's partition bounds (``ManifestFileMeta.partition_stats``; Paimon's ``_PARTITION_STATS``).

Written with each manifest (:func:`partition_stats_of`) into its list entry, and read back to decide
without reading a manifest whether it can hold a partition (:class:`PartitionBounds`, used by
``commit_files``' known-path check) or rows a filter may select (core/native/partition_pruning.py). A
list entry without bounds (written before there were any) may hold anything.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Iterable

from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.native.schema import decode_partition, encode_partition


def partition_stats_of(entries: Iterable) -> str | None:
    """JSON ``{"lower": [...], "upper": [...], "nulls": [...]}`` over the entries' partition values (per key:
    the smallest and largest non-null value, and whether a null occurs); None for no entries or no keys."""
    partitions = {e.file.partition for e in entries}
    if not partitions or not next(iter(partitions)):
        return None
    lower, upper, nulls = [], [], []
    for values in zip(*partitions):
        present = [v for v in values if v is not None]
        lower.append(min(present) if present else None)
        upper.append(max(present) if present else None)
        nulls.append(len(present) < len(values))
    return json.dumps({"lower": json.loads(encode_partition(tuple(lower))), "upper": json.loads(encode_partition(tuple(upper))), "nulls": nulls})


class PartitionBounds:
    """Whether a manifest's partition bounds may hold one of some partitions (bounds parsed once per manifest)."""

    def __init__(self, partition_types: list, partitions: set[tuple]):
        self.partition_types = partition_types
        self.partitions = partitions
        self._decided: dict[str, bool] = {}

    def may_hold(self, meta) -> bool:
        decided = self._decided.get(meta.file_name)
        if decided is None:
            decided = self._decided[meta.file_name] = self._may_hold(meta.partition_stats)
        return decided

    def _may_hold(self, stats: str | None) -> bool:
        if stats is None or not self.partition_types:
            return True  # written before there were bounds, or unpartitioned: nothing is known
        lower, upper, nulls = parsed_bounds(stats, tuple(self.partition_types))
        return any(_within(partition, lower, upper, nulls) for partition in self.partitions)


@lru_cache(maxsize=65536)
def parsed_bounds(stats: str, partition_types: tuple) -> tuple[tuple, tuple, tuple]:
    """A manifest's ``partition_stats`` as (lower, upper, nulls); a manifest's bounds never change."""
    try:
        doc = json.loads(stats)
        lower = decode_partition(json.dumps(doc["lower"]), list(partition_types))
        upper = decode_partition(json.dumps(doc["upper"]), list(partition_types))
        return lower, upper, tuple(doc["nulls"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptMetadataError(f"unreadable partition bounds {stats!r}: {exc}") from exc


def _within(partition: tuple, lower: tuple, upper: tuple, nulls: list) -> bool:
    for value, low, high, has_null in zip(partition, lower, upper, nulls):
        if value is None:
            if not has_null:
                return False
        elif low is None or not (low <= value <= high):
            return False
    return True
