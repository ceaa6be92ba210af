"""Scenario helpers for the tests ported from Apache Paimon and Apache Iceberg.

The Java tests name files by the bucket (Paimon) or the partition (Iceberg's
FILE_A..FILE_D, one per ``data_bucket``) they live in. Here every commit
writes one data file per partition it touches, so a file is named by
``(snapshot id, partition)`` and the scenario records its path at commit time.
Commit times are chosen by the test (the table's ``clock``), and the scenario
keeps the rows every snapshot must read back (``expected``), computed from the
operations themselves, never from the table.
"""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa

from airflow_snaptable.core import Table
from airflow_snaptable.core.native.manifest import FileKind
from tests.conftest import SCHEMA, sorted_ids

T0 = 1_700_000_000_000  # epoch millis of the first commit unless a test picks times
SECOND = 1_000
HOUR = 3_600_000
NEVER = "36500 d"  # a time_retained under which time never expires anything (Paimon's Long.MAX_VALUE)


def utc(text: str) -> int:
    """Epoch millis of an ISO local time read as UTC (Paimon's ``utcMills``)."""
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


def rows(partition: int, ids: list[int]) -> pa.Table:
    """Rows with the given ids, all in partition ``p = partition``."""
    return pa.table(
        {
            "p": [partition] * len(ids),
            "id": ids,
            "name": [f"name-{i}" for i in ids],
            "value": [i * 0.5 for i in ids],
        },
        schema=SCHEMA,
    )


class Scenario:
    """A table partitioned by ``p`` (a Paimon bucket / an Iceberg data_bucket) with commits at chosen times."""

    def __init__(self, root, options: dict | None = None):
        self.table = Table.create(str(root), SCHEMA, partition_by=["p"], options=options)
        self.now = T0 - SECOND  # the first commit without an explicit time lands at T0
        self.table.clock = lambda: self.now
        self.live: dict[int, list[int]] = {}  # partition -> row ids in the latest snapshot
        self.expected: dict[int, list[int]] = {}  # snapshot id -> sorted row ids it must read
        self.file: dict[tuple[int, int], str] = {}  # (snapshot id, partition) -> path of the file it added
        self.partition_of: dict[int, int] = {}  # row id -> its partition
        self._next_id = 0

    @property
    def uri(self) -> str:
        return self.table.uri

    # -- commits ---------------------------------------------------------------------

    def _tick(self, at: int | None) -> None:
        self.now = self.now + SECOND if at is None else at

    def _fresh(self, n: int) -> list[int]:
        ids = list(range(self._next_id, self._next_id + n))
        self._next_id += n
        return ids

    def _remember(self, partition: int, ids: list[int]) -> list[int]:
        for i in ids:
            self.partition_of[i] = partition
        return ids

    def _record(self, snapshot):
        self.expected[snapshot.id] = sorted(i for ids in self.live.values() for i in ids)
        for entry in self.table.manifest_io.read_delta(snapshot):
            if entry.kind is FileKind.ADD:
                self.file[(snapshot.id, entry.file.partition[0])] = entry.file.path
        return snapshot

    def add(self, *partitions: int, at: int | None = None, n: int = 2):
        """One APPEND writing one new file (``n`` rows) into each given partition."""
        self._tick(at)
        data = {p: self._remember(p, self._fresh(n)) for p in partitions}
        snapshot = self.table.append(pa.concat_tables([rows(p, ids) for p, ids in data.items()]))
        for p, ids in data.items():
            self.live.setdefault(p, []).extend(ids)
        return self._record(snapshot)

    def drop(self, *partitions: int, at: int | None = None):
        """One DELETE of every file of the given partitions (Paimon's ``cleanBucket``, Iceberg's ``deleteFile``)."""
        self._tick(at)
        snapshot = self.table.delete([{"p": p} for p in partitions])
        for p in partitions:
            self.live.pop(p, None)
        return self._record(snapshot)

    def replace(self, partition: int, at: int | None = None, n: int = 2):
        """One OVERWRITE of a partition with a new file (Iceberg's ``newOverwrite().addFile().deleteFile()``)."""
        self._tick(at)
        ids = self._remember(partition, self._fresh(n))
        snapshot = self.table.overwrite(rows(partition, ids), partitions=[{"p": partition}])
        self.live[partition] = ids
        return self._record(snapshot)

    def compact(self, at: int | None = None):
        """One COMPACT rewriting every partition with at least two files (same rows, new files)."""
        self._tick(at)
        snapshot = self.table.compact(min_file_num=2)
        assert snapshot is not None, "nothing to compact"
        return self._record(snapshot)

    def rolled_back_to(self, snapshot_id: int) -> None:
        """After a rollback to ``snapshot_id``: the model continues from that snapshot's rows."""
        self.live = {}
        for i in self.expected[snapshot_id]:
            self.live.setdefault(self.partition_of[i], []).append(i)

    # -- checks ----------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        return os.path.exists(os.path.join(self.uri, path))

    def snapshot_ids(self) -> list[int]:
        return Table.open(self.uri).snapshot_manager.list_ids()

    def tag_names(self) -> set[str]:
        return {t.name for t in Table.open(self.uri).tags()}

    def check(self) -> Table:
        """A fresh reader scans every retained snapshot and every tag to its expected rows, and
        ``verify()`` finds nothing missing and nothing unreferenced."""
        fresh = Table.open(self.uri)
        ids = fresh.snapshot_manager.list_ids()
        assert ids == list(range(ids[0], ids[-1] + 1) if ids else []), f"snapshot ids not contiguous: {ids}"
        for snapshot_id in ids:
            assert sorted_ids(fresh.scan(snapshot_id=snapshot_id).to_arrow()) == self.expected[snapshot_id], snapshot_id
        for tag in fresh.tags():
            assert sorted_ids(fresh.scan(tag=tag.name).to_arrow()) == self.expected[tag.snapshot_id], tag.name
        result = fresh.verify()
        assert result.missing_files == [], result.missing_files
        assert result.unreferenced_files == [], result.unreferenced_files
        return fresh


def mixed_history(s: Scenario, commits: int) -> None:
    """``commits`` commits cycling through append, partition overwrite, compaction and partition delete,
    so that expiry has data files to delete (the Java tests write random keys into several buckets)."""
    cycle = [
        lambda: s.add(0, 1, 2),
        lambda: s.replace(1),
        lambda: s.add(0, 2),
        lambda: s.compact(),
        lambda: s.drop(2),
        lambda: s.add(1, 2),
    ]
    for i in range(commits):
        cycle[i % len(cycle)]()


def manifest_refs(table: Table, snapshot) -> set[str]:
    """Table-relative paths of the manifest lists and manifests a snapshot (or a tag's copy of it) references."""
    return {f"manifest/{name}" for name in table.manifest_io.names_of(snapshot)}


def files_under(table: Table, directory: str) -> list[str]:
    return sorted(rel for rel, _size, _mtime in table.storage.list_files(directory))
