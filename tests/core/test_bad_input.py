"""Bad input gets a typed error and changes nothing on storage (issue 9: validation and typed errors).

Every test compares the bytes on storage before and after the bad call: an error
raised after a first write would still leave files behind.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import time
from datetime import timedelta

import pyarrow as pa
import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core import actions
from airflow_snaptable.core.errors import (
    CorruptMetadataError,
    InvalidArgumentError,
    InvalidNameError,
    SnapTableError,
)
from airflow_snaptable.core.arguments.names import MAX_NAME_LENGTH, validate_name
from airflow_snaptable.core.io.storage import Storage
from tests.conftest import SCHEMA, make_rows, sorted_ids
from tests.core.test_lifecycle import History, tree

DAY_MS = 86_400_000
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def real_now_millis() -> int:
    return int(time.time() * 1000)


def history_with_consumer(table: Table) -> History:
    """Six snapshots and a consumer that has read all of them (a default rollback must be forced past it)."""
    history = History(table)
    history.appends(6)
    table.update_consumer("reader", 7)
    return history


# -- item 2: booleans given as strings act as true ------------------------------------------------

#: The arguments each action needs to be made at all; the field under test is laid over them.
REQUIRED = {
    "create-tag": {"tag_name": "t"},
    "delete-tag": {"tag_name": "t"},
    "rename-tag": {"tag_name": "t", "new_name": "u"},
    "clean": {"policy": "KEEP_LATEST_COMMITS"},
    "delete-savepoint": {"snapshot_id": 1},
    "restore-savepoint": {"snapshot_id": 1},
    "rollback": {"snapshot_id": 1},
    "update-consumer": {"consumer_id": "c", "next_snapshot": 1},
    "expire-data": {"column": "ts", "retention": "1 d"},
    "undo": {"run_id": "r1"},
}


def _kinds(field: dataclasses.Field) -> set[str]:
    return {part.strip() for part in str(field.type).split("|")}


def _action_fields():
    for name, cls in sorted(actions.ACTIONS.items()):
        for field in dataclasses.fields(cls):
            if field.name != "table":
                yield pytest.param(cls, field, id=f"{name}.{field.name}")


def _bad_values(field: dataclasses.Field) -> list:
    """Values of the wrong type for the field's annotation (the JSON shapes a user can send)."""
    kinds = _kinds(field)
    candidates = ["false", "true", "2", 0, 1, 2.0, -1, True, None, ["x"], {"a": 1}, math.nan]
    bad = []
    for value in candidates:
        if value is None:
            fits = "None" in kinds
        elif isinstance(value, bool):
            fits = "bool" in kinds
        elif isinstance(value, int):
            # Counts and ids start at 1 (a retention in days at 0); a time (``now``, ``as_of``) may be any epoch millis.
            minimum = field.metadata["param"].minimum
            fits = "int" in kinds and (value >= (1 if minimum is None else minimum) or "str" in kinds)
        elif isinstance(value, str):
            fits = "str" in kinds
        elif isinstance(value, list):
            fits = "list" in kinds
        else:
            fits = False
        if not fits:
            bad.append(value)
    return bad


@pytest.mark.parametrize("cls, field", list(_action_fields()))
def test_every_action_field_is_type_checked_when_the_action_is_made(cls, field):
    """issue 9 item 2: bool fields take only True/False, int fields only non-bool ints >= 1, str fields only strings."""
    bad = _bad_values(field)
    assert bad, f"{field.name}: no wrong value to try"
    for value in bad:
        doc = {"action": cls.name, "table": "/nowhere", **REQUIRED.get(cls.name, {}), field.name: value}
        with pytest.raises(InvalidArgumentError, match=field.name):
            actions.action_from_json(doc)
        with pytest.raises(InvalidArgumentError, match=field.name):
            cls(**{k: v for k, v in doc.items() if k != "action"})


