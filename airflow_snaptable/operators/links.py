"""Extra links of snaptable tasks: a button on each task that opens its table in the UI plugin.

- :class:`TableTimelineLink` ("Table timeline"): every task that works on one table (the operators,
  the sensor, a lake DAG's ``maintain_table`` task) links to that table's timeline page,
  ``/snaptable/timeline?conn_id=...&table=...`` (plugins/timeline_app.py), with the task's rendered
  connection id and table: the page resolves the name under the connection's root as the task did.
- :class:`LakeHealthLink` ("Lake health"): a lake DAG's ``list_tables`` task links to its connection's
  lake page, ``/snaptable/lake?conn_id=...``.

The links are relative to the API server's ``[api] base_url`` path, where the plugin is mounted.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit

from airflow.sdk import BaseOperatorLink, conf

from airflow_snaptable.hooks.snaptable import DEFAULT_CONN_ID

#: Where plugins/snaptable.py mounts the plugin's app (plugins/timeline_app.py URL_PREFIX).
PLUGIN_PREFIX = "/snaptable"


def plugin_url(page: str, **query: str) -> str:
    """``<base path>/snaptable/<page>?<query>``."""
    base = urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    return f"{base}{PLUGIN_PREFIX}/{page}?{urlencode(query)}"


def _table_of(operator: Any) -> str | None:
    table = getattr(operator, "table", None)
    if isinstance(table, dict):  # a lake table, as list_tables gives it
        table = table.get("uri")
    return table if isinstance(table, str) and table.strip() else None


class TableTimelineLink(BaseOperatorLink):
    """The task's table, drawn: its snapshots, tags, consumers and next expiry."""

    name = "Table timeline"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        table = _table_of(operator)
        if table is None:
            return ""  # no table (a mapped task before it expanded): no button
        return plugin_url("timeline", conn_id=getattr(operator, "snaptable_conn_id", None) or DEFAULT_CONN_ID, table=table)


class LakeHealthLink(BaseOperatorLink):
    """Every table of the task's connection with its health and maintenance status."""

    name = "Lake health"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return plugin_url("lake", conn_id=getattr(operator, "snaptable_conn_id", None) or DEFAULT_CONN_ID)
