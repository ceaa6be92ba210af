"""A pypaimon writer commits while our expiry runs on the same Paimon table.

The writer (Apache Paimon's own client, another process) appends one commit after another;
meanwhile this process expires the table down to its newest snapshot, over and over. When the
writer is done, every one of its commits has landed (the latest snapshot reads every row ever
written, as pypaimon reads it), every snapshot left reads, and the files left are exactly the
ones they use: no live file was deleted, nothing leaked.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

from airflow_snaptable.core import Table
from tests.paimon.conftest import CLIENT, FAR_FUTURE, table_files

WRITES = 24


def test_a_pypaimon_writer_committing_while_we_expire_loses_nothing(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    root = os.path.join(warehouse, "db.db", "app")
    # Every fifth commit overwrites partition b with its row, so expiry has data files to delete
    # while the writer runs.
    overwrites = set(range(4, WRITES, 5))
    written = [["b" if i in overwrites or i % 3 == 0 else "a", 1000 + i, f"w{i}"] for i in range(WRITES)]
    steps = [{"write": "db.app", "rows": [row]} for row in written]
    for i in overwrites:
        steps[i]["overwrite"] = {"p": "b"}
    writer = subprocess.Popen(
        [paimon.python, str(CLIENT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    writer.stdin.write(json.dumps({"warehouse": warehouse, "steps": steps}))
    writer.stdin.close()

    expired, runs_that_expired = [], 0
    while writer.poll() is None:
        result = Table.open(root).expire_snapshots(retain_min=1, retain_max=1, now=FAR_FUTURE)
        expired += result.expired_snapshot_ids
        runs_that_expired += bool(result.expired_snapshot_ids)
        time.sleep(0.01)
    assert writer.returncode == 0, writer.stderr.read()[-3000:]
    result = Table.open(root).expire_snapshots(retain_min=1, retain_max=1, now=FAR_FUTURE)
    expired += result.expired_snapshot_ids
    assert runs_that_expired >= 5, "expiries must have interleaved with the writer's commits"
    assert sorted(expired) == list(range(1, 6 + WRITES)), "each snapshot expired once, the newest stays"

    # Every commit landed: the newest snapshot holds the template's rows plus the writer's, as the
    # overwrites of partition b left them.
    expected = [r for r in paimon.before["app"]["snapshots"]["6"]["rows"]]
    for i, row in enumerate(written):
        if "overwrite" in steps[i]:
            expected = [r for r in expected if r[0] != "b"]
        expected.append(row)
    key = lambda r: json.dumps(r, sort_keys=True, default=str)
    after = paimon.read(warehouse, "app")["app"]
    assert list(after["snapshots"]) == [str(6 + WRITES)]
    latest = after["snapshots"][str(6 + WRITES)]
    assert "error" not in latest, latest
    assert latest["rows"] == sorted(expected, key=key)
    for tag, read in after["tags"].items():
        assert read["rows"] == paimon.before["app"]["tags"][tag]["rows"], tag
    used = {f for read in list(after["snapshots"].values()) + list(after["tags"].values()) for f in read["files"]}
    assert table_files(root) == used
    assert Table.open(root).verify().ok
