"""Statistics files of expired snapshots under a retention on Apache Iceberg tables (issue 26), judged by
pyiceberg reading the metadata back.

An expiry with ``noncurrent_days`` drops the ``statistics`` and ``partition-statistics`` entries of the
snapshots it removes (as Java's RemoveSnapshots does) and records them; undo puts them back in its one
catalog commit; purge deletes such a file with its run only while no entry of the live metadata names it.
"""

from __future__ import annotations

from airflow_snaptable.core.formats.iceberg.files import Locator
from tests.iceberg.conftest import files_on_disk, read_everything
from tests.iceberg.test_iceberg_noncurrent import FAR, _history, _open


def _puffin(table, snapshot_id: int, kind: str) -> str:
    path = f"{table.location()}/metadata/{snapshot_id}-{kind}.puffin"
    with open(path[len("file://"):], "wb") as handle:
        handle.write(b"PFA1" + bytes(16) + b"PFA1")
    return path


def _with_statistics(table, snapshot_id: int):
    """A statistics file (pyiceberg's ``update_statistics``) and a partition-statistics file (its
    ``set-partition-statistics`` update: pyiceberg has no builder for it) for ``snapshot_id``."""
    from pyiceberg.table.statistics import PartitionStatisticsFile, StatisticsFile
    from pyiceberg.table.update import SetPartitionStatisticsUpdate

    with table.update_statistics() as update:
        update.set_statistics(StatisticsFile(
            snapshot_id=snapshot_id, statistics_path=_puffin(table, snapshot_id, "stats"), file_size_in_bytes=24,
            file_footer_size_in_bytes=12, blob_metadata=[],
        ))
    table = table.refresh()
    with table.transaction() as transaction:
        transaction._apply((SetPartitionStatisticsUpdate(partition_statistics=PartitionStatisticsFile(
            snapshot_id=snapshot_id, statistics_path=_puffin(table, snapshot_id, "partition-stats"), file_size_in_bytes=24,
        )),))
    return table.refresh()


def _statistics(table) -> tuple[list, list]:
    metadata = table.refresh().metadata
    return (
        sorted((f.model_dump() for f in metadata.statistics), key=repr),
        sorted((f.model_dump() for f in metadata.partition_statistics), key=repr),
    )


def test_undo_puts_back_the_statistics_entries_of_the_snapshots_it_restores(iceberg_env):
    table, ids = _history(iceberg_env)
    table = _with_statistics(table, ids[0])
    table = _with_statistics(table, table.metadata.current_snapshot_id)  # a retained snapshot's: untouched
    before, statistics = read_everything(table), _statistics(table)
    assert len(statistics[0]) == len(statistics[1]) == 2
    files = files_on_disk(iceberg_env.location())
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(10, "expire") as run:
        assert ids[0] in ours.expire_snapshots(retain_min=1, older_than=FAR).expired_snapshot_ids
    assert [f.snapshot_id for f in table.refresh().metadata.statistics] == [table.refresh().metadata.current_snapshot_id]
    assert files_on_disk(iceberg_env.location()) >= files, "the statistics files stay, noncurrent"
    _open(iceberg_env).undo(run.run_id)
    assert _statistics(table) == statistics
    assert read_everything(table) == before
    assert _open(iceberg_env).verify().ok
    assert _open(iceberg_env).remove_orphan_files(older_than="0 s", dry_run=True).orphan_count == 0


def test_undo_refuses_when_a_statistics_file_it_would_list_again_is_gone(iceberg_env):
    import os

    import pytest

    from airflow_snaptable.core.errors import RunPurgedError

    table, ids = _history(iceberg_env)
    table = _with_statistics(table, ids[0])
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(10, "expire") as run:
        ours.expire_snapshots(retain_min=1, older_than=FAR)
    after = read_everything(table), _statistics(table)
    os.remove(os.path.join(iceberg_env.location(), f"metadata/{ids[0]}-stats.puffin"))
    with pytest.raises(RunPurgedError, match="stats.puffin"):
        _open(iceberg_env).undo(run.run_id)
    assert (read_everything(table), _statistics(table)) == after


def test_purge_deletes_a_statistics_file_with_its_run_only_while_nothing_lists_it(iceberg_env):
    table, ids = _history(iceberg_env)
    table = _with_statistics(table, ids[0])
    table = _with_statistics(table, ids[3])
    location = iceberg_env.location()
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(0, "expire"):
        ours.expire_snapshots(retain_min=1, older_than=FAR)
    # The current snapshot's statistics now name one of the files the run holds: referenced again.
    from pyiceberg.table.statistics import StatisticsFile

    table = table.refresh()
    reused = f"{table.location()}/metadata/{ids[3]}-stats.puffin"
    with table.update_statistics() as update:
        update.set_statistics(StatisticsFile(
            snapshot_id=table.metadata.current_snapshot_id, statistics_path=reused, file_size_in_bytes=24,
            file_footer_size_in_bytes=12, blob_metadata=[],
        ))
    held = {p for e in _open(iceberg_env).noncurrent_journal().entries() for p, _s in e.files}
    names = {f"metadata/{i}-{kind}.puffin" for i in (ids[0], ids[3]) for kind in ("stats", "partition-stats")}
    assert names <= held
    result = _open(iceberg_env).purge()
    on_disk = files_on_disk(location)
    assert Locator(table.location()).relative(reused) in on_disk and result.kept_referenced_files >= 1
    assert not (names - {f"metadata/{ids[3]}-stats.puffin"}) & on_disk
    assert [f.statistics_path for f in table.refresh().metadata.statistics] == [reused]
    assert _open(iceberg_env).verify().ok
