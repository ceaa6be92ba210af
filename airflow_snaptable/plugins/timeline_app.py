"""The read-only web pages of the Airflow UI plugin: the timelines of the tables of ``snaptable`` connections.

A FastAPI app the Airflow API server mounts at ``/snaptable`` (plugins/snaptable.py registers it):

- ``/snaptable/``: the ``snaptable`` connections the user may read, each with its root, a link to
  its tables (the lake page) and a form for a table (a name under the root, or a full URI);
- ``/snaptable/tables?conn_id=...``: the connection's tables by name, each linking to its timeline;
- ``/snaptable/lake?conn_id=...``: every table of the connection with its health and maintenance
  status (plugins/lake_page.py), failed first, each linking to its timeline;
- ``/snaptable/timeline?conn_id=...&table=...``: the HTML timeline (core/timeline/render.py);
- ``/snaptable/timeline.svg?conn_id=...&table=...``: the picture alone.

Who may look: the Airflow auth manager decides, as for the REST API. The user comes from the
API server's JWT (the ``_token`` cookie the UI sets, or an ``Authorization: Bearer`` header); without
one the browser is sent to the auth manager's login page and back. A connection is shown only to a
user the auth manager lets read it (``is_authorized_connection(method="GET")``).

What reaches the browser: connection ids, the table URI (without any ``user:password@`` or query
string) and the picture. The connection's login, password, storage options and catalog properties
never do: they are used here to read the table's metadata, and any error text is scrubbed of them.
Connections come from the metadata database and ``AIRFLOW_CONN_*`` variables (a secrets backend
cannot be listed: a connection only it holds is still shown when asked for by id).
"""

from __future__ import annotations

import dataclasses
import html
import logging
import os
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

log = logging.getLogger(__name__)

URL_PREFIX = "/snaptable"
CONN_TYPE = "snaptable"
HEADERS = {
    # The pages are self-contained: nothing loads from anywhere, no script runs; only the Airflow UI may frame them.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
PAGE_STYLE = (
    "body{font-family:'DejaVu Sans','Liberation Sans',Arial,sans-serif;margin:16px;color:#263238}"
    "h1{font-size:18px}table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #cfd8dc;text-align:left}"
    ".error{color:#b71c1c;font-family:monospace}"
)

app = FastAPI(title="snaptable timelines", docs_url=None, redoc_url=None, openapi_url=None)


class Denied(Exception):
    """The user may not read this connection (or it is not a snaptable connection): 404, saying no more."""


# -- who is asking -------------------------------------------------------------------------------


async def _user(request: Request):
    """The authenticated user, or None (no token, or a token the auth manager refuses)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN

    header = request.headers.get("authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else request.cookies.get(COOKIE_NAME_JWT_TOKEN)
    if not token:
        return None
    try:
        return await get_auth_manager().get_user_from_token(token)
    except Exception:  # noqa: BLE001 - expired or invalid: log in again
        return None


def _login_redirect(request: Request) -> RedirectResponse:
    from airflow.api_fastapi.app import get_auth_manager

    return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)), status_code=307)


def _may_read(user, conn_id: str) -> bool:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails

    return get_auth_manager().is_authorized_connection(method="GET", details=ConnectionDetails(conn_id=conn_id), user=user)


# -- connections ---------------------------------------------------------------------------------


def snaptable_connection_ids() -> list[str]:
    """Ids of the ``snaptable`` connections in the metadata database and in ``AIRFLOW_CONN_*`` variables."""
    from sqlalchemy import select

    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    found: set[str] = set()
    try:
        with create_session() as session:
            found.update(session.scalars(select(Connection.conn_id).where(Connection.conn_type == CONN_TYPE)))
    except Exception:  # noqa: BLE001 - no database here: the variables still count
        log.warning("cannot list connections from the metadata database", exc_info=True)
    for name in os.environ:
        if name.startswith("AIRFLOW_CONN_") and len(name) > len("AIRFLOW_CONN_"):
            conn_id = name[len("AIRFLOW_CONN_"):].lower()
            try:
                if _connection(conn_id) is not None:
                    found.add(conn_id)
            except Exception:  # noqa: BLE001 - a malformed variable is not ours to report here
                continue
    return sorted(found)


def _connection(conn_id: str):
    """The snaptable connection ``conn_id`` (any secrets backend), or None if there is none of that type."""
    from airflow.exceptions import AirflowNotFoundException
    from airflow.models.connection import Connection

    try:
        conn = Connection.get_connection_from_secrets(conn_id)
    except AirflowNotFoundException:
        return None
    return conn if conn.conn_type == CONN_TYPE else None


def display_uri(uri: str) -> str:
    """A URI fit to show: no ``user:password@``, no query string or fragment (where credentials hide)."""
    if "://" not in uri:
        return uri
    parts = urlsplit(uri)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _secret_strings(conn, settings) -> list[str]:
    """Every credential-like value of the connection, to scrub from error text."""
    values: list[Any] = [conn.password, conn.login, settings.key, settings.secret]
    stack: list[Any] = [settings.storage_options, settings.catalog or {}]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            values.append(item)
    return sorted({str(v) for v in values if isinstance(v, (str, int)) and len(str(v)) >= 4}, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def load_timeline(conn_id: str, table: str):
    """The table's timeline, its URI made fit to show. Raises Denied, or ValueError with scrubbed text."""
    from airflow_snaptable.core.table import Table
    from airflow_snaptable.core.timeline.model import build_timeline
    from airflow_snaptable.hooks.snaptable import ConnectionSettings, join_table_uri

    conn = _connection(conn_id)
    if conn is None:
        raise Denied(conn_id)
    settings = secrets = None
    try:
        settings = ConnectionSettings.from_connection(conn, conn.extra_dejson)
        secrets = _secret_strings(conn, settings)
        uri = join_table_uri(settings.root, table)
        opened = Table.open(uri, settings.storage_options_for(uri), catalog=settings.catalog_for(uri, conn_id))
        timeline = build_timeline(opened)
    except Exception as exc:  # noqa: BLE001 - shown to the user, scrubbed
        message = f"{type(exc).__name__}: {exc}"
        raise ValueError(scrub(message, secrets if secrets is not None else _fallback_secrets(conn))) from None
    return dataclasses.replace(timeline, uri=display_uri(timeline.uri))


def _fallback_secrets(conn) -> list[str]:
    """When the connection's extras cannot even be parsed: scrub the raw extra's text and the password."""
    return sorted({s for s in (conn.password, conn.login, conn.extra) if s and len(s) >= 4}, key=len, reverse=True)


# -- pages ---------------------------------------------------------------------------------------


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    text = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"<style>{PAGE_STYLE}</style></head><body>{body}</body></html>"
    )
    return HTMLResponse(text, status_code=status, headers=HEADERS)


