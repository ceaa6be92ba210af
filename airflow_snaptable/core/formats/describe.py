"""What ``snaptable show`` says about a table (its schema, options, snapshot range, tags and consumers),
and how many files each commit added and deleted (``snaptable snapshots``, the timeline).

One description for every format, each read the way its own engine keeps it:

- this package's tables: the Arrow schema, the table options, the live data files of the latest
  snapshot (a scan's plan);
- Apache Paimon tables: Paimon's schema document as written (Paimon's type names, partition and
  primary keys, every option, not only those the lifecycle reads), the live data files counted
  from the latest snapshot's manifest lists (no manifest is read; its rows are Paimon's to read);
- Apache Iceberg tables: the current schema and partition spec, the table properties (consumer
  properties are shown as consumers), ``main``'s history, and the current snapshot's summary
  totals of data and delete files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_snaptable.core.native.snapshot import FileCounts

#: The format names of core/table.py and core/formats/iceberg/table.py.
PAIMON_FORMAT = "paimon"
ICEBERG_FORMAT = "iceberg"


@dataclass
class TableDescription:
    uri: str
    format: str
    #: Columns: {"name", "type" (the format's own type name), "nullable"}.
    schema: list[dict[str, Any]]
    #: Partition columns (Iceberg: ``transform(column)`` unless the transform is identity).
    partition_keys: list[str]
    options: dict[str, str]
    #: The retained history's ends (Iceberg: ``main``'s oldest and current snapshots).
    earliest_snapshot_id: int | None
    latest_snapshot_id: int | None
    snapshot_count: int
    #: Rows and live data files of the latest snapshot.
    total_record_count: int
    data_files: int
    #: {"name", "snapshot_id", "source"}, by snapshot.
    tags: list[dict[str, Any]] = field(default_factory=list)
    #: {"id", "next_snapshot"} (Iceberg: the position, a sequence number along main).
    consumers: list[dict[str, Any]] = field(default_factory=list)
    #: Paimon's primary keys (empty for an append table and the other formats).
    primary_keys: list[str] = field(default_factory=list)
    #: Iceberg's live delete files (None: the format keeps none this package reads).
    delete_files: int | None = None
    #: Paimon's index files (dynamic-bucket hash indexes) the latest snapshot lists (None: the format keeps none).
    index_files: int | None = None
    #: Paimon: the changelog files the latest commit wrote (None: it has no changelog).
    changelog_files: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def describe(table) -> TableDescription:
    """The description of any table ``Table.open`` returns."""
    if table.format == ICEBERG_FORMAT:
        return _iceberg(table)
    latest, earliest = table.latest_snapshot(), table.earliest_snapshot()
    if table.format == PAIMON_FORMAT:
        described = _paimon(table, latest)
    else:
        described = TableDescription(
            uri=table.uri, format=table.format,
            schema=[{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in table.arrow_schema],
            partition_keys=list(table.partition_keys), options=dict(table.schema.options),
            earliest_snapshot_id=None, latest_snapshot_id=None, snapshot_count=0, total_record_count=0,
            data_files=len(table.scan().files()) if latest else 0,
        )
    described.earliest_snapshot_id = earliest.id if earliest else None
    described.latest_snapshot_id = latest.id if latest else None
    # Ids count the commits: the range is the count (verify reports a gap in it).
    described.snapshot_count = latest.id - earliest.id + 1 if latest and earliest else 0
    described.total_record_count = latest.total_record_count if latest else 0
    described.tags = _tags(table)
    described.consumers = [{"id": c.id, "next_snapshot": c.next_snapshot} for c in table.consumers()]
    return described


def file_counts(table, snapshots, index_files: bool = False) -> dict[int, FileCounts]:
    """The data files each snapshot's commit added and deleted, by snapshot id: this package's from the
    snapshot's summary, Paimon's from its delta manifest list, Iceberg's (data and delete files) from its summary.
    ``index_files``: Paimon's also count the index files each snapshot lists (its index manifest is read)."""
    if table.format == ICEBERG_FORMAT:
        from airflow_snaptable.core.formats.iceberg.snapshots import file_counts_of

        return {snapshot.id: file_counts_of(snapshot) for snapshot in snapshots}
    if table.format == PAIMON_FORMAT:
        return table.store.files.delta_file_counts(list(snapshots), index_files=index_files)
    return table.store.files.delta_file_counts(list(snapshots))