def test_the_rollback_of_the_issue_with_force_false_is_refused_and_changes_nothing(table, table_uri):
    """issue 9 item 2: ``"force": "false"`` forced the rollback (4 snapshots, 12 data files and a consumer lost)."""
    history_with_consumer(table)
    before = tree(table_uri)
    doc = json.dumps({"action": "rollback", "table": table_uri, "snapshot_id": 2, "force": "false"})
    with pytest.raises(InvalidArgumentError, match="force must be True or False"):
        actions.run_action(actions.action_from_json(doc))
    assert tree(table_uri) == before
    # The real False refuses, as the consumer has read past snapshot 2.
    with pytest.raises(InvalidArgumentError, match="consumers have read past"):
        actions.run_action(actions.action_from_json(json.dumps({**json.loads(doc), "force": False})))
    assert tree(table_uri) == before


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda t: t.rollback_to(snapshot_id=2, force="false"), id="rollback-force"),
        pytest.param(lambda t: t.rollback_to(snapshot_id=2, force=1), id="rollback-force-int"),
        pytest.param(lambda t: t.rollback_to(snapshot_id=2, keep_history="false"), id="rollback-keep-history"),
        pytest.param(lambda t: t.rollback_to(snapshot_id=2, keep_history=None), id="rollback-keep-history-none"),
        pytest.param(lambda t: t.expire_snapshots(retain_min=1, time_retained="0 s", dry_run="false"), id="expire-dry-run"),
        pytest.param(lambda t: t.expire_snapshots(retain_min=1, time_retained="0 s", dry_run=0), id="expire-dry-run-0"),
        pytest.param(lambda t: t.remove_orphan_files(older_than="0 s", dry_run="false"), id="orphans-dry-run"),
        pytest.param(lambda t: t.create_periodic_tags("hourly", catch_up="false"), id="periodic-catch-up"),
        pytest.param(lambda t: t.stream("latest", include_overwrite="false"), id="stream-include-overwrite"),
    ],
)
def test_table_methods_take_only_real_booleans(table, table_uri, call):
    """issue 9 item 2: core itself rejects "false", 0 and None where it tests a flag's truthiness."""
    history = history_with_consumer(table)
    history.table.consumer_manager.delete("reader")  # so a forced or unforced rollback would both run
    before = tree(table_uri)
    with pytest.raises(InvalidArgumentError, match="must be True or False"):
        call(table)
    assert tree(table_uri) == before


# -- item 3: orphan cleaning with `now` in the future ----------------------------------------------


@pytest.mark.parametrize("older_than", [None, "1 d", timedelta(hours=1)], ids=repr)
@pytest.mark.parametrize("through", ["table", "action"])
def test_a_future_now_never_lets_orphan_cleaning_delete_an_in_flight_commits_files(table, table_uri, older_than, through):
    """issue 9 item 3: the safety window holds against the real clock, whatever ``now`` says."""
    table.append(make_rows(range(3)))
    cleaned = []

    def clean_while_the_commit_is_in_flight(kind, path):
        # The commit's data files and manifests are written; its snapshot is not published yet.
        if kind == "write" and path.startswith("snapshot/snapshot-") and not cleaned:
            future = real_now_millis() + 10 * DAY_MS
            if through == "table":
                result = Table.open(table_uri).remove_orphan_files(older_than=older_than, dry_run=False, now=future)
                cleaned.append(result.orphan_files)
            else:
                doc = {"action": "remove-orphan-files", "table": table_uri, "dry_run": False, "now": future}
                if older_than is not None:
                    doc["older_than"] = older_than if isinstance(older_than, str) else f"{older_than.total_seconds():g} s"
                cleaned.append(actions.run_action(actions.action_from_json(doc))["result"]["orphan_files"])

    table.storage.on_operation = clean_while_the_commit_is_in_flight
    snapshot = table.append(make_rows(range(3, 12)))
    table.storage.on_operation = None
    assert cleaned == [[]]
    fresh = Table.open(table_uri)
    assert sorted_ids(fresh.scan(snapshot_id=snapshot.id).to_arrow()) == list(range(12))
    assert fresh.verify().ok


def test_an_absolute_older_than_after_the_real_clock_is_an_error_whatever_now_says(table, table_uri):
    """issue 9 item 3: a cutoff in the real future would delete files a running writer has just written."""
    table.append(make_rows(range(3)))
    stray = os.path.join(table_uri, "data", "p=0", "data-just-written.parquet")
    with open(stray, "wb") as handle:
        handle.write(b"a writer's file, not committed yet")
    before = tree(table_uri)
    now = real_now_millis()
    with pytest.raises(InvalidArgumentError, match="future"):
        table.remove_orphan_files(older_than=now + 60_000, dry_run=False, now=now + DAY_MS)
    assert tree(table_uri) == before


