"""Real Apache Paimon tables for the tests: pypaimon (its own venv, scripts/pypaimon-venv) writes them
once per session; each test works on a copy and asks pypaimon to read every snapshot and tag back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = Path(__file__).resolve().parent / "pypaimon_client.py"
FAR_FUTURE = 4_102_444_800_000  # 2100-01-01

COLUMNS = [["p", "string"], ["id", "int64"], ["v", "string"]]
#: The append table (bucket -1, partitioned, a file index beside the data files of commits 1, 2 and 4), the primary-key table
#: (2 fixed buckets) and a primary-key table with compactions (files at levels 0 and 5): several
#: commits each, overwrites among them, tags. Snapshot ids in comments.
SCENARIO = [
    {"create": "db.app", "columns": COLUMNS, "partition": ["p"],
     "options": {"bucket": "-1", "file-index.bloom-filter.columns": "id"}},
    {"write": "db.app", "rows": [["a", 1, "x"], ["b", 2, "y"]], "index": True},  # 1
    {"write": "db.app", "rows": [["a", 3, "x"], ["c d/e", 4, "y"]], "index": True},  # 2
    {"write": "db.app", "rows": [["a", 5, "z"]], "overwrite": {"p": "a"}},  # 3: p=a files of 1 and 2 deleted
    {"write": "db.app", "rows": [["b", 6, "w"]], "index": True},  # 4
    {"write": "db.app", "rows": [["a", 7, "v"], ["b", 8, "v"]], "overwrite": {}},  # 5: everything deleted
    {"write": "db.app", "rows": [["c d/e", 9, "u"]]},  # 6
    {"tag": "db.app", "name": "t2", "snapshot": 2},
    {"tag": "db.app", "name": "t4", "snapshot": 4, "time_retained": "1d"},
    {"create": "db.pk", "columns": COLUMNS, "partition": ["p"], "pk": ["p", "id"], "options": {"bucket": "2"}},
    {"write": "db.pk", "rows": [["a", 1, "x"], ["b", 2, "y"]]},  # 1
    {"write": "db.pk", "rows": [["a", 1, "x2"], ["b", 3, "y"]]},  # 2
    {"write": "db.pk", "rows": [["a", 7, "q"]], "overwrite": {}},  # 3
    {"write": "db.pk", "rows": [["b", 9, "z"], ["a", 7, "q2"]]},  # 4
    {"write": "db.pk", "rows": [["a", 10, "r"]]},  # 5
    {"tag": "db.pk", "name": "t1", "snapshot": 1},
    # An LSM history: a rewrite compaction, an upgrade compaction (the same file deleted at level 0
    # and added at level 5), then level-0 files over the compacted ones.
    {"create": "db.lsm", "columns": COLUMNS, "partition": ["p"], "pk": ["p", "id"], "options": {"bucket": "2"}},
    {"write": "db.lsm", "rows": [["a", 1, "x"], ["a", 2, "x"], ["b", 3, "y"], ["b", 4, "y"]]},  # 1
    {"write": "db.lsm", "rows": [["a", 1, "x2"], ["a", 5, "z"]]},  # 2
    {"compact": "db.lsm", "partition": "a"},  # 3: COMPACT, p=a rewritten into one level-5 file
    {"compact": "db.lsm", "partition": "b", "upgrade": True},  # 4: COMPACT, p=b's files moved to level 5
    {"write": "db.lsm", "rows": [["a", 2, "x3"], ["b", 3, "y3"]]},  # 5
    {"tag": "db.lsm", "name": "compacted", "snapshot": 3},
    {"read": "db.app"},
    {"read": "db.pk"},
    {"read": "db.lsm"},
]


def pypaimon_python() -> str:
    """The pypaimon venv's python (scripts/pypaimon-venv creates it once; it is idempotent)."""
    subprocess.run([str(ROOT / "scripts" / "pypaimon-venv")], check=True)
    return str(ROOT / ".venv-pypaimon" / "bin" / "python")


def run_client(python: str, warehouse: str, steps: list) -> dict:
    done = subprocess.run(
        [python, str(CLIENT)], input=json.dumps({"warehouse": warehouse, "steps": steps}),
        capture_output=True, text=True, timeout=120,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise AssertionError(f"pypaimon client failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


class Paimon:
    """The session's template warehouse, what pypaimon read from it, and copies for tests."""

    def __init__(self, python: str, template: str, before: dict):
        self.python = python
        self.template = template
        self.before = {name.split(".", 1)[1]: read for name, read in before.items()}

    def copy(self, dest: Path) -> str:
        shutil.copytree(self.template, dest)  # copy2: bytes and modification times
        return str(dest)

    def read(self, warehouse: str, *names: str) -> dict:
        """What pypaimon reads from the tables ``db.<name>`` of ``warehouse``, by name."""
        answer = run_client(self.python, warehouse, [{"read": f"db.{n}"} for n in names])
        return {name.split(".", 1)[1]: read for name, read in answer.items()}


def make_paimon(tmp_path_factory) -> Paimon:
    """The session's Paimon tables (the fixture ``paimon`` of tests/conftest.py, shared by tests/paimon and tests/spark)."""
    python = pypaimon_python()
    template = str(tmp_path_factory.mktemp("paimon") / "warehouse")
    before = run_client(python, template, SCENARIO)
    return Paimon(python, template, before)


def table_root(warehouse: str, name: str) -> str:
    """The directory of the table ``db.<name>`` in a pypaimon warehouse."""
    return os.path.join(warehouse, "db.db", name)


def open_table(warehouse: str, name: str):
    """The table ``db.<name>`` of a pypaimon warehouse, opened by this package."""
    from airflow_snaptable.core import Table

    return Table.open(table_root(warehouse, name))


def table_files(table_dir: str) -> set[str]:
    """The data and manifest files under a Paimon table (relative paths): what expiry and cleaning may delete."""
    found = set()
    for directory, _dirs, names in os.walk(table_dir):
        rel = os.path.relpath(directory, table_dir)
        top = rel.split(os.sep)[0]
        if top in ("snapshot", "tag", "consumer", "schema", "snaptable"):
            continue
        found.update(os.path.join(rel, n) if rel != "." else n for n in names)
    return found
