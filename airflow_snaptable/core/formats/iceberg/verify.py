"""``verify()`` of an Iceberg table: what a reader or the lifecycle would trip on, reported, never raised.

The same report as for this package's tables (core/formats/native/verify.py ``VerifyResult``), from Iceberg's own
metadata. Every snapshot in the metadata is walked, as Iceberg's ``ReachableFileUtil`` does:

- missing files: a manifest list, a manifest, a live data or delete file, a statistics file or the
  current metadata file the metadata names and the storage does not have (previous metadata
  versions in the log may be gone: nothing reads them);
- unreferenced files: files under the table location nothing in the metadata names (orphans;
  this package's own ``snaptable/`` directory and ``metadata/version-hint.text`` are not);
- size mismatches: the bytes the metadata records (a manifest's length, a data file's
  ``file_size_in_bytes``, a statistics file's) against the listing;
- corrupt metadata: a manifest list or manifest that cannot be read, a consumer property or a
  deletion plan this package cannot parse;
- snapshots committed further in the future than ``commit.max-clock-skew`` (a table property,
  default one minute) by the real clock.

Iceberg's snapshot ids are not numbered: there are no gaps to report. Files the metadata places
outside the table location (``write.data.path``) are not checked: they are not listed here.
"""

from __future__ import annotations

from airflow_snaptable.core.formats.iceberg.journal import journal_of

import io
import time

import fastavro

from airflow_snaptable.core.errors import CorruptMetadataError, InvalidOptionError
from airflow_snaptable.core.formats.iceberg.consumers import read_consumers
from airflow_snaptable.core.formats.iceberg.expire import PLAN_DIR, IcebergDeletionPlan
from airflow_snaptable.core.formats.iceberg.files import DELETED, LIFECYCLE_DIR, Locator, _entry_ref, _manifest_ref
from airflow_snaptable.core.arguments.table_options import TableOptions
from airflow_snaptable.core.formats.native.verify import VerifyResult

#: Iceberg's Hadoop catalogs keep it beside the metadata files; nothing names it.
VERSION_HINT = "metadata/version-hint.text"
CLOCK_SKEW = "commit.max-clock-skew"


def verify_iceberg(table) -> VerifyResult:
    """``table``: an IcebergTable (core/formats/iceberg/table.py)."""
    iceberg = table.refresh()
    metadata, storage = iceberg.metadata, table.storage
    locator = Locator(iceberg.location())
    result = VerifyResult()
    present = {rel: size for rel, size, _mtime in storage.iter_files("") if not rel.startswith(LIFECYCLE_DIR + "/")}
    snapshots = sorted(metadata.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number or 0))
    result.snapshot_ids = [s.snapshot_id for s in snapshots]
    result.tags = [t.name for t in table.tags()]

    used: dict[str, str] = {}  # path -> what names it first
    recorded: dict[str, int] = {}  # path -> bytes the metadata records
    optional: set[str] = set()  # named, but nothing reads them: never missing

    def use(uri: str, owner: str, size: int | None = None) -> str | None:
        rel = locator.relative(uri)
        if rel is not None:
            used.setdefault(rel, owner)
            if size is not None:
                recorded.setdefault(rel, int(size))
        return rel

    use(iceberg.metadata_location, "the current metadata")
    for entry in metadata.metadata_log:
        rel = locator.relative(entry.metadata_file)
        if rel is not None and rel not in used:
            used[rel] = "the metadata log"
            optional.add(rel)
    statistics = list(metadata.statistics or []) + list(getattr(metadata, "partition_statistics", None) or [])
    for stats in statistics:
        use(stats.statistics_path, f"statistics of snapshot {stats.snapshot_id}", stats.file_size_in_bytes)

    # Manifest lists, then the manifests they name, then the files those hold: each read once.
    # A list that shares its parent's records is decoded only up to them (manifest_lists.py): the
    # manifests it shares were named first by the parent.
    manifests = {}
    for snapshot, refs in _list_records(storage, snapshots, use, result):
        owner = f"snapshot {snapshot.snapshot_id}"
        for ref in refs:
            if ref.path not in manifests:
                manifests[ref.path] = (ref, owner, use(ref.path, owner, ref.length))
    contents = _read_avro(storage, {uri: rel for uri, (_ref, _owner, rel) in manifests.items() if rel}, result)
    for uri, records in contents.items():
        ref, owner, rel = manifests[uri]
        try:
            entries = [_entry_ref(record, ref, uri) for record in records]
        except CorruptMetadataError as exc:
            result.corrupt_metadata.append({"path": rel, "error": str(exc)})
            continue
        for entry in entries:
            if entry.status != DELETED:
                use(entry.path, owner, entry.size)

    result.missing_files = [
        {"path": rel, "referenced_by": owner} for rel, owner in sorted(used.items()) if rel not in present and rel not in optional
    ]
    result.size_mismatches = [
        {"path": rel, "recorded_size": size, "actual_size": present[rel], "referenced_by": used[rel]}
        for rel, size in sorted(recorded.items()) if rel in present and present[rel] != size
    ]
    held = journal_of(table.storage).held_paths()  # noncurrent: kept on purpose until purged
    result.unreferenced_files = sorted(rel for rel in present if rel not in used and rel != VERSION_HINT and rel not in held)
    result.corrupt_metadata += _corrupt_lifecycle(storage, metadata)
    result.future_snapshots = _future(snapshots, metadata.properties or {})
    return result


