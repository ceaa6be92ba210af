"""Maintenance actions in Spark: core's action, with bulk file deletes spread over executors.

Core deletes a plan's manifests, then its data files, and orphan cleaning its
orphans, each through one call of ``Storage.delete_files`` (a set of files
whose relative order does not matter; all gone on return). Every other delete,
whose order is what makes core crash safe (snapshot files, tags, the plan
itself), goes through ``Storage.delete`` one at a time. So the only seam Spark
needs is ``delete_files``: :class:`DistributedDeleteStorage` sends a call with
at least ``threshold`` files to the executors
(``sc.parallelize(paths, n).foreachPartition(...)``), each task deleting its
slice with core's own ``Storage.delete_files``; shorter calls stay in process.

Crash safety is core's: ``delete_files`` returns only when every file is gone,
and a failed Spark job raises :class:`~airflow_snaptable.core.errors.StorageError`
before core deletes the plan, so a rerun finishes it (deleting a missing file
is success).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from airflow_snaptable.core.actions import Action, run_action
from airflow_snaptable.core.errors import StorageError
from airflow_snaptable.core.storage import Storage
from airflow_snaptable.core.table import Table

log = logging.getLogger(__name__)

#: ``delete_files`` calls with at least this many files go to the executors
#: (Spark conf ``spark.snaptable.delete.parallelThreshold``). A Spark job costs 1-2 s
#: before it deletes anything, while core in process deletes ~10,000 files in about
#: that time (S3: 10 DeleteObjects requests); see docs/benchmarks.md, "Spark delete".
DEFAULT_PARALLEL_THRESHOLD = 10_000
#: Files per Spark task (Spark conf ``spark.snaptable.delete.filesPerTask``), but at least one task per core.
#: A task costs ~0.1 s before it deletes anything: 20,000 local files took 2.7-3.5x core's
#: in-process time in tasks of 1,000, 0.99x in tasks of 5,000 (docs/benchmarks.md).
DEFAULT_FILES_PER_TASK = 5000


class ExecutorDelete:
    """The per-partition function: deletes table-relative paths on an executor with core's bulk delete.

    ``processed`` is a Spark accumulator: each task adds the number of paths it
    deleted (or found gone) once all of them are, so only finished tasks count.
    """

    def __init__(self, uri: str, storage_options: dict | None, processed=None):
        self.uri = uri
        self.storage_options = storage_options
        self.processed = processed

    def __call__(self, paths: Iterable[str]) -> None:
        paths = list(paths)
        if not paths:
            return
        Storage.from_uri(self.uri, self.storage_options).delete_files(paths)
        if self.processed is not None:
            self.processed.add(len(paths))


class SparkDeleter:
    """Deletes a list of table files in one Spark job: ``sc.parallelize(paths, n).foreachPartition(...)``.

    ``deleted`` counts the files the executors' tasks reported done (a Spark
    accumulator, so it proves the work happened there); ``jobs`` the Spark jobs run.
    """

    def __init__(self, spark_context, uri: str, storage_options: dict | None = None, files_per_task: int = DEFAULT_FILES_PER_TASK):
        self.sc = spark_context
        self.uri = uri
        self.storage_options = storage_options
        self.files_per_task = max(1, int(files_per_task))
        self.deleted = 0
        self.jobs = 0

    def task_count(self, files: int) -> int:
        """Enough tasks for ``files_per_task`` each, and at least one per core (never more than files)."""
        return max(1, min(files, max(math.ceil(files / self.files_per_task), self.sc.defaultParallelism)))

    def __call__(self, paths: list[str]) -> None:
        if not paths:
            return
        processed = self.sc.accumulator(0)
        self.sc.setJobDescription(f"snaptable: delete {len(paths)} files of {self.uri}")
        try:
            self.jobs += 1
            self.sc.parallelize(paths, self.task_count(len(paths))).foreachPartition(
                ExecutorDelete(self.uri, self.storage_options, processed)
            )
        except Exception as exc:  # noqa: BLE001 - Py4J/Spark errors become core's typed storage error
            self.deleted += processed.value
            raise StorageError(
                f"deleting {len(paths)} files of {self.uri} on Spark executors failed "
                f"({processed.value} deleted; a rerun of the action finishes the job): {_first_line(exc)}"
            ) from exc
        finally:
            self.sc.setJobDescription(None)
        self.deleted += processed.value


def _first_line(exc: BaseException) -> str:
    # Py4J errors carry the whole Java and Python stack traces; the first line names the cause.
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:500]
    return type(exc).__name__


class DistributedDeleteStorage(Storage):
    """A core Storage whose bulk deletes (``delete_files``) of ``threshold`` files or more run through ``deleter``.

    Every file is counted and announced (``on_operation``) on the driver before
    the deleter runs, as core's ``delete_files`` does per batch, so operation
    counts and crash injection see each file.
    """

    def __init__(self, storage: Storage, deleter: Callable[[list[str]], None], threshold: int = DEFAULT_PARALLEL_THRESHOLD):
        super().__init__(storage.fs, storage.root, storage.uri)
        self.deleter = deleter
        self.threshold = max(1, int(threshold))
        self.deleted_by_deleter = 0

    def delete_files(self, rels: list[str]) -> None:
        if len(rels) < self.threshold:
            super().delete_files(rels)
            return
        for rel in rels:
            self._op("delete", rel)
        self.deleter(list(rels))
        self.deleted_by_deleter += len(rels)


@dataclass
class DistributedRun:
    #: core's result dict, ``{"action", "table", "result"}``
    result: dict[str, Any]
    #: files the executors' tasks deleted (counted there)
    deleted_on_executors: int
    spark_jobs: int
    #: storage operations the action issued, by kind (each file deleted on an executor counts as one delete)
    operations: dict[str, int]


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
    return DistributedRun(result, deleter.deleted, deleter.jobs, storage.snapshot_counts())
