"""Planning, expiry, a sensor poke and the CLI import neither pandas nor pyarrow.dataset (issue 34 item 19).

A fresh process pays for what it imports: pandas is most of a second on a busy machine, and pyarrow.dataset
imports it. A sensor poke, a CLI call and a mapped task are fresh processes, so each path below runs in its own
interpreter, which then reports whether either module was loaded.

pyarrow (26) imports pandas the first time it converts a Python value to Arrow (``pa.scalar``, ``pa.array``,
``Schema.empty_table``, a compute call or an expression with a Python literal), and pyarrow.dataset imports it: these
paths build their Arrow values from buffers (core/native/arrow_values.py) and judge a DNF filter's partitions and
column statistics from its terms (core/native/dnf_pruning.py), so a filtered plan, data skipping by statistics and
orphan cleaning load neither. A filter given as a ``pyarrow.compute.Expression`` is still judged by a dataset
(pandas loads): only a DNF filter plans without it. Reading rows (``to_arrow``) loads pyarrow.dataset through
pyarrow.parquet's reader: not a planning path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_snaptable.core import Table

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = ("pandas", "pyarrow.dataset")


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    """A lake with one partitioned table of six snapshots (written here: the paths below only read and expire)."""
    lake = tmp_path_factory.mktemp("lake")
    schema = pa.schema([("p", pa.int64()), ("x", pa.int64())])
    table = Table.create(str(lake / "sales" / "orders"), schema, partition_by=["p"])
    for i in range(6):
        table.append(pa.table({"p": [i % 2, 2], "x": [i, i]}, schema=schema))
    (lake.parent / f"{lake.name}-policy.json").write_text(json.dumps({"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 3}}}))
    return lake


def cli(*args: str) -> str:
    return f"from airflow_snaptable.cli import main; main({list(args)!r})"


def paths(lake: Path) -> dict[str, str]:
    uri, policy = str(lake / "sales" / "orders"), str(lake.parent / f"{lake.name}-policy.json")
    table = f"from airflow_snaptable.core import Table; table = Table.open({uri!r})"
    return {
        "plan the latest snapshot": f"{table}; assert table.scan().files()",
        "plan a snapshot and a change set": f"{table}; table.scan(snapshot_id=2).files(); table.changes(2).added_record_count",
        "sensor poke": (
            "import os, json; os.environ['AIRFLOW_CONN_SNAPTABLE_DEFAULT'] = json.dumps({'conn_type': 'snaptable'}); "
            "from airflow_snaptable.sensors import NewSnapshotSensor; "
            f"assert NewSnapshotSensor(task_id='wait', table={uri!r}, after_snapshot_id=1).poke({{}}).is_done"
        ),
        "find_new_snapshots with changes": (
            f"{table}; from airflow_snaptable.core.incremental import find_new_snapshots; "
            "assert find_new_snapshots(table, after_snapshot_id=1, with_changes=True).found"
        ),
        "cli snapshots, show, tags, verify": "; ".join(cli(c, uri) for c in ("snapshots", "show", "tags", "verify")),
        "cli new-snapshots": cli("new-snapshots", uri, "--after-snapshot-id", "1"),
        "cli timeline": cli("timeline", uri, "--out", str(lake.parent / f"{lake.name}.svg")),
        "cli status and health": "; ".join(cli(c, str(lake)) for c in ("status", "health")),
        "cli maintain (expiry by policy)": cli("maintain", str(lake), "--policy", policy),
        "cli expire": cli("expire", uri, "--retain-max", "2", "--retain-min", "1"),
        "plan one partition": f"{table}; assert len(table.scan(filter=[('p', '=', 1)]).files()) == 3",
        "plan a range of partitions and an in list": (
            f"{table}; assert len(table.scan(filter=[('p', '>=', 1), ('p', '<', 2)]).files()) == 3; "
            "assert len(table.scan(filter=[[('p', 'in', [0, None])], [('p', '!=', 2), ('x', '=', 4)]]).files()) == 6"
        ),
        "plan by column statistics": f"{table}; assert len(table.scan(filter=[('x', '>', 4)]).files()) == 2",
        "cli clean-orphans (dry run)": cli("clean-orphans", uri),
    }


PATHS = list(paths(Path("/lake")))


@pytest.mark.parametrize("name", PATHS)
def test_a_fresh_process_imports_neither_pandas_nor_pyarrow_dataset(name, lake):
    code = paths(lake)[name]
    report = f"\nimport sys, json\nprint(json.dumps([m for m in {FORBIDDEN!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", code + report], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == [], f"{name} imported {loaded}"
