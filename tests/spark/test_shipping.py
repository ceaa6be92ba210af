"""The archive shipped to a cluster (spark/shipping.py): what it holds, and built once per content."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

from airflow_snaptable.spark.shipping import SITE_DIR, cached_archive


def test_the_archive_holds_the_package_and_its_dependencies_and_is_built_once(tmp_path):
    first = cached_archive(str(tmp_path))
    again = cached_archive(str(tmp_path))
    assert first.built and not again.built and again.path == first.path and again.key == first.key
    assert os.listdir(tmp_path) == [os.path.basename(first.path)]  # no half-built file left
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
