"""The plugin's FastAPI app without a server or a browser: who may look, and what never reaches the page.

The auth manager is a stand-in (the API server initialises the real one): it knows one token
and lets its user read only the connections it names. Connections are ``AIRFLOW_CONN_*``
variables. The browser test (test_timeline_ui.py) runs the real API server.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from airflow_snaptable.plugins import timeline_app
from tests.airflow.conftest import snaptable_conn
from tests.core.test_timeline import HOSTILE_DIR, build_scenario_table

SECRET = "pw-PLUGIN-SECRET-93b1"
OPTION_SECRET = "opt-PLUGIN-SECRET-5c2d"


class FakeAuthManager:
    def __init__(self, readable: set[str]):
        self.readable = readable

    async def get_user_from_token(self, token: str):
        if token != "good-token":
            raise ValueError("invalid token")
        return "alice"

    def get_url_login(self, next_url: str | None = None) -> str:
        return "/auth/login?" + urlencode({"next": next_url or ""})  # as the simple auth manager does

    def is_authorized_connection(self, *, method, user, details=None) -> bool:
        return method == "GET" and user == "alice" and details.conn_id in self.readable


@pytest.fixture()
def client(monkeypatch, tmp_path):
    build_scenario_table(str(tmp_path / HOSTILE_DIR))
    monkeypatch.setenv("AIRFLOW_CONN_SNAP_OK", snaptable_conn(str(tmp_path), password=SECRET,
                                                              extra={"storage_options": json.dumps({"token": OPTION_SECRET})}))
    monkeypatch.setenv("AIRFLOW_CONN_SNAP_HIDDEN", snaptable_conn(str(tmp_path)))
    # Broken extras that hold a secret: the error must not echo it.
    monkeypatch.setenv("AIRFLOW_CONN_SNAP_BROKEN", snaptable_conn(
        "s3://user:" + SECRET + "@bucket/wh", password=SECRET, extra={"storage_options": '{"token": "' + OPTION_SECRET + '" oops'}))
    monkeypatch.setattr("airflow.api_fastapi.app.get_auth_manager", lambda: FakeAuthManager({"snap_ok", "snap_broken"}))
    server = FastAPI()  # mounted as the API server mounts it (airflow.api_fastapi.app.init_plugins)
    server.mount(timeline_app.URL_PREFIX, timeline_app.app)
    with TestClient(server, base_url="http://airflow.test") as test_client:
        yield test_client


def test_without_a_token_the_browser_goes_to_the_login_page_and_back(client):
    for path in ("/snaptable/", "/snaptable/timeline?conn_id=snap_ok&table=x", "/snaptable/timeline.svg?conn_id=snap_ok&table=x"):
        for cookies in ({}, {"_token": "forged"}):
            client.cookies.clear()
            client.cookies.update(cookies)
            response = client.get(path, follow_redirects=False)
            assert response.status_code == 307, path
            login = urlsplit(response.headers["location"])
            assert login.path == "/auth/login" and parse_qs(login.query)["next"] == ["http://airflow.test" + path]


def test_the_list_shows_only_the_snaptable_connections_the_user_may_read(client):
    client.cookies.set("_token", "good-token")
    response = client.get("/snaptable/")
    assert response.status_code == 200
    assert "frame-ancestors 'self'" in response.headers["content-security-policy"]
    assert 'data-conn-id="snap_ok"' in response.text and 'data-conn-id="snap_broken"' in response.text
    assert "snap_hidden" not in response.text
    # A bearer header works as well as the UI's cookie.
    client.cookies.clear()
    assert client.get("/snaptable/", headers={"Authorization": "Bearer good-token"}).status_code == 200


def test_the_timeline_page_and_svg(client):
    client.cookies.set("_token", "good-token")
    page = client.get("/snaptable/timeline", params={"conn_id": "snap_ok", "table": HOSTILE_DIR})
    assert page.status_code == 200 and page.text.count('<g class="snapshot"') == 6
    svg = client.get("/snaptable/timeline.svg", params={"conn_id": "snap_ok", "table": HOSTILE_DIR})
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert 'data-consumer="reader" data-next-snapshot="6"' in svg.text
    for text in (page.text, svg.text):
        assert SECRET not in text and OPTION_SECRET not in text
    # A connection the user may not read is as absent as one that does not exist.
    assert client.get("/snaptable/timeline", params={"conn_id": "snap_hidden", "table": HOSTILE_DIR}).status_code == 404


def test_errors_are_shown_without_the_connections_secrets(client):
    client.cookies.set("_token", "good-token")
    broken = client.get("/snaptable/timeline", params={"conn_id": "snap_broken", "table": "t"})
    assert broken.status_code == 400 and "InvalidArgumentError" in broken.text
    missing = client.get("/snaptable/timeline", params={"conn_id": "snap_ok", "table": "<no such table>"})
    assert missing.status_code == 400 and "&lt;no such table&gt;" in missing.text and "<no such" not in missing.text
    for text in (broken.text, missing.text):
        assert SECRET not in text and OPTION_SECRET not in text


def test_display_uri_drops_credentials():
    assert timeline_app.display_uri("s3://AKIA:secret@bucket/wh/t?X-Amz-Signature=s#f") == "s3://bucket/wh/t"
    assert timeline_app.display_uri("/data/tables/orders") == "/data/tables/orders"
    assert timeline_app.scrub("key secret-1 and secret-12", ["secret-12", "secret-1"]) == "key *** and ***"


# -- tables other engines wrote: an Iceberg table in a pyiceberg catalog, a Paimon table pypaimon wrote --


@pytest.fixture()
def format_client(monkeypatch, tmp_path, paimon):
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog

    from airflow_snaptable.core import Table

    warehouse = tmp_path / "iceberg"
    warehouse.mkdir()
    catalog = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}
    pyiceberg = load_catalog("default", **catalog)
    pyiceberg.create_namespace("db")
    schema = pa.schema([("id", pa.int64())])
    iceberg = pyiceberg.create_table("db.orders", schema=schema)
    for i in range(3):
        iceberg.append(pa.table({"id": [i]}, schema=schema))
    iceberg.manage_snapshots().create_tag(iceberg.refresh().metadata.snapshots[0].snapshot_id, "first").commit()
    ours = Table.open("iceberg://db.orders", catalog=catalog)
    ours.update_consumer("reader", ours.snapshot_manager.latest_id())
    paimon_warehouse = paimon.copy(tmp_path / "paimon")
    monkeypatch.setenv("AIRFLOW_CONN_SNAP_ICEBERG", snaptable_conn(extra={"catalog": catalog}))
    monkeypatch.setenv("AIRFLOW_CONN_SNAP_PAIMON", snaptable_conn(f"{paimon_warehouse}/db.db"))
    monkeypatch.setattr("airflow.api_fastapi.app.get_auth_manager", lambda: FakeAuthManager({"snap_iceberg", "snap_paimon"}))
    server = FastAPI()
    server.mount(timeline_app.URL_PREFIX, timeline_app.app)
    with TestClient(server, base_url="http://airflow.test") as test_client:
        test_client.cookies.set("_token", "good-token")
        yield test_client, [s.snapshot_id for s in iceberg.refresh().metadata.snapshots]


def test_the_timeline_of_an_iceberg_table_and_of_a_paimon_table(format_client):
    client, iceberg_ids = format_client
    page = client.get("/snaptable/timeline", params={"conn_id": "snap_iceberg", "table": "iceberg://db.orders"})
    assert page.status_code == 200, page.text
    for snapshot_id in iceberg_ids:
        assert f'data-snapshot-id="{snapshot_id}"' in page.text
    assert 'data-tag="first"' in page.text and 'data-consumer="reader"' in page.text
    assert f'data-next-snapshot-id="{iceberg_ids[-1]}"' in page.text
    svg = client.get("/snaptable/timeline.svg", params={"conn_id": "snap_iceberg", "table": "iceberg://db.orders"})
    assert svg.status_code == 200 and svg.text.count('<g class="snapshot"') == 3
    paimon_page = client.get("/snaptable/timeline", params={"conn_id": "snap_paimon", "table": "app"})
    assert paimon_page.status_code == 200 and paimon_page.text.count('<g class="snapshot"') == 6
    assert 'data-tag="t2"' in paimon_page.text and 'data-tag="t4"' in paimon_page.text


def test_the_docs_say_how_to_open_the_pages_with_settings_that_exist():
    """docs/airflow.md says how to see the pages: the API server command, where, and the auth settings; each
    setting it names is one of this Airflow's, and the command is one of its CLI's."""
    import re

    from airflow.configuration import conf

    from tests.airflow.conftest import REPO

    text = " ".join((REPO / "docs" / "airflow.md").read_text(encoding="utf-8").split())
    assert "**To see the pages**" in text and f"{timeline_app.URL_PREFIX}/" in text
    settings = re.findall(r"\[core\] (\w+)|AIRFLOW__CORE__(\w+)=", text)
    named = {(a or b).lower() for a, b in settings}
    assert {"simple_auth_manager_users", "simple_auth_manager_all_admins"} <= named, named
    for option in named:
        assert conf.has_option("core", option), option
    from airflow.cli.cli_config import core_commands

    command, *flags = re.search(r"`airflow (api-server[^`]*)`", text).group(1).split()
    (found,) = [c for c in core_commands if c.name == command]
    options = {flag for arg in found.args for flag in arg.flags}
    assert {f for f in flags if f.startswith("-")} <= options, (flags, options)
