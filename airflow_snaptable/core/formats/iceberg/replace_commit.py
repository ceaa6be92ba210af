"""One Iceberg ``replace`` snapshot on ``main``: what compaction and manifest rewriting commit.

A replace snapshot changes files or manifests, never rows. It is committed the way Iceberg's
``RewriteFiles`` / ``RewriteManifests`` commit (``SnapshotProducer``):

- the new manifest list is built on ``main``'s head *at commit time*, so a concurrent append
  survives: after a lost race the list is built again on the new head, with the same new files;
- before each attempt the caller validates the commits in between (``validate(head)``): what
  they changed may make the replace wrong (a rewritten file deleted meanwhile), which is a
  :class:`ReplaceConflict`, never an overwrite of their change;
- the catalog swap asserts the table, ``main``'s head and the schema the files were written
  with; a lost swap removes that attempt's manifest list and manifests, a commit whose outcome
  is unknown removes nothing.

Format v3 tables fail closed: their snapshots assign row ids (``first-row-id``, row lineage), which a
replace must carry over for every row it moves, and pyiceberg writes no v3 manifests yet.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException
from pyiceberg.manifest import ManifestContent, ManifestFile, write_manifest_list

from airflow_snaptable.core.arguments.table_options import parse_size
from airflow_snaptable.core.errors import CommitFailedError, InvalidArgumentError, InvalidOptionError, UnsupportedMetadataError
from airflow_snaptable.core.formats.iceberg.counted_io import CountedFileIO
from airflow_snaptable.core.formats.iceberg.manifest_avro import Entry, ManifestWriter, read_entries

#: Catalog swaps a replace tries against commits that do not conflict with it (appends), as Iceberg's ``commit.retry.num-retries``.
COMMIT_ATTEMPTS = 5


class CommitOutcomeUnknownError(CommitFailedError):
    """The catalog did not say whether the commit landed: nothing it wrote may be removed (orphan removal
    judges later, by what the metadata references)."""


class ReplaceConflict(Exception):
    """A commit since the plan changed what the replace depends on: the plan must be made again."""


def check_format_version(metadata, uri: str, doing: str) -> None:
    if metadata.format_version >= 3:
        raise UnsupportedMetadataError(
            f"{uri}: {doing} of format v3 tables is not supported: v3 snapshots carry row lineage (first-row-id), "
            "so a rewrite must keep each moved row's _row_id and _last_updated_sequence_number (written as columns of "
            "the new files) and manifests must keep first_row_id; pyiceberg writes no v3 manifests yet"
        )


def live_entries(manifest: ManifestFile, file_io, metadata) -> list[Entry]:
    """The manifest's live entries, read with fastavro (manifest_avro.py); read once per FileIO (a manifest is
    never rewritten in place, so its path names the same entries when the commit reads it again after the plan).
    ``metadata``: the table's, whose specs and schema type the partition values."""
    cache = getattr(file_io, "entries", None)
    if cache is not None and manifest.manifest_path in cache:
        return cache[manifest.manifest_path]
    entries = read_entries(manifest, file_io, metadata, discard_deleted=True)
    if cache is not None:
        cache[manifest.manifest_path] = entries
    return entries


def snapshot_manifests(snapshot, file_io) -> list[ManifestFile]:
    """The snapshot's manifests (pyiceberg's manifest list reader); the list read once per FileIO (a manifest
    list is immutable: the plan and the commit on the same head read it once)."""
    cache = getattr(file_io, "manifest_lists", None)
    if cache is not None and snapshot.manifest_list in cache:
        return cache[snapshot.manifest_list]
    manifests = list(snapshot.manifests(file_io))
    if cache is not None:
        cache[snapshot.manifest_list] = manifests
    return manifests


def live_entries_by_manifest(manifests: list[ManifestFile], file_io: CountedFileIO, metadata) -> dict[str, list[Entry]]:
    """Each manifest's live entries, by its path: how compaction and manifest rewriting walk a snapshot's
    manifests (read in one bulk read first, then each decoded once per FileIO)."""
    prefetch_entries(manifests, file_io, metadata)
    return {manifest.manifest_path: live_entries(manifest, file_io, metadata) for manifest in manifests}


