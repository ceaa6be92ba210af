"""Renaming a tag (Paimon's renameTag): same snapshot, create time, TTL and source; safe against expiry and crashes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_snaptable.core import Table, TagAlreadyExistsError, TagNotFoundError
from airflow_snaptable.core.errors import InvalidArgumentError, InvalidNameError
from tests.conftest import SCHEMA, make_rows, sorted_ids


@pytest.fixture
def table(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.append(make_rows(range(0, 6)))  # 1
    table.overwrite(make_rows(range(6, 12)))  # 2: every file of 1 is deleted
    table.append(make_rows(range(12, 15)))  # 3
    return table


def test_a_renamed_tag_keeps_everything_but_its_name_and_still_protects_its_files(table):
    first = table.create_tag("first", 1, time_retained="30 d")
    renamed = table.rename_tag("first", "day-one")
    assert (renamed.snapshot_id, renamed.create_time_millis, renamed.time_retained_millis, renamed.source) == (
        1, first.create_time_millis, first.time_retained_millis, first.source
    )
    assert [t.name for t in table.tags()] == ["day-one"]
    table.expire_snapshots(retain_min=1, time_retained="0 s")
    assert sorted_ids(table.scan(tag="day-one").to_arrow()) == list(range(6))  # snapshot 1 expired, its files kept
    assert table.delete_tag("day-one")  # now the files only it held go
    assert table.verify().ok


def test_bad_renames_change_nothing(table):
    table.create_tag("a", 1)
    table.create_tag("b", 2)
    with pytest.raises(TagAlreadyExistsError):
        table.rename_tag("a", "b")
    with pytest.raises(TagNotFoundError):
        table.rename_tag("missing", "c")
    with pytest.raises(InvalidNameError):
        table.rename_tag("a", "../c")
    with pytest.raises(InvalidArgumentError):
        table.rename_tag("a", "a")
    assert [(t.name, t.snapshot_id) for t in table.tags()] == [("a", 1), ("b", 2)]


def test_a_rename_that_crashed_after_publishing_the_new_name_is_finished_by_a_rerun(table):
    table.create_tag("old", 1)
    calls = []

    def crash(kind, path):
        if kind == "delete" and path == "tag/tag-old":
            calls.append(path)
            raise OSError("killed")

    table.storage.on_operation = crash
    with pytest.raises(OSError):
        table.rename_tag("old", "new")
    table.storage.on_operation = None
    assert calls and {t.name for t in table.tags()} == {"old", "new"}  # both hold snapshot 1
    assert table.rename_tag("old", "new").name == "new"
    assert [t.name for t in table.tags()] == ["new"]


def test_the_cli_renames_a_tag(table):
    table.create_tag("draft", 2)
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_snaptable.cli", "tag", "rename", table.uri, "draft", "final", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"]["name"] == "final"
    assert [(t.name, t.snapshot_id) for t in Table.open(table.uri).tags()] == [("final", 2)]
