"""Every shell and Python block of README.md and docs/*.md runs as written, so the docs cannot rot.

The blocks of one document run in order, in one empty temporary directory (what one block writes,
the next one reads), with this venv's ``snaptable``, ``python`` and ``airflow`` first on the PATH
and a new, empty Airflow home per document (SQLite once the document migrates it; the DAGs folder ``dags/``
of that directory): the test migrates nothing, so a document says what a new home needs.

- A bash block runs with ``bash -e``; a Python block with this venv's Python.
- A Python block whose first line is a comment naming a file (``# dags/lake_maintenance.py``)
  is that file: it is written there, not run (``airflow dags test`` runs a DAG file).
- A block followed by an ``output`` block must print that output; times, run ids and byte counts
  may differ, and so may the column widths they make.
- An operator call in the prose that names its task (`` `SnapTableExpireSnapshotsOperator(task_id="expire",
  table="lake/sales/orders", retain_max=5)` ``) is an example too: it runs where it stands among the blocks,
  constructed and executed (``execute``) on the document's tables through its connection. A call showing one
  argument (`` `SnapTableCreateTagOperator(if_exists="skip")` ``) is not a whole example.
- Every example value of a ``snaptable`` help text (``e.g. '30 d'``) runs on a real table (``help_examples``).
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


#: An operator or sensor call in inline code that names its task: a whole example (PROSE_CALL_RUNNER runs it).
PROSE_CALL = re.compile(r"`(?P<call>\w+(?:Operator|Sensor)\([^`]*\btask_id=[^`]*\))`")
#: Runs a prose call: the names of airflow_snaptable.operators and .sensors in scope, templates rendered, executed,
#: with the connections the document made (``airflow connections add``) as a task gets them from the metadata database.
PROSE_CALL_RUNNER = """
import os, sys
from airflow.models import Connection
from airflow.utils.session import create_session
with create_session() as session:
    for conn in session.query(Connection):
        os.environ.setdefault("AIRFLOW_CONN_" + conn.conn_id.upper(), conn.as_json())
from airflow_snaptable import operators, sensors
names = {**{n: getattr(operators, n) for n in operators.__all__}, **{n: getattr(sensors, n) for n in sensors.__all__}}
task = eval(sys.argv[1], names)
task.render_template_fields({})
print(task.execute({}))
"""


def prose_calls(doc: Path, text: str) -> list[Block]:
    """The operator calls of ``doc``'s prose (outside fenced blocks), as blocks of the language ``prose-call``."""
    fenced = [m.span() for m in FENCE.finditer(text)]
    found = []
    for match in PROSE_CALL.finditer(text):
        if not any(start <= match.start() < end for start, end in fenced):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(str(doc.relative_to(REPO)), line, "prose-call", " ".join(match["call"].split())))
    return found


def blocks(doc: Path) -> list[Block]:
    """The shell and Python blocks of ``doc``, each with the output block after it, and its prose calls, in order."""
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
    return sorted(found + prose_calls(doc, text), key=lambda block: block.line)


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


@pytest.fixture
def airflow_home(tmp_path) -> Path:
    """A new, empty Airflow home per document: the test sets nothing up, so a document that runs ``airflow``
    commands says what a new home needs (``airflow db migrate``) as a reader's new home needs it."""
    home = tmp_path / "airflow-home"
    home.mkdir()
    return home


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


def run_block(block: Block, workdir: Path, env: dict[str, str]) -> str:
    if block.file:
        target = workdir / block.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code, encoding="utf-8")
        compile(block.code, str(target), "exec")  # a DAG file a document shows is at least valid Python
        return ""
    if block.language == "bash":
        command = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    elif block.language == "prose-call":
        command = [str(VENV_BIN / "python"), "-c", PROSE_CALL_RUNNER, block.code]
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


# -- the examples of the CLI's help texts ---------------------------------------------------------


@dataclass
class HelpExample:
    """A value a help text shows (``e.g. '30 d'``, ``such as '2 d'``) for one argument of one command."""

    command: tuple[str, ...]
    option: str | None  # the flag (None: a positional argument)
    dest: str
    value: str

    def __str__(self) -> str:
        return f"snaptable {' '.join(self.command)} {self.option or self.dest} {self.value}"


#: What introduces an example in a help text, and the value after it: quoted, a JSON array or object, or one word.
_EXAMPLE = re.compile(r"\b(?:e\.g\.|such as) ")


def _example_value(text: str) -> str | None:
    import json

    if text.startswith("'"):
        end = text.find("'", 1)
        return text[1:end] if end > 0 else None
    if text[:1] in "[{":
        try:
            _value, end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            return None
        return text[:end]
    word = re.match(r"[^\s;)]+", text)
    return word.group(0).rstrip(",.") if word else None