def target_size(metadata, given: Any, argument: str, table_property: str, default: int) -> int:
    """A rewrite's target size in bytes: the ``argument`` when given (``"128 mb"`` or a byte count), else the
    table's ``table_property``, else Iceberg's ``default``."""
    if given is not None:
        try:
            return parse_size(given, argument)
        except (ValueError, InvalidOptionError) as exc:
            raise InvalidArgumentError(str(exc)) from None
    text = metadata.properties.get(table_property)
    try:
        value = default if text is None else int(text)
    except ValueError:
        raise InvalidArgumentError(f"table property {table_property} must be a number of bytes, got {text!r}") from None
    if value <= 0:
        raise InvalidArgumentError(f"table property {table_property} must be positive, got {value}")
    return value


def prefetch_entries(manifests: list[ManifestFile], file_io: CountedFileIO, metadata) -> None:
    """Read the manifests whose entries are not known yet in one bulk read (Storage.read_many: in parallel on
    remote storage, on the executors in the Spark job), so that live_entries finds them. A manifest
    missing here is left to live_entries, which fails on it."""
    wanted = list({m.manifest_path: m for m in manifests if m.manifest_path not in file_io.entries}.values())
    if len(wanted) < 2:
        return
    for start in range(0, len(wanted), _PREFETCH_BATCH):  # the bytes of a batch at a time, decoded as they come
        rels = {m.manifest_path: file_io.relative(m.manifest_path) for m in wanted[start:start + _PREFETCH_BATCH]}
        contents = file_io.storage.read_many(list(rels.values()))
        for manifest in wanted[start:start + _PREFETCH_BATCH]:
            data = contents.pop(rels[manifest.manifest_path], None)
            if data is not None:
                file_io.entries[manifest.manifest_path] = read_entries(manifest, file_io, metadata, discard_deleted=True, data=data)


#: Manifests read per bulk read: the bytes of one batch are held at a time; as many as the Spark job's
#: bulk reads send to the executors (spark/maintenance.py DEFAULT_READ_THRESHOLD).
_PREFETCH_BATCH = 5000


def check_no_delete_files(manifests: list[ManifestFile], file_io, metadata, uri: str, found: str | None = None) -> None:
    """Delete files fail a compaction closed: rewriting rows they delete would bring the rows back.
    ``found``: a delete file already seen (in a manifest that says it holds data)."""
    for manifest in manifests:
        if found is not None or (manifest.content == ManifestContent.DELETES and live_entries(manifest, file_io, metadata)):
            raise UnsupportedMetadataError(
                f"{uri}: the current snapshot has delete files ({found or manifest.manifest_path}); compacting it needs the "
                "position and equality deletes applied to the rows rewritten, the applied delete files removed, and the "
                "new files given the old data sequence number so that newer equality deletes still apply; not supported yet"
            )


@dataclass
class ReplaceWriter:
    """Writes the manifests and manifest list of one replace snapshot through a counted FileIO."""

    table: object  # the pyiceberg Table the commit is made on
    file_io: CountedFileIO
    snapshot_id: int

    def __post_init__(self):
        self._uuid = uuid.uuid4()
        self._count = 0

    @property
    def metadata(self):
        return self.table.metadata

    def _compression(self):
        from pyiceberg.table import TableProperties

        return self.metadata.properties.get(TableProperties.WRITE_AVRO_COMPRESSION, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)

    def manifest_writer(self, spec_id: int) -> ManifestWriter:
        """A manifest of ``spec_id`` written with fastavro as pyiceberg's ``write_manifest`` writes it (manifest_avro.py)."""
        self._count += 1
        path = self.table.location_provider().new_metadata_location(f"{self._uuid}-m{self._count}.avro")
        return ManifestWriter(self.file_io.new_output(path), self.metadata, spec_id, self.snapshot_id, self._compression())

    def manifest_list(self, manifests: list[ManifestFile], parent_id: int | None, attempt: int) -> str:
        path = self.table.location_provider().new_metadata_location(f"snap-{self.snapshot_id}-{attempt}-{self._uuid}.avro")
        with write_manifest_list(
            format_version=self.metadata.format_version, output_file=self.file_io.new_output(path), snapshot_id=self.snapshot_id,
            parent_snapshot_id=parent_id, sequence_number=self.metadata.next_sequence_number(), avro_compression=self._compression(),
        ) as writer:
            writer.add_manifests(manifests)
        return path


