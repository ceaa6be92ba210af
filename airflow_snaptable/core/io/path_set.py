"""A compact set of file paths: 8 bytes per path, for the in-use set of a table of millions of files.

Orphan cleaning asks, of every file under the table, "does a retained snapshot or a tag
reference it?". A Python set of a million path strings takes about 150 MB; this set keeps a
sorted array of 64-bit hashes of the paths (BLAKE2b, 8-byte digest) instead, 8 MB, and answers
for a batch of listed paths at once (``numpy.searchsorted``).

The safety rule: a hash collision can only make a file that nothing references look in use,
so it is kept (an orphan left for a later clean, one in 2^64 / n per file); it can never make a
referenced file look unreferenced, as every referenced path's own hash is in the set. So only
membership is ever asked of this set, never "what is not in it", and a set is only ever built
from paths that are in use (the fold of a state that decides what is live happens on the paths
themselves, core/formats/native/in_use.py).
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Sequence

import numpy as np

#: The hash width: 8 bytes per path in the set.
_DIGEST_BYTES = 8


def path_hashes(paths: Iterable[str]) -> np.ndarray:
    """The 64-bit hashes (uint64) of ``paths``, in order."""
    digests = b"".join(hashlib.blake2b(p.encode(), digest_size=_DIGEST_BYTES).digest() for p in paths)
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64, copy=False)


class PathHashSet:
    """A sorted, duplicate-free array of path hashes (build one with :class:`PathHashSetBuilder`).

    :param hashes: sorted unique uint64 hashes.
    """

    def __init__(self, hashes: np.ndarray):
        self._hashes = hashes

    @classmethod
    def of(cls, paths: Iterable[str]) -> "PathHashSet":
        """The set of ``paths`` (for stores that collect their in-use paths as strings)."""
        builder = PathHashSetBuilder()
        builder.add_paths(paths)
        return builder.build()

    def __len__(self) -> int:
        return len(self._hashes)

    @property
    def nbytes(self) -> int:
        return int(self._hashes.nbytes)

    def contains(self, paths: Sequence[str]) -> np.ndarray:
        """For each path, whether it may be in the set (bool array). True for every path added;
        True also, with probability about n / 2^64, for a path never added (kept, never deleted)."""
        wanted = path_hashes(paths)
        if not len(self._hashes):
            return np.zeros(len(wanted), dtype=bool)
        at = np.searchsorted(self._hashes, wanted)
        found = np.zeros(len(wanted), dtype=bool)
        inside = at < len(self._hashes)
        found[inside] = self._hashes[at[inside]] == wanted[inside]
        return found

    def __contains__(self, path: str) -> bool:
        return bool(self.contains([path])[0])


class PathHashSetBuilder:
    """Collects path hashes in chunks and deduplicates them as it goes, so memory stays a small
    multiple of the distinct paths even when many states (tags, runs of snapshots) name the same files."""

    def __init__(self) -> None:
        self._merged = np.empty(0, dtype=np.uint64)
        self._pending: list[np.ndarray] = []
        self._pending_count = 0

    def add_paths(self, paths: Iterable[str]) -> None:
        self.add_hashes(path_hashes(paths))

    def add_hashes(self, hashes: np.ndarray) -> None:
        if not len(hashes):
            return
        self._pending.append(hashes)
        self._pending_count += len(hashes)
        if self._pending_count > max(len(self._merged), 1 << 20):
            self._merge()

    def _merge(self) -> None:
        self._merged = np.unique(np.concatenate([self._merged, *self._pending]))
        self._pending, self._pending_count = [], 0

    def build(self) -> PathHashSet:
        self._merge()
        return PathHashSet(self._merged)
