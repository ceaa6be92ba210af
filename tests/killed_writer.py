"""A real process killed with SIGKILL in the middle of an atomic write, for the tests of abandoned temp files.

:func:`run_killed` runs ``code`` (Python, with ``Table`` and ``uri`` defined) in a child process
that sends itself SIGKILL at the moment a local atomic write has written and synced its temp file
and is about to rename or link it to a target whose path contains ``at`` (core/io/local_files.py):
the state a kill -9 or a power loss leaves there. :func:`start_paused` stops the child at that
moment instead, until :meth:`Paused.release`, so a test can run other writers beside a live one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

_CHILD = r"""
import json, os, signal, sys, time
spec = json.loads(sys.argv[1])
real = {"replace": os.replace, "link": os.link}

def at_the_point(name):
    def call(src, dst, *args, **kwargs):
        if spec["at"] in str(dst) and os.path.basename(str(src)).endswith(".tmp"):
            if spec["release"] is None:
                os.kill(os.getpid(), signal.SIGKILL)
            open(spec["paused"], "w").close()
            while not os.path.exists(spec["release"]):
                time.sleep(0.01)
        return real[name](src, dst, *args, **kwargs)
    return call

os.replace, os.link = at_the_point("replace"), at_the_point("link")
from airflow_snaptable.core import Table
exec(spec["code"], {"Table": Table, "uri": spec["uri"], "catalog": spec["catalog"]})
"""


def _spec(uri: str, at: str, code: str, catalog: dict | None, paused: str | None = None, release: str | None = None) -> str:
    return json.dumps({"uri": uri, "at": at, "code": code, "catalog": catalog, "paused": paused, "release": release})


def run_killed(uri: str, at: str, code: str, catalog: dict | None = None) -> None:
    """Run ``code`` in a child killed by SIGKILL at the write of a target containing ``at`` (it must get there)."""
    done = subprocess.run([sys.executable, "-c", _CHILD, _spec(uri, at, code, catalog)], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, f"the child was not killed at {at!r} (exit {done.returncode}): {done.stderr[-3000:]}"


class Paused:
    """A child stopped inside a write (its temp file written, not yet renamed)."""

    def __init__(self, process: subprocess.Popen, release: Path):
        self.process, self._release = process, release

    def release(self) -> None:
        """Let the write finish; the child's code must then succeed."""
        self._release.touch()
        _out, err = self.process.communicate(timeout=120)
        assert self.process.returncode == 0, err[-3000:]


def start_paused(workdir: Path, uri: str, at: str, code: str, catalog: dict | None = None) -> Paused:
    paused, release = workdir / "paused", workdir / "release"
    process = subprocess.Popen(
        [sys.executable, "-c", _CHILD, _spec(uri, at, code, catalog, str(paused), str(release))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120
    while not paused.exists():
        if process.poll() is not None:
            raise AssertionError(f"the child ended before reaching {at!r}: {process.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, "the child never reached the write"
        time.sleep(0.02)
    return Paused(process, release)


def temp_files(root: str, directory: str) -> list[str]:
    """The hidden ``.tmp`` files directly in ``root/directory``."""
    path = os.path.join(root, directory)
    return sorted(n for n in os.listdir(path) if n.startswith(".") and n.endswith(".tmp")) if os.path.isdir(path) else []
