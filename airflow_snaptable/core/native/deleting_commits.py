"""The retained commits that may delete files, found without reading the history of appends.

A commit that records deleting no file (``Snapshot.deletes_no_file``: an append) changes no
deletion rule's answer, so what must read the deleted files of a history (the known-path check
of ``Table.commit_files``, core/write/external_files.py) needs only the other commits. Each snapshot
links to the one below it where such a commit may be (``Snapshot.may_delete_below``, written by
:func:`link_below`), so they are found by following links: reads proportional to the deleting
commits, not to the snapshots (a history of 100,000 appends costs one read).

A link names its target's base manifest list, unique to the commit attempt that wrote it, so a
target a rollback replaced is noticed (then the rest of the range is read, as it is below a
snapshot written before links existed), and a target read once is answered from memory.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.native.snapshot import Snapshot, SnapshotManager

#: Snapshots read in one ``Storage.read_many`` where there are no links to follow.
READ_CHUNK = 1_000
#: Per snapshot manager (one per open table), the link targets it read, by id: a snapshot never changes.
_KEPT: "WeakKeyDictionary[SnapshotManager, dict[int, Snapshot]]" = WeakKeyDictionary()


def link_below(parent: Snapshot | None) -> dict:
    """``may_delete_below`` of a commit on ``parent``: the parent when it may delete (or does not
    know its own link), else the parent's link, which skips it."""
    if parent is None:
        return {"id": 0}
    if parent.deletes_no_file and parent.may_delete_below is not None:
        return dict(parent.may_delete_below)
    return {"id": parent.id, "base_manifest_list": parent.base_manifest_list}


def deleting_commits(snapshots: SnapshotManager, earliest: int, latest: Snapshot) -> list[Snapshot]:
    """The snapshots with ``earliest < id <= latest.id`` that may delete files, newest first.

    Follows the links down from ``latest``; where a snapshot has no link (written before links
    existed) or a link's target was replaced, the remaining ids are all read, in bulk. Raises
    SnapshotNotFoundError when one is missing (fail closed), CorruptMetadataError on a bad link.
    """
    kept = _KEPT.setdefault(snapshots, {})
    for expired in [i for i in kept if i <= earliest]:
        del kept[expired]
    found: list[Snapshot] = []
    current = latest
    while current.id > earliest:
        if not current.deletes_no_file:
            found.append(current)
        link = current.may_delete_below
        if link is None:  # written before links: read the rest, in bulk
            return found + _read_down(snapshots, earliest, current.id - 1)
        below, identity = _parse_link(link, current)
        if below <= earliest:
            break
        target = _identified(snapshots, kept, below, identity)
        if target is None:  # replaced by a rollback since the link was written: read what is there
            return found + _read_down(snapshots, earliest, below)
        current = target
    return found


def _identified(snapshots: SnapshotManager, kept: dict[int, Snapshot], snapshot_id: int, identity: str | None) -> Snapshot | None:
    """Snapshot ``snapshot_id`` if it is the commit whose base manifest list is ``identity`` (None:
    whichever is there), else None (a rollback replaced that id); kept when identified, so read once.
    Raises SnapshotNotFoundError if it is gone."""
    cached = kept.get(snapshot_id)
    if cached is not None and identity is not None and cached.base_manifest_list == identity:
        return cached
    found = snapshots.snapshot(snapshot_id)
    if identity is None:
        return found
    if found.base_manifest_list != identity:
        return None
    kept[snapshot_id] = found
    return found


def _parse_link(link: object, snapshot: Snapshot) -> tuple[int, str | None]:
    target = link.get("id") if isinstance(link, dict) else None
    identity = link.get("base_manifest_list") if isinstance(link, dict) else None
    if not isinstance(target, int) or isinstance(target, bool) or not 0 <= target < snapshot.id or not (
        identity is None or isinstance(identity, str)
    ):
        raise CorruptMetadataError(f"snapshot {snapshot.id}: bad may_delete_below {link!r}")
    return target, identity


def _read_down(snapshots: SnapshotManager, earliest: int, top: int) -> list[Snapshot]:
    """The snapshots ``earliest < id <= top`` that may delete, newest first, each read (in bulk,
    :data:`READ_CHUNK` at a time: only those that may delete are kept)."""
    found: list[Snapshot] = []
    for high in range(top, earliest, -READ_CHUNK):
        low = max(earliest + 1, high - READ_CHUNK + 1)
        read = snapshots.read_ids(range(low, high + 1))
        found += [read[i][0] for i in range(high, low - 1, -1) if not read[i][0].deletes_no_file]
    return found