def help_examples() -> list[HelpExample]:
    """Every example value in the help of every argument of every ``snaptable`` command.

    Table locations are every command's first argument and run in every example; their help's examples name
    stores this test has no bucket of (``s3://bucket/table``), so they are the one kind left out."""
    import argparse

    from airflow_snaptable.cli import build_parser

    found: list[HelpExample] = []

    def walk(parser: argparse.ArgumentParser, command: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*command, name))
            elif action.help and action.dest != "uri":
                for match in _EXAMPLE.finditer(action.help):
                    value = _example_value(action.help[match.end():])
                    if value is not None:
                        option = max(action.option_strings, key=len) if action.option_strings else None
                        found.append(HelpExample(command, option, action.dest, value))

    walk(build_parser(), ())
    return found


HELP_EXAMPLES = help_examples()
#: The rest of a command line an example needs (the arguments a command requires besides its table).
_REQUIRED = {("tag", "create"): ["nightly"], ("expire-data",): ["--column", "ts"], ("new-snapshots",): ["--after-snapshot-id", "0"],
             ("clean",): ["--policy", "KEEP_LATEST_COMMITS", "--commits-retained", "2"]}
#: The placeholder table of an example whose value names one (run-action's JSON): it runs on the real table.
_PLACEHOLDER_TABLE = "/data/orders"


def _help_example_table(path: Path, snapshots: int = 6):
    """A table with this package's defaults (no options set), partitioned by day, one APPEND per day from 2026-01-01."""
    import datetime as dt

    import pyarrow as pa

    from airflow_snaptable.core import Table

    schema = pa.schema([("day", pa.date32()), ("order_id", pa.int64()), ("ts", pa.timestamp("ms", tz="UTC"))])
    table = Table.create(str(path), schema, partition_by=["day"])
    for i in range(snapshots):
        day = dt.date(2026, 1, 1) + dt.timedelta(days=i)
        when = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
        table.append(pa.table({"day": [day], "order_id": [i], "ts": [when]}, schema=schema))
    return table


def test_the_help_texts_have_examples():
    """The extraction finds what the help texts show (the run-action JSON, durations, sizes, ids, partitions, kinds)."""
    shown = {(" ".join(e.command), e.dest) for e in HELP_EXAMPLES}
    assert {("run-action", "action_json"), ("expire", "time_retained"), ("expire", "snapshot_ids"),
            ("compact", "partitions"), ("new-snapshots", "kinds"), ("clean-orphans", "older_than")} <= shown, shown


@pytest.mark.parametrize("example", HELP_EXAMPLES, ids=str)
def test_every_help_example_runs(example, tmp_path):
    """Each example a help text shows runs as written on a real table with the defaults (an Iceberg table for an
    Iceberg-only command), its command exiting 0: ``snaptable run-action '{"action": "expire-snapshots", ...,
    "retain_max": 5}'`` on a default table included (a minimum nobody set follows a lower maximum)."""
    from airflow_snaptable.cli import build_parser, main

    command = list(example.command)
    if command == ["rewrite-manifests"]:
        uri, catalog = _iceberg_table(tmp_path)
        extra = ["--catalog", catalog]
    else:
        table = _help_example_table(tmp_path / "orders")
        uri, extra = table.uri, []
        if example.dest == "snapshot_ids":
            table.expire_snapshots(snapshot_ids=[1, 2])  # "the oldest retained ones": 3 and 4 are, now
    value = example.value.replace(_PLACEHOLDER_TABLE, uri)
    if example.option is None:
        args = [*command, value, *extra]
    else:
        args = [*command, uri, *_REQUIRED.get(tuple(command), []), example.option, value, *extra]
    build_parser().parse_args(args)  # the example is a value of its argument
    assert main(args) == 0, f"{example}: snaptable {' '.join(args)} failed"


def _iceberg_table(tmp_path: Path) -> tuple[str, str]:
    import json

    import pyarrow as pa
    from pyiceberg.catalog import load_catalog

    from tests.iceberg.conftest import SCHEMA as ICEBERG_SCHEMA

    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    properties = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}
    catalog = load_catalog("default", **properties)
    catalog.create_namespace("db")
    iceberg = catalog.create_table("db.orders", schema=ICEBERG_SCHEMA)
    for i in range(3):
        iceberg.append(pa.table({"p": ["a"], "id": [i]}, schema=ICEBERG_SCHEMA))
    return "iceberg://db.orders", json.dumps(properties)
