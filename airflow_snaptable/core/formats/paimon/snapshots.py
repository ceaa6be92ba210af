"""Paimon's history: ``snapshot/snapshot-<id>`` (Paimon's JSON) and its ``EARLIEST``/``LATEST`` hints.

A snapshot is read into the engine's ``Snapshot`` (id, time, commit kind, the two manifest lists);
the file's own text rides along in ``summary["paimon"]`` (a JSON scalar, so it survives every
copy the engine makes: rollback plans, tag intents), and restoring a snapshot or writing a tag
writes Paimon's document back, not ours.

A snapshot's index manifest (``indexManifest``, index_manifests.py) is read by files.py from the
kept document (:func:`index_manifest_name`).

A snapshot's changelog (``changelogManifestList``, changelogs.py) is its own: read by files.py
from the kept document (:func:`changelog_manifest_list_name`). A tag's snapshot is marked
(``TAG_KEY``): Paimon's tags do not keep their snapshot's changelog.

Fail closed (UnsupportedMetadataError, naming the feature): a snapshot version other than 3,
statistics files (``statistics``), a commit kind other than APPEND, COMPACT and OVERWRITE.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from airflow_snaptable.core.errors import CorruptMetadataError, UnsupportedMetadataError
from airflow_snaptable.core.formats.paimon.index_manifests import INDEX_FILE_PREFIX, checked_index_manifest_name
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot, read_snapshot_files
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.io.table_paths import checked_file_name

SNAPSHOT_DIR = "snapshot"
EARLIEST_HINT = f"{SNAPSHOT_DIR}/EARLIEST"
LATEST_HINT = f"{SNAPSHOT_DIR}/LATEST"
#: Where a snapshot's own Paimon JSON is kept in ``Snapshot.summary``.
RAW_KEY = "paimon"
#: Set in ``Snapshot.summary`` of a snapshot read from a tag file (its changelog is not the tag's).
TAG_KEY = "paimon-tag"
#: Paimon's ``Snapshot.CURRENT_VERSION``.
SNAPSHOT_VERSION = 3
_SNAPSHOT_FILE = re.compile(r"^snapshot-(\d+)$")
_KINDS = {"APPEND": CommitKind.APPEND, "COMPACT": CommitKind.COMPACT, "OVERWRITE": CommitKind.OVERWRITE}
#: Snapshot fields naming files this store does not track: deleting around them could lose or leak them.
_UNSUPPORTED_FIELDS = {
    "statistics": "table statistics files (statistics)",
}


def snapshot_path(snapshot_id: int) -> str:
    return f"{SNAPSHOT_DIR}/snapshot-{snapshot_id}"


def from_document(doc: Any, raw: str, where: str, tag: bool = False) -> Snapshot:
    """The engine's Snapshot of Paimon's snapshot document ``doc`` (``raw`` is its text, kept; ``tag``: read
    from a tag file)."""
    if not isinstance(doc, dict):
        raise CorruptMetadataError(f"{where}: a snapshot is a JSON object")
    version = doc.get("version")
    if version != SNAPSHOT_VERSION:
        raise UnsupportedMetadataError(f"{where}: Paimon snapshot version {version!r} is not {SNAPSHOT_VERSION}")
    for key, feature in _UNSUPPORTED_FIELDS.items():
        if doc.get(key) is not None:
            raise UnsupportedMetadataError(f"{where}: {feature} are not supported")
    kind = _KINDS.get(doc.get("commitKind"))
    if kind is None:
        raise UnsupportedMetadataError(f"{where}: commit kind {doc.get('commitKind')!r} is not supported")
    try:
        snapshot_id = doc["id"]
        if not isinstance(snapshot_id, int) or isinstance(snapshot_id, bool) or snapshot_id < 1:
            raise ValueError(f"bad id {snapshot_id!r}")
        for key in ("baseManifestList", "deltaManifestList"):
            checked_file_name(doc[key], key, where)  # expiry deletes the lists by these names
            if doc[key].startswith(INDEX_FILE_PREFIX):  # a plan tells an index file's directory by its prefix
                raise UnsupportedMetadataError(f"{where}: manifest list {doc[key]!r} is named like an index file")
        if doc.get("indexManifest") is not None:
            checked_index_manifest_name(doc["indexManifest"], where)
        if doc.get("changelogManifestList") is not None:
            name = checked_file_name(doc["changelogManifestList"], "changelogManifestList", where)
            if name.startswith(INDEX_FILE_PREFIX):
                raise UnsupportedMetadataError(f"{where}: manifest list {name!r} is named like an index file")
        return Snapshot(
            id=snapshot_id,
            parent_id=snapshot_id - 1 if snapshot_id > 1 else None,
            schema_id=int(doc["schemaId"]),
            commit_kind=kind,
            commit_user=str(doc.get("commitUser", "")),
            commit_identifier=None if doc.get("commitIdentifier") is None else int(doc["commitIdentifier"]),
            time_millis=int(doc["timeMillis"]),
            total_record_count=int(doc.get("totalRecordCount") or 0),
            delta_record_count=int(doc.get("deltaRecordCount") or 0),
            watermark=None if doc.get("watermark") is None else int(doc["watermark"]),
            base_manifest_list=doc["baseManifestList"],
            delta_manifest_list=doc["deltaManifestList"],
            summary={RAW_KEY: raw, TAG_KEY: True} if tag else {RAW_KEY: raw},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptMetadataError(f"{where}: cannot parse Paimon snapshot: {exc!r}") from exc


def index_manifest_name(snapshot: Snapshot) -> str | None:
    """The snapshot's ``indexManifest`` (checked when the snapshot was read), None if it has none."""
    raw = (snapshot.summary or {}).get(RAW_KEY)
    return json.loads(raw).get("indexManifest") if isinstance(raw, str) else None


