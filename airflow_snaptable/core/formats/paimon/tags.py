"""Paimon's tags (``tag/tag-<name>``) and consumers (``consumer/consumer-<id>``).

A tag file is its snapshot's JSON, plus ``tagCreateTime`` (a Java ``LocalDateTime`` as an array
``[y, mo, d, h, mi, s, nanos]`` in the writer's time zone, trailing zeros left out) and
``tagTimeRetained`` (a Java ``Duration`` in seconds) when the tag has a time to live; without one,
Paimon writes the plain snapshot JSON (older readers cannot read the extra fields), and so does
this store. Paimon records no source (UNRECORDED): whether a tag is automatic is decided by its
name and the table's period options (core/lifecycle/periodic_tags.py, Paimon's ``TagPeriodHandler.isAutoTag``). A consumer file is ``{"nextSnapshot": n}``; its update time is the
file's modification time (Paimon's ``ConsumerManager.expire`` reads that).
"""

from __future__ import annotations

import datetime as dt
import json

from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.errors import ConsumerNotFoundError, CorruptMetadataError
from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.formats.paimon.snapshots import document, from_document, parse_json
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.native.named_files import read_named_file
from airflow_snaptable.core.native.tags import UNRECORDED, Tag, TagManager


CONSUMER_DIR = "consumer"
CONSUMER_PREFIX = "consumer-"
_CREATE_TIME = "tagCreateTime"
_TIME_RETAINED = "tagTimeRetained"


def local_datetime_millis(value) -> int:
    """Epoch millis of a Java LocalDateTime array (the writer's local time zone, as Paimon reads it)."""
    if not isinstance(value, list) or not 5 <= len(value) <= 7 or not all(isinstance(v, int) for v in value):
        raise ValueError(f"bad LocalDateTime {value!r}")
    parts = list(value) + [0] * (7 - len(value))
    when = dt.datetime(*parts[:6], parts[6] // 1000)
    return int(when.timestamp() * 1000)


def local_datetime_array(millis: int) -> list[int]:
    """Jackson's LocalDateTime array of an epoch millis in the local time zone."""
    when = dt.datetime.fromtimestamp(millis / 1000)
    nanos = when.microsecond * 1000
    array = [when.year, when.month, when.day, when.hour, when.minute]
    if when.second or nanos:
        array.append(when.second)
        if nanos:
            array.append(nanos)
    return array


def encode_tag(tag: Tag) -> bytes:
    doc = document(tag.snapshot, f"tag {tag.name}")
    if tag.time_retained_millis is not None:
        doc[_CREATE_TIME] = local_datetime_array(tag.create_time_millis)
        doc[_TIME_RETAINED] = tag.time_retained_millis / 1000
    return json.dumps(doc, indent=2).encode()


def decode_tag(name: str, data: bytes, where: str) -> Tag:
    doc, _ = parse_json(data, where)
    if not isinstance(doc, dict):
        raise CorruptMetadataError(f"{where}: a tag is a JSON object")
    create, retained = doc.pop(_CREATE_TIME, None), doc.pop(_TIME_RETAINED, None)
    snapshot = from_document(doc, json.dumps(doc, indent=2), where, tag=True)
    try:
        create_millis = snapshot.time_millis if create is None else local_datetime_millis(create)
        if retained is not None and (isinstance(retained, bool) or not isinstance(retained, (int, float)) or retained < 0):
            raise ValueError(f"bad {_TIME_RETAINED} {retained!r}")
    except ValueError as exc:
        raise CorruptMetadataError(f"{where}: {exc}") from exc
    # Paimon's TagTimeExpire expires a tag only when it has both a create time and a time to live.
    retained_millis = None if retained is None or create is None else int(round(retained * 1000))
    return Tag(name, snapshot, create_millis, retained_millis, UNRECORDED)


class PaimonTagStore(TagManager):
    """core/lifecycle/store.py ``TagStore`` on ``tag/``: our tag files' layout, with Paimon's tag JSON."""

    def decode(self, name: str, data: bytes, where: str) -> Tag:
        return decode_tag(name, data, where)

    def encode(self, tag: Tag) -> bytes:
        return encode_tag(tag)


def parse_consumer_file(data: bytes, where: str, consumer_id: str = "", modified: float | None = None) -> Consumer:
    """A Paimon consumer file (also what verify checks consumer files with)."""
    try:
        doc = json.loads(data)
        next_snapshot = doc["nextSnapshot"]
        if not isinstance(next_snapshot, int) or isinstance(next_snapshot, bool) or next_snapshot < 1:
            raise ValueError(f"bad nextSnapshot {next_snapshot!r}")
    except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
        raise CorruptMetadataError(f"{where}: cannot parse Paimon consumer file: {exc}") from exc
    return Consumer(consumer_id, next_snapshot, int((modified or 0) * 1000))


class PaimonConsumerStore:
    """core/lifecycle/store.py ``ConsumerStore`` on ``consumer/``."""

    def __init__(self, storage: Storage):
        self.storage = storage

    @staticmethod
    def parse_consumer_file(data: bytes, where: str) -> Consumer:
        return parse_consumer_file(data, where)

    def _modified(self) -> dict[str, float | None]:
        return {rel.rsplit("/", 1)[-1]: mtime for rel, _size, mtime in self.storage.list_files(CONSUMER_DIR)}

    def consumer(self, consumer_id: str) -> Consumer:
        path = f"{CONSUMER_DIR}/{CONSUMER_PREFIX}{consumer_id}"
        data = read_named_file(self.storage, "consumer", consumer_id, path, ConsumerNotFoundError)
        modified = self._modified().get(CONSUMER_PREFIX + consumer_id)
        return parse_consumer_file(data, self.storage.full_uri(path), consumer_id, modified)

    def get(self, consumer_id: str) -> Consumer | None:
        try:
            return self.consumer(consumer_id)
        except ConsumerNotFoundError:
            return None

    def consumers(self) -> list[Consumer]:
        modified = self._modified()
        found = []
        for name in sorted(modified):
            if not name.startswith(CONSUMER_PREFIX):
                continue
            consumer_id = name[len(CONSUMER_PREFIX):]
            validate_name(consumer_id, "consumer")
            path = f"{CONSUMER_DIR}/{name}"
            try:
                data = self.storage.read_bytes(path)
            except FileNotFoundError:
                continue
            found.append(parse_consumer_file(data, self.storage.full_uri(path), consumer_id, modified[name]))
        return found

    def write(self, consumer: Consumer) -> None:
        path = f"{CONSUMER_DIR}/{CONSUMER_PREFIX}{validate_name(consumer.id, 'consumer')}"
        self.storage.remove_abandoned_temps(CONSUMER_DIR)  # left by a write killed mid-way (kill -9)
        self.storage.write_bytes(path, json.dumps({"nextSnapshot": consumer.next_snapshot}).encode())

    def delete(self, consumer_id: str) -> None:
        self.storage.delete(f"{CONSUMER_DIR}/{CONSUMER_PREFIX}{consumer_id}")
        self.storage.sync_directory(CONSUMER_DIR)  # as for tags: it must not come back over expired snapshots
