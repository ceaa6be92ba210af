"""Compact sets of data-file paths: sorted arrays of 64-bit path hashes, 8 bytes a path.

Expiry asks "does this tag hold path p?" and "was p added back at or after it was deleted?"
for every candidate. Answering from Python sets of the paths costs ~100 bytes or more per
path, so a tag of ten million files would not fit in a bounded planner. These answer from
sorted ``array('Q')`` hashes instead, built by streaming the entries once.

Collision rule (why a hash is safe here): a hash collision only ever makes an answer *more*
protective. A tag's set answers "holds p" for every path whose hash equals a live path's, so a
colliding unreferenced file is kept (left for orphan cleaning), never a referenced one deleted;
an added-back lookup that collides skips a deletion, which keeps the file. Nothing that
answers "may delete" is ever derived from a hash.

The hashes are Python's ``hash(str)`` (SipHash, 64 bits, salted per process): an index lives
and dies in the process that built it and is never stored.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from airflow_snaptable.core.native.manifest import FileKind, ManifestEntry

_MASK = (1 << 64) - 1
#: Up to this many added paths, LastAdded keeps a dict (~100 bytes an entry) instead of arrays.
_SMALL = 65_536


def path_hash(path: str) -> int:
    """The 64-bit (unsigned) hash of a path, stable within this process."""
    return hash(path) & _MASK


def _sorted_order(hashes: array) -> array:
    """Indices that sort ``hashes``, sorted by Arrow (no list of a million Python ints)."""
    if not hashes:
        return array("Q")
    values = pa.Array.from_buffers(pa.uint64(), len(hashes), [None, pa.py_buffer(hashes)])
    order = pc.sort_indices(values)
    found = array("Q")
    found.frombytes(order.buffers()[1].to_pybytes()[order.offset * 8:(order.offset + len(order)) * 8])
    return found


def _take(values: array, order: array) -> array:
    return array(values.typecode, (values[i] for i in order))


class PathHashSet:
    """A set of paths as their sorted hashes: ``path in s`` may say yes for a path never added
    (a collision: see the module doc), never no for one added."""

    __slots__ = ("_hashes",)

    def __init__(self, hashes: array):
        self._hashes = hashes

    @classmethod
    def of_live(cls, entries: Iterable[ManifestEntry]) -> "PathHashSet":
        """The paths live after folding ``entries`` (ADD/DELETE, in order), streamed once.

        A path is added only while not live and deleted only while live (names are never reused
        but by an explicit add-back), so it is live iff it has more ADDs than DELETEs. Counted per
        hash: colliding paths sum their counts, and the sum is positive iff one of them is live,
        so a collision can only add a hash, never lose a live one.
        """
        added, deleted = array("Q"), array("Q")
        for entry in entries:
            (added if entry.kind is FileKind.ADD else deleted).append(path_hash(entry.file.path))
        added = _take(added, _sorted_order(added))
        deleted = _take(deleted, _sorted_order(deleted))
        live = array("Q")
        d = 0
        i = 0
        while i < len(added):
            value = added[i]
            count = 0
            while i < len(added) and added[i] == value:
                count, i = count + 1, i + 1
            while d < len(deleted) and deleted[d] < value:
                d += 1
            while d < len(deleted) and deleted[d] == value:
                count, d = count - 1, d + 1
            if count > 0:
                live.append(value)
        return cls(live)

    @classmethod
    def of_paths(cls, paths: Iterable[str]) -> "PathHashSet":
        hashes = array("Q", (path_hash(p) for p in paths))
        return cls(_take(hashes, _sorted_order(hashes)))

    def __contains__(self, path: str) -> bool:
        value = path_hash(path)
        i = bisect_left(self._hashes, value)
        return i < len(self._hashes) and self._hashes[i] == value

    def __len__(self) -> int:
        return len(self._hashes)


class LastAdded:
    """The newest snapshot at which each path was added, by hash (a collision answers the newer of
    the two: a later add-back, which only ever keeps a file)."""

    __slots__ = ("_hashes", "_snapshots", "_small")

    def __init__(self) -> None:
        self._hashes = array("Q")
        self._snapshots = array("q")
        self._small: dict[int, int] | None = None

    def add(self, path: str, snapshot_id: int) -> None:
        """Record an ADD; call :meth:`seal` once all are in."""
        self._hashes.append(path_hash(path))
        self._snapshots.append(snapshot_id)

    def seal(self) -> "LastAdded":
        if len(self._hashes) <= _SMALL:
            # Few adds (an overwrite adds a handful): a dict answers faster than a bisection.
            small: dict[int, int] = {}
            for value, snapshot_id in zip(self._hashes, self._snapshots):
                small[value] = max(small.get(value, snapshot_id), snapshot_id)
            self._small = small
            self._hashes, self._snapshots = array("Q"), array("q")
            return self
        order = _sorted_order(self._hashes)
        hashes, snapshots = _take(self._hashes, order), _take(self._snapshots, order)
        # Keep one slot per hash: the newest snapshot of its run.
        self._hashes, self._snapshots = array("Q"), array("q")
        for value, snapshot_id in zip(hashes, snapshots):
            if self._hashes and self._hashes[-1] == value:
                self._snapshots[-1] = max(self._snapshots[-1], snapshot_id)
            else:
                self._hashes.append(value)
                self._snapshots.append(snapshot_id)
        return self

    def get(self, path: str) -> int | None:
        """The newest snapshot that added ``path`` (None: none recorded)."""
        if self._small is not None:
            return self._small.get(path_hash(path)) if self._small else None
        value = path_hash(path)
        i = bisect_left(self._hashes, value)
        if i < len(self._hashes) and self._hashes[i] == value:
            return self._snapshots[i]
        return None

    def __len__(self) -> int:
        return len(self._small) if self._small is not None else len(self._hashes)
