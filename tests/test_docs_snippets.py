"""Every shell and Python block of README.md and docs/*.md runs as written, so the docs cannot rot.

The blocks of one document run in order, in one empty temporary directory (what one block writes,
the next one reads), with this venv's ``snaptable``, ``python`` and ``airflow`` first on the PATH
and a throwaway Airflow home (SQLite, the DAGs folder ``dags/`` of that directory).

- A bash block runs with ``bash -e``; a Python block with this venv's Python.
- A Python block whose first line is a comment naming a file (``# dags/lake_maintenance.py``)
  is that file: it is written there, not run (``airflow dags test`` runs a DAG file).
- A block followed by an ``output`` block must print that output; times, run ids and byte counts
  may differ, and so may the column widths they make.
- A block that cannot run here (a real cloud bucket, a cluster, an install into the environment)
  starts with the visible marker ``# (not run in the docs test: <reason>)``. Its ``snaptable``
  command lines are still parsed by the CLI, so their commands and flags exist.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: The environment the blocks run in: this venv (the checkout on PYTHONPATH), or, from
#: scripts/check-wheel, a fresh venv with only the built wheel installed (SNAPTABLE_DOCS_VENV).
INSTALLED_VENV = os.environ.get("SNAPTABLE_DOCS_VENV")
VENV_BIN = Path(INSTALLED_VENV) / "bin" if INSTALLED_VENV else Path(sys.executable).parent

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
LANGUAGES = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python", "py": "python"}
NOT_RUN = re.compile(r"\A# \(not run in the docs test: (?P<reason>[^)]+)\)[ \t]*\n")
FILE_BLOCK = re.compile(r"\A# (?P<path>[\w./-]+\.py)[ \t]*\n")
#: Blocks that may be marked as not run, in all the docs: the exceptions stay few.
MAX_NOT_RUN = 10


@dataclass
class Block:
    doc: str
    line: int
    language: str
    code: str
    #: The ``output`` block right after it, if any.
    output: str | None = None

    @property
    def not_run(self) -> str | None:
        found = NOT_RUN.match(self.code)
        return found["reason"] if found else None

    @property
    def file(self) -> str | None:
        found = FILE_BLOCK.match(self.code) if self.language == "python" else None
        return found["path"] if found else None

    def __str__(self) -> str:
        return f"{self.doc}:{self.line} ({self.language})"


def blocks(doc: Path) -> list[Block]:
    """The shell and Python blocks of ``doc``, each with the output block after it."""
    text = doc.read_text(encoding="utf-8")
    found: list[Block] = []
    previous_end = None
    for match in FENCE.finditer(text):
        info, code = match.group(1).lower(), match.group(2)
        if info == "output" and found and previous_end is not None and not text[previous_end:match.start()].strip():
            found[-1].output = code
        elif info in LANGUAGES:
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(str(doc.relative_to(REPO)), line, LANGUAGES[info], code))
        previous_end = match.end() if info in LANGUAGES else None
    return found


ALL_BLOCKS = [block for doc in DOCS for block in blocks(doc)]


# -- the CLI lines of every block, run or not ----------------------------------------------------


def snaptable_commands(code: str) -> list[list[str]]:
    """The argument lists of the ``snaptable`` commands in a shell block (comments, pipes and here-documents aside)."""
    commands, heredoc = [], None
    logical = code.replace("\\\n", " ")
    for line in logical.splitlines():
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        marker = re.search(r"<<-?\s*'?(\w+)'?", line)
        if marker:
            heredoc = marker.group(1)
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        for i, word in enumerate(words):
            if word == "snaptable" and (i == 0 or words[i - 1] in ("|", "&&", ";", "||")):
                args = []
                for part in words[i + 1:]:
                    if part in ("|", "&&", ";", "||", ">", ">>"):
                        break
                    args.append(part)
                commands.append(args)
    return commands


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.language == "bash"], ids=str)
def test_documented_snaptable_commands_parse(block):
    """Every ``snaptable`` line is a command with flags that exist (the blocks not run included)."""
    from airflow_snaptable.cli import build_parser

    parser = build_parser()
    for args in snaptable_commands(block.code):
        if args in (["--version"], ["--help"]):
            continue
        try:
            parser.parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"{block}: snaptable {' '.join(args)} does not parse (exit {exc.code})")


def test_blocks_not_run_are_few_and_say_why():
    skipped = [block for block in ALL_BLOCKS if block.not_run]
    assert len(skipped) <= MAX_NOT_RUN, [str(b) for b in skipped]
    assert all(len(block.not_run) > 10 for block in skipped)
    assert not any(block.not_run for block in ALL_BLOCKS if block.doc == "README.md" and block.output is not None)


# -- running them --------------------------------------------------------------------------------


#: Times, run ids, durations and byte counts: what may differ between two runs of a block.
_VARIABLE = [
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z?"), "<time>"),
    (re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]+\b"), "<run>"),
    (re.compile(r"\b\d+ bytes\b"), "<n> bytes"),
    (re.compile(r"-{2,}"), "--"),
]


def normalized(text: str) -> list[str]:
    lines = []
    for line in text.strip().splitlines():
        for pattern, placeholder in _VARIABLE:
            line = pattern.sub(placeholder, line)
        lines.append(" ".join(line.split()))
    return lines


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory) -> Path:
    """A throwaway Airflow home, migrated on first use (only documents with ``airflow`` commands need it)."""
    return tmp_path_factory.mktemp("docs-airflow-home")


def environment(workdir: Path, airflow_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW__", "SNAPTABLE_"))}
    env.update({
        "PATH": os.pathsep.join([str(VENV_BIN), env.get("PATH", "")]),
        "PYTHONPATH": "" if INSTALLED_VENV else os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p),
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(workdir / "dags"),
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    })
    return env


def _migrate(airflow_home: Path, env: dict[str, str]) -> None:
    if not (airflow_home / "airflow.db").exists():
        done = subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]


def run_block(block: Block, workdir: Path, env: dict[str, str]) -> str:
    if block.file:
        target = workdir / block.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code, encoding="utf-8")
        compile(block.code, str(target), "exec")  # a DAG file a document shows is at least valid Python
        return ""
    if block.language == "bash":
        command = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    else:
        command = [str(VENV_BIN / "python"), "-c", block.code]
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{block} failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _docs_with_blocks() -> list[str]:
    return sorted({block.doc for block in ALL_BLOCKS if not block.not_run})


@pytest.mark.parametrize("doc", _docs_with_blocks())
def test_the_blocks_of_a_document_run_as_written(doc, tmp_path, airflow_home):
    """The document's blocks in order in one empty directory; each prints the output shown after it."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = environment(workdir, airflow_home)
    todo = [block for block in ALL_BLOCKS if block.doc == doc and not block.not_run]
    if any(re.search(r"^\s*airflow\s", block.code, re.M) for block in todo if block.language == "bash"):
        _migrate(airflow_home, env)
    for block in todo:
        out = run_block(block, workdir, env)
        if block.output is not None:
            assert normalized(out) == normalized(block.output), f"{block} printed:\n{out}"
    shutil.rmtree(workdir, ignore_errors=True)


