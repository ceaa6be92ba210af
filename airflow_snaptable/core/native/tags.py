"""Tags: named, durable references to a snapshot's state (``tag/tag-<name>``).

A tag file holds a copy of the snapshot it names, so the tagged state stays
readable after the snapshot itself expires. Expiry never deletes a file that
a tag still holds, and deleting a tag frees the files only it held: those rules
are the lifecycle's (core/lifecycle/tags.py, core/lifecycle/protection.py); here are the
tag itself and its files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable

from airflow_snaptable.core.errors import CorruptMetadataError, SnapTableError, TagNotFoundError
from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.arguments.times import duration_argument
from airflow_snaptable.core.native.named_files import read_named_file
from airflow_snaptable.core.native.snapshot import Snapshot
from airflow_snaptable.core.io.storage import Storage

TAG_DIR = "tag"
TAG_PREFIX = "tag-"
MANUAL = "manual"
PERIODIC = "periodic"
#: The source of a tag whose file records none: Paimon's tag files, Iceberg's refs, and a tag file of
#: ours without a "source" field (an older or another writer's). Whether it is automatic is the periodic rules' question
#: (core/lifecycle/periodic_tags.py: its name must be the table's own pattern).
UNRECORDED = "unrecorded"
#: What creating a tag does when a tag of that name exists.
IF_EXISTS = ("fail", "skip")


@dataclass(frozen=True)
class Tag:
    name: str
    snapshot: Snapshot
    create_time_millis: int
    time_retained_millis: int | None = None
    #: MANUAL, PERIODIC (only those are pruned by tag.num-retained-max), a savepoint's, or UNRECORDED.
    source: str = MANUAL

    @property
    def snapshot_id(self) -> int:
        return self.snapshot.id

    @property
    def expires_at_millis(self) -> int | None:
        if self.time_retained_millis is None:
            return None
        return self.create_time_millis + self.time_retained_millis

    def is_expired(self, now_millis: int) -> bool:
        expires = self.expires_at_millis
        return expires is not None and now_millis > expires

    def to_json(self) -> bytes:
        doc = {
            "name": self.name,
            "snapshot": self.snapshot.to_dict(),
            "tagCreateTime": self.create_time_millis,
            "tagTimeRetainedMillis": self.time_retained_millis,
            "source": self.source,
        }
        return json.dumps(doc, indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "Tag":
        try:
            doc = json.loads(data)
            snapshot = Snapshot.from_json(json.dumps(doc["snapshot"]).encode(), where=where)
            return cls(
                name=str(doc["name"]),
                snapshot=snapshot,
                create_time_millis=int(doc["tagCreateTime"]),
                time_retained_millis=None if doc.get("tagTimeRetainedMillis") is None else int(doc["tagTimeRetainedMillis"]),
                source=str(doc.get("source", UNRECORDED)),
            )
        except CorruptMetadataError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            raise CorruptMetadataError(f"{where}: cannot parse tag file: {exc}") from exc

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "snapshot_id": self.snapshot_id,
            "snapshot_time_millis": self.snapshot.time_millis,
            "create_time_millis": self.create_time_millis,
            "time_retained_millis": self.time_retained_millis,
            "expires_at_millis": self.expires_at_millis,
            "source": self.source,
            "record_count": self.snapshot.total_record_count,
        }


def tag_path(name: str) -> str:
    return f"{TAG_DIR}/{TAG_PREFIX}{name}"


def retained_millis(time_retained) -> int | None:
    """A tag's time to live in millis ("7 d", a timedelta, seconds; None: kept until deleted)."""
    if time_retained is None:
        return None
    return int(duration_argument(time_retained, "time_retained") / timedelta(milliseconds=1))


class TagManager:
    """Reads and writes tag files. Reading is fail-closed: an unreadable tag is an error, never "no tag".

    The layout (``tag/tag-<name>``) is Paimon's too: its tag store is this one with Paimon's tag JSON
    (:meth:`decode`, :meth:`encode`; core/formats/paimon/tags.py).
    """

    def __init__(self, storage: Storage):
        self.storage = storage

    def decode(self, name: str, data: bytes, where: str) -> Tag:
        """The tag ``name`` in ``data``, read from ``where``; CorruptMetadataError if it cannot be read."""
        return Tag.from_json(data, where=where)

    def encode(self, tag: Tag) -> bytes:
        return tag.to_json()

    def names(self) -> list[str]:
        names = []
        for entry in self.storage.list_names(TAG_DIR):
            if entry.startswith(TAG_PREFIX):  # temp files of atomic writes start with "."
                names.append(entry[len(TAG_PREFIX):])
        return names

    def tag(self, name: str) -> Tag:
        path = tag_path(name)
        data = read_named_file(self.storage, "tag", name, path, TagNotFoundError)
        return self.decode(name, data, self.storage.full_uri(path))

    def exists(self, name: str) -> bool:
        return self.storage.exists(tag_path(validate_name(name, "tag")))

    def tags(self, unreadable: Callable[[str, SnapTableError], None] | None = None) -> list[Tag]:
        """Every tag, ordered by snapshot id then name.

        Raises if any tag file cannot be read (fail closed), unless ``unreadable(name, error)`` is
        given: then that tag is reported to it and left out (verify() reports, never raises).
        """
        found = []
        for name in self.names():
            try:
                found.append(self.tag(name))
            except TagNotFoundError:
                continue  # deleted while we listed
            except SnapTableError as exc:
                if unreadable is None:
                    raise
                unreadable(name, exc)
        return sorted(found, key=lambda t: (t.snapshot_id, t.name))

    def create(self, tag: Tag) -> bool:
        # A create killed mid-write (kill -9) left a temp file: the next tag write removes it.
        self.storage.remove_abandoned_temps(TAG_DIR)
        return self.storage.create_exclusive(tag_path(tag.name), self.encode(tag))

    def replace(self, tag: Tag) -> None:
        self.storage.remove_abandoned_temps(TAG_DIR)
        self.storage.write_bytes(tag_path(tag.name), self.encode(tag))

    def delete(self, name: str) -> None:
        self.storage.delete(tag_path(name))
        # A deletion a power loss takes back would bring the tag back over files expiry freed since.
        self.storage.sync_directory(TAG_DIR)
