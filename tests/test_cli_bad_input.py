"""The CLI turns bad input into one typed error line (exit 2) and changes nothing (issue 9)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_snaptable.cli import main
from tests.conftest import make_rows
from tests.core.test_lifecycle import History, tree

SNAPTABLE = str(Path(sys.executable).with_name("snaptable"))
SECRET = "cli-test-SECRET-91ac"


def _six_snapshots_and_a_consumer(table) -> None:
    History(table).appends(6)
    table.update_consumer("reader", 7)


def test_run_action_rollback_with_force_as_a_string_is_refused(table, table_uri, capsys):
    """issue 9 item 2: ``snaptable run-action '{"action": "rollback", "snapshot_id": 2, "force": "false"}'`` forced it."""
    _six_snapshots_and_a_consumer(table)
    before = tree(table_uri)
    doc = json.dumps({"action": "rollback", "table": table_uri, "snapshot_id": 2, "force": "false"})
    assert main(["run-action", doc]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: InvalidArgumentError: ") and "force must be True or False" in err
    assert tree(table_uri) == before
    assert table.consumer("reader").next_snapshot == 7


@pytest.mark.parametrize(
    "text",
    ["[]", "null", '"rollback"', "7", '{"action": ["rollback"], "table": "/t"}', "[" * 50_000 + "]" * 50_000, "{oops"],
    ids=lambda t: t[:30],
)
def test_run_action_json_of_the_wrong_shape_is_one_typed_error_line(text, capsys):
    """issue 9 item 17: a list, null, a string or ``"action": [...]`` ended in a traceback."""
    assert main(["run-action", text]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: InvalidArgumentError: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    "command",
    [
        ["snapshots"],
        ["expire", "--dry-run"],
        ["clean-orphans"],
        ["run-action", "ACTION"],
        ["tag", "create", "URI", "t"],
    ],
    ids=lambda c: c[0] if c[0] != "tag" else "tag-create",
)
@pytest.mark.parametrize("options", ["{'key': '" + SECRET + "'}", '["' + SECRET + '"]', "[" * 50_000 + "]" * 50_000], ids=["not-json", "not-an-object", "too-deep"])
def test_storage_options_that_are_not_a_json_object_are_one_typed_error_line(table, table_uri, capsys, command, options):
    """issue 9 item 17: ``--storage-options`` that is not JSON ended in a traceback (and the text may hold secrets)."""
    table.append(make_rows(range(3)))
    before = tree(table_uri)
    action = json.dumps({"action": "expire-tags", "table": table_uri})
    argv = [part.replace("URI", table_uri).replace("ACTION", action) for part in command]
    if "URI" not in command and "ACTION" not in command:
        argv.insert(1, table_uri)
    assert main(argv + ["--storage-options", options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: InvalidArgumentError: --storage-options") and SECRET not in err
    assert tree(table_uri) == before


def test_console_script_reports_a_bad_location_without_a_traceback(tmp_path):
    """issue 9 items 10 and 17: a blank location or one that is a file is a typed error, not a traceback."""
    file_path = tmp_path / "orders.parquet"
    file_path.write_bytes(b"x")
    for uri in (" ", str(file_path), "foo://bucket/t"):
        result = subprocess.run([SNAPTABLE, "show", uri], capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("snaptable: InvalidArgumentError:") and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["orders.parquet"]


def test_catalog_properties_are_for_iceberg_uris_only_and_must_be_a_json_object(table, table_uri, capsys):
    _six_snapshots_and_a_consumer(table)
    before = tree(table_uri)
    assert main(["expire", table_uri, "--retain-min", "1", "--catalog", '{"type": "sql"}']) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: InvalidArgumentError: ") and "iceberg://" in err
    assert main(["snapshots", table_uri, "--catalog", "[1, 2]"]) == 2
    assert "--catalog must be a JSON object" in capsys.readouterr().err
    assert main(["snapshots", table_uri, "--catalog", '{"credential": "' + SECRET + '"'] ) == 2
    err = capsys.readouterr().err
    assert "--catalog is not valid JSON" in err and SECRET not in err  # the text may hold secrets: never echoed
    assert tree(table_uri) == before
