"""The plugin's lake page without a browser (plugins/lake_page.py): who may look, what it lists, what never shows.

Uses the stand-in auth manager and the connections of test_timeline_plugin.py; the browser test
(test_timeline_ui.py) loads the page in headless Chromium.
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import FastAPI
from fastapi.testclient import TestClient

from airflow_snaptable.plugins import timeline_app
from tests.airflow.conftest import snaptable_conn
from tests.airflow.test_timeline_plugin import OPTION_SECRET, SECRET, FakeAuthManager, client, format_client  # noqa: F401
from tests.core.test_timeline import HOSTILE_DIR


def test_the_lake_page_needs_a_user_and_a_readable_connection(client):  # noqa: F811
    assert client.get("/snaptable/lake?conn_id=snap_ok", follow_redirects=False).status_code == 307
    client.cookies.set("_token", "good-token")
    assert client.get("/snaptable/lake").status_code == 400
    assert client.get("/snaptable/lake?conn_id=snap_hidden").status_code == 404
    assert client.get("/snaptable/lake?conn_id=nothing_here").status_code == 404
    broken = client.get("/snaptable/lake?conn_id=snap_broken")
    assert broken.status_code == 400 and SECRET not in broken.text and OPTION_SECRET not in broken.text


def test_the_lake_page_lists_the_tables_under_the_root_each_linking_to_its_timeline(client):  # noqa: F811
    client.cookies.set("_token", "good-token")
    page = client.get("/snaptable/lake?conn_id=snap_ok")
    assert page.status_code == 200 and "frame-ancestors 'self'" in page.headers["content-security-policy"]
    expected_link = "timeline?" + urlencode({"conn_id": "snap_ok", "table": HOSTILE_DIR})
    assert f'href="{expected_link.replace("&", "&amp;")}"' in page.text
    assert "<b>" not in page.text and SECRET not in page.text and OPTION_SECRET not in page.text
    assert client.get("/snaptable/" + expected_link).status_code == 200
    # The index links each connection to its lake page and shows its root.
    index = client.get("/snaptable/").text
    assert 'href="lake?conn_id=snap_ok"' in index and 'class="root"' in index


def test_a_root_that_does_not_exist_is_reported_without_secrets(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_SNAP_GONE", snaptable_conn(str(tmp_path / f"gone-{SECRET}"), password=SECRET))
    monkeypatch.setattr("airflow.api_fastapi.app.get_auth_manager", lambda: FakeAuthManager({"snap_gone"}))
    server = FastAPI()
    server.mount(timeline_app.URL_PREFIX, timeline_app.app)
    with TestClient(server, base_url="http://airflow.test") as test_client:
        test_client.cookies.set("_token", "good-token")
        page = test_client.get("/snaptable/lake?conn_id=snap_gone")
    assert page.status_code == 200 and "location-error" in page.text and "TableNotFoundError" in page.text
    assert SECRET not in page.text and "gone-***" in page.text


def test_a_catalog_connection_lists_its_iceberg_tables_and_a_paimon_root_its_tables(format_client):  # noqa: F811
    test_client, _ids = format_client
    iceberg = test_client.get("/snaptable/lake?conn_id=snap_iceberg")
    assert iceberg.status_code == 200, iceberg.text
    assert 'data-table="db.orders"' in iceberg.text
    assert "timeline?" + urlencode({"conn_id": "snap_iceberg", "table": "iceberg://db.orders"}).replace("&", "&amp;") in iceberg.text
    paimon = test_client.get("/snaptable/lake?conn_id=snap_paimon")
    assert paimon.status_code == 200
    assert all(f'data-table="{name}"' in paimon.text for name in ("app", "pk", "lsm"))


def test_the_tables_page_lists_a_connection_s_tables_by_name(client, monkeypatch):  # noqa: F811
    import airflow_snaptable.core.table as table_module

    client.cookies.set("_token", "good-token")
    assert client.get("/snaptable/tables?conn_id=snap_hidden").status_code == 404

    def no_opening(*args, **kwargs):
        raise AssertionError("the list opens no table")

    opening = table_module.Table.__dict__["open"]
    monkeypatch.setattr(table_module.Table, "open", no_opening)  # names come from discovery alone
    page = client.get("/snaptable/tables?conn_id=snap_ok")
    assert page.status_code == 200
    link = "timeline?" + urlencode({"conn_id": "snap_ok", "table": HOSTILE_DIR})
    assert f'class="timeline-link" href="{link.replace("&", "&amp;")}"' in page.text
    assert 'class="lake-link" href="lake?conn_id=snap_ok"' in page.text
    assert 'class="permalink" href="/snaptable/tables?conn_id=snap_ok" target="_top"' in page.text
    assert "<b>" not in page.text and SECRET not in page.text and OPTION_SECRET not in page.text
    # The timeline page links back to the connection's tables.
    monkeypatch.setattr(table_module.Table, "open", opening)
    timeline = client.get("/snaptable/" + link)
    assert 'href="tables?conn_id=snap_ok"' in timeline.text and 'class="connection-root"' in timeline.text


def test_the_lake_page_has_one_jobs_column_whatever_the_number_of_jobs():
    """A column per job made the page wider than a 1280 px window (eleven jobs, each cell up to 200 px wide):
    the jobs of a table are lines of one cell, and long words (times, messages) break anywhere."""
    import html
    import re

    from airflow_snaptable.core.lake.health import TableHealth
    from airflow_snaptable.core.lake.policy import JOBS
    from airflow_snaptable.plugins.lake_page import LAKE_STYLE, LakeView, render_lake

    jobs = {job: {"status": "Successful", "lastRunTimestamp": "2026-12-08T00:42:32.759Z", "nextDue": "2026-12-09T00:42:32Z"}
            for job in JOBS}
    jobs["snapshot-expiry"] = {"status": "Failed", "lastRunTimestamp": "2026-12-08T00:42:32.759Z", "failureMessage": "x" * 300}
    health = TableHealth(table="sales.orders", format="snaptable", uri="/lake/sales/orders", snapshots=3, data_files=4,
                         bytes=4040, oldest_snapshot_age_seconds=60.0, jobs=jobs)
    view = LakeView("snap_ok", "/lake", False, [health], {health.uri: "sales/orders"}, [])
    page = render_lake(view, html.escape, "/snaptable")
    header = re.search(r'<table class="lake"><tr>(.*?)</tr>', page).group(1)
    assert header.count("<th>") == 7 and "<th>jobs</th>" in header
    (row,) = re.findall(r'<tr class="lake-table.*?</tr>', page)
    assert row.count("<td") == 7
    assert re.findall(r'data-job="([^"]+)"', row) == list(JOBS)
    assert 'data-job="snapshot-expiry" data-status="Failed"' in row
    assert "table.lake td{overflow-wrap:anywhere}" in LAKE_STYLE
