"""Issue 9 item 12: missing metadata of snapshots being expired, and the way out.

Expiry fails closed when it cannot read what it plans from (right for deleting), but a
missing manifest list of the earliest snapshot then blocks every expiry for ever. The
repair path, ``expire_snapshots(skip_missing=True)``, skips only the missing metadata of
the snapshots being expired; what protects (the first kept snapshot, tags) must still
read, and no file a retained snapshot or tag references is deleted.
"""

from __future__ import annotations

import os

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import MissingMetadataError
from airflow_snaptable.core.native.manifest import manifest_path
from tests.conftest import SCHEMA, make_rows, sorted_ids
from tests.core.test_lifecycle import make_table


def _remove(table: Table, name: str) -> None:
    os.remove(os.path.join(table.uri, manifest_path(name)))


def _fresh(table: Table) -> Table:
    """A maintenance run is a new process: nothing of the writer's caches."""
    return Table.open(table.uri)


def _history(uri: str):
    history = make_table(uri)
    for _ in range(3):
        history.append(3)
    history.overwrite(3, partition=0)  # 4: replaces partition 0
    history.append(3)  # 5
    history.append(3)  # 6
    return history


def test_a_missing_list_of_the_earliest_snapshot_fails_closed_and_names_the_way_out(tmp_path):
    history = _history(str(tmp_path / "t"))
    table = history.table
    _remove(table, table.snapshot(1).base_manifest_list)
    table = _fresh(table)
    before = sorted(os.listdir(os.path.join(table.uri, "data", "p=0")))
    with pytest.raises(MissingMetadataError, match="skip_missing"):
        table.expire_snapshots(retain_min=2, time_retained="0 s")
    assert [s.id for s in table.snapshots()] == list(range(1, 7))
    assert sorted(os.listdir(os.path.join(table.uri, "data", "p=0"))) == before


def test_skip_missing_expires_past_it_and_deletes_only_what_nothing_retained_uses(tmp_path):
    history = _history(str(tmp_path / "t"))
    table = history.table
    first = table.snapshot(1)
    _remove(table, first.base_manifest_list)
    _remove(table, first.delta_manifest_list)
    table.create_tag("keep", 3)
    table = _fresh(table)
    result = table.expire_snapshots(retain_min=2, time_retained="0 s", skip_missing=True)
    assert result.expired_snapshot_ids == [1, 2, 3, 4]
    assert sorted(result.missing_metadata) == sorted(manifest_path(n) for n in (first.base_manifest_list, first.delta_manifest_list))
    for snapshot_id in (5, 6):
        assert sorted_ids(table.scan(snapshot_id=snapshot_id).to_arrow()) == history.model[snapshot_id]
    assert sorted_ids(table.scan(tag="keep").to_arrow()) == history.model[3]
    assert table.verify().missing_files == []
    # What the broken snapshot alone referenced is left for orphan cleaning, which works again.
    table.remove_orphan_files(older_than="0 s", dry_run=False, now=table.clock() + 1000)
    assert table.verify().ok, table.verify()


def test_skip_missing_still_fails_closed_on_what_protects(tmp_path):
    """A missing list of the first kept snapshot or of a tag still stops the run: skipping it could delete live files."""
    history = _history(str(tmp_path / "t"))
    table = history.table
    table.create_tag("keep", 2)
    _remove(table, table.tag("keep").snapshot.base_manifest_list)
    table = _fresh(table)
    with pytest.raises(MissingMetadataError):
        table.expire_snapshots(retain_min=2, time_retained="0 s", skip_missing=True)
    assert [s.id for s in table.snapshots()] == list(range(1, 7))


def test_skip_missing_never_deletes_a_file_the_first_kept_snapshot_uses(tmp_path):
    """A skipped delta may be the one that added a file back: the kept state is the safety net.

    1 adds A; 2 deletes A; 3 adds A back (keep-history rollback); 4..7 append, and 4's base
    merges 3's delta away. Then 3's delta manifest is lost, and with it (an older table) the
    re-add registry: only the kept snapshot 4 still says that A is live.
    """
    import shutil

    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "3"})
    table.append(make_rows([0]))
    table.overwrite(make_rows([3]), partitions=[{"p": 0}])
    table.rollback_to(snapshot_id=1, keep_history=True)
    for i in range(4):
        table.append(make_rows([1 + 3 * i]))
    lost = list(table.snapshot(3).written_metadata["delta_manifests"])
    assert not set(lost) & table.manifest_io.names_of(table.snapshot(4))
    for name in lost:
        _remove(table, name)
    shutil.rmtree(os.path.join(table.uri, "readd"))
    table = _fresh(table)
    result = table.expire_snapshots(retain_min=4, time_retained="0 s", skip_missing=True)
    assert result.expired_snapshot_ids == [1, 2, 3] and result.missing_metadata == [manifest_path(n) for n in lost]
    assert sorted_ids(table.scan().to_arrow()) == [0, 1, 4, 7, 10]
    assert table.verify().missing_files == []


def test_the_cli_takes_the_repair_path(tmp_path, capsys):
    import json

    from airflow_snaptable.cli import main

    history = _history(str(tmp_path / "t"))
    table = history.table
    _remove(table, table.snapshot(1).base_manifest_list)
    assert main(["expire", table.uri, "--retain-min", "2", "--time-retained", "0 s", "--json"]) != 0
    capsys.readouterr()
    assert main(["expire", table.uri, "--retain-min", "2", "--time-retained", "0 s", "--skip-missing", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["result"]["expired_snapshot_ids"] == [1, 2, 3, 4] and len(out["result"]["missing_metadata"]) == 1
