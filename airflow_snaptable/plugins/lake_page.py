"""The plugin's lake page: every table of a ``snaptable`` connection with its health (core/lake/health.py).

``/snaptable/tables?conn_id=...`` lists a connection's tables by name (discovery only: cheap), each
linking to its timeline. ``/snaptable/lake?conn_id=...`` lists the tables under the connection's ``root`` and, when the
connection has a ``catalog``, every table of that Iceberg catalog: snapshots, data files, bytes,
the age of the oldest snapshot, and each maintenance job's last status, time and when it is next
due. Tables with a failed job (or that cannot be read) come first; each name links to its timeline.
Everything shown is escaped, and error text is scrubbed of the connection's secrets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from airflow_snaptable.core.formats.foreign import ICEBERG_SCHEME

JOB_LABELS = {"Successful": "ok", "Failed": "FAILED", "Not_Yet_Run": "not yet run", "Disabled": "disabled"}
STATUS_CLASSES = {"Successful": "ok", "Failed": "failed", "Not_Yet_Run": "never"}
#: Between the parts of a job's line: its last run, failure, skip and next due.
DETAIL_SEPARATOR = " \u00b7 "
#: Characters of a failure message a cell shows.
MESSAGE_SHOWN = 120
LAKE_STYLE = (
    "tr.failed td{background:#ffebee}.failed{color:#b71c1c;font-weight:bold}.ok{color:#2e7d32}.never{color:#607d8b}"
    # One jobs column, a line per job, and long words (times, paths, messages) broken anywhere: the page fits
    # a 1280 px window whatever the number of jobs (one column per job made it wider).
    "table.lake{max-width:100%}table.lake td{overflow-wrap:anywhere}td.name{max-width:320px}td.jobs{min-width:320px}"
    "div.job{margin:1px 0}.job-name{display:inline-block;min-width:150px}.num{text-align:right}"
    ".small{font-size:12px;color:#607d8b}"
)


@dataclass
class LakeView:
    conn_id: str
    #: The connection's root as shown (no credentials), or None.
    root: str | None
    #: Iceberg catalog tables are listed too.
    has_catalog: bool
    tables: list[Any]  # core.lake.health.TableHealth
    #: table uri -> the ``table`` parameter of its timeline link (a name under the root, or its URI).
    table_params: dict[str, str]
    #: Locations that could not be listed, with the (scrubbed) reason.
    errors: list[str]


def table_param(root: str | None, uri: str) -> str:
    """What the timeline page takes for the table: its path under the root, else its full URI."""
    if root:
        prefix = root.rstrip("/") + "/"
        if uri.startswith(prefix):
            return uri[len(prefix):]
    return uri


def _locations(settings, conn_id: str) -> list[tuple[str, dict | None, dict | None]]:
    """(location, storage options, catalog properties): the root, and the whole catalog when there is one."""
    locations = []
    if settings.root:
        locations.append((settings.root, settings.storage_options_for(settings.root), None))
    if settings.catalog:
        locations.append((ICEBERG_SCHEME, None, settings.catalog_for(ICEBERG_SCHEME, conn_id)))
    return locations


def load_table_list(conn, conn_id: str, scrub, secrets_of, display_uri) -> LakeView:
    """The connection's tables by name and format only: discovery reads no table's history (core/lake/discovery.py)."""
    from airflow_snaptable.core.lake import list_tables
    from airflow_snaptable.core.lake.health import TableHealth
    from airflow_snaptable.hooks.snaptable import ConnectionSettings

    settings = ConnectionSettings.from_connection(conn, conn.extra_dejson)
    secrets = secrets_of(conn, settings)
    tables, errors = [], []
    for location, storage_options, catalog in _locations(settings, conn_id):
        try:
            tables += [TableHealth(t.name, t.format, t.uri, error=t.problem) for t in list_tables(location, storage_options=storage_options, catalog=catalog)]
        except Exception as exc:  # noqa: BLE001 - shown, scrubbed; the other location still is
            errors.append(scrub(f"{display_uri(location)}: {type(exc).__name__}: {exc}", secrets))
    shown_root = scrub(display_uri(settings.root), secrets) if settings.root else None
    params = {t.uri: table_param(settings.root, t.uri) for t in tables}
    return LakeView(conn_id, shown_root, bool(settings.catalog), tables, params, errors)


def render_table_list(view: LakeView, esc, prefix: str) -> str:
    """The connection's tables, each linking to its timeline, and a link to their health."""
    items = "".join(
        f'<li class="listed-table" data-table="{esc(t.table)}"><a class="timeline-link" '
        f'href="{esc("timeline?" + urlencode({"conn_id": view.conn_id, "table": view.table_params[t.uri]}))}">{esc(t.table)}</a> '
        f'<span class="small">{esc(t.format)}</span></li>'
        for t in view.tables
    ) or "<li>no tables</li>"
    errors = "".join(f'<p class="error location-error">{esc(e)}</p>' for e in view.errors)
    self_link = f"{prefix}/tables?" + urlencode({"conn_id": view.conn_id})
    lake_link = "lake?" + urlencode({"conn_id": view.conn_id})
    return (
        f'<nav><a href="./">all connections</a> · <a class="lake-link" href="{esc(lake_link)}">health and maintenance '
        f'of these tables</a> · <a class="permalink" href="{esc(self_link)}" target="_top">link to this page</a></nav>'
        f"<h1>Tables: {esc(view.conn_id)}</h1><p>{_where(view, esc)}. A name opens the table's timeline.</p>"
        f'<style>{LAKE_STYLE}</style>{errors}<ul class="tables">{items}</ul>'
    )


