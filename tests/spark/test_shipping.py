"""The archive shipped to a cluster (spark/shipping.py): what it holds, and built once per content."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

from airflow_snaptable.spark.shipping import SITE_DIR, STALE_ARCHIVE_SECONDS, cached_archive, prune_stale_archives


def test_the_archive_holds_the_package_and_its_dependencies_and_is_built_once(tmp_path):
    stale = tmp_path / "snaptable-env-0.0.1-py311-0123456789abcdef0123.tar.gz"  # an older version's archive
    stale.write_bytes(b"old")
    os.utime(stale, (0, 0))
    first = cached_archive(str(tmp_path))
    os.utime(first.path, (0, 0))
    again = cached_archive(str(tmp_path))
    assert first.built and not again.built and again.path == first.path and again.key == first.key
    # No half-built file left, the stale archive pruned by the build, and the hit marked as a use.
    assert os.listdir(tmp_path) == [os.path.basename(first.path)]
    assert os.stat(first.path).st_mtime > STALE_ARCHIVE_SECONDS
    names = {d.split("==")[0].lower() for d in first.distributions}
    assert {"pyarrow", "fsspec", "pendulum", "fastavro", "numpy"} <= names
    assert not {n for n in names if n.startswith(("pyspark", "py4j", "apache-airflow"))}
    with tarfile.open(first.path) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    # A Python without the package imports it, and its core, from the unpacked archive alone.
    site = tmp_path / "unpacked" / SITE_DIR
    probe = "import airflow_snaptable, airflow_snaptable.core.io.storage, pendulum; print(airflow_snaptable.__file__)"
    out = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {probe}"],
        cwd="/", env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(site))


def test_pruning_removes_only_archives_unused_for_a_day_and_never_other_files(tmp_path):
    now = 10 * STALE_ARCHIVE_SECONDS
    def made(name: str, age: float):
        path = tmp_path / name
        path.write_bytes(b"x")
        os.utime(path, (now - age, now - age))
        return path
    kept = made("snaptable-env-2.0-py311-aaaa.tar.gz", STALE_ARCHIVE_SECONDS * 3)  # the one in use: never
    recent = made("snaptable-env-1.9-py311-bbbb.tar.gz", STALE_ARCHIVE_SECONDS - 60)  # maybe still being sent
    old = made("snaptable-env-1.8-py311-cccc.tar.gz", STALE_ARCHIVE_SECONDS + 60)
    abandoned = made(".building-xyz.tar.gz", STALE_ARCHIVE_SECONDS + 60)
    other = made("notes.tar.gz", STALE_ARCHIVE_SECONDS * 5)  # not ours: never
    removed = prune_stale_archives(str(tmp_path), keep=str(kept), now=now)
    assert sorted(removed) == sorted([str(old), str(abandoned)])
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in (kept, recent, other))
