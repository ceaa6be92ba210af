"""Maintenance actions in Spark: core's action, with bulk deletes and bulk metadata reads on executors.

Core deletes a plan's manifests, then its data files, and orphan cleaning its
orphans, each through one call of ``Storage.delete_files`` (a set of files
whose relative order does not matter; all gone on return). Every other delete,
whose order is what makes core crash safe (snapshot files, tags, the plan
itself), goes through ``Storage.delete`` one at a time. Core reads many
metadata files at once (expiry planning: the expired snapshots' delta
manifests; orphan cleaning: every snapshot's lists and deltas) through one call
of ``Storage.read_many``. Those two are the seams: :class:`DistributedStorage`
sends a call with at least ``threshold`` (deletes) or ``read_threshold``
(reads) files to the executors (``sc.parallelize(paths, n)``), each task
running core's own bulk call on its slice; shorter calls stay in process.
Listing for orphans stays on the driver: it is one paginated listing per
directory, which executors would not shorten. An Iceberg table's executors open
its location with the catalog's FileIO properties (core/formats/iceberg/files.py
``LocationStorage``); its catalog commit stays on the driver.

Crash safety is core's: ``delete_files`` returns only when every file is gone,
and a failed Spark job raises :class:`~airflow_snaptable.core.errors.StorageError`
before core deletes the plan, so a rerun finishes it (deleting a missing file
is success). Reads change nothing.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from airflow_snaptable.core.actions import Action, run_action
from airflow_snaptable.core.errors import StorageError
from airflow_snaptable.core.formats.foreign import is_iceberg_uri
from airflow_snaptable.core.formats.iceberg.files import storage_opener
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.table import Table
from airflow_snaptable.core.io.table_paths import check_deletable

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


#: ``read_many`` calls with at least this many files are read on the executors
#: (Spark conf ``spark.snaptable.read.parallelThreshold``): orphan cleaning of a long
#: history reads every snapshot's lists and delta manifests. A Spark job costs 1-2 s,
#: so short reads stay on the driver (on threads, for remote stores).
DEFAULT_READ_THRESHOLD = 5000


class ExecutorRead:
    """The per-partition function: reads table-relative paths on an executor with core's bulk read.

    Yields ``(path, bytes)`` for the files that exist; ``processed`` counts the paths read.
    """

    def __init__(self, uri: str, storage_options: dict | None, processed=None, opener: Callable[[], Storage] | None = None):
        self.uri = uri
        self.storage_options = storage_options
        self.processed = processed
        self.opener = opener

    def __call__(self, paths: Iterable[str]):
        paths = list(paths)
        if not paths:
            return iter(())
        found = _open_storage(self.uri, self.storage_options, self.opener).read_many(paths)
        if self.processed is not None:
            self.processed.add(len(paths))
        return iter(found.items())


def _open_storage(uri: str, storage_options: dict | None, opener: Callable[[], Storage] | None) -> Storage:
    """The table's storage on an executor: ``opener()`` (an Iceberg table's location and FileIO
    properties, core/formats/iceberg/files.py LocationStorage), else the table URI and storage options."""
    return opener() if opener is not None else Storage.from_uri(uri, storage_options)


class _ExecutorJobs:
    """Runs core bulk operations on slices of a file list, one Spark job per call."""

    def __init__(
        self, spark_context, uri: str, storage_options: dict | None = None, files_per_task: int = DEFAULT_FILES_PER_TASK,
        opener: Callable[[], Storage] | None = None,
    ):
        self._spark_context = spark_context
        self.uri = uri
        self.storage_options = storage_options
        self.files_per_task = max(1, int(files_per_task))
        self.opener = opener
        self.jobs = 0
        self.tasks = 0

    @property
    def sc(self):
        """The SparkContext; a job's :class:`~airflow_snaptable.spark.job_session.JobSpark` starts its session here,
        at the first work that crosses a threshold."""
        from airflow_snaptable.spark.job_session import JobSpark

        if isinstance(self._spark_context, JobSpark):
            return self._spark_context.sparkContext
        return self._spark_context

    def check_executors(self) -> None:
        """The executors' start-up check (spark/executor_check.py), before the first work sent to them:
        outside the try blocks below, so a cluster that cannot run the package gets its own clear error."""
        from airflow_snaptable.spark.executor_check import ensure_executors_checked

        ensure_executors_checked(self.sc)

    def task_count(self, files: int) -> int:
        """Enough tasks for ``files_per_task`` each, and at least one per core (never more than files)."""
        return max(1, min(files, max(math.ceil(files / self.files_per_task), self.sc.defaultParallelism)))


class SparkReader(_ExecutorJobs):
    """Reads a list of table files in one Spark job: ``sc.parallelize(paths, n).mapPartitions(...).collect()``.

    ``read`` counts the files the executors' tasks read (an accumulator); ``jobs`` the Spark jobs run.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read = 0

    def __call__(self, paths: list[str]) -> dict[str, bytes]:
        if not paths:
            return {}
        self.check_executors()
        processed = self.sc.accumulator(0)
        self.sc.setJobDescription(f"snaptable: read {len(paths)} metadata files of {self.uri}")
        try:
            self.jobs += 1
            self.tasks += self.task_count(len(paths))
            pairs = self.sc.parallelize(paths, self.task_count(len(paths))).mapPartitions(ExecutorRead(self.uri, self.storage_options, processed, self.opener)).collect()
        except Exception as exc:  # noqa: BLE001 - Py4J/Spark errors become core's typed storage error
            raise StorageError(f"reading {len(paths)} files of {self.uri} on Spark executors failed: {_first_line(exc)}") from exc
        finally:
            self.sc.setJobDescription(None)
        self.read += processed.value
        return dict(pairs)


