"""Periodic tags on Iceberg tag refs: Paimon's automatic-tag rules (core/lifecycle/periodic_tags.py), unchanged.

The rules run over a view of the Iceberg table: its ``main`` history (the latest ancestor at a
period's end is the state the period's tag holds), its tag refs, and its tag commits. An Iceberg
ref records no source, so, as on Paimon tables, a tag is automatic only if its whole name is the
pattern of the run's period and formatter and names a complete period (core/lifecycle/periodic_tags.py):
``num_retained_max`` may prune it and the periodic run does not tag that period again. Any other
tag is manual, whatever it looks like. The options (``tag.creation-period``,
``tag.creation-period-duration``, ``tag.creation-delay``, ``tag.period-formatter``,
``tag.num-retained-max``, ``tag.automatic-creation``) are read from the table's properties.
Watermarks are not Iceberg's: ``time_source="watermark"`` raises UnsupportedOperationError.
"""

from __future__ import annotations

import dataclasses

from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.arguments.table_options import OPTION_SPECS, TableOptions
from airflow_snaptable.core.lifecycle.periodic_tags import PeriodicTagging
from airflow_snaptable.core.native.tags import MANUAL

#: The table properties the periodic rules read.
TAG_OPTIONS = (
    "tag.creation-period", "tag.creation-period-duration", "tag.creation-delay", "tag.period-formatter",
    "tag.num-retained-max", "tag.automatic-creation",
)


class _History:
    """``main``'s history, as the periodic rules ask for it."""

    def __init__(self, table):
        self.table = table

    def earliest_snapshot(self):
        return self.table.earliest_snapshot()

    def latest_snapshot(self):
        return self.table.latest_snapshot()

    def snapshot_at(self, millis: int):
        return self.table.snapshot_at(millis)

    def snapshot(self, snapshot_id: int):
        return self.table.snapshot(snapshot_id)


class _Refs:
    """The tag refs as they are (no source recorded): the periodic rules tell which are automatic."""

    def __init__(self, table):
        self.table = table

    def tags(self):
        return self.table.tag_refs()


@dataclasses.dataclass(frozen=True)
class _View:
    snapshots: _History
    tags: _Refs


class _Tagging:
    """Tag commits through the table (one catalog commit each)."""

    def __init__(self, table):
        self.table = table

    def create(self, name: str, snapshot_id: int, time_retained=None, source: str = MANUAL, now_millis: int | None = None):
        return self.table.create_tag(name, snapshot_id, time_retained=time_retained)

    def delete(self, name: str):
        return self.table.delete_tag(name)


def tag_options(properties: dict) -> TableOptions:
    """The periodic-tag options among an Iceberg table's properties, validated."""
    picked = {k: v for k, v in properties.items() if k in TAG_OPTIONS and k in OPTION_SPECS}
    try:
        return TableOptions(picked)
    except Exception as exc:  # noqa: BLE001 - InvalidOptionError and its kin
        raise InvalidArgumentError(f"table properties: {exc}") from exc


def periodic_tagging(table) -> PeriodicTagging:
    view = _View(_History(table), _Refs(table))
    return PeriodicTagging(view, _Tagging(table), tag_options(dict(table.refresh().metadata.properties)), table.clock)