def _where(view: LakeView, esc) -> str:
    where = [f'root <span class="root">{esc(view.root)}</span>'] if view.root else []
    if view.has_catalog:
        where.append("the connection's Iceberg catalog")
    return "Every table of " + (" and ".join(where) or "nothing (the connection has no root and no catalog)")


def load_lake(conn, conn_id: str, scrub, secrets_of, display_uri) -> LakeView:
    """Every table of the connection with its health. ``scrub(text, secrets)`` cleans error text."""
    from airflow_snaptable.core.lake.health import lake_health
    from airflow_snaptable.hooks.snaptable import ConnectionSettings

    settings = ConnectionSettings.from_connection(conn, conn.extra_dejson)
    secrets = secrets_of(conn, settings)
    tables, errors = [], []
    for location, storage_options, catalog in _locations(settings, conn_id):
        try:
            tables += lake_health(location, storage_options=storage_options, catalog=catalog)
        except Exception as exc:  # noqa: BLE001 - shown, scrubbed; the other location still is
            errors.append(scrub(f"{display_uri(location)}: {type(exc).__name__}: {exc}", secrets))
    for health in tables:
        if health.error:
            health.error = scrub(health.error, secrets)
        for record in health.jobs.values():
            if record.get("failureMessage"):
                record["failureMessage"] = scrub(str(record["failureMessage"]), secrets)
    tables.sort(key=lambda h: (not h.failed, h.table, h.uri))
    params = {h.uri: table_param(settings.root, h.uri) for h in tables}
    shown_root = scrub(display_uri(settings.root), secrets) if settings.root else None
    return LakeView(conn_id, shown_root, bool(settings.catalog), tables, params, errors)


def human_bytes(value: int | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{value} B"


def human_age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.1f} {unit}"
    return f"{seconds:.0f} s"


def render_lake(view: LakeView, esc, prefix: str) -> str:
    """The page's body (the caller wraps it): a row per table, failed first."""
    from airflow_snaptable.core.lake.policy import JOBS

    rows = []
    for health in view.tables:
        link = "timeline?" + urlencode({"conn_id": view.conn_id, "table": view.table_params[health.uri]})
        lines = []
        for job in [job for job in JOBS if job in health.jobs]:  # the order a run carries them out
            record = health.jobs[job]
            status = str(record.get("status"))
            detail = [str(record.get("lastRunTimestamp") or "never")]
            message = str(record.get("failureMessage") or "")
            if message:  # shortened on the page; the whole text is the line's tooltip
                detail.append(message if len(message) <= MESSAGE_SHOWN else message[: MESSAGE_SHOWN - 1] + "\u2026")
            if record.get("skipped"):
                detail.append(str(record["skipped"]))
            if record.get("nextDue"):
                detail.append("next due " + str(record["nextDue"]))
            lines.append(
                f'<div class="job {STATUS_CLASSES.get(status, "")}" data-job="{esc(job)}" data-status="{esc(status)}" '
                f'title="{esc(message)}"><span class="job-name">{esc(job)}</span> {esc(JOB_LABELS.get(status, status))} '
                f'<span class="small">{DETAIL_SEPARATOR.join(esc(d) for d in detail)}</span></div>'
            )
        cells = [f'<td class="jobs">{"".join(lines) or "-"}</td>']
        error = f'<div class="error">{esc(health.error)}</div>' if health.error else ""
        rows.append(
            f'<tr class="lake-table{" failed" if health.failed else ""}" data-table="{esc(health.table)}" '
            f'data-failed="{str(health.failed).lower()}">'
            f'<td class="name"><a class="timeline-link" href="{esc(link)}">{esc(health.table)}</a>{error}</td><td>{esc(health.format)}</td>'
            f'<td class="num">{esc(_dash(health.snapshots))}</td><td class="num">{esc(_dash(health.data_files))}</td>'
            f'<td class="num">{esc(human_bytes(health.bytes))}</td><td class="num">{esc(human_age(health.oldest_snapshot_age_seconds))}</td>'
            f'{"".join(cells)}</tr>'
        )
    if not rows:
        rows.append('<tr><td colspan="7">no tables</td></tr>')
    errors = "".join(f'<p class="error location-error">{esc(e)}</p>' for e in view.errors)
    self_link = f"{prefix}/lake?" + urlencode({"conn_id": view.conn_id})
    return (
        f'<nav><a href="./">all connections</a> \u00b7 <a href="{esc("tables?" + urlencode({"conn_id": view.conn_id}))}">'
        f'table names only</a> \u00b7 <a class="permalink" href="{esc(self_link)}" target="_top">link to this page</a></nav>'
        f"<h1>Lake health: {esc(view.conn_id)}</h1>"
        f"<p>{_where(view, esc)}; tables with a failed job first. A name opens the table's timeline.</p>"
        f"<style>{LAKE_STYLE}</style>{errors}"
        '<table class="lake"><tr><th>table</th><th>format</th><th>snapshots</th><th>data files</th><th>bytes</th>'
        f"<th>oldest snapshot</th><th>jobs</th></tr>{''.join(rows)}</table>"
    )


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)