class ExecutorDelete:
    """The per-partition function: deletes table-relative paths on an executor with core's bulk delete.

    ``processed`` is a Spark accumulator: each task adds the number of paths it
    deleted (or found gone) once all of them are, so only finished tasks count.
    """

    def __init__(self, uri: str, storage_options: dict | None, processed=None, opener: Callable[[], Storage] | None = None):
        self.uri = uri
        self.storage_options = storage_options
        self.processed = processed
        self.opener = opener

    def __call__(self, paths: Iterable[str]) -> None:
        paths = list(paths)
        if not paths:
            return
        _open_storage(self.uri, self.storage_options, self.opener).delete_files(paths)
        if self.processed is not None:
            self.processed.add(len(paths))


class SparkDeleter(_ExecutorJobs):
    """Deletes a list of table files in one Spark job: ``sc.parallelize(paths, n).foreachPartition(...)``.

    ``deleted`` counts the files the executors' tasks reported done (a Spark
    accumulator, so it proves the work happened there); ``jobs`` the Spark jobs run.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.deleted = 0

    def __call__(self, paths: list[str]) -> None:
        if not paths:
            return
        self.check_executors()
        processed = self.sc.accumulator(0)
        self.sc.setJobDescription(f"snaptable: delete {len(paths)} files of {self.uri}")
        try:
            self.jobs += 1
            self.tasks += self.task_count(len(paths))
            self.sc.parallelize(paths, self.task_count(len(paths))).foreachPartition(
                ExecutorDelete(self.uri, self.storage_options, processed, self.opener)
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
    # Py4J errors carry the whole Java and Python stack traces: their first line says only which call
    # failed, so the cause found in the rest (a missing module, a lost executor ...) and its way out follow.
    from airflow_snaptable.spark.failures import describe

    return describe(exc)


class DistributedStorage(Storage):
    """A core Storage whose bulk deletes (``delete_files``) of ``threshold`` files or more run through
    ``deleter``, and bulk reads (``read_many``) of ``read_threshold`` files or more through ``reader``.

    Every file is counted and announced (``on_operation``) on the driver before
    the deleter or reader runs, as core's bulk operations do, so operation
    counts and crash injection see each file.
    """

    def __init__(
        self,
        storage: Storage,
        deleter: Callable[[list[str]], None],
        threshold: int = DEFAULT_PARALLEL_THRESHOLD,
        reader: Callable[[list[str]], dict[str, bytes]] | None = None,
        read_threshold: int = DEFAULT_READ_THRESHOLD,
    ):
        super().__init__(storage.fs, storage.root, storage.uri)
        self.deleter = deleter
        self.threshold = max(1, int(threshold))
        self.deleted_by_deleter = 0
        self.reader = reader
        self.read_threshold = max(1, int(read_threshold))

    def read_many(self, rels: list[str]) -> dict[str, bytes]:
        if self.reader is None or len(rels) < self.read_threshold:
            return super().read_many(rels)
        for rel in rels:
            self._op("read", rel)
        return self.reader(list(rels))

    def delete_files(self, rels: list[str]) -> None:
        if len(rels) < self.threshold:
            super().delete_files(rels)
            return
        check_deletable(rels, self.uri)  # the guard of core's deletes: nothing outside the table
        for rel in rels:
            self._op("delete", rel)
        self.deleter(list(rels))
        self.deleted_by_deleter += len(rels)


class ExecutorCompaction:
    """The per-partition function of a compaction: rewrites its file groups on an executor, on the table's storage there."""

    def __init__(self, opener: Callable[[], Storage]):
        self.opener = opener

    def __call__(self, tasks):
        storage = None
        for index, group, rewrite in tasks:
            storage = storage or self.opener()
            yield index, rewrite.on(storage)(group)


