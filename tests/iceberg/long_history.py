"""A long Iceberg history built cheaply: pyiceberg commits one append (the templates), then the
snapshots, manifest lists and manifests of ``n`` more appends are written directly with fastavro,
and the metadata naming them is registered in the catalog as a new table.

Each synthetic append adds one manifest naming one data file (the files themselves are not
written: a dry run plans without reading them). ``width`` bounds a list: snapshot ``i``'s list is
its own manifest, then the first ``width - 1`` records of its parent's (``None``: all of them,
the shape pyiceberg's own appends give, n(n+1)/2 records in all).
"""

from __future__ import annotations

import copy
import io
import json
import os
import uuid

import fastavro


def _read(path: str):
    with open(path, "rb") as f:
        reader = fastavro.reader(io.BytesIO(f.read()))
        return reader.writer_schema, dict(reader.metadata), list(reader)


def _write(path: str, schema, metadata: dict, records: list) -> None:
    meta = {k: v for k, v in metadata.items() if not k.startswith("avro.")}
    with open(path, "wb") as f:
        fastavro.writer(f, schema, records, codec="deflate", metadata=meta)


def build_long_history(catalog, template_name: str, name: str, n: int, width: int | None = None, data_files: bool = False) -> str:
    """Register ``name``: ``template_name``'s one snapshot and ``n`` appends after it; returns its location.
    ``data_files``: each append's data file is written too (a copy of the template's)."""
    template = catalog.load_table(template_name)
    location = template.location()
    root = location[len("file://"):] if location.startswith("file://") else location
    snapshot = template.current_snapshot()
    list_schema, list_meta, list_records = _read(snapshot.manifest_list[len("file://"):])
    manifest_schema, manifest_meta, entries = _read(list_records[0]["manifest_path"][len("file://"):])
    with open(template.metadata_location[len("file://"):]) as f:
        doc = json.load(f)
    template_data = entries[0]["data_file"]["file_path"]
    data_bytes = open(template_data[len("file://"):], "rb").read() if data_files else b""

    records = list_records
    parent_id = snapshot.snapshot_id
    sequence = snapshot.sequence_number
    stamp = snapshot.timestamp_ms
    snapshots = doc["snapshots"]
    for i in range(n):
        snapshot_id, sequence, stamp = 10**12 + i, sequence + 1, stamp + 1
        entry = copy.deepcopy(entries[0])
        entry["snapshot_id"] = snapshot_id
        entry["sequence_number"] = None
        entry["data_file"]["file_path"] = f"{location}/data/long-{i}.parquet"
        if data_files:
            os.makedirs(f"{root}/data", exist_ok=True)
            with open(f"{root}/data/long-{i}.parquet", "wb") as f:
                f.write(data_bytes)
        manifest_path = f"{location}/metadata/long-{i}-m0.avro"
        _write(f"{root}/metadata/long-{i}-m0.avro", manifest_schema, {**manifest_meta}, [entry])
        own = dict(list_records[0], manifest_path=manifest_path, added_snapshot_id=snapshot_id,
                   sequence_number=sequence, min_sequence_number=sequence)
        records = [own] + (records if width is None else records[: width - 1])
        list_path = f"{location}/metadata/snap-long-{i}.avro"
        meta = {**list_meta, "snapshot-id": str(snapshot_id), "parent-snapshot-id": str(parent_id), "sequence-number": str(sequence)}
        _write(f"{root}/metadata/snap-long-{i}.avro", list_schema, meta, records)
        snapshots.append({
            "snapshot-id": snapshot_id, "parent-snapshot-id": parent_id, "sequence-number": sequence,
            "timestamp-ms": stamp, "manifest-list": list_path, "summary": {"operation": "append"}, "schema-id": 0,
        })
        parent_id = snapshot_id
    doc.update({
        "current-snapshot-id": parent_id, "last-sequence-number": sequence, "last-updated-ms": stamp,
        "refs": {"main": {"snapshot-id": parent_id, "type": "branch"}}, "snapshot-log": [],
        "table-uuid": str(uuid.uuid4()),
    })
    metadata_path = f"{root}/metadata/99999-{uuid.uuid4()}.metadata.json"
    with open(metadata_path, "w") as f:
        json.dump(doc, f)
    namespace = name.rsplit(".", 1)[0]
    catalog.register_table((namespace, name.rsplit(".", 1)[1]), f"file://{metadata_path}" if location.startswith("file://") else metadata_path)
    assert os.path.exists(metadata_path)
    return location
