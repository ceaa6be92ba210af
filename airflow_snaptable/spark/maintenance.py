"""Maintenance actions in Spark: core's action, with bulk file deletes spread over executors.

Core deletes through ``Storage.delete`` one file at a time, in a carefully chosen
order (unpublish snapshots, then delete manifests and data files, then drop the
plan). :class:`DistributedDeleteStorage` keeps that order while deleting in
bulk: it holds back deletes of data files and manifests (``data/``,
``manifest/``) and sends a held-back run to the executors
(``sc.parallelize(paths, n).foreachPartition(...)``) right before any other
storage operation, and at the end. Every other operation sees exactly the
storage state it would have seen with one-by-one deletes, so core's crash
safety (a rerun finishes an interrupted plan) is unchanged. Runs shorter than
``threshold`` are deleted on the driver.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from airflow_snaptable.core.actions import Action, run_action
from airflow_snaptable.core.storage import Storage
from airflow_snaptable.core.table import Table

log = logging.getLogger(__name__)

#: Runs of at least this many deletes go to the executors (Spark conf ``spark.snaptable.delete.parallelThreshold``).
DEFAULT_PARALLEL_THRESHOLD = 200
#: Deletes per Spark task (Spark conf ``spark.snaptable.delete.filesPerTask``).
DEFAULT_FILES_PER_TASK = 1000
BULK_DIRS = ("data/", "manifest/")


class ExecutorDelete:
    """The per-partition function: deletes table-relative paths on an executor (missing = done)."""

    def __init__(self, uri: str, storage_options: dict | None):
        self.uri = uri
        self.storage_options = storage_options

    def __call__(self, paths: Iterable[str]) -> None:
        storage = Storage.from_uri(self.uri, self.storage_options)
        for rel in paths:
            storage.delete(rel)


class SparkDeleter:
    """Deletes a list of table files through ``sc.parallelize(paths, n).foreachPartition(...)``."""

    def __init__(self, spark_context, uri: str, storage_options: dict | None = None, files_per_task: int = DEFAULT_FILES_PER_TASK):
        self.sc = spark_context
        self.uri = uri
        self.storage_options = storage_options
        self.files_per_task = max(1, int(files_per_task))
        self.deleted = 0
        self.jobs = 0

    def __call__(self, paths: list[str]) -> None:
        if not paths:
            return
        slices = max(1, min(len(paths), max(math.ceil(len(paths) / self.files_per_task), self.sc.defaultParallelism)))
        self.sc.setJobDescription(f"snaptable: delete {len(paths)} files of {self.uri}")
        try:
            self.sc.parallelize(paths, slices).foreachPartition(ExecutorDelete(self.uri, self.storage_options))
        finally:
            self.sc.setJobDescription(None)
        self.deleted += len(paths)
        self.jobs += 1


class DistributedDeleteStorage(Storage):
    """A core Storage whose bulk deletes (data files, manifests) run through ``deleter`` in batches."""

    def __init__(self, storage: Storage, deleter: Callable[[list[str]], None], threshold: int = DEFAULT_PARALLEL_THRESHOLD):
        super().__init__(storage.fs, storage.root, storage.uri)
        self.deleter = deleter
        self.threshold = max(1, int(threshold))
        self._pending: list[str] = []
        self.deleted_by_deleter = 0

    def flush(self) -> None:
        """Run the held-back deletes (before any other operation, and at the end of an action)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        if len(pending) >= self.threshold:
            self.deleter(pending)
            self.counts["delete"] += len(pending)
            self.deleted_by_deleter += len(pending)
        else:
            for rel in pending:
                super().delete(rel)

    def delete(self, rel: str) -> None:
        if rel.startswith(BULK_DIRS):
            self._pending.append(rel)
            return
        self.flush()
        super().delete(rel)

    # Every other operation first completes the deletes issued before it. Core funnels
    # every operation through _op(); the public methods are wrapped too, in case it stops.
    def _op(self, kind: str, rel: str, *args, **kwargs):
        self.flush()
        return super()._op(kind, rel, *args, **kwargs)

    def read_bytes(self, *args, **kwargs):
        self.flush()
        return super().read_bytes(*args, **kwargs)

    def open_read(self, *args, **kwargs):
        self.flush()
        return super().open_read(*args, **kwargs)

    def write_bytes(self, *args, **kwargs):
        self.flush()
        return super().write_bytes(*args, **kwargs)

    def create_exclusive(self, *args, **kwargs):
        self.flush()
        return super().create_exclusive(*args, **kwargs)

    def exists(self, *args, **kwargs):
        self.flush()
        return super().exists(*args, **kwargs)

    def list_names(self, *args, **kwargs):
        self.flush()
        return super().list_names(*args, **kwargs)

    def list_files(self, *args, **kwargs):
        self.flush()
        return super().list_files(*args, **kwargs)


@dataclass
class DistributedRun:
    result: dict[str, Any]
    deleted_on_executors: int
    spark_jobs: int


def run_action_distributed(
    spark,
    action: Action,
    storage_options: dict | None = None,
    threshold: int | None = None,
    files_per_task: int | None = None,
) -> DistributedRun:
    """``core.actions.run_action(action)`` with bulk deletes on the executors; returns core's result dict."""
    conf = spark.sparkContext.getConf()
    if threshold is None:
        threshold = int(conf.get("spark.snaptable.delete.parallelThreshold", str(DEFAULT_PARALLEL_THRESHOLD)))
    if files_per_task is None:
        files_per_task = int(conf.get("spark.snaptable.delete.filesPerTask", str(DEFAULT_FILES_PER_TASK)))
    deleter = SparkDeleter(spark.sparkContext, action.table, storage_options, files_per_task)
    storage = DistributedDeleteStorage(Storage.from_uri(action.table, storage_options), deleter, threshold)
    table = Table.open(action.table, storage=storage)
    result = run_action(action, storage_options, table=table)
    storage.flush()
    return DistributedRun(result, deleter.deleted, deleter.jobs)