class SparkGroupRunner(_ExecutorJobs):
    """Runs a compaction's file groups in one Spark job, one task per group; the commit stays on the driver.

    Each task is sent its group and the rewriter of that group alone (``rewrite.for_group``: the
    group's files, not the whole plan's: a plan of 10,000 files unpickled in every task cost more
    than the rewrite). A failed task fails the job before anything is committed: the files the
    other tasks wrote are unreferenced, and orphan removal deletes them.
    """

    def __call__(self, groups: list, rewrite) -> list[list]:
        if not groups:
            return []
        self.check_executors()
        self.sc.setJobDescription(f"snaptable: compact {len(groups)} file groups of {self.uri}")
        try:
            self.jobs += 1
            self.tasks += len(groups)
            tasks = [(index, group, rewrite.for_group(group)) for index, group in enumerate(groups)]
            pairs = self.sc.parallelize(tasks, len(tasks)).mapPartitions(ExecutorCompaction(self.opener)).collect()
        except Exception as exc:  # noqa: BLE001 - Py4J/Spark errors become core's typed storage error
            raise StorageError(f"compacting {len(groups)} file groups of {self.uri} on Spark executors failed: {_first_line(exc)}") from exc
        finally:
            self.sc.setJobDescription(None)
        return [files for _index, files in sorted(pairs, key=lambda pair: pair[0])]


DRIVER = "driver"
EXECUTORS = "executors"


def ran_on(reads: bool = False, deletes: bool = False, rewrites: bool = False, spark_jobs: int = 0,
           spark_tasks: int = 0, **counts: int) -> dict[str, Any]:
    """Where a piece of work ran, as results carry it (``ranOn``)::

        {"reads": "driver" | "executors", "deletes": ..., "rewrites": ..., "sparkJobs": n, "sparkTasks": n}

    A kind says ``executors`` when at least one bulk call of it (a bulk metadata read, a bulk delete,
    a compaction's file groups) ran on the executors; the driver always does the rest (the single,
    ordered writes and deletes that make an action crash safe, listing, commits). ``sparkJobs`` and
    ``sparkTasks`` count the Spark jobs and tasks the work ran in; ``counts`` adds the files read or
    deleted on the executors (``filesReadOnExecutors``, ``filesDeletedOnExecutors``) where known."""
    return {"reads": EXECUTORS if reads else DRIVER, "deletes": EXECUTORS if deletes else DRIVER,
            "rewrites": EXECUTORS if rewrites else DRIVER, "sparkJobs": spark_jobs, "sparkTasks": spark_tasks, **counts}


