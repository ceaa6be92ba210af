"""Rewriting an Iceberg table's manifests (Iceberg's ``RewriteManifests``): the current snapshot's data
manifests clustered by partition into manifests near ``commit.manifest.target-size-bytes``.

After many small appends each partition's files are spread over one manifest per commit, and
planning a scan of one partition opens them all. Rewritten, a spec's live entries are sorted by
partition and cut into manifests of about the target size, so a partition's files sit in one or
a few manifests whose partition summaries let a planner skip the rest.

- Entries keep their status' meaning: every live file becomes EXISTING with the snapshot id and
  sequence numbers it had (no row changes; incremental readers see no new data).
- Delete manifests are kept as they are (only data manifests are clustered).
- The commit is a ``replace`` snapshot (replace_commit.py); a concurrent commit makes it plan
  again on the new head (the rewrite reads metadata only), until the attempts run out.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_snaptable.core.errors import CommitConflictError
from airflow_snaptable.core.formats.iceberg.counted_io import CountedFileIO
from airflow_snaptable.core.formats.iceberg.replace_commit import (
    CommitOutcomeUnknownError,
    ReplaceConflict,
    check_format_version,
    commit_replace,
    live_entries_by_manifest,
    snapshot_manifests,
    target_size,
)

TARGET_MANIFEST_SIZE_PROPERTY = "commit.manifest.target-size-bytes"
DEFAULT_TARGET_MANIFEST_SIZE = 8 * 1024**2


@dataclass
class ManifestRewriteResult:
    snapshot_id: int | None
    dry_run: bool
    target_manifest_size: int
    manifests_before: int
    manifests_after: int
    #: Data manifests replaced and written (delete manifests are kept as they are).
    rewritten_manifests: int
    added_manifests: int
    entries: int


def _target(iceberg, given) -> int:
    return target_size(iceberg.metadata, given, "target_manifest_size", TARGET_MANIFEST_SIZE_PROPERTY, DEFAULT_TARGET_MANIFEST_SIZE)


def _sort_key(partition) -> tuple:
    """Partition values in order, None first, values of different types kept apart."""
    return tuple((value is not None, type(value).__name__, value) for value in partition)


@dataclass
class _Clustered:
    data_manifests: list
    bins: dict[int, list[list]]  # spec id -> entries per new manifest
    entries: int


def _cluster(head, file_io, metadata, target: int) -> _Clustered:
    from pyiceberg.manifest import ManifestContent

    manifests = snapshot_manifests(head, file_io)
    data = [m for m in manifests if m.content == ManifestContent.DATA]
    live = live_entries_by_manifest(data, file_io, metadata)
    by_spec: dict[int, list] = {}
    total_bytes = total_entries = 0
    for manifest in data:
        entries = live[manifest.manifest_path]
        by_spec.setdefault(manifest.partition_spec_id, []).extend(entries)
        total_bytes += manifest.manifest_length
        counts = (manifest.added_files_count, manifest.existing_files_count, manifest.deleted_files_count)
        total_entries += sum(c or 0 for c in counts) if None not in counts else len(entries)
    # A new manifest's size is estimated from what the old ones cost per entry (Iceberg's RollingManifestWriter counts the same way).
    per_entry = total_bytes / total_entries if total_entries else 1
    per_manifest = max(1, int(target / per_entry))
    bins: dict[int, list[list]] = {}
    for spec_id, entries in by_spec.items():
        entries.sort(key=lambda e: (_sort_key(e.data_file.partition), e.data_file.file_path))
        bins[spec_id] = [entries[i:i + per_manifest] for i in range(0, len(entries), per_manifest)]
    return _Clustered(data, bins, sum(len(e) for e in by_spec.values()))


def _changes(planned: _Clustered, new_count: int, target: int) -> bool:
    """Would the rewrite change anything? Not when it writes as many manifests and none is over the target
    (a spec in one manifest is already clustered): no snapshot then, as no data changed."""
    return new_count != len(planned.data_manifests) or any(m.manifest_length > target for m in planned.data_manifests)


def rewrite_manifests(table, target_manifest_size=None, dry_run: bool = False) -> ManifestRewriteResult:
    """Rewrite the data manifests of ``table``'s current snapshot (``table``: an IcebergTable)."""
    iceberg = table.refresh()
    target = _target(iceberg, target_manifest_size)
    check_format_version(iceberg.metadata, table.uri, "manifest rewriting")
    head = iceberg.metadata.current_snapshot()
    file_io = CountedFileIO(table.storage, iceberg.location(), iceberg.io.properties)
    if head is None:
        return ManifestRewriteResult(None, dry_run, target, 0, 0, 0, 0, 0)
    before = len(snapshot_manifests(head, file_io))
    planned = _cluster(head, file_io, iceberg.metadata, target)
    new_count = sum(len(b) for b in planned.bins.values())
    result = ManifestRewriteResult(None, dry_run, target, before, before - len(planned.data_manifests) + new_count, len(planned.data_manifests), new_count, planned.entries)
    if dry_run or not _changes(planned, new_count, target):
        return result

    def build(writer, current):
        from pyiceberg.manifest import ManifestContent

        clustered = planned if current.snapshot_id == head.snapshot_id else _cluster(current, writer.file_io, writer.metadata, target)
        written = []
        for spec_id in sorted(clustered.bins):
            for entries in clustered.bins[spec_id]:
                with writer.manifest_writer(spec_id) as out:
                    for entry in entries:
                        out.existing(entry)
                written.append(out.to_manifest_file())
        kept = [m for m in snapshot_manifests(current, writer.file_io) if m.content != ManifestContent.DATA]
        from pyiceberg.table.snapshots import Operation, Summary

        summary = Summary(
            Operation.REPLACE,
            **{k: v for k, v in (current.summary.additional_properties if current.summary else {}).items() if k.startswith("total-")},
            **{"manifests-created": str(len(written)), "manifests-replaced": str(len(clustered.data_manifests)),
               "manifests-kept": str(len(kept)), "entries-processed": str(clustered.entries)},
        )
        result.rewritten_manifests, result.added_manifests = len(clustered.data_manifests), len(written)
        result.manifests_after = len(written) + len(kept)
        return written + kept, summary

    try:
        result.snapshot_id = commit_replace(
            table.refresh, file_io, iceberg.metadata.new_snapshot_id(), iceberg.metadata.current_schema_id, build, table.uri,
        )
    except CommitOutcomeUnknownError:
        raise  # it may have landed: what it wrote may be in use
    except ReplaceConflict as exc:
        file_io.delete_written()
        raise CommitConflictError(f"{table.uri}: manifest rewriting conflicts with a concurrent commit: {exc}") from exc
    except Exception:
        file_io.delete_written()  # certainly not committed
        raise
    return result