def _list_records(storage, snapshots: list, use, result: VerifyResult):
    """Each snapshot whose manifest list is there and reads, with the records it does not share
    with its parent's list (all of them when it shares none); parents first. A list that cannot
    be read goes into ``result``; its children then share nothing."""
    from airflow_snaptable.core.formats.iceberg.manifest_lists import ListDecoder, parents_first

    decoder = ListDecoder(_manifest_ref)
    order = parents_first(snapshots)
    rels = {s.snapshot_id: use(s.manifest_list, f"snapshot {s.snapshot_id}") for s in order}
    decoded: dict[int, object] = {}
    for start in range(0, len(order), 128):
        batch = order[start:start + 128]
        contents = _read_many(storage, sorted({rels[s.snapshot_id] for s in batch if rels[s.snapshot_id]}), result)
        for s in batch:
            data = contents.get(rels[s.snapshot_id])
            if data is None:
                continue  # outside the location, or missing (reported) or unreadable (reported)
            try:
                current = decoder.decode(s.manifest_list, data, decoded.get(s.parent_snapshot_id))
            except CorruptMetadataError as exc:
                result.corrupt_metadata.append({"path": rels[s.snapshot_id], "error": str(exc)})
                continue
            decoded[s.snapshot_id] = current
            if len(decoded) > 64:
                decoded.pop(next(iter(decoded)))
            yield s, current.added if current.shares_parent else current.records


def _read_many(storage, rels: list[str], result: VerifyResult) -> dict[str, bytes]:
    try:
        return storage.read_many(rels)
    except CorruptMetadataError:  # a directory where a file should be: read one by one
        contents = {}
        for rel in rels:
            try:
                contents[rel] = storage.read_bytes(rel)
            except FileNotFoundError:
                continue
            except CorruptMetadataError as exc:
                result.corrupt_metadata.append({"path": rel, "error": str(exc)})
        return contents


def _read_avro(storage, rels: dict[str, str], result: VerifyResult) -> dict[str, list[dict]]:
    """The records of each file that is there and reads (by URI); what cannot be read goes into ``result``."""
    try:
        contents = storage.read_many(list(rels.values()))
    except CorruptMetadataError:  # a directory where a file should be: read one by one
        contents = {}
        for rel in rels.values():
            try:
                contents[rel] = storage.read_bytes(rel)
            except FileNotFoundError:
                continue
            except CorruptMetadataError as exc:
                result.corrupt_metadata.append({"path": rel, "error": str(exc)})
    found = {}
    for uri, rel in rels.items():
        if rel not in contents:
            continue  # reported as missing
        try:
            found[uri] = list(fastavro.reader(io.BytesIO(contents[rel])))
        except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
            result.corrupt_metadata.append({"path": rel, "error": f"cannot read: {type(exc).__name__}: {exc}"})
    return found


def _corrupt_lifecycle(storage, metadata) -> list[dict]:
    """This package's consumers (table properties) and deletion plans that cannot be parsed: expiry fails on them."""
    corrupt = []
    try:
        read_consumers(metadata)
    except CorruptMetadataError as exc:
        corrupt.append({"path": "table properties", "error": str(exc)})
    for name in storage.list_names(PLAN_DIR):
        if not (name.startswith("expire-") and name.endswith(".json")):
            continue
        try:
            IcebergDeletionPlan.from_json(name, storage.read_bytes(f"{PLAN_DIR}/{name}"))
        except FileNotFoundError:
            continue  # finished since the listing
        except CorruptMetadataError as exc:
            corrupt.append({"path": f"{PLAN_DIR}/{name}", "error": str(exc)})
    return corrupt


def _future(snapshots: list, properties: dict) -> list[dict]:
    """Snapshots stamped later than the real clock allows (a writer's clock is the suspect, so not the table's)."""
    try:
        skew = TableOptions({CLOCK_SKEW: properties[CLOCK_SKEW]} if CLOCK_SKEW in properties else {}).get(CLOCK_SKEW)
    except InvalidOptionError:
        skew = TableOptions({}).get(CLOCK_SKEW)
    now = time.time() * 1000
    tolerance = skew.total_seconds() * 1000
    return [
        {"snapshot_id": s.snapshot_id, "time_millis": s.timestamp_ms, "ahead_millis": int(s.timestamp_ms - now)}
        for s in snapshots if s.timestamp_ms > now + tolerance
    ]