# -- item 5: partition key names -------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["x/../../../escaped", "a/b", "k=v", "..", ".", "", " k", "k ", "a\\b", "tab\tkey", ".hidden", "k\u2028"], ids=repr
)
def test_partition_keys_that_break_the_directory_form_are_refused_at_create(tmp_path, key):
    """issue 9 item 5: a key named ``x/../../../escaped`` wrote data files outside the table root."""
    schema = pa.schema([(key, pa.int64()), ("v", pa.int64())])
    uri = str(tmp_path / "a" / "b" / "c" / "table")
    with pytest.raises(InvalidNameError, match="partition key"):
        Table.create(uri, schema, partition_by=[key])
    assert tree(tmp_path) == {}


def test_partition_keys_with_unusual_but_safe_names_work(tmp_path):
    """issue 9 item 5: the rule refuses what breaks ``key=value``, not every unusual name."""
    key = "día de venta-1"
    schema = pa.schema([(key, pa.string()), ("v", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema, partition_by=[key])
    rows = pa.table({key: ["a/b", "..", "x=y"], "v": [1, 2, 3]}, schema=schema)
    table.append(rows)
    assert sorted(Table.open(table.uri).scan().to_arrow().column(key).to_pylist()) == ["..", "a/b", "x=y"]
    data_files = [path for path in tree(tmp_path) if path.endswith(".parquet")]
    assert len(data_files) == 3 and all(path.startswith("t/data/") for path in data_files)


def test_a_string_partition_value_spelled_like_the_null_marker_keeps_its_value(tmp_path):
    """issue 9 item 5: the value "__NULL__" had the directory of a null, so it read back as None."""
    schema = pa.schema([("s", pa.string()), ("v", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema, partition_by=["s"])
    for value in ("__NULL__", None):
        assert table.schema.partition_from_dir(table.schema.partition_dir((value,))) == (value,)
    # commit_files checks a file's directory against its partition: the value's own directory passes.
    from airflow_snaptable.core.native.data_files import split_by_partition, write_partition_files

    rows = pa.table({"s": ["__NULL__", None], "v": [1, 2]}, schema=schema)
    files = [f for partition, group in split_by_partition(rows, table.schema)
             for f in write_partition_files(table.storage, table.schema, partition, group, 1 << 20, "zstd")]
    table.commit_files(files)
    assert sorted(table.scan().to_arrow().column("s").to_pylist(), key=str) == [None, "__NULL__"]


# -- item 8: everything is validated before the first byte is written ------------------------------

BAD_COMMIT_ARGUMENTS = {
    "identifier-without-user": {"commit_identifier": 1},
    "negative-identifier": {"commit_user": "u", "commit_identifier": -1},
    "bool-identifier": {"commit_user": "u", "commit_identifier": True},
    "string-identifier": {"commit_user": "u", "commit_identifier": "1"},
    "int-user": {"commit_user": 5},
    "empty-user": {"commit_user": ""},
    "string-watermark": {"watermark": "5"},
    "bool-watermark": {"watermark": True},
    "float-watermark": {"watermark": 1.5},
}
#: The commit arguments each write takes.
WRITE_ARGUMENTS = {
    "append": {"commit_user", "commit_identifier", "watermark"},
    "overwrite": {"commit_user", "commit_identifier", "watermark"},
    "overwrite-partition": {"commit_user", "commit_identifier", "watermark"},
    "delete": {"commit_user", "commit_identifier"},
    "compact": {"commit_user"},
}


def _write_call(kind: str, arguments: dict):
    rows = make_rows(range(30, 39))
    if kind == "append":
        return lambda t: t.append(rows, **arguments)
    if kind == "overwrite":
        return lambda t: t.overwrite(rows, **arguments)
    if kind == "overwrite-partition":
        return lambda t: t.overwrite(make_rows([30, 33]), partitions=[{"p": 0}], **arguments)
    if kind == "delete":
        return lambda t: t.delete([{"p": 0}], **arguments)
    if kind == "compact":
        return lambda t: t.compact(min_file_num=2, **arguments)
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind, arguments",
    [
        pytest.param(kind, arguments, id=f"{kind}-{name}")
        for kind, takes in WRITE_ARGUMENTS.items()
        for name, arguments in BAD_COMMIT_ARGUMENTS.items()
        if set(arguments) <= takes
    ],
)
def test_commit_arguments_are_checked_before_any_data_file_is_written(table, table_uri, kind, arguments):
    """issue 9 item 8: ``append(commit_identifier=1)`` without a user (and the like) left 3 data files behind."""
    table.append(make_rows(range(3)))
    table.append(make_rows(range(3, 6)))
    before = tree(table_uri)
    with pytest.raises(InvalidArgumentError):
        _write_call(kind, arguments)(table)
    assert tree(table_uri) == before


@pytest.mark.parametrize("arguments", list(BAD_COMMIT_ARGUMENTS.values()), ids=list(BAD_COMMIT_ARGUMENTS))
def test_commit_files_checks_its_commit_arguments_before_writing_metadata(table, table_uri, arguments):
    """issue 9 item 8: commit_files takes the same checks as the other writes."""
    from tests.core.test_commit_files import write_files

    files = write_files(table, make_rows(range(6)))
    before = tree(table_uri)
    with pytest.raises(InvalidArgumentError):
        table.commit_files(files, **arguments)
    assert tree(table_uri) == before


def test_a_partition_value_too_long_for_a_directory_name_writes_no_partition(tmp_path):
    """issue 9 item 8: a 300-character value left the other partitions' files and raised an untyped OSError."""
    schema = pa.schema([("s", pa.string()), ("v", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema, partition_by=["s"])
    before = tree(table.uri)
    for too_long in ("x" * 300, "é" * 50, "x" * 254):  # "é" is 6 bytes percent-encoded; "s=" + 254 > 255
        rows = pa.table({"s": ["a", "b", too_long, "c"], "v": [1, 2, 3, 4]}, schema=schema)
        with pytest.raises(InvalidArgumentError, match="255 bytes"):
            table.append(rows)
        with pytest.raises(InvalidArgumentError, match="255 bytes"):
            table.overwrite(rows)
        assert tree(table.uri) == before
    longest = "x" * 253  # "s=" + 253 bytes: exactly 255
    table.append(pa.table({"s": [longest, "a"], "v": [1, 2]}, schema=schema))
    assert sorted(Table.open(table.uri).scan().to_arrow().column("s").to_pylist()) == ["a", longest]


@pytest.mark.parametrize(
    "spec",
    [{"p": "0"}, {"p": True}, {"p": 0.0}, {"p": [0]}, {"p": 2**70}],
    ids=repr,
)
def test_partition_values_of_the_wrong_type_are_an_error_not_a_silent_no_op(table, table_uri, spec):
    """issue 9 item 8: ``delete([{"p": "0"}])`` matched nothing and committed an empty DELETE snapshot."""
    table.append(make_rows(range(6)))
    before = tree(table_uri)
    with pytest.raises(InvalidArgumentError, match="p"):
        table.delete([spec])
    with pytest.raises(InvalidArgumentError, match="p"):
        table.overwrite(make_rows([3]), partitions=[spec])
    with pytest.raises(InvalidArgumentError, match="p"):
        table.compact(partitions=[spec], min_file_num=2)
    assert tree(table_uri) == before


@pytest.mark.parametrize(
    "arguments",
    [{"partition_by": 5}, {"partition_by": {"p": 1}}, {"options": ["snapshot.num-retained.min"]}, {"options": "x=1"}],
    ids=repr,
)
def test_create_refuses_partition_keys_and_options_of_the_wrong_shape(tmp_path, arguments):
    """issue 9 item 5: ``partition_by=5`` or options as a list raised TypeError/AttributeError."""
    with pytest.raises(SnapTableError):
        Table.create(str(tmp_path / "t"), SCHEMA, **arguments)
    assert tree(tmp_path) == {}


def test_date_partitions_are_given_as_dates_or_iso_strings(tmp_path):
    """issue 9 item 8: a JSON partition (a compact action's) names a date as a string; it must match the date."""
    schema = pa.schema([("day", pa.date32()), ("v", pa.int64())])
    table = Table.create(str(tmp_path / "t"), schema, partition_by=["day"])
    day = dt.date(2026, 1, 1)
    for v in range(3):
        table.append(pa.table({"day": [day, dt.date(2026, 1, 2)], "v": [v, v]}, schema=schema))
    compacted = actions.run_action(actions.Compact(table.uri, partitions=[{"day": "2026-01-01"}], min_file_num=2))
    assert compacted["result"]["commit_kind"] == "COMPACT"
    assert table.delete([{"day": day}]).total_record_count == 3
    with pytest.raises(InvalidArgumentError, match="day"):
        table.delete([{"day": dt.datetime(2026, 1, 2)}])  # a datetime is no date32 value
    with pytest.raises(InvalidArgumentError, match="day"):
        table.delete([{"day": "January"}])


# -- item 10: empty and blank table locations ------------------------------------------------------


@pytest.mark.parametrize("uri", ["", None, " ", "\t", "file://", "s3://", 5, b"/tmp/t"], ids=repr)
def test_empty_or_blank_locations_are_refused(tmp_path, monkeypatch, uri):
    """issue 9 item 10: ``Table.create("")``, ``(None)`` and ``(" ")`` created tables in the current directory."""
    monkeypatch.chdir(tmp_path)
    for call in (
        lambda: Table.create(uri, SCHEMA),
        lambda: Table.open(uri),
        lambda: Table.exists(uri),
        lambda: Storage.from_uri(uri),
    ):
        with pytest.raises(InvalidArgumentError, match="location"):
            call()
    assert tree(tmp_path) == {}


def test_a_path_object_is_a_location(tmp_path):
    """issue 9 item 10: refusing None must not refuse ``pathlib.Path``."""
    Table.create(tmp_path / "t", SCHEMA).append(make_rows(range(3)))
    assert Table.exists(tmp_path / "t") and Table.open(tmp_path / "t").scan().to_arrow().num_rows == 3


# -- item 17: untyped errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '[{"action": "expire-tags", "table": "/t"}]',
        "null",
        '"expire-tags"',
        "5",
        '{"action": ["expire-tags"], "table": "/t"}',
        '{"action": {"a": 1}, "table": "/t"}',
        "[" * 100_000 + "]" * 100_000,
        '{"action": "expire-tags", "table": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "{not json",
    ],
    ids=lambda t: t[:40],
)
def test_action_json_of_the_wrong_shape_is_an_invalid_argument(text):
    """issue 9 item 17: a list, null, a string or ``"action": [...]`` raised TypeError/AttributeError/RecursionError."""
    with pytest.raises(InvalidArgumentError):
        actions.action_from_json(text)


@pytest.mark.parametrize("value", [None, 5, ["expire-tags"], b'{"action": "expire-tags"}'], ids=repr)
def test_action_from_json_takes_text_or_a_mapping(value):
    """issue 9 item 17: other Python values are an InvalidArgumentError, not a TypeError."""
    with pytest.raises(InvalidArgumentError):
        actions.action_from_json(value)


def test_a_location_that_is_a_file_is_refused(tmp_path):
    """issue 9 item 17: a URI pointing at a file raised NotADirectoryError."""
    path = tmp_path / "orders.parquet"
    path.write_bytes(b"not a table")
    before = tree(tmp_path)
    for call in (lambda: Table.open(str(path)), lambda: Table.exists(str(path)), lambda: Table.create(str(path), SCHEMA)):
        with pytest.raises(InvalidArgumentError, match="is a file"):
            call()
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    "rel, read",
    [
        ("snapshot/LATEST", lambda t: t.latest_snapshot()),
        ("tag/tag-daily", lambda t: t.tags()),
        ("tag/tag-daily", lambda t: t.tag("daily")),
        ("consumer/consumer-reader", lambda t: t.consumers()),
        ("consumer/consumer-reader", lambda t: t.consumer("reader")),
        ("snapshot/snapshot-1", lambda t: t.snapshot(1)),
    ],
)
def test_a_metadata_path_that_is_a_directory_is_corrupt_metadata(table, table_uri, rel, read):
    """issue 9 item 17: LATEST, a tag or a consumer path that is a directory raised IsADirectoryError."""
    table.append(make_rows(range(3)))
    path = os.path.join(table_uri, rel)
    if os.path.exists(path):
        os.remove(path)
    os.makedirs(os.path.join(path, "inside"))
    with pytest.raises(CorruptMetadataError, match="directory"):
        read(Table.open(table_uri))


def test_a_metadata_directory_that_is_a_file_is_corrupt_metadata(table, table_uri):
    """issue 9 item 17: ``consumer`` as a file listed as "no consumers", so expiry stopped protecting them."""
    table.append(make_rows(range(3)))
    with open(os.path.join(table_uri, "consumer"), "wb") as handle:
        handle.write(b"x")
    with pytest.raises(CorruptMetadataError, match="not a directory"):
        Table.open(table_uri).consumers()


@pytest.mark.parametrize("with_filter", [False, True])
@pytest.mark.parametrize("damage", ["truncate", "garble"])
def test_scanning_a_damaged_data_file_is_corrupt_metadata(table, table_uri, with_filter, damage):
    """issue 9 item 17: a truncated data file raised ArrowInvalid (or, with a filter, "the filter does not fit")."""
    table.append(make_rows(range(9)))
    path = os.path.join(table_uri, table.scan().files()[0].path)
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data[: len(data) // 2] if damage == "truncate" else data[:4] + b"\0" * (len(data) - 12) + data[-8:])
    scan = Table.open(table_uri).scan(filter=[("id", ">=", 0)] if with_filter else None)
    with pytest.raises(CorruptMetadataError, match="cannot be read"):
        scan.to_arrow()


def test_a_filter_that_does_not_fit_the_schema_is_still_an_invalid_argument(table):
    """issue 9 item 17: telling damage from a bad filter must not turn filter errors into corruption."""
    table.append(make_rows(range(9)))
    for bad in ([("id", "=", "x")], [("nope", "=", 1)], [("name", "in", [1, 2])]):
        with pytest.raises(InvalidArgumentError, match="filter"):
            table.scan(filter=bad).to_arrow()


@pytest.mark.parametrize("columns", [["id", "id"], "id", [1], ("id", None), 5], ids=repr)
def test_scan_columns_must_be_distinct_names(table, columns):
    """issue 9 item 17: ``scan(columns=["id", "id"])`` failed inside Arrow."""
    table.append(make_rows(range(3)))
    with pytest.raises(InvalidArgumentError, match="columns"):
        table.scan(columns=columns).to_arrow()
    with pytest.raises(InvalidArgumentError, match="columns"):
        table.read_files(table.scan().files(), columns=columns)


@pytest.mark.parametrize("time_retained", [math.nan, math.inf, -math.inf, float("-nan")], ids=repr)
def test_create_tag_with_a_non_finite_time_retained_is_refused(table, table_uri, time_retained):
    """issue 9 item 17: ``create_tag(time_retained=nan)`` raised a bare ValueError."""
    table.append(make_rows(range(3)))
    before = tree(table_uri)
    with pytest.raises(SnapTableError, match="time_retained"):
        table.create_tag("t", time_retained=time_retained)
    assert tree(table_uri) == before


@pytest.mark.parametrize("min_file_num", ["x", "5", 2.5, True, 1, None], ids=repr)
def test_compact_min_file_num_is_an_integer_of_at_least_two(table, table_uri, min_file_num):
    """issue 9 item 17: ``compact(min_file_num="x")`` raised a bare ValueError (and "5" or 2.5 were taken)."""
    for i in range(3):
        table.append(make_rows(range(i * 3, i * 3 + 3)))
    before = tree(table_uri)
    if min_file_num is None:  # the option's default: allowed
        assert table.compact(min_file_num=min_file_num) is None  # 3 files < 5
        return
    with pytest.raises(InvalidArgumentError, match="min_file_num"):
        table.compact(min_file_num=min_file_num)
    assert tree(table_uri) == before


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda t: t.changes("1"), id="changes-from-str"),
        pytest.param(lambda t: t.changes(1, "3"), id="changes-to-str"),
        pytest.param(lambda t: t.changes(True), id="changes-from-bool"),
        pytest.param(lambda t: t.changes(1.0), id="changes-from-float"),
        pytest.param(lambda t: t.snapshot_at_watermark("abc"), id="watermark-abc"),
        pytest.param(lambda t: t.snapshot_at_watermark("5"), id="watermark-str"),
        pytest.param(lambda t: t.snapshot_at_watermark(5.7), id="watermark-float"),
        pytest.param(lambda t: t.snapshot_at_watermark(None), id="watermark-none"),
        pytest.param(lambda t: t.stream("from-snapshot", snapshot_id="2"), id="stream-snapshot-str"),
        pytest.param(lambda t: t.stream("from-snapshot-full", snapshot_id=2.0), id="stream-snapshot-float"),
        pytest.param(lambda t: t.stream().restore("2"), id="stream-restore-str"),
        pytest.param(lambda t: t.snapshot_at(10**20), id="snapshot-at-out-of-range"),
        pytest.param(lambda t: t.expire_consumers(now="x"), id="expire-consumers-now"),
        pytest.param(lambda t: t.expire_consumers(now=[1]), id="expire-consumers-now-list"),
    ],
)
def test_reads_and_lookups_take_typed_arguments(table, table_uri, call):
    """issue 9 item 17: ``changes("3")``, ``snapshot_at_watermark("abc")`` and the like raised TypeError or ValueError."""
    for i in range(3):
        table.append(make_rows(range(i * 3, i * 3 + 3)), watermark=i)
    before = tree(table_uri)
    with pytest.raises(InvalidArgumentError):
        call(table)
    assert tree(table_uri) == before