@app.get("/", response_class=HTMLResponse)
async def index(request: Request) -> Response:
    user = await _user(request)
    if user is None:
        return _login_redirect(request)
    conn_ids = [c for c in await run_in_threadpool(snaptable_connection_ids) if _may_read(user, c)]
    roots = await run_in_threadpool(lambda: {c: _shown_root(c) for c in conn_ids})
    rows = "".join(
        f'<tr class="connection" data-conn-id="{esc(c)}"><td>{esc(c)}</td><td class="root">{esc(roots[c])}</td>'
        f'<td><a class="tables-link" href="tables?{esc(urlencode({"conn_id": c}))}">tables</a> \u00b7 '
        f'<a class="lake-link" href="lake?{esc(urlencode({"conn_id": c}))}">health</a></td>'
        f'<td><form method="get" action="timeline">'
        f'<input type="hidden" name="conn_id" value="{esc(c)}">'
        f'<input name="table" size="40" placeholder="table name under the root, or a full URI" required> '
        f'<button type="submit">timeline</button></form></td></tr>'
        for c in conn_ids
    ) or '<tr><td colspan="4">no snaptable connections</td></tr>'
    body = (
        "<h1>Snapshot tables: timelines</h1>"
        "<p>Pick a snaptable connection: its tables with their health, or a table's timeline (its snapshots, "
        "tags, consumers and next expiry, drawn).</p>"
        f"<table><tr><th>connection</th><th>root</th><th>tables</th><th>table timeline</th></tr>{rows}</table>"
    )
    return _page("snaptable timelines", body)