@dataclass
class DistributedRun:
    #: core's result dict, ``{"action", "table", "result"}``
    result: dict[str, Any]
    #: files the executors' tasks deleted (counted there)
    deleted_on_executors: int
    spark_jobs: int
    #: storage operations the action issued, by kind (each file deleted on an executor counts as one delete)
    operations: dict[str, int]
    #: metadata files the executors' tasks read (counted there)
    read_on_executors: int = 0
    #: where each kind of work ran (:func:`ran_on`)
    ran_on: dict[str, Any] | None = None

    def job_result(self) -> dict[str, Any]:
        """What the maintenance job returns for the action: core's result and ``ranOn``."""
        return {**self.result, "ranOn": self.ran_on}


def run_action_distributed(
    spark,
    action: Action,
    storage_options: dict | None = None,
    threshold: int | None = None,
    files_per_task: int | None = None,
    read_threshold: int | None = None,
    catalog: dict | None = None,
) -> DistributedRun:
    """``core.actions.run_action(action)`` with bulk deletes and bulk metadata reads on the executors.

    ``spark``: a SparkSession, or the job's :class:`~airflow_snaptable.spark.job_session.JobSpark` (whose
    session starts only if the work crosses a threshold). ``catalog``: an ``iceberg://`` table's catalog properties.
    """
    from airflow_snaptable.spark.job_session import JobSpark, conf_value

    if threshold is None:
        threshold = int(conf_value(spark, "spark.snaptable.delete.parallelThreshold", str(DEFAULT_PARALLEL_THRESHOLD)))
    if files_per_task is None:
        files_per_task = int(conf_value(spark, "spark.snaptable.delete.filesPerTask", str(DEFAULT_FILES_PER_TASK)))
    if read_threshold is None:
        read_threshold = int(conf_value(spark, "spark.snaptable.read.parallelThreshold", str(DEFAULT_READ_THRESHOLD)))
    # A JobSpark starts its session only when an executor job runs (spark/job_session.py).
    context = spark if isinstance(spark, JobSpark) else spark.sparkContext
    if is_iceberg_uri(action.table):
        # An Iceberg table's files are where its catalog says: the executors open its location with
        # the catalog's FileIO properties; the catalog commit stays on the driver.
        table = Table.open(action.table, catalog=catalog)
        opener = storage_opener(table.iceberg)
        deleter = SparkDeleter(context, action.table, None, files_per_task, opener=opener)
        reader = SparkReader(context, action.table, None, files_per_task, opener=opener)
        storage = table.storage = DistributedStorage(table.storage, deleter, threshold, reader, read_threshold)
        table.group_runner = SparkGroupRunner(context, action.table, None, files_per_task, opener=opener)
    else:
        deleter = SparkDeleter(context, action.table, storage_options, files_per_task)
        reader = SparkReader(context, action.table, storage_options, files_per_task)
        storage = DistributedStorage(Storage.from_uri(action.table, storage_options), deleter, threshold, reader, read_threshold)
        table = Table.open(action.table, storage=storage)
    result = run_action(action, storage_options, table=table)
    group_runner = getattr(table, "group_runner", None)
    group_jobs, group_tasks = getattr(group_runner, "jobs", 0), getattr(group_runner, "tasks", 0)
    where = ran_on(reader.jobs > 0, deleter.jobs > 0, group_jobs > 0, deleter.jobs + reader.jobs + group_jobs,
                   deleter.tasks + reader.tasks + group_tasks, filesReadOnExecutors=reader.read,
                   filesDeletedOnExecutors=deleter.deleted)
    return DistributedRun(result, deleter.deleted, deleter.jobs + reader.jobs + group_jobs, storage.snapshot_counts(),
                          reader.read, where)
