"""``retain_max`` alone keeps that many (issue 34 item 18): a minimum nobody set follows a lower maximum.

The README's ``SnapTableExpireSnapshotsOperator(task_id="expire", table=..., retain_max=5)`` and the
``run-action --help`` example failed with "retain_max (5) must be >= retain_min (10)" on a default
table. The rule is core's (core/lifecycle/expiry/plan.py ``resolve_settings``), so the core API, the
CLI, run-action, the operators, the Spark job and the lake jobs all keep what the caller said. A
minimum the caller or the table set is still a floor: a maximum below it is refused, naming it.
"""

from __future__ import annotations

import json
import os

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, InvalidOptionError
from tests.conftest import SCHEMA, make_rows
from tests.paimon.test_paimon_lifecycle import check as check_paimon


def _appends(path: str, count: int, options: dict | None = None) -> Table:
    table = Table.create(path, SCHEMA, options=options)
    for i in range(count):
        table.append(make_rows(range(i * 3, i * 3 + 3)))
    return table


def _ids(path: str) -> list[int]:
    return [s.id for s in Table.open(path).snapshots()]


def test_the_core_api_keeps_the_maximum_given_over_a_default_minimum(tmp_path):
    table = _appends(str(tmp_path / "t"), 7)
    result = table.expire_snapshots(retain_max=5)
    assert result.expired_snapshot_ids == [1, 2]
    assert _ids(table.uri) == [3, 4, 5, 6, 7]


def test_a_minimum_someone_set_still_refuses_a_lower_maximum(tmp_path):
    own = _appends(str(tmp_path / "own"), 7, {"snapshot.num-retained.min": "6"})
    with pytest.raises(InvalidArgumentError, match=r"retain_max \(5\) must be >= retain_min \(6: table option "
                                                   r"snapshot.num-retained.min, set on the table\)"):
        own.expire_snapshots(retain_max=5)
    plain = _appends(str(tmp_path / "plain"), 7)
    with pytest.raises(InvalidArgumentError, match=r"retain_max \(5\) must be >= retain_min \(6\)"):
        plain.expire_snapshots(retain_max=5, retain_min=6)
    assert _ids(own.uri) == _ids(plain.uri) == [1, 2, 3, 4, 5, 6, 7]  # nothing changed


def test_the_cli_and_run_action_keep_the_maximum_given(tmp_path, capsys):
    expire, action = str(tmp_path / "expire"), str(tmp_path / "action")
    _appends(expire, 7)
    _appends(action, 7)
    assert main(["expire", expire, "--retain-max", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["expired_snapshot_ids"] == [1, 2]
    # run-action --help's own example
    assert main(["run-action", json.dumps({"action": "expire-snapshots", "table": action, "retain_max": 5})]) == 0
    assert _ids(expire) == _ids(action) == [3, 4, 5, 6, 7]


def test_a_paimon_table_keeps_the_maximum_given_and_pypaimon_reads_what_is_left(paimon, tmp_path, capsys):
    warehouse = paimon.copy(tmp_path / "w")
    assert main(["expire", os.path.join(warehouse, "db.db", "app"), "--retain-max", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["expired_snapshot_ids"] == [1, 2, 3, 4]
    check_paimon(paimon, warehouse, "app", [5, 6], ["t2", "t4"])


def test_a_table_that_sets_only_a_maximum_keeps_that_many(tmp_path):
    """The same rule for the table's own options: ``snapshot.num-retained.max=3`` alone was refused at create
    ("must be >= snapshot.num-retained.min (10)"); its default minimum now follows it. Both set still must agree."""
    table = _appends(str(tmp_path / "t"), 5, {"snapshot.num-retained.max": "3"})
    assert table.options.get("snapshot.num-retained.min") == 3
    assert table.expire_snapshots().expired_snapshot_ids == [1, 2]
    assert _ids(table.uri) == [3, 4, 5]
    with pytest.raises(InvalidOptionError, match=r"snapshot.num-retained.max \(3\) must be >= snapshot.num-retained.min \(4\)"):
        Table.create(str(tmp_path / "both"), SCHEMA, options={"snapshot.num-retained.max": "3", "snapshot.num-retained.min": "4"})
