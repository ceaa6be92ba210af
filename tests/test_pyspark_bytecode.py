"""devtools/pyspark_bytecode.py: the bytecode it adds to a zip is what Python imports, once, for this Python."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from devtools.pyspark_bytecode import MAGIC, add_bytecode, has_bytecode

SOURCE = b"def fail():\n    raise ValueError('from the zip')\n"


def _zip(path, extra: dict[str, bytes] | None = None):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/__init__.py", b"")
        archive.writestr("pkg/mod.py", SOURCE)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return path


def _import(path) -> subprocess.CompletedProcess:
    probe = "import pkg.mod as m; print(m.__spec__.origin, m.__file__)\ntry: m.fail()\nexcept ValueError: import traceback; traceback.print_exc()"
    return subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": str(path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=True)


def test_python_imports_the_added_bytecode_and_a_second_run_adds_nothing(tmp_path):
    path = _zip(tmp_path / "lib.zip")
    assert "mod.pyc" not in _import(path).stdout  # before: compiled from source at every import
    assert add_bytecode(path) == 2
    with zipfile.ZipFile(path) as archive:
        assert has_bytecode(archive) and archive.read("pkg/mod.py") == SOURCE  # the sources stay as they were
    out = _import(path)
    assert "pkg/mod.pyc" in out.stdout
    # A traceback names the module as zipimport does for a source it compiles, and shows its line.
    assert f'File "{path}/pkg/mod.py", line 2, in fail' in out.stderr and "raise ValueError('from the zip')" in out.stderr
    assert add_bytecode(path) == 0


def test_bytecode_of_another_python_is_replaced(tmp_path):
    foreign = b"\x00\x00\r\n" + bytes(12) + b"junk"
    path = _zip(tmp_path / "lib.zip", {"pkg/__init__.pyc": foreign, "pkg/mod.pyc": foreign})
    assert add_bytecode(path) == 2
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["pkg/__init__.py", "pkg/__init__.pyc", "pkg/mod.py", "pkg/mod.pyc"]
        assert archive.read("pkg/mod.pyc")[:4] == MAGIC
    assert "pkg/mod.pyc" in _import(path).stdout
