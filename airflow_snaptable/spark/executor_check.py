"""The job's first Spark job on a cluster: can the executors run this package, and is it the same one?

A cluster whose executors lack the package, run another Python, or hold another
version of it would otherwise fail only at the first large delete, halfway into an
action (or never, while tables stay under the thresholds). The check runs one tiny
task per executor core before the first work the job sends them (:func:`ensure_executors_checked`,
called by every executor job of spark/maintenance.py and spark/lake.py) and fails the job with the
executors' own answer: the import error, their Python version, or their package version. A job
whose work all stays on the driver never needs the executors, and does not pay the check (~1 s).

The probe must run where the package cannot be imported, so it is built inside
:func:`_probe` from builtins only: cloudpickle sends a nested function by value, while
a module-level function of this package would be sent by name and fail to unpickle.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from airflow_snaptable.core.errors import ExecutionEnvironmentError

#: Spark conf: ``false`` skips the check (e.g. a cluster known to be right, to save ~1 s).
CHECK_CONF = "spark.snaptable.executorCheck"


@dataclass(frozen=True)
class ExecutorReport:
    python: str
    version: str | None
    error: str | None
    host: str


def _probe():
    def probe(_rows):
        import socket
        import sys as _sys

        python = "%d.%d.%d" % tuple(_sys.version_info[:3])
        version = None
        try:
            import airflow_snaptable  # noqa: F401 - what the executors must import

            version = str(airflow_snaptable.__version__)
            # The core imports its compiled dependencies: a package built for another Python fails here.
            import airflow_snaptable.core.io.storage  # noqa: F401

            yield (python, version, None, socket.gethostname())
        except BaseException as exc:  # noqa: BLE001 - the executors' answer, sent back to the driver
            yield (python, version, "%s: %s" % (type(exc).__name__, exc), socket.gethostname())

    return probe


def probe_executors(spark_context) -> list[ExecutorReport]:
    """One tiny task per default-parallelism slot; each reports its Python, package version or import error."""
    slots = max(1, int(spark_context.defaultParallelism))
    spark_context.setJobDescription("snaptable: check the executors' Python and package version")
    try:
        rows = spark_context.parallelize(range(slots), slots).mapPartitions(_probe()).collect()
    finally:
        spark_context.setJobDescription(None)
    return sorted({ExecutorReport(*row) for row in rows}, key=lambda r: (r.host, r.python, r.version or "", r.error or ""))


def check_reports(reports: list[ExecutorReport], driver_version: str, driver_python: tuple[int, int] | None = None) -> None:
    """Raise :class:`ExecutionEnvironmentError` naming what differs and how to fix it; return when all match."""
    driver_python = driver_python or (sys.version_info[0], sys.version_info[1])
    wanted_python = f"{driver_python[0]}.{driver_python[1]}"
    wrong_python = sorted({r.python for r in reports if ".".join(r.python.split(".")[:2]) != wanted_python})
    versions = sorted({r.version for r in reports if r.version and r.version != driver_version})
    if versions:  # the first thing to fix: another version may also lack what this one imports
        raise ExecutionEnvironmentError(
            f"version mismatch: the driver runs airflow-snaptable {driver_version}, the executors {', '.join(versions)};"
            " ship the driver's version (runner_ship='auto'), rebuild the prebuilt archive, or upgrade the nodes"
        )
    failed = [r for r in reports if r.error]
    if failed:
        first = failed[0]
        hint = (
            f" The executors run Python {', '.join(wrong_python)} but the driver (and the shipped archive) Python {wanted_python}:"
            f" point spark.pyspark.python (or PYSPARK_PYTHON in the submit's env_vars) at a Python {wanted_python} on the nodes."
            if wrong_python
            else " Ship it with runner_ship='auto' (the default), name a prebuilt archive with runner_ship='<uri>',"
            " or install airflow-snaptable on every node."
        )
        raise ExecutionEnvironmentError(
            f"the Spark executors cannot run airflow-snaptable (host {first.host}, Python {first.python}): {first.error}.{hint}"
        )
    if wrong_python:
        raise ExecutionEnvironmentError(
            f"the Spark executors run Python {', '.join(wrong_python)}, the driver Python {wanted_python}: compiled dependencies"
            f" (pyarrow, numpy) and pickled functions need the same version; set spark.pyspark.python to a Python {wanted_python}"
        )


def check_executors(spark) -> list[ExecutorReport]:
    """Probe and check the executors of a non-local master (local masters share the driver's Python)."""
    import airflow_snaptable

    conf = spark.sparkContext.getConf()
    master = conf.get("spark.master", "")
    if master.startswith("local") or conf.get(CHECK_CONF, "true").strip().lower() == "false":
        return []
    try:
        reports = probe_executors(spark.sparkContext)
    except Exception as exc:  # noqa: BLE001 - the probe could not even run: Spark's reason, explained
        from airflow_snaptable.spark.failures import describe

        raise ExecutionEnvironmentError(f"the Spark executors could not run the check of their Python and package version: {describe(exc)}") from exc
    check_reports(reports, str(airflow_snaptable.__version__))
    return reports


def ensure_executors_checked(spark_context) -> None:
    """:func:`check_executors` once per SparkContext, before the first work sent to its executors."""
    if getattr(spark_context, "_snaptable_executors_checked", False):
        return

    class _Session:  # check_executors reads only the session's SparkContext
        sparkContext = spark_context

    check_executors(_Session())
    spark_context._snaptable_executors_checked = True  # only once they passed: a failed check fails every use
