"""What the built wheel carries (issue 28 item 5): the license, the project's URLs, a provider whose
documentation link is this package's, and each operator, sensor and trigger class defined once."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel built from a copy of the sources (the build leaves nothing in the repository)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "airflow_snaptable", source / "airflow_snaptable", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    build = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", build, str(out)], cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return zipfile.ZipFile(out / done.stdout.strip().splitlines()[-1])


def _metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return email.message_from_bytes(wheel.read(name))


def test_the_wheel_carries_the_license(wheel):
    licenses = [n for n in wheel.namelist() if ".dist-info/" in n and Path(n).name == "LICENSE"]
    assert licenses, wheel.namelist()
    assert b"Apache License" in wheel.read(licenses[0]) and b"Version 2.0" in wheel.read(licenses[0])


def test_the_wheel_names_the_project_urls_and_the_provider_links_to_them(wheel):
    from airflow_snaptable.get_provider_info import get_provider_info

    urls = dict(value.split(", ", 1) for value in _metadata(wheel).get_all("Project-URL") or [])
    assert {"Homepage", "Documentation"} <= set(urls), urls
    (integration,) = get_provider_info()["integrations"]
    assert integration["external-doc-url"] == urls["Documentation"]


def test_every_class_has_its_prefixed_name_and_a_short_name_is_the_same_class():
    """Each operator, sensor and trigger class is defined once, under its prefixed name; a name without the
    prefix (the names the package was specified with, tests/airflow/test_short_names.py) is that class."""
    from airflow_snaptable import operators, sensors, triggers

    for module in (operators, sensors, triggers):
        for name in module.__all__:
            cls = getattr(module, name)
            assert cls.__name__.startswith("SnapTable"), f"{module.__name__}.{name}: a class defined without the prefix"
            assert getattr(module, cls.__name__) is cls, f"{module.__name__}.{name}: its class is not exported by its own name"
