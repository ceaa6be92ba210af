"""Apache Paimon tables (filesystem catalog layout) through the store seam: see docs/format.md.

``Table.open("<warehouse>/<db>.db/<table>")`` finds Paimon's ``schema/schema-<id>`` and opens the
table through four stores over Paimon's own files (snapshots.py, files.py, tags.py); the lifecycle
engine runs on them unchanged, and keeps its own files (plans, intents) in ``snaptable/``, a
directory Paimon never reads. Rows are Paimon's to write and to read (merge-on-read, deletion
vectors, schema evolution): the table is not readable here.

Before anything is deleted, what this store does not understand fails closed with
UnsupportedMetadataError naming it: branches (``branch/``), decoupled changelogs (``changelog/``,
or changelog options that keep the changelog longer than the snapshots: changelogs.py),
statistics files in a snapshot, index files other than dynamic-bucket hash indexes and deletion
vectors in ``index/`` (index_manifests.py), external data paths, unknown format versions.
"""

from __future__ import annotations

from typing import Callable

from airflow_snaptable.core.errors import CorruptMetadataError, UnsupportedMetadataError
from airflow_snaptable.core.formats.paimon.binary_row import PartitionLayout
from airflow_snaptable.core.formats.paimon.changelogs import check_changelog_options
from airflow_snaptable.core.formats.paimon.files import PaimonFiles
from airflow_snaptable.core.formats.paimon.index_manifests import check_index_options
from airflow_snaptable.core.formats.paimon.schema import is_paimon_schema, partition_types, read_document, schema_ids, to_table_schema
from airflow_snaptable.core.formats.paimon.snapshots import PaimonSnapshotStore
from airflow_snaptable.core.formats.paimon.tags import PaimonConsumerStore, PaimonTagStore
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.store import FormatTable, TableStore

FORMAT = "paimon"
#: The engine's own directory inside the table (plan/, intent/, readd/): Paimon never reads it.
LIFECYCLE_DIR = "snaptable"
#: Directories of Paimon features whose files this store does not track.
_UNSUPPORTED_DIRS = {"branch": "branches (branch/)", "changelog": "decoupled changelog files (changelog/)"}


class LifecycleStorage(Storage):
    """A Storage rooted at a directory of the table whose operations count (and ``on_operation``) on the table's."""

    def __init__(self, parent: Storage, directory: str):
        super().__init__(parent.fs, parent.full_path(directory), parent.full_uri(directory))
        self._parent = parent
        self._directory = directory

    def _op(self, kind: str, rel: str, n: int = 1) -> None:
        self._parent._op(kind, f"{self._directory}/{rel}" if rel else self._directory, n)


def is_paimon_table(storage: Storage) -> bool:
    """Does the directory hold a Paimon table (its latest schema is Paimon's JSON)?"""
    if not schema_ids(storage):
        return False
    try:
        return is_paimon_schema(read_document(storage))
    except CorruptMetadataError:
        return False  # this package's reader reports it


def check_supported(storage: Storage) -> None:
    for directory, feature in _UNSUPPORTED_DIRS.items():
        if any(not name.startswith(".") for name in storage.list_names(directory)):
            raise UnsupportedMetadataError(f"{storage.uri}: Paimon {feature} are not supported")


def open_paimon_table(storage: Storage, clock: Callable[[], int]) -> FormatTable:
    check_supported(storage)
    doc = read_document(storage)
    where = storage.full_uri("schema")
    schema = to_table_schema(doc, where)
    raw_options = doc.get("options") or {}
    check_index_options(raw_options, where)
    check_changelog_options(raw_options, where)
    layout = PartitionLayout(
        keys=schema.partition_keys,
        types=partition_types(doc),
        default_name=str(raw_options.get("partition.default-name", "__DEFAULT_PARTITION__")),
        legacy_name=str(raw_options.get("partition.legacy-name", "true")).strip().lower() != "false",
    )
    layout.check()
    store = TableStore(
        storage.uri,
        snapshots=PaimonSnapshotStore(storage),
        files=PaimonFiles(storage, layout, LIFECYCLE_DIR),
        tags=PaimonTagStore(storage),
        consumers=PaimonConsumerStore(storage),
        lifecycle=LifecycleStorage(storage, LIFECYCLE_DIR),
    )
    return FormatTable(format=FORMAT, schema=schema, store=store, storage=storage, readable=False)