async def _timeline(request: Request, conn_id: str, table: str):
    """(user, timeline) or a response to return instead (login, 404, 400)."""
    user = await _user(request)
    if user is None:
        return _login_redirect(request)
    if not conn_id or not table:
        return _page("snaptable timeline", '<p class="error">conn_id and table are required</p>', 400)
    if not _may_read(user, conn_id):
        return _page("snaptable timeline", f'<p class="error">no snaptable connection {esc(conn_id)}</p>', 404)
    try:
        return await run_in_threadpool(load_timeline, conn_id, table)
    except Denied:
        return _page("snaptable timeline", f'<p class="error">no snaptable connection {esc(conn_id)}</p>', 404)
    except ValueError as exc:
        body = f'<p><a href="./">all connections</a></p><p class="error">{esc(exc)}</p>'
        return _page("snaptable timeline", body, 400)


@app.get("/timeline", response_class=HTMLResponse)
async def timeline_page(request: Request, conn_id: str = "", table: str = "") -> Response:
    from airflow_snaptable.core.timeline.render import render_html

    found = await _timeline(request, conn_id, table)
    if isinstance(found, Response):
        return found
    query = urlencode({"conn_id": conn_id, "table": table})
    links = [("all connections", "./"), (f"tables of {conn_id}", "tables?" + urlencode({"conn_id": conn_id})),
             ("their health", "lake?" + urlencode({"conn_id": conn_id})),
             ("picture alone (SVG)", "timeline.svg?" + query), ("link to this page", f"{URL_PREFIX}/timeline?{query}")]
    root = await run_in_threadpool(_shown_root, conn_id)
    text = render_html(found, links=links, title=f"Timeline ({conn_id})")
    # The root the table's name is under, and the permalink opening outside the UI's frame.
    text = text.replace('<a href="' + esc(f"{URL_PREFIX}/timeline?{query}") + '">',
                        '<a class="permalink" target="_top" href="' + esc(f"{URL_PREFIX}/timeline?{query}") + '">', 1)
    text = text.replace('<p class="table-uri">', f'<p class="connection-root">connection {esc(conn_id)}, root {esc(root)}</p><p class="table-uri">', 1)
    return HTMLResponse(text, headers=HEADERS)


@app.get("/lake", response_class=HTMLResponse)
async def lake_page(request: Request, conn_id: str = "") -> Response:
    from airflow_snaptable.plugins.lake_page import load_lake, render_lake

    return await _connection_page(request, conn_id, "snaptable lake", load_lake, render_lake)


@app.get("/tables", response_class=HTMLResponse)
async def tables_page(request: Request, conn_id: str = "") -> Response:
    from airflow_snaptable.plugins.lake_page import load_table_list, render_table_list

    return await _connection_page(request, conn_id, "snaptable tables", load_table_list, render_table_list)


async def _connection_page(request: Request, conn_id: str, title: str, load, render) -> Response:
    """A page about one connection's tables: the user must be logged in and may read the connection."""
    user = await _user(request)
    if user is None:
        return _login_redirect(request)
    if not conn_id:
        return _page(title, '<p class="error">conn_id is required</p>', 400)
    conn = await run_in_threadpool(_connection, conn_id) if _may_read(user, conn_id) else None
    if conn is None:
        return _page(title, f'<p class="error">no snaptable connection {esc(conn_id)}</p>', 404)
    try:
        view = await run_in_threadpool(load, conn, conn_id, scrub, _secret_strings, display_uri)
    except Exception as exc:  # noqa: BLE001 - the connection's extras cannot be read: say so, scrubbed
        body = f'<p><a href="./">all connections</a></p><p class="error">{esc(scrub(f"{type(exc).__name__}: {exc}", _fallback_secrets(conn)))}</p>'
        return _page(title, body, 400)
    return _page(f"{title}: {conn_id}", render(view, esc, URL_PREFIX))


def _shown_root(conn_id: str) -> str:
    """The connection's root fit to show ("not set" when it has none, "unreadable" when its extras are broken)."""
    from airflow_snaptable.hooks.snaptable import ConnectionSettings

    conn = _connection(conn_id)
    if conn is None:
        return "unknown"
    try:
        settings = ConnectionSettings.from_connection(conn, conn.extra_dejson)
    except Exception:  # noqa: BLE001 - the timeline or lake page names the problem
        return "unreadable (see the connection's extras)"
    return scrub(display_uri(settings.root), _secret_strings(conn, settings)) if settings.root else "not set"


@app.get("/timeline.svg")
async def timeline_svg(request: Request, conn_id: str = "", table: str = "") -> Response:
    from airflow_snaptable.core.timeline.render import render_svg

    found = await _timeline(request, conn_id, table)
    if isinstance(found, Response):
        return found
    return Response(render_svg(found), media_type="image/svg+xml", headers=HEADERS)
