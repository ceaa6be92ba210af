"""The command line as a new user meets it (issue 28 items 2, 3, 5).

One default per action (the action's), ``--version``, help a terminal can read, the sensor's
parameter names, malformed URIs named as such, and no traceback for expected conditions:
a reader that leaves the pipe early, a file the command cannot write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from airflow_snaptable import __version__
from airflow_snaptable.cli import build_parser, main
from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import ACTIONS
from tests.conftest import make_rows

RST_MARKUP = ("``", ":class:", ":func:", ":meth:", ":mod:", ":param")


def _orphan(table: Table) -> str:
    path = os.path.join(table.uri, "data", "p=0", "left-by-a-crash.parquet")
    with open(path, "wb") as handle:
        handle.write(b"x" * 10)
    old = 1_000_000_000  # 2001: older than any window
    os.utime(path, (old, old))
    return path


def test_clean_orphans_is_a_dry_run_by_default_as_in_the_operator_and_json(table, table_uri, capsys):
    table.append(make_rows(range(5)))
    orphan = _orphan(table)
    assert main(["clean-orphans", table_uri, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["result"]
    assert os.path.exists(orphan), "clean-orphans without --no-dry-run deleted a file"
    assert [os.path.basename(p) for p in listed["orphan_files"]] == ["left-by-a-crash.parquet"]
    assert ACTIONS["remove-orphan-files"].from_values(table_uri, {}).dry_run is True

    assert main(["clean-orphans", table_uri, "--no-dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["orphan_count"] == 1
    assert not os.path.exists(orphan)


def test_every_bool_flag_leaves_the_default_to_the_action():
    """Given neither --x nor --no-x, the command passes nothing: the action's default applies."""
    parser = build_parser()
    for word, args in [("expire", ["expire", "u"]), ("clean-orphans", ["clean-orphans", "u"]),
                       ("rollback", ["rollback", "u", "--snapshot-id", "1"])]:
        parsed = parser.parse_args(args)
        action_cls = {"expire": ACTIONS["expire-snapshots"], "clean-orphans": ACTIONS["remove-orphan-files"],
                      "rollback": ACTIONS["rollback"]}[word]
        for field in action_cls.parameters():
            if field.kinds - {"None"} == {"bool"} and not field.param.internal:
                assert getattr(parsed, field.name) is None, (word, field.name)
    assert parser.parse_args(["expire", "u", "--no-delete-files"]).delete_files is False


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"snaptable {__version__}"


def _help_texts() -> dict[str, str]:
    """The help of every command and subcommand, by its words."""
    texts = {}

    def walk(parser, words):
        texts[" ".join(words) or "snaptable"] = parser.format_help()
        for action in parser._actions:
            if hasattr(action, "choices") and isinstance(action.choices, dict):
                for word, sub in action.choices.items():
                    walk(sub, words + [word])

    walk(build_parser(), [])
    return texts


def test_help_texts_are_plain_text_and_every_argument_has_help():
    texts = _help_texts()
    assert len(texts) > 20
    for words, text in texts.items():
        for markup in RST_MARKUP:
            assert markup not in text, f"snaptable {words} --help shows {markup!r}"
    run_action = texts["run-action"]
    assert "expire-snapshots" in run_action and '"action"' in run_action
    for words in ("consumer delete", "run-action"):
        parser_lines = texts[words].split("positional arguments:")[1].split("options:")[0].strip().splitlines()
        assert all(len(line.split()) > 1 for line in parser_lines if not line.startswith(" " * 10)), (words, parser_lines)