def replace_summary(metadata, parent, added: list, removed: list, extra: dict[str, str]):
    """A ``replace`` summary with Iceberg's totals: pyiceberg's collector, its totals, the operation replace."""
    from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector, Summary, update_snapshot_summaries

    collector = SnapshotSummaryCollector()
    schema, specs = metadata.schema(), metadata.specs()
    #: Each partition's path, made once (10,000 files of 10 partitions: 10 paths): what the collector's
    #: add_file and remove_file do, file by file.
    paths: dict[tuple, str] = {}

    def account(data_file, adding: bool) -> None:
        (collector.metrics.add_file if adding else collector.metrics.remove_file)(data_file)
        partition = data_file.partition
        if len(partition) > 0:
            key = (data_file.spec_id, tuple(partition[i] for i in range(len(partition))))
            path = paths.get(key)
            if path is None:
                path = paths[key] = specs[data_file.spec_id].partition_to_path(partition, schema)
            metrics = collector.partition_metrics[path]
            (metrics.add_file if adding else metrics.remove_file)(data_file)

    for data_file in added:
        account(data_file, True)
    for data_file in removed:
        account(data_file, False)
    totals = update_snapshot_summaries(
        Summary(Operation.OVERWRITE, **collector.build()), parent.summary if parent is not None else None,
    )
    properties = {key: value for key, value in totals.additional_properties.items()}
    return Summary(Operation.REPLACE, **properties, **extra)


def commit_replace(
    refresh: Callable[[], object],
    file_io: CountedFileIO,
    snapshot_id: int,
    schema_id: int,
    build: Callable[[ReplaceWriter, object], tuple[list[ManifestFile], object]],
    uri: str,
) -> int:
    """Commit the replace snapshot ``snapshot_id`` on ``main``; its manifests and summary come from
    ``build(writer, head_snapshot)``, called on every attempt with ``main``'s head then (it raises
    ReplaceConflict when the head's changes conflict with the replace). Returns the snapshot id."""
    from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
    from pyiceberg.table.snapshots import Snapshot
    from pyiceberg.table.update import (
        AddSnapshotUpdate,
        AssertCurrentSchemaId,
        AssertRefSnapshotId,
        AssertTableUUID,
        SetSnapshotRefUpdate,
    )

    for attempt in range(COMMIT_ATTEMPTS):
        table = refresh()
        metadata = table.metadata
        if metadata.current_schema_id != schema_id:
            raise ReplaceConflict(f"the schema changed from {schema_id} to {metadata.current_schema_id}")
        head = metadata.snapshot_by_name(MAIN_BRANCH)
        writer = ReplaceWriter(table, file_io, snapshot_id)
        attempt_start = len(file_io.written)
        manifests, summary = build(writer, head)
        manifest_list = writer.manifest_list(manifests, head.snapshot_id if head else None, attempt)
        snapshot = Snapshot(
            snapshot_id=snapshot_id, parent_snapshot_id=head.snapshot_id if head else None, manifest_list=manifest_list,
            sequence_number=metadata.next_sequence_number(), summary=summary, schema_id=schema_id,
        )
        updates = (
            AddSnapshotUpdate(snapshot=snapshot),
            SetSnapshotRefUpdate(snapshot_id=snapshot_id, parent_snapshot_id=snapshot.parent_snapshot_id, ref_name=MAIN_BRANCH, type=SnapshotRefType.BRANCH),
        )
        requirements = (
            AssertTableUUID(uuid=metadata.table_uuid),
            AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=head.snapshot_id if head else None),
            AssertCurrentSchemaId(current_schema_id=schema_id),
        )
        try:
            table.catalog.commit_table(table, requirements, updates)
            return snapshot_id
        except CommitStateUnknownException as exc:  # it may have landed: nothing it wrote may go
            raise CommitOutcomeUnknownError(f"{uri}: the catalog did not say whether the replace snapshot {snapshot_id} landed: {exc}") from exc
        except CommitFailedException as exc:
            # This attempt's manifest list and manifests are nobody's: remove them, keep the new data files and added manifests.
            attempt_files, file_io.written = file_io.written[attempt_start:], file_io.written[:attempt_start]
            _remove_quietly(file_io, attempt_files)
            if attempt == COMMIT_ATTEMPTS - 1:
                raise CommitFailedError(f"{uri}: concurrent commits kept moving main; the replace did not land: {exc}") from exc
            time.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


def _remove_quietly(file_io: CountedFileIO, paths: list[str]) -> None:
    try:
        file_io.storage.delete_files([file_io.relative(path) for path in paths])
    except OSError:
        pass  # left to orphan removal