def _tags(table) -> list[dict[str, Any]]:
    return [{"name": t.name, "snapshot_id": t.snapshot_id, "source": t.source} for t in table.tags()]


def _paimon(table, latest) -> TableDescription:
    from airflow_snaptable.core.formats.paimon.schema import read_document

    doc = read_document(table.storage)
    return TableDescription(
        uri=table.uri, format=table.format,
        schema=[
            {"name": f["name"], "type": paimon_type_text(f["type"]), "nullable": "NOT NULL" not in paimon_type_text(f["type"]).upper()}
            for f in doc.get("fields") or []
        ],
        partition_keys=list(doc.get("partitionKeys") or []),
        primary_keys=list(doc.get("primaryKeys") or []),
        options={str(k): str(v) for k, v in sorted((doc.get("options") or {}).items())},
        earliest_snapshot_id=None, latest_snapshot_id=None, snapshot_count=0, total_record_count=0,
        data_files=table.store.files.live_file_count(latest) if latest else 0,
        index_files=len(table.store.files.index_files(latest)) if latest else 0,
        changelog_files=table.store.files.delta_file_counts([latest], index_files=True)[latest.id].changelog_files if latest else None,
    )


def paimon_type_text(paimon_type) -> str:
    """Paimon's type as its SQL text: a string as written; a nested type (a JSON object) spelled out."""
    if not isinstance(paimon_type, dict):
        return str(paimon_type)
    kind = str(paimon_type.get("type", ""))
    base, _, rest = kind.partition(" ")
    suffix = f" {rest}" if rest else ""
    if base.upper() in ("ARRAY", "MULTISET"):
        return f"{base}<{paimon_type_text(paimon_type.get('element'))}>{suffix}"
    if base.upper() == "MAP":
        return f"{base}<{paimon_type_text(paimon_type.get('key'))}, {paimon_type_text(paimon_type.get('value'))}>{suffix}"
    if base.upper() == "ROW":
        fields = ", ".join(f"{f.get('name')} {paimon_type_text(f.get('type'))}" for f in paimon_type.get("fields") or [])
        return f"{base}<{fields}>{suffix}"
    return kind


def _iceberg(table) -> TableDescription:
    from airflow_snaptable.core.formats.iceberg.consumers import PROPERTY_PREFIX

    iceberg = table.refresh()
    schema = iceberg.schema()
    partition_keys = []
    for spec_field in iceberg.spec().fields:
        column = schema.find_column_name(spec_field.source_id)
        transform = str(spec_field.transform)
        partition_keys.append(column if transform == "identity" else f"{transform}({column})")
    history = table.snapshots()  # main's, oldest first
    summary = (history[-1].summary or {}) if history else {}
    return TableDescription(
        uri=table.uri, format=table.format,
        schema=[{"name": f.name, "type": str(f.field_type), "nullable": not f.required} for f in schema.fields],
        partition_keys=partition_keys,
        options={k: v for k, v in sorted((iceberg.metadata.properties or {}).items()) if not k.startswith(PROPERTY_PREFIX)},
        earliest_snapshot_id=history[0].id if history else None,
        latest_snapshot_id=history[-1].id if history else None,
        snapshot_count=len(history),
        total_record_count=history[-1].total_record_count if history else 0,
        data_files=int(summary.get("total-data-files") or 0),
        delete_files=int(summary.get("total-delete-files") or 0),
        tags=_tags(table),
        consumers=[{"id": c.id, "next_snapshot": c.next_snapshot} for c in table.consumers()],
    )