def test_new_snapshots_takes_the_sensor_names_and_the_old_ones(table, table_uri, capsys):
    for i in range(3):
        table.append(make_rows([i]))
    assert main(["new-snapshots", table_uri, "--after-snapshot-id", "1", "--commit-kinds", "APPEND", "--json"]) == 0
    by_new = json.loads(capsys.readouterr().out)
    assert main(["new-snapshots", table_uri, "--after", "1", "--kinds", "APPEND", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == by_new
    assert by_new["snapshot_ids"] == [2, 3]
    assert main(["new-snapshots", table_uri, "--consumer-id", "reader", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["from_snapshot_id"] == 0


def test_cli_flags_carry_the_operators_parameter_names():
    """Every flag of an action command is its field's name; the lake's run id is the operator's lake_run_id."""
    from airflow_snaptable.operators.lake import SnapTableMaintainTableOperator
    import inspect

    parser = build_parser()
    assert parser.parse_args(["maintain", "l", "--policy", "p", "--lake-run-id", "r"]).run_id == "r"
    assert parser.parse_args(["maintain", "l", "--policy", "p", "--run-id", "r"]).run_id == "r"
    assert "lake_run_id" in inspect.signature(SnapTableMaintainTableOperator.__init__).parameters
    from airflow_snaptable.sensors import SnapTableNewSnapshotSensor

    sensor = set(inspect.signature(SnapTableNewSnapshotSensor.__init__).parameters)
    assert {"after_snapshot_id", "consumer_id", "commit_kinds"} <= sensor
    new = parser.parse_args(["new-snapshots", "u", "--after-snapshot-id", "1", "--commit-kinds", "APPEND"])
    assert new.after_snapshot_id == 1 and new.kinds == "APPEND"


@pytest.mark.parametrize("uri, fixed", [("iceberg:/db.orders", "iceberg://db.orders"), ("s3:/bucket/orders", "s3://bucket/orders"),
                                        ("memory:orders", "memory://orders")])
def test_a_malformed_uri_is_named_as_such(uri, fixed, capsys):
    assert main(["snapshots", uri]) == 2
    err = capsys.readouterr().err
    assert "malformed URI" in err and repr(fixed) in err and "Traceback" not in err


def test_a_name_with_a_colon_is_still_a_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["snapshots", "orders:v2"]) == 2
    assert "TableNotFoundError" in capsys.readouterr().err


def _snaptable(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "airflow_snaptable.cli", *args], stderr=subprocess.PIPE, **kwargs)


def test_a_reader_that_leaves_early_gets_no_traceback(table, table_uri):
    """``snaptable snapshots URI | head -1``: the pipe is closed before the command writes."""
    for i in range(3):
        table.append(make_rows([i]))
    for args in (["snapshots", table_uri], ["--help"], ["snapshots", table_uri, "--json"]):
        process = _snaptable(*args, stdout=subprocess.PIPE)
        process.stdout.close()  # the reader is gone before the interpreter has even started
        _, err = process.communicate(timeout=120)
        assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
        assert process.returncode in (0, 141)


def test_a_file_the_command_cannot_write_is_one_line(table, table_uri, tmp_path, capsys):
    table.append(make_rows([1]))
    assert main(["timeline", table_uri, "--out", str(tmp_path / "no" / "such" / "dir" / "t.svg")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: FileNotFoundError") and err.count("\n") == 1


def test_a_missing_storage_package_names_the_extra_that_installs_it(monkeypatch, capsys):
    """s3fs is installed here: a machine without it is fsspec failing to import it, as fsspec does."""
    import fsspec

    real = fsspec.get_filesystem_class

    def without_s3fs(protocol):
        if protocol in ("s3", "s3a"):
            raise ImportError("Install s3fs to access S3")
        return real(protocol)

    monkeypatch.setattr(fsspec, "get_filesystem_class", without_s3fs)
    assert main(["snapshots", "s3://bucket/orders"]) == 2
    err = capsys.readouterr().err
    assert "UnsupportedStorageError" in err and "pip install 'airflow-snaptable[s3]'" in err and "Traceback" not in err


# -- issue 34 item 21 -------------------------------------------------------------------------------


def _subcommands(parser=None, words=()):
    """(words, parser, one-line help) of every command and subcommand, groups included."""
    import argparse

    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*words, name), sub, helps.get(name)
                yield from _subcommands(sub, (*words, name))


def _is_a_whole_sentence(text: str | None) -> bool:
    return (
        bool(text) and text[0].isupper() and text.rstrip().endswith(".")
        and text.count("(") == text.count(")") and len(text.split()) >= 3
    )


def test_every_subcommand_describes_itself_in_a_whole_sentence():
    """``snaptable X --help`` starts with what X does: a description line, a whole sentence (not a summary cut where
    its docstring wrapped), and the one-line help of the command list says the same."""
    for words, sub, summary in _subcommands():
        assert _is_a_whole_sentence(sub.description), f"snaptable {' '.join(words)}: description {sub.description!r}"
        assert summary and " ".join(summary.split()).rstrip(".").lower() == sub.description.rstrip(".").lower(), (words, summary)


def test_every_flag_has_its_no_form():
    """The README: a flag --x has its --no-x (maintain --dry-run and --json of every command included)."""
    import argparse

    for words, sub, _summary in _subcommands():
        for action in sub._actions:
            if action.nargs == 0 and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                assert isinstance(action, argparse.BooleanOptionalAction), f"snaptable {' '.join(words)} {action.option_strings}"
    parser = build_parser()
    assert parser.parse_args(["maintain", "lake", "--policy", "p.json", "--no-dry-run"]).dry_run is False
    assert parser.parse_args(["maintain", "lake", "--policy", "p.json"]).dry_run is False
    assert parser.parse_args(["snapshots", "t", "--no-json"]).json is False


def test_compact_with_nothing_to_do_says_so(table, table_uri, capsys):
    table.append(make_rows(range(3)))
    assert main(["compact", table_uri]) == 0
    out = capsys.readouterr().out.strip()
    assert out == "nothing to do: the table is unchanged", out
    assert main(["compact", table_uri, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"] is None
    assert [s.id for s in table.snapshots()] == [1]


def test_new_snapshots_gives_the_sensors_answer_by_default(table, table_uri, capsys, monkeypatch):
    """Without --commit-kinds, the CLI counts the kinds the sensor and the triggers count (one default, in
    core.incremental): new snapshots that are only a compaction are no new data for either."""
    from airflow_snaptable.core.incremental import DATA_COMMIT_KINDS

    for i in range(2):
        table.append(make_rows(range(i * 3, i * 3 + 3), partitions=1))
    table.compact(min_file_num=2)
    assert table.latest_snapshot().commit_kind.value == "COMPACT"
    assert main(["new-snapshots", table_uri, "--after-snapshot-id", "2", "--json"]) == 1  # nothing new for the sensor
    answer = json.loads(capsys.readouterr().out)
    assert answer["matching_snapshot_ids"] == [] and answer["snapshot_ids"] == [3]
    pytest.importorskip("airflow")
    from airflow_snaptable.sensors import SnapTableNewSnapshotSensor

    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", json.dumps({"conn_type": "snaptable"}))
    sensor = SnapTableNewSnapshotSensor(task_id="wait", table=table_uri, after_snapshot_id=2)
    assert set(sensor.commit_kinds) == set(DATA_COMMIT_KINDS) and sensor.poke({}).is_done is False
    capsys.readouterr()
    assert main(["new-snapshots", table_uri, "--after-snapshot-id", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["matching_snapshot_ids"] == [2]


def test_health_fits_a_terminal_with_every_job_and_a_failure(tmp_path, capsys):
    """``snaptable health`` of a table with eleven jobs, one failed: every line within 120 columns, the failed
    job named, the others counted (``--json`` keeps each job's status and the whole message)."""
    import datetime as dt

    import pyarrow as pa

    schema = pa.schema([("day", pa.date32()), ("order_id", pa.int64()), ("ts", pa.timestamp("ms", tz="UTC"))])
    table = Table.create(str(tmp_path / "lake" / "sales" / "orders_with_a_longer_name"), schema, partition_by=["day"])
    for i in range(4):
        day = dt.date(2026, 1, 1) + dt.timedelta(days=i)
        table.append(pa.table({"day": [day], "order_id": [i], "ts": [dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)]}, schema=schema))
    policy = {"defaults": {
        "snapshot-expiry": {"min-snapshots-to-keep": 2}, "orphan-file-removal": {"older-than-days": 3}, "tag-expiry": {},
        "consumer-expiry": {}, "periodic-tags": {"period": "daily"}, "data-compaction": {}, "purge": {},
        "data-expiry": {"column": "no_such_column", "retention": "3650 d"},  # fails, with a long message
        "clean": {"policy": "KEEP_LATEST_COMMITS", "commits-retained": 2},
    }}
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    assert main(["maintain", str(tmp_path / "lake"), "--policy", str(tmp_path / "policy.json")]) == 1
    capsys.readouterr()
    assert main(["health", str(tmp_path / "lake")]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 120, out
    (row,) = [line for line in out.splitlines() if line.startswith("sales.")]
    assert "FAILED data-expiry" in row and " ok" in row
    assert main(["health", str(tmp_path / "lake"), "--json"]) == 0
    jobs = json.loads(capsys.readouterr().out)["tables"][0]["jobs"]
    assert jobs["data-expiry"]["status"] == "Failed" and len(jobs) >= 9