def test_expire_consumers_checks_now_even_without_an_expiration_time(table, table_uri):
    """issue 9 item 17: with ``consumer.expiration-time`` unset, ``expire_consumers(now="x")`` returned []."""
    table.append(make_rows(range(3)))
    table.update_consumer("reader", 1)
    assert table.expire_consumers() == []
    with pytest.raises(InvalidArgumentError, match="x"):
        table.expire_consumers(now="x")
    assert [c.id for c in table.consumers()] == ["reader"]


@pytest.mark.parametrize("uri", ["foo://bucket/table", "nosuchprotocol://x"])
def test_an_unknown_storage_protocol_is_an_invalid_argument(uri):
    """issue 9 item 17: an unknown fsspec protocol raised a bare ValueError."""
    for call in (lambda: Table.open(uri), lambda: Table.create(uri, SCHEMA), lambda: Storage.from_uri(uri)):
        with pytest.raises(InvalidArgumentError, match="protocol"):
            call()


@pytest.mark.parametrize("options", [["key"], "key=value", 5], ids=repr)
def test_storage_options_must_be_a_mapping(tmp_path, options):
    """issue 9 item 17: storage options that are no mapping raised a bare ValueError or TypeError."""
    with pytest.raises(InvalidArgumentError, match="storage options"):
        Storage.from_uri(str(tmp_path / "t"), options)
    assert tree(tmp_path) == {}


