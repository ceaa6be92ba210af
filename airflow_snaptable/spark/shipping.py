"""What the maintenance job ships to a cluster: this package and its dependencies, as one archive.

A cluster's nodes do not have this package (nor ``pendulum``, ``fastavro`` ...), so the
spark-submit runner sends them an archive built from the submitting Python environment:

- ``site-packages/`` holds this package (the copy this process imports) and every
  installed distribution it needs at run time (the base requirements, plus those of the
  ``s3`` and ``iceberg`` extras that are installed), found by walking the requirement
  graph; pyspark, py4j and Airflow are left out (Spark puts its own pyspark on the
  executors' path, and the job never imports Airflow).
- It travels as ``--archives <archive>#snaptable_env``; Spark unpacks it in each
  executor's working directory and ``spark.executorEnv.PYTHONPATH`` puts
  ``snaptable_env/site-packages`` on the executors' Python path. The executors run the
  cluster's own Python, which must be the same ``major.minor`` and platform as this one
  (pyarrow and numpy are compiled): the job checks it at start (executor_check.py).

A zip for ``--py-files`` is not enough: pyarrow and numpy hold compiled modules, which
Python does not import from a zip.

The archive is built once per content: its name holds a hash of the package's version
and source files, the name and version of every shipped distribution, and the Python
version and platform. It is written to a temporary name and renamed, so concurrent
tasks on one worker never see half an archive; a later call finds it and pays nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

#: The directory name (``#alias`` of ``--archives``) the archive unpacks into, next to each executor.
ARCHIVE_ALIAS = "snaptable_env"
#: The folder inside the archive holding the importable modules.
SITE_DIR = "site-packages"
#: Where built archives are kept (env ``SNAPTABLE_SPARK_CACHE`` overrides).
DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "airflow-snaptable", "spark")
#: The extras whose installed requirements are shipped too (storage and catalog clients).
SHIPPED_EXTRAS = ("s3", "iceberg")
#: Distributions never shipped: Spark provides pyspark and py4j; the job never imports Airflow.
_NOT_SHIPPED_PREFIXES = ("pyspark", "py4j", "apache-airflow", "pip", "setuptools", "wheel")
#: Files no job imports: tests, C headers and Cython sources, and Arrow Flight (an RPC framework,
#: 35 MB of pyarrow). Leaving them out makes the archive a fifth smaller to send and unpack.
_LEFT_OUT = re.compile(
    r"(^|/)(tests?|include)/|\.(pxd|pyx|pxi|h|hpp|cc|pyi)$|^pyarrow/(libarrow_flight|libarrow_python_flight|_flight)"
)
_PACKAGE = "airflow_snaptable"
_DIST = "airflow-snaptable"
#: A build keeps the archives of other contents that are this recent: a spark-submit started
#: a moment ago may still be sending one (each is about 100 MB; every upgrade or code change
#: makes a new one, so without pruning the cache only grows).
STALE_ARCHIVE_SECONDS = 24 * 3600
_ARCHIVE_NAME = re.compile(r"^snaptable-env-.+\.tar\.gz$")


@dataclass(frozen=True)
class ShippedArchive:
    """An archive of this package and its dependencies, ready for ``--archives``."""

    path: str
    #: the hash naming it (content identity)
    key: str
    #: the package version inside (the executor check compares it with the driver's)
    version: str
    #: ``name==version`` of every shipped distribution
    distributions: tuple[str, ...]
    size: int
    #: True when this call built it (False: found in the cache)
    built: bool
    #: seconds this call spent (building, or finding it)
    seconds: float


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def shipped_distributions() -> list:
    """The installed distributions this package needs at run time, found by walking requirements."""
    from importlib import metadata

    from packaging.requirements import Requirement

    try:
        root = metadata.distribution(_DIST)
        requirements = [(r, "") for r in root.requires or []]
    except metadata.PackageNotFoundError:  # running from a source tree: the core's fixed dependencies
        requirements = []
    wanted: list[tuple[str, str]] = []
    for text, _ in requirements:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("",) + SHIPPED_EXTRAS):
            wanted.append((text, ""))
    seen: dict[str, object] = {}
    queue = [Requirement(text) for text, _ in wanted]
    while queue:
        req = queue.pop()
        key = _normalise(req.name)
        if key in seen or key == _DIST or key.startswith(_NOT_SHIPPED_PREFIXES):
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue  # an optional extra not installed here, or a marker for another platform
        seen[key] = dist
        extras = ("",) + tuple(req.extras)
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                queue.append(sub)
    return sorted(seen.values(), key=lambda d: _normalise(d.metadata["Name"]))


def _package_dir() -> Path:
    import airflow_snaptable

    return Path(airflow_snaptable.__file__).resolve().parent


def _package_files() -> list[Path]:
    root = _package_dir()
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def _distribution_files(dist) -> Iterable[tuple[Path, str]]:
    """(file on disk, name inside site-packages) of one installed distribution; scripts and caches left out."""
    for rel in dist.files or []:
        name = str(rel)
        if name.startswith("..") or "__pycache__" in rel.parts or name.endswith(".pyc") or _LEFT_OUT.search(name):
            continue
        source = Path(dist.locate_file(rel))
        if source.is_file():
            yield source, name


def package_version() -> str:
    import airflow_snaptable

    return str(airflow_snaptable.__version__)


def archive_key(distributions: list | None = None) -> str:
    """The content identity: package version and sources, shipped distributions, Python and platform."""
    distributions = shipped_distributions() if distributions is None else distributions
    digest = hashlib.sha256()
    digest.update(f"{package_version()}|{sys.implementation.name}{sys.version_info[0]}.{sys.version_info[1]}|{platform.machine()}|{sys.platform}".encode())
    for dist in distributions:
        digest.update(f"|{dist.metadata['Name']}=={dist.version}".encode())
    root = _package_dir()
    for path in _package_files():
        digest.update(str(path.relative_to(root)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:20]


def cache_dir() -> str:
    return os.environ.get("SNAPTABLE_SPARK_CACHE") or DEFAULT_CACHE_DIR


def cached_archive(directory: str | None = None) -> ShippedArchive:
    """The archive for this environment: from the cache, or built now (once per content)."""
    started = time.monotonic()
    directory = directory or cache_dir()
    distributions = shipped_distributions()
    key = archive_key(distributions)
    version = package_version()
    names = tuple(f"{d.metadata['Name']}=={d.version}" for d in distributions)
    path = os.path.join(directory, f"snaptable-env-{version}-py{sys.version_info[0]}{sys.version_info[1]}-{key}.tar.gz")
    if os.path.exists(path):
        with contextlib.suppress(OSError):  # marks its last use for pruning; a read-only cache still serves it
            os.utime(path)
        return ShippedArchive(path, key, version, names, os.path.getsize(path), False, time.monotonic() - started)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".building-", suffix=".tar.gz", dir=directory)
    os.close(fd)
    try:
        # Level 1: a third of the time of the default level, for an archive ~10% larger.
        with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
            root = _package_dir()
            for file in _package_files():
                tar.add(str(file), f"{SITE_DIR}/{_PACKAGE}/{file.relative_to(root)}", recursive=False)
            for dist in distributions:
                for source, name in _distribution_files(dist):
                    tar.add(str(source), f"{SITE_DIR}/{name}", recursive=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)  # atomic: a concurrent build of the same content wins or loses whole
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    prune_stale_archives(directory, keep=path)
    return ShippedArchive(path, key, version, names, os.path.getsize(path), True, time.monotonic() - started)


def prune_stale_archives(directory: str, keep: str, now: float | None = None) -> list[str]:
    """Removes the cache's archives of other contents unused for :data:`STALE_ARCHIVE_SECONDS`
    (and abandoned partial builds as old); returns their paths. Only files this module names
    are touched, never another file in the directory."""
    now = time.time() if now is None else now
    removed = []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if path == keep or not (_ARCHIVE_NAME.match(name) or name.startswith(".building-")):
            continue
        try:
            # Its mtime is its last use: every cache hit touches it.
            if now - os.stat(path).st_mtime < STALE_ARCHIVE_SECONDS:
                continue
            os.unlink(path)
        except FileNotFoundError:  # a concurrent build pruned it first
            continue
        removed.append(path)
    return removed


def executor_pythonpath(alias: str = ARCHIVE_ALIAS) -> str:
    """The executors' extra Python path for an archive unpacked as ``alias``: our layout
    (``site-packages/``) and a packed virtual environment's (``lib/pythonX.Y/site-packages``,
    e.g. from venv-pack), so either kind of prebuilt archive works."""
    return os.pathsep.join(
        [f"{alias}/{SITE_DIR}", f"{alias}/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"]
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m airflow_snaptable.spark.shipping [DIR]``: build (or find) the archive, print its path.

    For clusters without access to this worker's disk: build it once, copy it to shared
    storage, and name it with ``runner_ship="hdfs:///.../snaptable-env-....tar.gz"``.
    """
    args = sys.argv[1:] if argv is None else argv
    archive = cached_archive(args[0] if args else None)
    print(archive.path)
    print(
        f"{'built' if archive.built else 'found'} in {archive.seconds:.1f} s, {archive.size / 1e6:.1f} MB, "
        f"{len(archive.distributions)} distributions, package {archive.version}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
