"""Data expiry (issue 27 item 3): rows older than a retention by a time column go in one commit,
on this package's tables and on Iceberg tables (pyiceberg reads the result back); a Paimon table
fails closed; a dry run lists what goes and changes nothing; bad input changes nothing."""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import ExpireData, action_from_json
from airflow_snaptable.core.errors import InvalidArgumentError, UnsupportedOperationError

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 6, 30, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


def _days_ago(days: float, now: dt.datetime = NOW) -> dt.datetime:
    return (now - dt.timedelta(days=days)).replace(tzinfo=None)


SCHEMA = pa.schema([("day", pa.date32()), ("ts", pa.timestamp("us")), ("id", pa.int64())])


def _rows(spec: list[tuple[int, float]], now: dt.datetime = NOW) -> pa.Table:
    """(id, age in days) -> rows whose ``ts`` is that old and ``day`` is its date."""
    return pa.table({
        "day": [_days_ago(age, now).date() for _i, age in spec],
        "ts": [_days_ago(age, now) for _i, age in spec],
        "id": [i for i, _age in spec],
    }, schema=SCHEMA)


def _ids(table: Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def _files(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, _s, names in os.walk(root) for n in names}


def test_rows_older_than_the_retention_go_in_one_commit_and_mixed_files_are_rewritten(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    table.append(_rows([(1, 40), (2, 35)]))  # all old: dropped whole
    table.append(_rows([(3, 31), (4, 2)]))  # mixed: rewritten with 4
    table.append(_rows([(5, 1)]))  # young: untouched
    before = table.latest_snapshot().id
    result = table.expire_data("ts", "30 d", now=NOW_MS)
    assert result.rows_deleted == 3 and len(result.data_files_removed) == 2 and len(result.data_files_added) == 1
    assert result.snapshot_id == before + 1
    assert _ids(Table.open(str(tmp_path / "t"))) == [4, 5]
    assert _ids(table) and sorted(table.scan(snapshot_id=before).to_arrow().column("id").to_pylist()) == [1, 2, 3, 4, 5]
    # Nothing old is left: a second run commits nothing.
    again = table.expire_data("ts", "30 d", now=NOW_MS)
    assert again.rows_deleted == 0 and again.snapshot_id is None and table.latest_snapshot().id == before + 1
    assert table.verify().ok


def test_a_partition_column_drops_whole_partitions_and_a_dry_run_lists_them(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["day"])
    table.append(_rows([(1, 40), (2, 40), (3, 10), (4, 0)]))
    files = _files(tmp_path / "t")
    dry = table.expire_data("day", "30 d", now=NOW_MS, dry_run=True)
    assert dry.dry_run and dry.rows_deleted == 2 and dry.partitions_dropped == [{"day": _days_ago(40).date()}]
    assert dry.snapshot_id is None and _files(tmp_path / "t") == files and _ids(table) == [1, 2, 3, 4]
    done = table.expire_data("day", "30 d", now=NOW_MS)
    assert done.partitions_dropped == dry.partitions_dropped and done.data_files_removed == dry.data_files_removed
    assert done.data_files_added == [] and _ids(table) == [3, 4]


def test_a_null_time_stays_and_bad_input_changes_nothing(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    table.append(pa.table({"day": [None, _days_ago(50).date()], "ts": [None, _days_ago(50)], "id": [1, 2]}, schema=SCHEMA))
    files = _files(tmp_path / "t")
    for column, retention, error in [("id", "1 d", InvalidArgumentError), ("nope", "1 d", InvalidArgumentError),
                                     ("ts", "-1 d", InvalidArgumentError), ("ts", "soon", InvalidArgumentError)]:
        with pytest.raises(error):
            table.expire_data(column, retention, now=NOW_MS)
    assert _files(tmp_path / "t") == files
    assert table.expire_data("ts", "1 d", now=NOW_MS).rows_deleted == 1
    assert _ids(table) == [1]


def test_a_concurrent_delete_of_a_file_fails_the_expiry(tmp_path, monkeypatch):
    """The commit names the files it replaces: one replaced meanwhile (an overwrite) is a conflict,
    and the rows the overwrite wrote are not lost."""
    from airflow_snaptable.core.errors import CommitConflictError
    from airflow_snaptable.core.write import data_expiry

    table = Table.create(str(tmp_path / "t"), SCHEMA)
    table.append(_rows([(1, 40), (2, 1)]))
    other = Table.open(str(tmp_path / "t"))
    real = data_expiry.split_by_partition

    def race(rows, schema):
        other.overwrite(_rows([(7, 50), (8, 1)]))
        return real(rows, schema)

    monkeypatch.setattr(data_expiry, "split_by_partition", race)
    with pytest.raises(CommitConflictError):
        table.expire_data("ts", "30 d", now=NOW_MS)
    assert _ids(Table.open(str(tmp_path / "t"))) == [7, 8]


def test_the_action_cli_and_json_agree(tmp_path, capsys):
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA)
    table.append(_rows([(1, 40), (2, 1)], now=dt.datetime.now(UTC)))  # the CLI runs on the real clock
    assert main(["expire-data", uri, "--column", "ts", "--retention", "30 d", "--dry-run", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["result"]["dry_run"] is True and shown["result"]["rows_deleted"] == 1
    action = action_from_json({"action": "expire-data", "table": uri, "column": "ts", "retention": "30 d"})
    assert isinstance(action, ExpireData)
    assert action.run(Table.open(uri))["result"]["rows_deleted"] == 1
    assert _ids(Table.open(uri)) == [2]
    with pytest.raises(InvalidArgumentError):
        ExpireData(table=uri, column="ts", retention="later")


def test_a_paimon_table_fails_closed(paimon, tmp_path):
    warehouse = paimon.copy(tmp_path / "w")
    table_dir = os.path.join(warehouse, "db.db", "app")
    files = _files(table_dir)
    with pytest.raises(UnsupportedOperationError, match="not supported on paimon"):
        Table.open(table_dir).expire_data("p", "1 d")
    assert _files(table_dir) == files


def test_an_iceberg_table_loses_its_old_rows_and_pyiceberg_reads_the_rest(tmp_path):
    from pyiceberg.catalog import load_catalog

    (tmp_path / "w").mkdir()
    props = {"type": "sql", "uri": f"sqlite:///{tmp_path}/c.db", "warehouse": f"file://{tmp_path}/w"}
    catalog = load_catalog("default", **props)
    catalog.create_namespace("db")
    iceberg = catalog.create_table("db.events", schema=SCHEMA)
    iceberg.append(_rows([(1, 40), (2, 35)]))
    iceberg.append(_rows([(3, 31), (4, 2)]))
    iceberg.append(_rows([(5, 1)]))
    ours = Table.open("iceberg://db.events", catalog=props)
    dry = ours.expire_data("ts", "30 d", now=NOW_MS, dry_run=True)
    assert dry.rows_deleted == 3 and len(dry.data_files_removed) == 2 and dry.snapshot_id is None
    assert len(iceberg.refresh().metadata.snapshots) == 3
    done = ours.expire_data("ts", "30 d", now=NOW_MS)
    assert done.rows_deleted == 3 and done.snapshot_id == iceberg.refresh().current_snapshot().snapshot_id
    assert sorted(iceberg.refresh().scan().to_arrow().column("id").to_pylist()) == [4, 5]
    assert ours.expire_data("ts", "30 d", now=NOW_MS).snapshot_id is None
    with pytest.raises(InvalidArgumentError):
        ours.expire_data("id", "30 d", now=NOW_MS)


def test_an_iceberg_table_partitioned_by_date_drops_its_old_partitions(tmp_path):
    """An Iceberg table partitioned by a date column (identity): the old partitions' files go whole, no
    file is rewritten; pyiceberg reads the rest."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.transforms import IdentityTransform

    (tmp_path / "w").mkdir()
    props = {"type": "sql", "uri": f"sqlite:///{tmp_path}/c.db", "warehouse": f"file://{tmp_path}/w"}
    catalog = load_catalog("default", **props)
    catalog.create_namespace("db")
    iceberg = catalog.create_table("db.events", schema=SCHEMA)
    with iceberg.update_spec() as spec:
        spec.add_field("day", IdentityTransform(), "day")
    iceberg = iceberg.refresh()
    iceberg.append(_rows([(1, 40), (2, 41), (3, 1)]))
    ours = Table.open("iceberg://db.events", catalog=props)
    dry = ours.expire_data("day", "30 d", now=NOW_MS, dry_run=True)
    assert dry.rows_deleted == 2 and len(dry.data_files_removed) == 2
    done = ours.expire_data("day", "30 d", now=NOW_MS)
    assert done.rows_deleted == 2 and sorted(done.data_files_removed) == sorted(dry.data_files_removed) and done.data_files_added == []
    assert sorted(iceberg.refresh().scan().to_arrow().column("id").to_pylist()) == [3]


class _Crash(Exception):
    pass


def test_a_crash_at_every_storage_operation_leaves_the_rows_before_or_after(tmp_path):
    """A data expiry killed at any storage operation: the table reads its rows before or after, never
    a mix, and a rerun finishes the expiry."""

    def fresh(name: str) -> Table:
        table = Table.create(str(tmp_path / name), SCHEMA)
        table.append(_rows([(1, 40), (2, 35)]))
        table.append(_rows([(3, 31), (4, 2)]))
        return table

    counted = fresh("count")
    seen = []
    counted.storage.on_operation = lambda kind, path: seen.append(kind)
    counted.expire_data("ts", "30 d", now=NOW_MS)
    counted.storage.on_operation = None
    assert seen
    for n in range(len(seen)):
        table = fresh(f"t{n}")
        calls = {"n": 0}

        def crash(kind, path, n=n, calls=calls):
            calls["n"] += 1
            if calls["n"] == n + 1:
                raise _Crash(f"{kind} {path}")

        table.storage.on_operation = crash
        try:
            table.expire_data("ts", "30 d", now=NOW_MS)
        except _Crash:
            pass  # a failure after the commit point is only logged: the commit stands
        assert calls["n"] > n
        reopened = Table.open(str(tmp_path / f"t{n}"))
        assert _ids(reopened) in ([1, 2, 3, 4], [4]), n
        reopened.expire_data("ts", "30 d", now=NOW_MS)
        assert _ids(Table.open(str(tmp_path / f"t{n}"))) == [4], n
