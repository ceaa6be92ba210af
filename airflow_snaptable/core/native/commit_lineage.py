"""Whether a commit's base is still there, and whether the snapshot it published extends the table.

Snapshot ids alone cannot tell: expiry removes ids oldest first and a rollback lets ids be
reused, so a writer that was slow can find its base gone, or publish an id that expired
(a stale base), or see its own snapshot's predecessor expire right after publishing it.
A snapshot's identity is its ``base_manifest_list`` (unique to the commit attempt), and a
snapshot records its parent's (``parent_base_manifest_list``).
"""

from __future__ import annotations

import logging
from typing import Callable

from airflow_snaptable.core.errors import SnapshotNotFoundError
from airflow_snaptable.core.native.snapshot import Snapshot, SnapshotManager

log = logging.getLogger(__name__)

#: Why a base is gone, or why a published snapshot was undone.
EXPIRED_BASE = "expired-base"
ROLLED_BACK = "rolled-back"


class CommitLineage:
    def __init__(self, snapshots: SnapshotManager, rollback_ceiling: Callable[[], int | None]):
        self.snapshots = snapshots
        self.rollback_ceiling = rollback_ceiling

    def base_removed(self, base: Snapshot | None) -> str | None:
        """EXPIRED_BASE or ROLLED_BACK if the snapshot this attempt builds on is gone, else None.

        Its id holding another snapshot means a rollback discarded it and a later commit reused the id.
        """
        if base is None:
            return None
        try:
            current = self.snapshots.snapshot(base.id)
        except SnapshotNotFoundError:
            current = None
        if current is not None:
            return None if current.base_manifest_list == base.base_manifest_list else ROLLED_BACK
        newest = self.snapshots.latest_id()
        if newest is not None and newest > base.id:
            return EXPIRED_BASE  # others committed on top and an expiry removed it: a lost race
        return ROLLED_BACK

    def stranded(self, snapshot: Snapshot, parent: Snapshot | None) -> str | None:
        """Why the snapshot just published does not extend the table (EXPIRED_BASE, ROLLED_BACK), or None.

        - A rollback fence below its id: a rollback is discarding it.
        - Its predecessor is another snapshot than its parent: a rollback discarded the
          parent and a later commit reused the id.
        - Its predecessor is gone. Expiry removes ids oldest first and never the latest, but
          it may have removed the predecessor *after* this snapshot was published and others
          built on it, so the ids alone cannot tell. The successor decides: built on this
          snapshot, this one stands; built on another, this re-created an expired id from a
          stale base. With no successor: this snapshot gone as well means an expiry took it
          after others built on it (it stands, in their history); still there with newer ids
          beyond the gap, it is a re-created id; with only older ids, a rollback discarded
          its parent.
        """
        try:
            ceiling = self.rollback_ceiling()
            if ceiling is not None and snapshot.id > ceiling:
                return ROLLED_BACK
            if snapshot.id == 1:
                return None
            predecessor = self._snapshot_or_none(snapshot.id - 1)
            if predecessor is not None:
                if parent is not None and predecessor.base_manifest_list != parent.base_manifest_list:
                    return ROLLED_BACK
                return None
            successor = self._snapshot_or_none(snapshot.id + 1)
            if successor is not None:
                if successor.parent_base_manifest_list is None:
                    return EXPIRED_BASE  # written by a version that did not record its parent: ids alone
                return None if successor.parent_base_manifest_list == snapshot.base_manifest_list else EXPIRED_BASE
            ids = self.snapshots.list_ids()
            still_published = self.is_ours(snapshot)
        except Exception as exc:  # noqa: BLE001 - the commit stands; this check is best effort like the hints
            log.warning("snapshot %s committed; checking that it extends the table failed: %s", snapshot.id, exc)
            return None
        if any(i > snapshot.id for i in ids):
            return EXPIRED_BASE if still_published else None
        if any(i < snapshot.id for i in ids):
            return ROLLED_BACK
        return None

    def _snapshot_or_none(self, snapshot_id: int) -> Snapshot | None:
        try:
            return self.snapshots.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            return None

    def is_ours(self, snapshot: Snapshot) -> bool:
        try:
            existing = self.snapshots.snapshot(snapshot.id)
        except Exception:  # noqa: BLE001 - unreadable or absent: not provably ours
            return False
        return existing.base_manifest_list == snapshot.base_manifest_list
