"""Manifest merging: how a commit keeps the number of manifests a snapshot reads bounded.

Only a file's last entry decides whether it is in the state, so a run of consecutive
manifests can be replaced by one holding each file's last entry, and a run starting at
the first manifest can drop DELETE entries (docs/format.md, "Manifest merging"):

- once DELETE entries (dead) outnumber live files (and there are at least
  ``manifest.merge-min-count`` of them), all manifests are rewritten as live ADD
  entries only ("full merge");
- otherwise, once the trailing run of small manifests is ``manifest.merge-min-count`` long,
  that run is merged. A manifest is small while it is under ``manifest.target-file-size`` and
  holds fewer entries than a merged manifest is cut at: a merge's pieces are full, so a later
  merge rewrites the run since then and the last piece only, never the whole table (pieces
  judged by size alone came out under the target, and every merge rewrote them all: a commit
  cost O(files in the table)).

A merge writes its entries sorted by partition, cut at the target size: after a merge each
file has one entry, so their order no longer matters, and each merged manifest then covers a
narrow range of partitions, which a filtered scan's partition bounds skip (core/native/partition_pruning.py).
"""

from __future__ import annotations

from airflow_snaptable.core.native.manifest import ManifestEntry, ManifestFileMeta, ManifestIO, last_entries

#: Bytes one entry takes in a compressed Parquet manifest, roughly: how many entries fill a target-size manifest.
BYTES_PER_ENTRY = 100


class ManifestMerger:
    def __init__(self, manifests: ManifestIO, schema_id: int, target_size: int, min_count: int):
        self.manifests = manifests
        self.schema_id = schema_id
        self.target_size = target_size
        self.min_count = min_count

    def merge(self, metas: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
        """The manifests a new base list holds instead of ``metas`` (the same list when nothing is due)."""
        deleted = sum(m.num_deleted_files for m in metas)
        live = sum(m.num_added_files for m in metas) - deleted
        if deleted >= self.min_count and deleted >= live:
            return self._rewrite(metas, keep_deletes=False)
        start = len(metas)
        while start > 0 and self._is_small(metas[start - 1]):
            start -= 1
        if len(metas) - start >= self.min_count:
            return metas[:start] + self._rewrite(metas[start:], keep_deletes=start > 0)
        return metas

    @property
    def _per_manifest(self) -> int:
        """Entries a merged manifest is cut at."""
        return max(1, self.target_size // BYTES_PER_ENTRY)

    def _is_small(self, meta: ManifestFileMeta) -> bool:
        return meta.file_size < self.target_size and meta.num_added_files + meta.num_deleted_files < self._per_manifest

    def _rewrite(self, metas: list[ManifestFileMeta], keep_deletes: bool) -> list[ManifestFileMeta]:
        entries: list[ManifestEntry] = []
        for meta in metas:
            entries.extend(self.manifests.read_manifest(meta.file_name))
        merged = sorted(last_entries(entries, keep_deletes=keep_deletes), key=lambda e: _partition_order(e.file.partition))
        per_manifest = self._per_manifest
        return [
            self.manifests.write_manifest(merged[i : i + per_manifest], self.schema_id)
            for i in range(0, len(merged), per_manifest)
        ]


def _partition_order(partition: tuple) -> tuple:
    """Sorts partition values per key (nulls last); values of one key share a type."""
    return tuple((value is None, value if value is not None else 0) for value in partition)
