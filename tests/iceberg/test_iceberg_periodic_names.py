"""Periodic tags on Iceberg tag refs: a ref records no source, so a tag is automatic only if its whole name is
the pattern of the table's own period and formatter and names a complete period (issue 22 items 8 and 9)."""

from __future__ import annotations

from airflow_snaptable.core import Table
from tests.iceberg.conftest import read_everything, rows

H = 3_600_000


def test_refs_in_other_patterns_or_future_periods_are_manual(iceberg_env):
    """An hourly with_dashes table, at most 1 automatic tag. Refs named in the daily, the without-dashes, the
    minute patterns or for 2099 used to be pruned as periodic tags, and the 2099 one stopped catch-up; they are
    manual: kept, and catch-up resumes after the automatic ref, the one in the table's own pattern."""
    table = iceberg_env.create(properties={"tag.creation-period": "hourly", "tag.num-retained-max": "1"})
    for i in range(2):
        table.append(rows(i))
    table = table.refresh()
    first, last = table.metadata.snapshots[0], table.metadata.snapshots[-1]
    hour = first.timestamp_ms // H * H
    own = Table.open("iceberg://db.orders", catalog=iceberg_env.properties)
    automatic = own.create_periodic_tags(now=hour + H + 1000).created  # the hour of the first commit
    assert len(automatic) == 1
    manual = ["2020-01-01", "2020010100", "20200101 00", "202001010000", "2099-12-31 23", "release"]
    update = table.manage_snapshots()
    for name in manual:
        update = update.create_tag(first.snapshot_id, name)
    update.commit()
    now = last.timestamp_ms // H * H + 3 * H + 1000
    own.clock = lambda: now
    result = own.create_periodic_tags(catch_up=True, now=now)
    assert result.created and result.deleted == [automatic[0]] + result.created[:-1]
    assert {t.name: t.source for t in own.tags()} == {**dict.fromkeys(manual, "manual"), result.created[-1]: "periodic"}
    refs = read_everything(table)["refs"]
    assert {name: refs[name] for name in manual} == dict.fromkeys(manual, first.snapshot_id)