# -- item 18: names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["a\u0085b", "a\u009bb", "a\u2028b", "a\u2029b", "a\u200bb", "a\u202eb", "\ufeffa", "a\ud800b", "a\x7fb", "a\nb"],
    ids=repr,
)
def test_names_with_invisible_or_control_characters_are_refused(table, table_uri, name):
    """issue 9 item 18: C1 controls, line/paragraph separators and format characters passed validation."""
    table.append(make_rows(range(3)))
    before = tree(table_uri)
    with pytest.raises(InvalidNameError):
        table.create_tag(name)
    with pytest.raises(InvalidNameError):
        table.update_consumer(name, 1)
    assert tree(table_uri) == before


def test_the_name_length_limit_is_in_utf8_bytes_in_code_message_and_docs(table, table_uri):
    """issue 9 item 18: the limit was documented in characters and checked in bytes."""
    table.append(make_rows(range(3)))
    for name in ("x" * MAX_NAME_LENGTH, "é" * (MAX_NAME_LENGTH // 2)):  # both exactly at the limit
        assert validate_name(name, "tag") == name
        table.create_tag(name)
    for name in ("x" * (MAX_NAME_LENGTH + 1), "é" * (MAX_NAME_LENGTH // 2 + 1)):
        with pytest.raises(InvalidNameError, match=f"{MAX_NAME_LENGTH} bytes"):
            table.create_tag(name)
    with open(os.path.join(REPO, "docs", "lifecycle.md"), encoding="utf-8") as handle:
        docs = " ".join(handle.read().split())
    assert f"over {MAX_NAME_LENGTH} bytes" in docs and f"{MAX_NAME_LENGTH} characters" not in docs


@pytest.mark.parametrize("call", [
    lambda t: t.create_tag("x", time_retained="soon"),
    lambda t: t.create_tag("x", time_retained=-5),
    lambda t: t.compact(target_file_size="big"),
])
def test_argument_durations_and_sizes_are_argument_errors_not_option_errors(tmp_path, call):
    """A bad ``time_retained``/``target_file_size`` argument is the caller's argument, like expiry's:
    InvalidArgumentError (it was InvalidOptionError, which names table options), and nothing changes."""
    from airflow_snaptable.core.errors import InvalidOptionError

    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    table.append(make_rows([0]))
    with pytest.raises(InvalidArgumentError) as raised:
        call(table)
    assert not isinstance(raised.value, InvalidOptionError)
    assert table.tags() == [] and [s.id for s in table.snapshots()] == [1]
