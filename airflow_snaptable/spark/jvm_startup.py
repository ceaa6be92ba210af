"""The start-up of spark-submit's JVM (in client mode: the driver's), which the runner shortens.

A small maintenance job's JVM lives seconds and mostly waits for the Python driver, so what it
costs is its start: the JIT compilers, the collector, and loading a few thousand Spark classes
from jars. The runner (hooks/spark_submit.py) sets ``SPARK_SUBMIT_OPTS`` (which spark-submit puts
on its JVM's command line, before the driver's own ``spark.driver.extraJavaOptions``, which thus
still override it) to :func:`submit_jvm_options` unless the task's environment sets it:

- ``-XX:TieredStopAtLevel=1``: C1 only, no C2 compiler threads competing for the cores;
- ``-XX:+UseSerialGC`` unless the driver's options pick a collector (two stop the JVM);
- a class-data sharing archive (JDK 13+ dynamic AppCDS): the classes the JVM loaded in an
  earlier run, mapped from one file instead of read and verified from the jars. The first run
  writes it at its exit (``-XX:ArchiveClassesAtExit``, a few seconds more, once) to a temporary
  name that :meth:`JvmStartup.finish` renames into the cache (``spark/shipping.py``'s cache
  directory); later runs map it (``-XX:SharedArchiveFile``). Its name holds the java binary and
  the Spark jars it was made with; a JVM that finds it does not fit (another JDK, other jars)
  ignores it and starts as without it (``-Xshare:auto``, the default).

Measured on a loaded 2-core machine: ~0.7 s of a 1.8 s JVM-and-Python start (docs/benchmarks.md).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

#: C1 only and the serial collector: for a JVM that lives seconds.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: The JVM's class-data sharing notes (a class it cannot archive, an archive that does not fit) go to
#: stdout, after the job's last line: silenced, as the archive is only ever a speed-up.
_QUIET = "-Xlog:cds=off,cds+dynamic=off"
_GC_FLAG = re.compile(r"-XX:\+Use\w*GC\b")


def driver_java_options(conf: Mapping[str, Any] | None) -> str:
    """:data:`DRIVER_JAVA_OPTIONS`, less the collector when the given driver options pick one (two collectors
    stop the JVM: "Conflicting collector combinations in option list")."""
    given = " ".join(str((conf or {}).get(key, "")) for key in ("spark.driver.extraJavaOptions", "spark.driver.defaultJavaOptions"))
    if _GC_FLAG.search(given):
        return _GC_FLAG.sub("", DRIVER_JAVA_OPTIONS).strip()
    return DRIVER_JAVA_OPTIONS


def _java_binary(env: Mapping[str, str]) -> str | None:
    """The java spark-class runs: ``$JAVA_HOME/bin/java``, else the first on the PATH."""
    if env.get("JAVA_HOME"):
        return os.path.join(env["JAVA_HOME"], "bin", "java")
    return shutil.which("java", path=env.get("PATH"))


def _spark_jars(spark_binary: str, env: Mapping[str, str]) -> str | None:
    """The jars directory of the Spark that ``spark_binary`` launches: ``$SPARK_HOME/jars``, the distribution
    the binary is in, or (pip's ``spark-submit`` script finds its home so) the installed pyspark's."""
    homes = [env.get("SPARK_HOME")]
    binary = shutil.which(spark_binary, path=env.get("PATH"))
    if binary is not None:
        homes.append(os.path.dirname(os.path.dirname(os.path.realpath(binary))))
    import importlib.util

    spec = importlib.util.find_spec("pyspark")  # finds, does not import
    if spec is not None and spec.origin:
        homes.append(os.path.dirname(spec.origin))
    for home in homes:
        if home and os.path.isdir(os.path.join(home, "jars")):
            return os.path.join(home, "jars")
    return None


@dataclass(frozen=True)
class JvmStartup:
    """The ``SPARK_SUBMIT_OPTS`` of one spark-submit and, on a first run, the archive it writes at exit."""

    options: str
    archive: str | None = None
    #: the archive's name while the first run writes it
    writing: str | None = None

    def finish(self, succeeded: bool) -> None:
        """After spark-submit returned: the archive a first run wrote, moved into place (atomically: concurrent
        first runs each write their own and the last rename wins). A failed or killed run's is removed: it
        may be cut short."""
        if not self.writing or not os.path.isfile(self.writing):
            return
        try:
            if succeeded:
                os.replace(self.writing, self.archive)
            else:
                os.unlink(self.writing)
        except OSError:
            pass


def submit_jvm_options(conf: Mapping[str, Any] | None, spark_binary: str, env: Mapping[str, str],
                       cache_directory: str | None = None) -> JvmStartup:
    """The JVM options for ``SPARK_SUBMIT_OPTS`` (see the module docstring), with a class-data archive kept in
    ``cache_directory`` (default: spark/shipping.py's cache) when the java binary and Spark's jars are found."""
    options = driver_java_options(conf)
    java, jars = _java_binary(env), _spark_jars(spark_binary, env)
    if not java or not jars or not os.path.exists(java):
        return JvmStartup(options)
    from airflow_snaptable.spark.shipping import cache_dir

    java = os.path.realpath(java)
    identity = "\n".join([java, str(os.stat(java).st_mtime_ns), os.path.realpath(jars), *sorted(os.listdir(jars)), options])
    directory = cache_directory or cache_dir()
    if re.search(r"\s", directory):  # SPARK_SUBMIT_OPTS is split on blanks
        return JvmStartup(options)
    archive = os.path.join(directory, f"submit-jvm-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.jsa")
    if os.path.isfile(archive):
        return JvmStartup(f"{options} -XX:SharedArchiveFile={archive} {_QUIET}", archive)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return JvmStartup(options)
    writing = f"{archive}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return JvmStartup(f"{options} -XX:ArchiveClassesAtExit={writing} {_QUIET}", archive, writing)