# -- the commands of docs/paimon.md and docs/iceberg.md on real tables ----------------------------


def _documented(doc: str) -> list[list[str]]:
    (block,) = [b for b in ALL_BLOCKS if b.doc == doc and b.language == "bash"]
    return snaptable_commands(block.code)


def _run_cli(args: list[str]) -> None:
    from airflow_snaptable.cli import main

    assert main(args) == 0, f"snaptable {' '.join(args)}"


def test_the_paimon_commands_run_on_a_table_pypaimon_wrote(paimon, tmp_path):
    """docs/paimon.md's commands with its path standing for a copy of a pypaimon table; pypaimon reads it back
    (``--retain-max 5`` alone was refused: the table's snapshot.num-retained.min is 10)."""
    warehouse = paimon.copy(tmp_path / "paimon")
    table_dir = os.path.join(warehouse, "db.db", "app")
    ran = 0
    for args in _documented("docs/paimon.md"):
        if "/data/paimon/db.db/orders" in args:
            _run_cli([table_dir if a == "/data/paimon/db.db/orders" else a for a in args])
            ran += 1
    assert ran == 2
    read = paimon.read(warehouse, "app")["app"]
    assert sorted(map(int, read["snapshots"])) == [2, 3, 4, 5, 6] and "2026-11-22" in read["tags"]


def test_the_iceberg_commands_run_on_a_table_pyiceberg_wrote(tmp_path):
    """docs/iceberg.md's commands with a real SQL catalog for its catalog properties (``--no-dry-run`` did not exist)."""
    import json

    from pyiceberg.catalog import load_catalog

    from tests.iceberg.conftest import SCHEMA as ICEBERG_SCHEMA, read_everything, rows

    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    properties = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}
    catalog = load_catalog("default", **properties)
    catalog.create_namespace("db")
    iceberg = catalog.create_table("db.orders", schema=ICEBERG_SCHEMA)
    for i in range(3):
        iceberg.append(rows(i))
    stray = warehouse / "db" / "orders" / "data" / "stray.parquet"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"x")
    os.utime(stray, (OLD_FILE, OLD_FILE))
    commands = _documented("docs/iceberg.md")
    assert [args[:2] for args in commands] == [["expire", "iceberg://db.orders"], ["tag", "create"], ["clean-orphans", "iceberg://db.orders"]]
    for args in commands:
        at = args.index("--catalog")
        _run_cli(args[:at + 1] + [json.dumps(properties)] + args[at + 2:])
    assert not stray.exists()  # --no-dry-run deleted the orphan
    assert "nightly" in iceberg.refresh().metadata.refs and read_everything(iceberg)


OLD_FILE = 1_000_000_000  # 2001: older than any window


def test_no_block_that_runs_installs_anything():
    """A block the test runs must not change the test's own venv (or fetch a published release of this package)."""
    installing = [str(b) for b in ALL_BLOCKS if not b.not_run and re.search(r"\bpip\s+install\b", b.code)]
    assert installing == []
