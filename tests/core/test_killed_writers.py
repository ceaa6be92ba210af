"""Temp files left by writers killed with SIGKILL mid-write are removed by the rerun (issue 22 item 11).

A local atomic write leaves ``.<target>.<host>-<pid>.<random>.tmp`` when its process dies between
writing the temp file and renaming it. Before, nothing but an orphan clean past its window
removed them, so ``verify`` failed after a successful rerun. Now the rerun removes the temp files
of its own kind whose writer is gone (a dead pid of this host, or older than any write takes),
never a live writer's. Real processes are killed here (tests/killed_writer.py), at every kind of
write the lifecycle makes: pending and active plans, intents, tags, consumers, re-add entries.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.io.local_files import ABANDONED_TEMP_SECONDS, host_token
from airflow_snaptable.core.io.storage import Storage
from tests.conftest import SCHEMA, make_rows
from tests.killed_writer import run_killed, start_paused, temp_files

EXPIRE = "Table.open(uri).expire_snapshots(retain_min=1, retain_max=2, time_retained='0 s')"
TAG = "Table.open(uri).create_tag('audit', 2)"
CONSUMER = "Table.open(uri).update_consumer('reader', 3)"
KEEP_HISTORY = "Table.open(uri).rollback_to(2, keep_history=True)"


def _history(uri: str, commits: int = 5) -> Table:
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    for i in range(commits):
        table.append(make_rows([i]))
    table.overwrite(make_rows([100]))  # so that a keep-history rollback adds files back (a re-add entry)
    return table


@pytest.mark.parametrize(
    "at, code, directory",
    [
        ("/plan/pending-", EXPIRE, "plan"),
        ("/plan/plan-", EXPIRE, "plan"),
        ("/intent/intent-", TAG, "intent"),
        ("/tag/tag-audit", TAG, "tag"),
        ("/consumer/consumer-reader", CONSUMER, "consumer"),
        ("/readd/readd-pending-", KEEP_HISTORY, "readd"),
    ],
    ids=["pending-plan", "active-plan", "intent", "tag", "consumer", "readd"],
)
def test_the_rerun_of_a_killed_write_removes_its_temp_file(tmp_path, at, code, directory):
    uri = str(tmp_path / "t")
    _history(uri)
    run_killed(uri, at, code)
    assert len(temp_files(uri, directory)) == 1  # what the kill left
    exec(code, {"Table": Table, "uri": uri})  # the rerun, in a live process
    assert temp_files(uri, directory) == []
    result = Table.open(uri).verify()
    assert result.ok, result.to_dict()


def test_a_live_writers_temp_file_is_never_removed(tmp_path):
    """A writer paused between writing its temp file and linking it (a live process) while other writers and an
    expiry run: its temp file stays, and its tag is created when it goes on."""
    uri = str(tmp_path / "t")
    _history(uri)
    paused = start_paused(tmp_path, uri, "/tag/tag-audit", TAG)
    try:
        live = temp_files(uri, "tag")
        assert len(live) == 1
        table = Table.open(uri)
        table.create_tag("other", 3)  # removes abandoned temp files of tag/ first
        table.update_consumer("reader", 3)
        table.expire_snapshots(retain_min=1, retain_max=4, time_retained="0 s")  # and of plan/, intent/, readd/
        assert temp_files(uri, "tag") == live
    finally:
        paused.release()
    assert Table.open(uri).tag("audit").snapshot_id == 2
    assert temp_files(uri, "tag") == []
    assert Table.open(uri).verify().ok


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_which_temp_files_are_abandoned(tmp_path):
    """Abandoned: a dead process of this host, or older than any write takes (any writer, Paimon's Java ones too).
    Kept: a running process's, a fresh one of another host (its pid says nothing here), and anything not a temp file."""
    storage = Storage.from_uri(str(tmp_path))
    os.makedirs(tmp_path / "tag")
    names = {
        f".tag-a.{host_token()}-{_dead_pid()}.0123456789abcdef.tmp": False,
        f".tag-b.{host_token()}-{os.getpid()}.0123456789abcdef.tmp": True,
        ".tag-c.ffffffff-1.0123456789abcdef.tmp": True,
        ".tag-d.3f1b7c2e-9d8a-4e6b-8c1d-2a9b0e4f5c6d.tmp": True,  # another writer's (no owner): age only
        "tag-e": True,
        ".tag-f.ffffffff-1.0123456789abcdef.tmp.old": True,
    }
    old = {".tag-g.ffffffff-1.0123456789abcdef.tmp": False, ".tag-h.3f1b7c2e-9d8a-4e6b-8c1d-2a9b0e4f5c6d.tmp": False,
           f".tag-i.{host_token()}-{os.getpid()}.0123456789abcdef.tmp": False}
    for name in list(names) + list(old):
        (tmp_path / "tag" / name).write_bytes(b"{")
    past = time.time() - ABANDONED_TEMP_SECONDS - 60
    for name in old:
        os.utime(tmp_path / "tag" / name, (past, past))
    storage.remove_abandoned_temps("tag")
    assert sorted(os.listdir(tmp_path / "tag")) == sorted(name for name, kept in names.items() if kept)
