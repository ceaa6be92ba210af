"""Streaming reads: ``spark.readStream.format("snaptable")`` on core's StreamScan.

Offsets are JSON dicts ``{"snapshot": N, "full": F}``: the next snapshot to read,
and whether its full state (rather than its delta) is still to be read (the
first batch of the ``*-full`` start modes). Options:

- ``scan.mode``: latest-full (default), latest, from-snapshot, from-snapshot-full,
  from-timestamp (Paimon's start modes); ``scan.snapshot-id``; ``scan.timestamp``
  (ISO time or epoch millis; ``scan.timestamp-millis`` too).
- ``consumer-id``: the table's consumer records the stream's progress (what Spark
  has finished), so snapshot expiry keeps everything the stream still needs; a
  new query (no checkpoint) with the same consumer id resumes from it.
- ``max-files-per-trigger``: a soft admission limit: every batch takes at least
  one snapshot, then more while the file count stays within the limit.
- ``streaming-read-overwrite``: also emit the rows OVERWRITE snapshots add.
- ``Trigger.AvailableNow`` reads up to the latest snapshot when the query starts.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxFiles, ReadMaxRows, SupportsTriggerAvailableNow

from airflow_snaptable.core.errors import InvalidArgumentError, StreamPositionLostError
from airflow_snaptable.core.lifecycle.changes import START_MODES, StreamScan
from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.table import Table
from airflow_snaptable.spark._common import (
    DEFAULT_SPLIT_SIZE,
    bool_option,
    group_files,
    int_option,
    size_option,
    storage_options_from,
    table_uri,
)
from airflow_snaptable.spark.read_tasks import FilesPartition, TableFiles

FULL_MODES = ("latest-full", "from-snapshot-full")


def offset(snapshot_id: int, full: bool = False) -> dict:
    return {"snapshot": int(snapshot_id), "full": bool(full)}


def parse_offset(value: dict) -> tuple[int, bool]:
    try:
        return int(value["snapshot"]), bool(value.get("full", False))
    except (KeyError, TypeError, ValueError):
        raise InvalidArgumentError(f"not a snaptable stream offset: {value!r}") from None


class SnapTableStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict, schema):
        uri = table_uri(options)
        storage_options = storage_options_from(options)
        table = Table.open(uri, storage_options)
        self.files_reader = TableFiles(uri, storage_options, table.schema, schema)
        self.mode = str(options.get("scan.mode") or "latest-full").strip().lower()
        if self.mode not in START_MODES:
            raise InvalidArgumentError(f"scan.mode must be one of {', '.join(START_MODES)}; got {self.mode!r}")
        self.start_snapshot_id = int_option(options, "scan.snapshot-id", minimum=1)
        timestamp = options.get("scan.timestamp") or options.get("scan.timestamp-millis")
        if timestamp is not None:
            text = str(timestamp).strip()
            timestamp = int(text) if text.isdigit() else text
        self.start_timestamp = timestamp
        self.include_overwrite = bool_option(options, "streaming-read-overwrite")
        self.consumer_id = options.get("consumer-id") or None
        if self.consumer_id is not None:
            validate_name(self.consumer_id, "consumer")
        self.max_files = int_option(options, "max-files-per-trigger", minimum=1)
        self.split_size = size_option(options, "read.split-size", DEFAULT_SPLIT_SIZE)
        self._target: int | None = None  # Trigger.AvailableNow: read nothing at or past this snapshot id
        self._recorded: int | None = None  # the consumer position written last
        self._table: Table | None = table
        if self.mode in ("from-snapshot", "from-snapshot-full") and self.start_snapshot_id is None:
            raise InvalidArgumentError(f"scan.mode {self.mode} needs scan.snapshot-id")
        if self.mode == "from-timestamp" and self.start_timestamp is None:
            raise InvalidArgumentError("scan.mode from-timestamp needs scan.timestamp")

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_table"] = None
        return state

    def _open(self) -> Table:
        if self._table is None:
            self._table = Table.open(self.files_reader.uri, self.files_reader.storage_options)
        return self._table

    def _scan_at(self, table: Table, position: int, full: bool) -> StreamScan:
        mode = "from-snapshot-full" if full else "from-snapshot"
        return table.stream(mode, snapshot_id=position, include_overwrite=self.include_overwrite)

    # -- offsets -------------------------------------------------------------

    def initialOffset(self) -> dict:
        table = self._open()
        if self.consumer_id is not None:
            consumer = table.consumer_manager.get(self.consumer_id)
            if consumer is not None:
                return offset(consumer.next_snapshot)
        scan = table.stream(self.mode, snapshot_id=self.start_snapshot_id, timestamp=self.start_timestamp)
        position = scan.checkpoint()
        position = position or 1
        # latest-full on an empty table starts with deltas from snapshot 1.
        full = self.mode == "from-snapshot-full" or (self.mode == "latest-full" and table.snapshot_manager.exists(position))
        return offset(position, full)

    @staticmethod
    def _latest(table: Table) -> int:
        return table.snapshot_manager.latest_id() or 0

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest(self._open()) + 1

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        return ReadAllAvailable() if self.max_files is None else ReadMaxFiles(self.max_files)

    def latestOffset(self, start: dict, limit) -> dict:
        table = self._open()
        position, full = parse_offset(start)
        # Spark asks for the next batch only once the batch ending at `start` is done.
        self._record(table, position, full)
        latest = self._latest(table)
        if position > latest + 1:
            raise StreamPositionLostError(
                f"the stream's next snapshot {position} is beyond latest + 1 ({latest + 1}): the table was rolled back"
            )
        end = latest + 1 if self._target is None else min(latest + 1, self._target)
        if full:
            end = max(end, position + 1)
        elif end <= position:
            return start
        budget = _budget(limit)
        if budget is not None:
            end = self._admit(table, position, full, end, *budget)
        return offset(end)

    def _admit(self, table: Table, position: int, full: bool, end: int, kind: str, maximum: int) -> int:
        """The end of a batch from ``position`` within the limit; at least one snapshot (soft limit)."""
        scan = self._scan_at(table, position, full)
        used = 0
        admitted = False
        while True:
            plan = scan.next_plan()
            if plan is None or plan.snapshot_id >= end:
                return end
            if kind == "files":
                cost = len(plan.added_files)
            elif kind == "rows":
                cost = plan.record_count
            else:
                cost = sum(f.file_size for f in plan.added_files)
            if admitted and used + cost > maximum:
                return plan.snapshot_id
            used += cost
            admitted = True

    def partitions(self, start: dict, end: dict):
        position, full = parse_offset(start)
        end_position, _ = parse_offset(end)
        if end_position <= position and not full:
            return []
        table = self._open()
        scan = self._scan_at(table, position, full)
        files = []
        while True:
            plan = scan.next_plan()
            if plan is None or plan.snapshot_id >= end_position:
                break
            files.extend(plan.added_files)
        return [FilesPartition(group) for group in group_files(files, self.split_size)]

    def read(self, partition):
        return self.files_reader.read(getattr(partition, "files", None) or [])

    def commit(self, end: dict) -> None:
        position, full = parse_offset(end)
        self._record(self._open(), position, full)

    def _record(self, table: Table, position: int, full: bool) -> None:
        """Move the consumer to ``position`` (everything before it is processed)."""
        if self.consumer_id is None or full or self._recorded == position:
            return
        table.update_consumer(self.consumer_id, position)
        self._recorded = position


def _budget(limit) -> tuple[str, int] | None:
    if isinstance(limit, ReadMaxFiles):
        return "files", int(limit.max_files)
    if isinstance(limit, ReadMaxRows):
        return "rows", int(limit.max_rows)
    if isinstance(limit, ReadMaxBytes):
        return "bytes", int(limit.max_bytes)
    return None
