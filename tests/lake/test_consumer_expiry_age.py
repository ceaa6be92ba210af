"""The ``consumer-expiry`` job's idle time (``expiration-time``), and the action argument under it.

A policy may say how long a consumer may stay idle; a table that explicitly keeps its consumers
longer (``consumer.expiration-time``) keeps them (docs/maintenance.md, "The table's own settings").
The argument is the action's (``expire-consumers``: ``expiration_time``), so ``run-action``, the operator
and the three formats take it too.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.actions import ExpireConsumers, run_action
from airflow_snaptable.core.errors import InvalidArgumentError, InvalidPolicyError
from airflow_snaptable.core.lake import SUCCESSFUL, Policy, maintain
from airflow_snaptable.core.native.consumers import consumer_path
from tests.lake.conftest import native_dir, write_native

DAY_MS = 86_400_000


def _idle(table: Table, consumer_id: str, days: float) -> None:
    """Make a consumer's last update ``days`` ago, as an old reader's file says it."""
    path = os.path.join(table.uri, consumer_path(consumer_id))
    doc = json.loads(open(path).read())
    doc["updateTime"] = int(time.time() * 1000 - days * DAY_MS)
    with open(path, "w") as f:
        f.write(json.dumps(doc))


def _consumers(path: str) -> list[str]:
    return sorted(c.id for c in Table.open(path).consumers())


@pytest.mark.parametrize("value", ["soon", True, -5, [1]])
def test_a_bad_expiration_time_is_refused_when_the_policy_is_loaded(value):
    with pytest.raises(InvalidPolicyError, match="defaults.consumer-expiry.expiration-time"):
        Policy.from_mapping({"defaults": {"consumer-expiry": {"expiration-time": value}}})


def test_the_policy_expires_idle_consumers_unless_the_table_keeps_them_longer(tmp_path):
    lake = str(tmp_path / "lake")
    plain = write_native(native_dir(lake, "a.plain"), 2)
    keeper = write_native(native_dir(lake, "a.keeper"), 2, options={"consumer.expiration-time": "5 d"})
    for table in (plain, keeper):
        table.update_consumer("idle", 2)
        table.update_consumer("fresh", 2)
        _idle(table, "idle", 3)
    report = maintain(lake, Policy.from_mapping({"defaults": {"consumer-expiry": {"expiration-time": "2 d"}}}))
    jobs = {t.table: t.jobs["consumer-expiry"] for t in report.tables}
    assert jobs["a.plain"]["status"] == SUCCESSFUL and jobs["a.plain"]["consumersExpired"] == ["idle"]
    assert jobs["a.plain"]["arguments"] == {"expiration_time": "2 d"}
    assert _consumers(plain.uri) == ["fresh"]
    # The table's own, longer idle time wins, and the status says so.
    assert jobs["a.keeper"]["consumersExpired"] == [] and _consumers(keeper.uri) == ["fresh", "idle"]
    assert jobs["a.keeper"]["notes"] == [
        "the table's consumer.expiration-time=5 d keeps more than the policy's expiration-time=2 d: the table's setting wins"
    ]


def test_without_the_key_the_table_option_decides_as_before(tmp_path):
    lake = str(tmp_path / "lake")
    table = write_native(native_dir(lake, "t"), 2)
    table.update_consumer("idle", 2)
    _idle(table, "idle", 30)
    job = maintain(lake, Policy.from_mapping({"defaults": {"consumer-expiry": {}}})).tables[0].jobs["consumer-expiry"]
    assert job["consumersExpired"] == [] and job["arguments"] == {} and _consumers(table.uri) == ["idle"]


def test_the_action_argument_on_paimon_and_iceberg(mixed_lake, iceberg_lake):
    paimon = Table.open(os.path.join(mixed_lake.path, "db.db", "app"))
    paimon.update_consumer("reader", paimon.latest_snapshot().id)
    later = paimon.clock() + 3 * DAY_MS
    assert run_action(ExpireConsumers.from_values(paimon.uri, {"expiration_time": "4 d", "now": later}), table=paimon)["result"] == []
    assert run_action(ExpireConsumers.from_values(paimon.uri, {"expiration_time": "2 d", "now": later}), table=paimon)["result"] == ["reader"]
    assert mixed_lake.read_paimon("app")["app"]  # pypaimon still reads it

    iceberg = Table.open("iceberg://sales.orders", catalog=iceberg_lake.properties)
    iceberg.update_consumer("reader", 2)
    later = iceberg.clock() + 3 * DAY_MS
    assert iceberg.expire_consumers(now=later, expiration_time="4 d") == []
    assert iceberg.expire_consumers(now=later, expiration_time="2 d") == ["reader"]
    assert iceberg.consumers() == []
    with pytest.raises(InvalidArgumentError, match="expiration_time"):
        ExpireConsumers.from_values(paimon.uri, {"expiration_time": "whenever"})
