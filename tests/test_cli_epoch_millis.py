"""Times as epoch milliseconds, which the help of ``--older-than`` and ``--as-of`` promises (issue 22 item 10).

A time given as the text of an integer (a command-line word, a rendered template, a JSON string)
is epoch millis, as the integer itself is; nonsense is one typed error line and changes nothing.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import CreateTag, ExpireSnapshots, RemoveOrphanFiles, Rollback
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.arguments.times import to_millis
from tests.conftest import make_rows
from tests.core.test_lifecycle import tree

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z
SECOND = 1000


def _iso(millis: int) -> str:
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).isoformat()


def _commits(table: Table, n: int) -> None:
    for i in range(n):
        table.clock = lambda i=i: T0 + i * SECOND
        table.append(make_rows([i]))


def _result(capsys) -> dict:
    return json.loads(capsys.readouterr().out)["result"]


def test_expire_older_than_in_epoch_millis_is_the_same_time_as_iso(table, table_uri, capsys):
    _commits(table, 5)
    cutoff = T0 + 2 * SECOND + 500
    base = ["expire", table_uri, "--retain-min", "1", "--dry-run", "--json", "--older-than"]
    assert main(base + [_iso(cutoff)]) == 0
    by_iso = _result(capsys)
    assert main(base + [str(cutoff)]) == 0
    by_millis = _result(capsys)
    assert by_millis["expired_snapshot_ids"] == by_iso["expired_snapshot_ids"] == [1, 2]


def test_tag_and_rollback_as_of_in_epoch_millis(table, table_uri, capsys):
    _commits(table, 5)
    as_of = str(T0 + 2 * SECOND + 500)  # between snapshot 3 and 4
    assert main(["tag", "create", table_uri, "at-three", "--as-of", as_of, "--json"]) == 0
    assert _result(capsys)["snapshot_id"] == 3
    assert main(["rollback", table_uri, "--as-of", as_of, "--json"]) == 0
    capsys.readouterr()
    assert Table.open(table_uri).latest_snapshot().id == 3


def test_clean_orphans_older_than_in_epoch_millis_is_a_time_not_seconds(table, table_uri, capsys):
    """A bare number was read as a duration in seconds (1.7e12 s back from now: a cutoff 54,000 years ago)."""
    _commits(table, 2)
    assert main(["clean-orphans", table_uri, "--older-than", str(T0), "--dry-run", "--json"]) == 0
    assert _result(capsys)["older_than_millis"] == T0


@pytest.mark.parametrize(
    "action, values",
    [
        (ExpireSnapshots, {"older_than": str(T0)}),
        (CreateTag, {"tag_name": "t", "as_of": str(T0)}),
        (Rollback, {"as_of": str(T0)}),
        (RemoveOrphanFiles, {"older_than": str(T0)}),
    ],
    ids=lambda v: getattr(v, "name", None) or "",
)
def test_actions_take_epoch_millis_as_text_and_as_numbers(table_uri, action, values):
    """The same field as JSON text (a rendered template, ``run-action``) and as a JSON number."""
    field = next(k for k in values if k in ("older_than", "as_of"))
    for form in (values[field], int(values[field])):
        made = action.from_values(table_uri, {**values, field: form})
        assert to_millis(getattr(made, field)) == T0


@pytest.mark.parametrize("text", ["nonsense", "1e12", "17000000000000000000000", "2026-13-01", "-"])
@pytest.mark.parametrize(
    "command",
    [["expire", "URI", "--dry-run", "--older-than"], ["rollback", "URI", "--as-of"], ["tag", "create", "URI", "t", "--as-of"],
     ["clean-orphans", "URI", "--dry-run", "--older-than"]],
    ids=lambda c: c[0] if c[0] != "tag" else "tag-create",
)
def test_nonsense_times_are_one_typed_error_line_and_change_nothing(table, table_uri, capsys, command, text):
    _commits(table, 3)
    before = tree(table_uri)
    assert main([table_uri if word == "URI" else word for word in command] + [text]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: InvalidArgumentError: ") and err.count("\n") == 1, err
    assert tree(table_uri) == before


@pytest.mark.parametrize("text", ["2026", "20260101", "2026001"])
def test_digits_that_also_read_as_an_iso_date_are_refused_as_ambiguous(text):
    """``20260101`` is an ISO-8601 basic date and an epoch millis (1970-01-01T05:37:40Z): never guessed."""
    with pytest.raises(InvalidArgumentError, match="ambiguous"):
        to_millis(text)
    assert to_millis(int(text)) == int(text)  # a number is always epoch millis
    assert to_millis("2026-01-01") == to_millis(dt.date(2026, 1, 1))