def changelog_manifest_list_name(snapshot: Snapshot) -> str | None:
    """The snapshot's ``changelogManifestList`` (checked when it was read); None if it has none or was
    read from a tag (Paimon's tags do not keep changelog files: ``manifestSkippingSet`` leaves them out)."""
    summary = snapshot.summary or {}
    raw = summary.get(RAW_KEY)
    if summary.get(TAG_KEY) or not isinstance(raw, str):
        return None
    return json.loads(raw).get("changelogManifestList")


def parse_json(data: bytes, where: str) -> tuple[dict, str]:
    try:
        text = data.decode("utf-8")
        return json.loads(text), text
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptMetadataError(f"{where}: not JSON: {exc}") from exc


def document(snapshot: Snapshot, where: str = "snapshot") -> dict:
    """Paimon's document of a snapshot this store read (from its kept text)."""
    raw = (snapshot.summary or {}).get(RAW_KEY)
    if not isinstance(raw, str):
        raise UnsupportedMetadataError(f"{where}: snapshot {snapshot.id} was not read from a Paimon table")
    doc = json.loads(raw)
    if doc.get("id") != snapshot.id:
        raise CorruptMetadataError(f"{where}: snapshot {snapshot.id} carries Paimon snapshot {doc.get('id')}")
    return doc


