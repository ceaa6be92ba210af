"""Paimon's index files: a snapshot's ``indexManifest`` and the ``index/`` files it lists.

A snapshot's ``indexManifest`` names an Avro file in ``manifest/`` (``index-manifest-<uuid>``)
of ``IndexManifestEntry`` records: ``_KIND``, ``_PARTITION``, ``_BUCKET`` and the
``IndexFileMeta`` fields ``_INDEX_TYPE``, ``_FILE_NAME``, ``_FILE_SIZE``, ``_ROW_COUNT``,
``_DELETIONS_VECTORS_RANGES``, ``_EXTERNAL_PATH``, ``_GLOBAL_INDEX``. Unlike a manifest list it
is the whole index state of the snapshot (Paimon's ``IndexManifestFileHandler`` writes the
previous entries combined with the commit's), and an index file is written once and never
changed (``index/index-<uuid>-<n>``): a new hash index or new deletion vectors of a bucket are a
new file.

So an index file and an index manifest are metadata of every snapshot that lists them, freed
as Paimon frees them (``FileDeletionBase.cleanUnusedIndexManifests``: an expired snapshot's index
manifest and index files, less those a retained snapshot or a tag lists). Two index types:
HASH (a dynamic bucket's key hashes) and DELETION_VECTORS (the deleted rows of data files of the
bucket, named in ``_DELETIONS_VECTORS_RANGES``). A snapshot that lists a deletion-vector file
reads the data files it applies to, and the data files a retained snapshot reads stay, as do the
index files it lists: so a deletion vector never outlives the retained snapshots that read its
data file, nor goes while one of them reads it.

Fail closed (UnsupportedMetadataError): other index types (global indexes), index files at
external paths or beside the data files (``_EXTERNAL_PATH``, ``index-file-in-data-file-dir``),
record versions other than 1, names that do not follow Paimon's prefixes (the directory of a
name in a deletion plan is told by its prefix).
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_snaptable.core.errors import CorruptMetadataError, UnsupportedMetadataError
from airflow_snaptable.core.formats.paimon.avro import read_avro
from airflow_snaptable.core.formats.paimon.binary_row import PartitionLayout
from airflow_snaptable.core.io.table_paths import checked_file_name

INDEX_DIR = "index"
#: Paimon's name prefixes (FileStorePathFactory): an index manifest in manifest/, an index file in index/.
INDEX_MANIFEST_PREFIX = "index-manifest-"
INDEX_FILE_PREFIX = "index-"
#: The ``_VERSION`` of IndexManifestEntry records (IndexManifestEntrySerializer).
INDEX_RECORD_VERSION = 1
HASH_INDEX = "HASH"
DELETION_VECTORS_INDEX = "DELETION_VECTORS"
#: The table option that moves index files into the bucket directories (Paimon >= 1.2).
IN_DATA_DIR_OPTION = "index-file-in-data-file-dir"


@dataclass(frozen=True)
class IndexFile:
    """One ``IndexManifestEntry``: an index file of a bucket."""

    kind: int
    partition: tuple
    bucket: int
    index_type: str
    name: str
    size: int
    row_count: int
    #: A deletion-vector index file's data files (the names in its ``_DELETIONS_VECTORS_RANGES``, in its bucket).
    applies_to: tuple[str, ...] = ()


def is_index_file_name(name: str) -> bool:
    """Is the metadata name an index file (in ``index/``) rather than a manifest, list or index manifest (in ``manifest/``)?"""
    return name.startswith(INDEX_FILE_PREFIX) and not name.startswith(INDEX_MANIFEST_PREFIX)


def checked_index_manifest_name(name, where: str) -> str:
    name = checked_file_name(name, "index manifest name (indexManifest)", where)
    if not name.startswith(INDEX_MANIFEST_PREFIX):
        raise UnsupportedMetadataError(f"{where}: index manifest {name!r} does not start with {INDEX_MANIFEST_PREFIX!r}")
    return name


def check_index_options(options: dict, where: str) -> None:
    if str(options.get(IN_DATA_DIR_OPTION, "false")).strip().lower() == "true":
        raise UnsupportedMetadataError(f"{where}: index files in the data file directories ({IN_DATA_DIR_OPTION}) are not supported")


def parse_index_manifest(data: bytes, layout: PartitionLayout, where: str) -> list[IndexFile]:
    found = []
    for record in read_avro(data, where):
        version = record.get("_VERSION")
        if version != INDEX_RECORD_VERSION:
            raise UnsupportedMetadataError(f"{where}: index record version {version!r} is not {INDEX_RECORD_VERSION}")
        try:
            index_type = record["_INDEX_TYPE"]
            name = checked_file_name(record["_FILE_NAME"], "index file name", where)
            if index_type not in (HASH_INDEX, DELETION_VECTORS_INDEX):
                raise UnsupportedMetadataError(
                    f"{where}: index file {name} is of type {index_type!r}; only dynamic bucket indexes ({HASH_INDEX}) and"
                    f" deletion vectors ({DELETION_VECTORS_INDEX}) are supported (global indexes are not)"
                )
            if record.get("_EXTERNAL_PATH") or record.get("_GLOBAL_INDEX") is not None:
                raise UnsupportedMetadataError(f"{where}: index file {name} at an external path or a global index is not supported")
            if not is_index_file_name(name):
                raise UnsupportedMetadataError(f"{where}: index file {name!r} does not start with {INDEX_FILE_PREFIX!r}")
            kind = record["_KIND"]
            if kind not in (0, 1):
                raise UnsupportedMetadataError(f"{where}: index manifest entry kind {kind!r} is not supported")
            ranges = record.get("_DELETIONS_VECTORS_RANGES") or ()
            found.append(IndexFile(
                kind=kind, partition=layout.decode(record["_PARTITION"]), bucket=int(record["_BUCKET"]),
                index_type=index_type, name=name, size=int(record["_FILE_SIZE"]), row_count=int(record["_ROW_COUNT"]),
                applies_to=tuple(checked_file_name(r["f0"], "data file of a deletion vector", where) for r in ranges),
            ))
        except (UnsupportedMetadataError, CorruptMetadataError):
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptMetadataError(f"{where}: bad index manifest entry: {exc}") from exc
    return found
