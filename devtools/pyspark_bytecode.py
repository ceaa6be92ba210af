"""Compiled bytecode inside the venv's ``pyspark.zip``: every Spark Python process starts faster.

spark-submit puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on the Python path
of the driver and of every Python worker it starts (the data-source lookup, the planning of a
Python data source's reads and writes, the task workers). pip's pyspark ships those zips with
sources only, and Python never writes bytecode into a zip, so each of these processes compiles
the pyspark modules it imports from source: ~0.8 s a process on a 2-core machine, several times
per spark-submit. Python imports a ``.pyc`` it finds next to the ``.py`` in a zip, so this adds
one per module (unchecked hash-based: the zip's sources never change under it; pip replaces the
whole file on an upgrade, and then the next run adds them again).

Only the test and demo set-up uses it (``scripts/bootstrap``): what runs is unchanged, only when
it is compiled. Idempotent: a zip that already holds this Python's bytecode is left alone.

Entries are appended in place (``zipfile`` mode ``"a"``): the existing entries keep their offsets,
so a Python process that read the zip's directory before keeps reading the sources it knew.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import sys
import zipfile
from importlib import _bootstrap_external  # type: ignore[attr-defined]
from pathlib import Path

#: The bytecode's header: a zip whose marker module has a .pyc of another Python gets this one's.
MAGIC = importlib.util.MAGIC_NUMBER


def spark_python_zips() -> list[Path]:
    """The zips spark-submit puts on its Python processes' path (pip's pyspark), found without importing pyspark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        return []
    lib = Path(spec.origin).parent / "python" / "lib"
    return sorted(lib.glob("*.zip")) if lib.is_dir() else []


def has_bytecode(archive: zipfile.ZipFile) -> bool:
    """Whether every source of ``archive`` has a ``.pyc`` of this Python next to it."""
    names = set(archive.namelist())
    sources = [n for n in names if n.endswith(".py")]
    for name in sources:
        pyc = name[:-3] + ".pyc"
        if pyc not in names:
            return False
    marker = next((n[:-3] + ".pyc" for n in sorted(sources)), None)
    return marker is None or archive.read(marker)[:4] == MAGIC


def add_bytecode(path: Path) -> int:
    """Appends a ``.pyc`` for each ``.py`` of the zip at ``path`` that has none; returns how many."""
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two set-ups at once: the second finds the work done
        with zipfile.ZipFile(path) as archive:
            if has_bytecode(archive):
                return 0
            names = set(archive.namelist())
            foreign = any(n.endswith(".pyc") for n in names)
        if foreign:  # bytecode of another Python: rewrite the zip from its sources alone
            _strip_bytecode(path)
            names = {n for n in names if not n.endswith(".pyc")}
        added = 0
        with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for info in [archive.getinfo(n) for n in sorted(names) if n.endswith(".py") and n[:-3] + ".pyc" not in names]:
                source = archive.read(info)
                try:
                    # named as zipimport names a module it compiles itself: tracebacks read the same
                    code = compile(source, f"{path}{os.sep}{info.filename}", "exec", dont_inherit=True)
                except SyntaxError:  # a module for another Python: imported (and failing) from source as before
                    continue
                data = _bootstrap_external._code_to_hash_pyc(code, importlib.util.source_hash(source), checked=False)
                archive.writestr(zipfile.ZipInfo(info.filename[:-3] + ".pyc", info.date_time), bytes(data), compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)
                added += 1
        return added


def _strip_bytecode(path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            if not info.filename.endswith(".pyc"):
                target.writestr(info, source.read(info))
    os.replace(tmp, path)


def main() -> int:
    for path in spark_python_zips():
        added = add_bytecode(path)
        if added:
            print(f"{path.name}: bytecode of {added} modules added", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
