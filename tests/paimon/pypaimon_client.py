"""The independent Apache Paimon client of tests/paimon: pypaimon, run in its own venv.

Run as ``.venv-pypaimon/bin/python tests/paimon/pypaimon_client.py`` with a JSON request on
stdin; the JSON answer goes to stdout. One request runs a whole list of steps in one process
(each start of the interpreter costs a second or two):

- ``{"create": "db.t", "columns": [[name, type], ...], "partition": [...], "pk": [...], "options": {...}}``
  (types: "int64", "int32", "string", "bool");
- ``{"write": "db.t", "rows": [[...], ...], "overwrite": null | {} | {"col": value}, "index": false}``:
  one commit; with ``index`` each data file gets a file index beside it (``<file>.index``, in its
  ``_EXTRA_FILES``), as Java Paimon writes one above ``file-index.in-manifest-threshold``
  (pypaimon 2.1 writes no file indexes);
  With ``"at": <epoch millis>`` the snapshot is stamped with that commit time instead of the
  clock's (Paimon's tests commit at chosen times the same way, through a test clock);
- ``{"delete_rows": "db.t", "row_ids": [...]}``: one commit deleting rows of a data-evolution table
  (``row-tracking.enabled``, ``data-evolution.enabled``, ``deletion-vectors.enabled``) by row id:
  pypaimon writes deletion vectors (a DELETION_VECTORS index file per bucket, in the index manifest);
- ``{"tag": "db.t", "name": "t1", "snapshot": null | id, "time_retained": null | "1d"}``;
- ``{"consumer": "db.t", "id": "c", "next_snapshot": n}``: pypaimon's ConsumerManager writes the
  consumer, as a Flink or Spark streaming reader of the table does; ``next_snapshot: null`` deletes it;
- ``{"consumers": "db.t"}``: every consumer as pypaimon's ConsumerManager reads it, and its
  ``min_next_snapshot``, answered as ``{"consumers": {id: next}, "min": n | null}``;
- ``{"compact": "db.t", "partition": "a", "level": 5, "upgrade": false}``: one COMPACT snapshot, as
  Java Paimon's LSM compaction commits it (pypaimon 2.1 has no compaction of its own). Each bucket
  of the primary-key table's partition ``p=<partition>`` is compacted into ``level``: rewritten
  (its merged rows written as a new file, the old files deleted) or, with ``upgrade`` and one
  file in the bucket, that file moved to ``level`` unchanged (a DELETE and an ADD of the same
  file at two levels, Paimon's upgrade);
- ``{"changelog": "db.t"}``: each snapshot's changelog (a table with a ``changelog-producer``) as a
  streaming reader reads it: the rows of an incremental read of that one commit
  (``incremental-between-timestamp``; the scenario stamps commits 1 s apart with ``at``) and the
  files it reads (its changelog manifest list, manifests and changelog files), answered as
  ``{id: {"rows": ..., "files": ...}}`` (``{"error": ...}`` when pypaimon cannot read it);
- ``{"read": "db.t"}``: every snapshot from EARLIEST to LATEST that exists and every tag, each
  as its rows sorted (a list of lists), answered as ``{"snapshots": {id: rows}, "tags": {name: rows}}``;
  a snapshot or tag that pypaimon cannot read is answered as ``{"error": "..."}``; with ``"as": key``
  the answer is under ``key`` (to read a table twice in one request).

Nothing here imports airflow_snaptable: this is the other side of the comparison.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
from pypaimon import CatalogFactory, Schema

TYPES = {"int64": pa.int64(), "int32": pa.int32(), "string": pa.string(), "bool": pa.bool_()}


def _catalog(warehouse: str):
    os.makedirs(warehouse, exist_ok=True)
    return CatalogFactory.create({"warehouse": warehouse})


def _rows(table) -> list:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return sorted([list(r) for r in zip(*columns)], key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _read(table, options: dict, snapshot) -> dict:
    """Its rows, and the files pypaimon reads for it: data files (with their extra files), the
    manifest lists and manifests, the index manifest and index files (paths relative to the table)."""
    from pypaimon.manifest.manifest_list_manager import ManifestListManager

    copied = table.copy(options) if options else table
    builder = copied.new_read_builder()
    splits = builder.new_scan().plan().splits()
    rows = _rows(builder.new_read().to_arrow(splits))
    root = table.table_path.rstrip("/") + "/"
    files = set()
    for split in splits:
        for meta in split.files:
            path = str(meta.file_path)
            path = path[len("file:"):] if path.startswith("file:") else path
            directory = path.rsplit("/", 1)[0] + "/"
            files.add(path)
            files.update(directory + extra for extra in meta.extra_files)
    lists = ManifestListManager(table)
    files.update(f"{root}manifest/{name}" for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list))
    files.update(f"{root}manifest/{m.file_name}" for m in lists.read_all(snapshot))
    if snapshot.index_manifest:
        # The index manifest and the index files it lists (a dynamic-bucket table's hash indexes): a
        # write reads them; pypaimon's IndexManifestFile reads a missing manifest as empty.
        from pypaimon.manifest.index_manifest_file import IndexManifestFile

        files.add(f"{root}manifest/{snapshot.index_manifest}")
        files.update(f"{root}index/{e.index_file.file_name}" for e in IndexManifestFile(table).read(snapshot.index_manifest))
    return {"rows": rows, "files": sorted(f[len(root):] if f.startswith(root) else f for f in files)}


def run(request: dict) -> dict:
    catalog = _catalog(request["warehouse"])
    answer: dict = {}
    schemas: dict = {}
    for step in request["steps"]:
        if "create" in step:
            name = step["create"]
            catalog.create_database(name.split(".")[0], True)
            arrow = pa.schema([(c, TYPES[t]) for c, t in step["columns"]])
            schema = Schema.from_pyarrow_schema(
                arrow, partition_keys=step.get("partition") or None, primary_keys=step.get("pk") or None,
                options=step.get("options") or {},
            )
            catalog.create_table(name, schema, False)
        elif "write" in step:
            table = catalog.get_table(step["write"])
            arrow = pa.schema([(f.name, f.type) for f in schemas.setdefault(step["write"], _arrow_schema(table))])
            data = pa.Table.from_pylist([dict(zip(arrow.names, r)) for r in step["rows"]], schema=arrow)
            builder = table.new_batch_write_builder()
            if step.get("overwrite") is not None:
                builder = builder.overwrite(step["overwrite"] or None)
            write = builder.new_write()
            write.write_arrow(data)
            messages = write.prepare_commit()
            if step.get("index"):
                messages = [_with_index_files(table, m) for m in messages]
            commit = builder.new_commit()
            if step.get("at") is not None:
                from unittest import mock

                with mock.patch("pypaimon.write.file_store_commit.time.time", return_value=step["at"] / 1000):
                    commit.commit(messages)
            else:
                commit.commit(messages)
            write.close()
            commit.close()
        elif "delete_rows" in step:
            # A data-evolution table's delete by row id: pypaimon writes it as deletion vectors (a new
            # DELETION_VECTORS index file of the bucket, and an index manifest), as Java Paimon does.
            builder = catalog.get_table(step["delete_rows"]).new_batch_write_builder()
            messages = builder.new_update().delete_by_row_id(step["row_ids"])
            commit = builder.new_commit()
            commit.commit(messages)
            commit.close()
        elif "tag" in step:
            table = catalog.get_table(step["tag"])
            table.create_tag(step["name"], snapshot_id=step.get("snapshot"), time_retained=step.get("time_retained"))
        elif "compact" in step:
            _compact(catalog.get_table(step["compact"]), step["partition"], step.get("level", 5), step.get("upgrade", False))
        elif "consumer" in step:
            from pypaimon.consumer.consumer import Consumer

            consumers = catalog.get_table(step["consumer"]).consumer_manager()
            if step["next_snapshot"] is None:
                consumers.delete_consumer(step["id"])
            else:
                consumers.reset_consumer(step["id"], Consumer(next_snapshot=step["next_snapshot"]))
        elif "consumers" in step:
            consumers = catalog.get_table(step["consumers"]).consumer_manager()
            answer[step["consumers"]] = {
                "consumers": {i: consumers.consumer(i).next_snapshot for i in sorted(consumers.list_all_ids())},
                "min": consumers.min_next_snapshot(),
            }
        elif "changelog" in step:
            answer[step.get("as", step["changelog"])] = _read_changelogs(catalog.get_table(step["changelog"]))
        elif "read" in step:
            answer[step.get("as", step["read"])] = _read_all(catalog.get_table(step["read"]))
        else:
            raise ValueError(f"unknown step {step}")
    return answer


def _with_index_files(table, message):
    import dataclasses

    files = []
    for meta in message.new_files:
        directory = str(meta.file_path).rsplit("/", 1)[0]
        directory = directory[len("file:"):] if directory.startswith("file:") else directory
        name = meta.file_name + ".index"
        with open(os.path.join(directory, name), "wb") as f:
            f.write(b"PAIMON-FILE-INDEX " + meta.file_name.encode())
        files.append(dataclasses.replace(meta, extra_files=list(meta.extra_files or []) + [name]))
    return dataclasses.replace(message, new_files=files)


def _compact(table, partition: str, level: int, upgrade: bool) -> None:
    import dataclasses

    from pypaimon.manifest.schema.manifest_entry import ManifestEntry

    builder = table.new_read_builder()
    buckets: dict = {}
    for split in builder.new_scan().plan().splits():
        if list(split.partition.values)[0] == partition:
            buckets.setdefault(split.bucket, (split.partition, []))[1].append(split)
    entries = []
    for bucket, (row, splits) in sorted(buckets.items()):
        files = {f.file_name: f for split in splits for f in split.files}
        total = table.total_buckets
        if upgrade:
            assert len(files) == 1, f"an upgrade moves one file; bucket {bucket} has {sorted(files)}"
            (old,) = files.values()
            entries.append(ManifestEntry(kind=1, partition=row, bucket=bucket, total_buckets=total, file=old))
            entries.append(ManifestEntry(kind=0, partition=row, bucket=bucket, total_buckets=total,
                                         file=dataclasses.replace(old, level=level)))
            continue
        merged = builder.new_read().to_arrow(splits)
        write_builder = table.new_batch_write_builder()
        write = write_builder.new_write()
        write.write_arrow(merged)
        messages = write.prepare_commit()
        write.close()
        new_files = [f for m in messages for f in m.new_files]
        assert all(m.bucket == bucket for m in messages), "rows of one bucket hash to it"
        for old in files.values():
            entries.append(ManifestEntry(kind=1, partition=row, bucket=bucket, total_buckets=total, file=old))
        for new in new_files:
            entries.append(ManifestEntry(kind=0, partition=row, bucket=bucket, total_buckets=total,
                                         file=dataclasses.replace(new, level=level)))
    commit = table.new_batch_write_builder().new_commit()
    commit.file_store_commit._try_commit(
        commit_kind="COMPACT", commit_identifier=2**62, commit_entries_plan=lambda snapshot: entries,
        detect_conflicts=True, allow_rollback=False,
    )
    commit.close()


def _arrow_schema(table) -> list:
    from pypaimon.schema.data_types import PyarrowFieldParser

    return list(PyarrowFieldParser.from_paimon_schema(table.fields))


def _read_changelogs(table) -> dict:
    from pypaimon.manifest.manifest_file_manager import ManifestFileManager
    from pypaimon.manifest.manifest_list_manager import ManifestListManager

    manager, found = table.snapshot_manager(), {}
    directory = os.path.join(table.table_path, "snapshot")
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    for snapshot_id in sorted(int(n[len("snapshot-"):]) for n in names if n.startswith("snapshot-")):
        try:
            snapshot = manager.get_snapshot_by_id(snapshot_id)
            window = table.copy({"incremental-between-timestamp": f"{snapshot.time_millis - 1},{snapshot.time_millis}"})
            builder = window.new_read_builder()
            rows = _rows(builder.new_read().to_arrow(builder.new_scan().plan().splits()))
            metas = ManifestListManager(table).read_changelog(snapshot)
            files = {f"manifest/{snapshot.changelog_manifest_list}"} | {f"manifest/{m.file_name}" for m in metas}
            added = {e.file.file_name for m in metas for e in ManifestFileManager(table).read(m.file_name) if e.kind == 0}
            for where, _dirs, files_here in os.walk(table.table_path):
                files.update(os.path.relpath(os.path.join(where, n), table.table_path) for n in files_here if n in added)
            found[str(snapshot_id)] = {"rows": rows, "files": sorted(files)}
        except Exception as exc:  # noqa: BLE001 - reported to the test
            found[str(snapshot_id)] = {"error": f"{type(exc).__name__}: {exc}"}
    return found


def _read_all(table) -> dict:
    snapshots, tags = {}, {}
    manager = table.snapshot_manager()
    latest = manager.get_latest_snapshot()
    names = sorted(os.listdir(os.path.join(table.table_path, "snapshot"))) if latest else []
    ids = sorted(int(n[len("snapshot-"):]) for n in names if n.startswith("snapshot-"))
    for snapshot_id in ids:
        try:
            snapshot = manager.get_snapshot_by_id(snapshot_id)
            snapshots[str(snapshot_id)] = _read(table, {"scan.snapshot-id": str(snapshot_id)}, snapshot)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            snapshots[str(snapshot_id)] = {"error": f"{type(exc).__name__}: {exc}"}
    tag_dir = os.path.join(table.table_path, "tag")
    for name in sorted(os.listdir(tag_dir)) if os.path.isdir(tag_dir) else []:
        if not name.startswith("tag-"):
            continue
        tag = name[len("tag-"):]
        try:
            tags[tag] = _read(table, {"scan.tag-name": tag}, table.tag_manager().get_or_throw(tag))
        except Exception as exc:  # noqa: BLE001
            tags[tag] = {"error": f"{type(exc).__name__}: {exc}"}
    return {"snapshots": snapshots, "tags": tags}


if __name__ == "__main__":
    json.dump(run(json.load(sys.stdin)), sys.stdout)