class PaimonSnapshotStore:
    """core/lifecycle/store.py ``SnapshotStore`` on a Paimon table's ``snapshot/`` directory."""

    def __init__(self, storage: Storage):
        self.storage = storage

    # -- reads -------------------------------------------------------------------------------------

    def parse(self, snapshot_id: int, path: str, data: bytes) -> Snapshot:
        where = self.storage.full_uri(path)
        doc, text = parse_json(data, where)
        snapshot = from_document(doc, text, where)
        if snapshot.id != snapshot_id:
            raise CorruptMetadataError(f"{where} holds snapshot id {snapshot.id}")
        return snapshot

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self.read_ids([snapshot_id])[snapshot_id][0]

    def read_ids(self, snapshot_ids: Iterable[int]) -> dict[int, tuple[Snapshot, int]]:
        return read_snapshot_files(self.storage, snapshot_ids, self.parse)

    def exists(self, snapshot_id: int) -> bool:
        return self.storage.exists(snapshot_path(snapshot_id))

    def list_ids(self) -> list[int]:
        ids = (_SNAPSHOT_FILE.match(name) for name in self.storage.list_names(SNAPSHOT_DIR))
        return sorted(int(m.group(1)) for m in ids if m)

    def _hint(self, path: str) -> int | None:
        try:
            value = int(self.storage.read_bytes(path).decode().strip())
            return value if value >= 1 else None
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            return None

    def earliest_floor(self) -> int:
        return self._hint(EARLIEST_HINT) or 1

    def earliest_id(self) -> int | None:
        """Paimon's rule: the EARLIEST hint if its snapshot exists and none is below it, else the listing."""
        hint = self._hint(EARLIEST_HINT)
        if hint is not None and self.exists(hint) and (hint == 1 or not self.exists(hint - 1)):
            return hint
        ids = self.list_ids()
        return ids[0] if ids else None

    def latest_id(self) -> int | None:
        """Paimon's rule: the LATEST hint if its snapshot exists and the next one does not, else the listing."""
        hint = self._hint(LATEST_HINT)
        if hint is not None and self.exists(hint) and not self.exists(hint + 1):
            return hint
        ids = self.list_ids()
        return ids[-1] if ids else None

    def latest_snapshot(self) -> Snapshot | None:
        latest = self.latest_id()
        return None if latest is None else self.snapshot(latest)

    def earliest_snapshot(self) -> Snapshot | None:
        earliest = self.earliest_id()
        return None if earliest is None else self.snapshot(earliest)

    def snapshot_at(self, time_millis: int) -> Snapshot | None:
        """The latest snapshot committed at or before the time (a binary search over the present ids)."""
        ids = [i for i in self.list_ids() if i >= self.earliest_floor()] or self.list_ids()
        found, low, high = None, 0, len(ids) - 1
        while low <= high:
            middle = (low + high) // 2
            snapshot = self.snapshot(ids[middle])
            if snapshot.time_millis <= time_millis:
                found, low = snapshot, middle + 1
            else:
                high = middle - 1
        return found

    @staticmethod
    def identity(snapshot: Snapshot) -> str:
        return snapshot.base_manifest_list

    @staticmethod
    def path(snapshot_id: int) -> str:
        return snapshot_path(snapshot_id)

    # -- changes -----------------------------------------------------------------------------------

    def unpublish(self, snapshot_ids: Iterable[int]) -> None:
        for snapshot_id in snapshot_ids:
            self.storage.delete(snapshot_path(snapshot_id))
        self.storage.sync_directory(SNAPSHOT_DIR)  # gone for good before the files they name are deleted

    def restore(self, snapshot: Snapshot) -> None:
        """Write the snapshot's Paimon document back (the hint first: see SnapshotManager.restore)."""
        if self.exists(snapshot.id):
            return
        document(snapshot, self.storage.uri)  # raises unless it carries its own Paimon JSON
        raw = snapshot.summary[RAW_KEY]
        self.write_earliest_hint(snapshot.id)
        self.storage.create_exclusive(snapshot_path(snapshot.id), raw.encode("utf-8"))

    def republish(self, snapshot: Snapshot) -> bool:
        """Write a snapshot a rollback discarded back above the latest, as Paimon's own document (undoing the
        rollback, core/lifecycle/noncurrent/undo.py); False, writing nothing, when a commit took the id."""
        document(snapshot, self.storage.uri)  # raises unless it carries its own Paimon JSON
        if not self.storage.create_exclusive(snapshot_path(snapshot.id), snapshot.summary[RAW_KEY].encode("utf-8")):
            return False
        self.write_latest_hint(snapshot.id)
        return True

    def write_earliest_hint(self, snapshot_id: int) -> None:
        self.storage.write_bytes(EARLIEST_HINT, str(snapshot_id).encode(), durable=False)

    def write_latest_hint(self, snapshot_id: int) -> None:
        self.storage.write_bytes(LATEST_HINT, str(snapshot_id).encode(), durable=False)
