"""pyiceberg snapshots as this package's Snapshot (the actions' and sensors' view of them)."""

from __future__ import annotations

from airflow_snaptable.core.native.snapshot import CommitKind, FileCounts, Snapshot

#: Summary keys of the files a commit added and removed (Iceberg's SnapshotSummary): data files and delete files.
_ADDED = ("added-data-files", "added-delete-files")
_DELETED = ("deleted-data-files", "removed-delete-files")
_KINDS = {"append": CommitKind.APPEND, "overwrite": CommitKind.OVERWRITE, "delete": CommitKind.DELETE, "replace": CommitKind.COMPACT}


def snapshot_of(snapshot) -> Snapshot:
    """A pyiceberg snapshot as this package's Snapshot (id: Iceberg's snapshot id)."""
    summary = dict(snapshot.summary.additional_properties) if snapshot.summary else {}
    operation = snapshot.summary.operation.value if snapshot.summary else "append"
    summary["operation"] = operation
    summary["sequence-number"] = snapshot.sequence_number
    return Snapshot(
        id=snapshot.snapshot_id,
        parent_id=snapshot.parent_snapshot_id,
        schema_id=snapshot.schema_id or 0,
        commit_kind=_KINDS.get(operation, CommitKind.APPEND),
        commit_user="",
        commit_identifier=None,
        time_millis=snapshot.timestamp_ms,
        total_record_count=int(summary.get("total-records", 0) or 0),
        delta_record_count=int(summary.get("added-records", 0) or 0),
        watermark=None,
        base_manifest_list=snapshot.manifest_list,
        delta_manifest_list="",
        summary=summary,
    )


def file_counts_of(snapshot: Snapshot) -> FileCounts:
    """The data and delete files the snapshot's commit added and removed, as its summary counts them."""
    summary = snapshot.summary or {}

    def total(keys) -> int:
        return sum(int(summary.get(key) or 0) for key in keys)

    return FileCounts(total(_ADDED), total(_DELETED))
