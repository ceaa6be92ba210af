"""The Airflow UI plugin in a real browser: ``airflow api-server`` serves it, headless Chromium draws it.

The API server runs on a free port against the session's temporary AIRFLOW_HOME (SQLite), with
connections given as ``AIRFLOW_CONN_*`` variables: a snaptable connection carrying a secret
(password and a storage option) and a connection of another type. The simple auth manager runs
with ``simple_auth_manager_all_admins`` (every request is an admin's). Chromium comes from
scripts/chromium (Debian's package, installed when missing); if that fails, the test fails with
the reason. Two Chromium runs (one page load each) load the lake page and the timeline page, each
writing a screenshot and dumping the DOM; the screenshots stay in the test's temporary directory, and
are copied to ``$SNAPTABLE_SCREENSHOT_DIR`` when it is set.
"""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import signal
import struct
import subprocess
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from urllib.parse import urlencode

import pytest

from airflow_snaptable.core import Table
from tests.airflow.conftest import AIRFLOW_BIN, REPO, base_env, free_port, run_airflow, snaptable_conn
from tests.core.test_timeline import HOSTILE_DIR, HOSTILE_TAG, build_scenario_table

SECRET_PASSWORD = "pw-UI-SECRET-7f3a9c"
SECRET_OPTION = "so-UI-SECRET-41d2e8"
LOGIN = "AKIAUITESTLOGIN"
CONN_ID = "snaptable_ui"
STARTUP_SECONDS = 90
LAKE_TABLES = ("good", "broken")
LAKE_POLICY = {"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0,
                                                "trigger": {"snapshots": 3}}, "tag-expiry": {}}}


@pytest.fixture(scope="session")
def chromium() -> str:
    """The chromium binary (scripts/chromium installs it when it is missing)."""
    proc = subprocess.run([str(REPO / "scripts" / "chromium")], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"scripts/chromium failed ({proc.returncode}): cannot install chromium:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    """The scenario table, and a lake beside it maintained once: ``lake.good`` and ``lake.broken`` (a job failed)."""
    from airflow_snaptable.core.lake import Policy, maintain
    from tests.lake.conftest import native_dir, write_native

    root = tmp_path_factory.mktemp("ui-warehouse")
    build_scenario_table(str(root / HOSTILE_DIR))
    for name in LAKE_TABLES:
        write_native(native_dir(str(root / "lake"), name))
    with open(os.path.join(native_dir(str(root / "lake"), "broken"), "snapshot", "snapshot-2"), "w") as f:
        f.write("{")
    maintain(str(root / "lake"), Policy.from_mapping(LAKE_POLICY))
    return root


@pytest.fixture(scope="module")
def api_server(airflow_db, warehouse, tmp_path_factory):
    """``airflow api-server`` on a free port; yields its base URL. Stopped (its process group) afterwards."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("api-server") / "api-server.log"
    env = base_env(
        **{
            f"AIRFLOW_CONN_{CONN_ID.upper()}": snaptable_conn(
                str(warehouse), login=LOGIN, password=SECRET_PASSWORD,
                extra={"storage_options": json.dumps({"token": SECRET_OPTION})},
            ),
            "AIRFLOW_CONN_NOT_A_TABLE": json.dumps({"conn_type": "http", "host": "example.invalid", "password": SECRET_PASSWORD}),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        }
    )
    started = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [AIRFLOW_BIN, "api-server", "--port", str(port), "--host", "127.0.0.1"],
            env=env, cwd=airflow_db, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"airflow api-server exited {proc.returncode}:\n{log_path.read_text()[-6000:]}")
            try:
                if _get(base + "/api/v2/monitor/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() - started > STARTUP_SECONDS:
                pytest.fail(f"airflow api-server not up after {STARTUP_SECONDS} s:\n{log_path.read_text()[-6000:]}")
            time.sleep(0.5)
        print(f"api-server up in {time.monotonic() - started:.1f} s")
        yield base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class DOM(html.parser.HTMLParser):
    """Every start tag of a page with its attributes (values unescaped)."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def groups(self, css_class: str) -> list[dict[str, str]]:
        return [a for tag, a in self.elements if tag == "g" and css_class in a.get("class", "").split()]


def _png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the decompressed scanlines of a PNG (enough to tell a blank picture)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    idat, offset = b"", 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        if kind == b"IDAT":
            idat += data[offset + 8:offset + 8 + length]
        offset += 12 + length
    return width, height, zlib.decompress(idat)


def _chromium_page(chromium: str, url: str, shot: Path, profile: Path) -> str:
    """One page load: its screenshot written to ``shot`` (checked not blank), its rendered DOM returned."""
    started = time.monotonic()
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}",
         f"--screenshot={shot}", "--window-size=1280,900", "--dump-dom", url],
        capture_output=True, text=True, timeout=180,
    )
    print(f"chromium {url}: {time.monotonic() - started:.1f} s, screenshot {shot}")
    if os.environ.get("SNAPTABLE_SCREENSHOT_DIR"):  # CI keeps the pictures as artifacts
        os.makedirs(os.environ["SNAPTABLE_SCREENSHOT_DIR"], exist_ok=True)
        shutil.copy(shot, os.environ["SNAPTABLE_SCREENSHOT_DIR"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    # The screenshot: the whole window, and not blank (many distinct byte values in its pixels).
    width, height, pixels = _png_pixels(shot)
    assert (width, height) == (1280, 900)
    assert shot.stat().st_size > 20_000 and len(set(pixels)) > 64
    return proc.stdout


def test_airflow_plugins_lists_the_plugin(airflow_db):
    proc = run_airflow(["plugins", "-o", "json"])
    plugins = {p["name"]: p for p in json.loads(proc.stdout[proc.stdout.index("["):])}
    plugin = plugins["snaptable"]
    assert "airflow-snaptable" in plugin["source"] and "airflow.plugins" in plugin["source"]
    assert [a["url_prefix"] for a in plugin["fastapi_apps"]] == ["/snaptable"]
    assert [v["href"] for v in plugin["external_views"]] == ["/snaptable/"]


def test_the_timeline_page_in_headless_chromium(api_server, warehouse, chromium, tmp_path):
    # The API server mounted the app and lists the plugin (the UI builds its menu from this).
    status, body = _get(api_server + "/api/v2/plugins")
    assert status == 200
    views = [v for p in json.loads(body)["plugins"] if p["name"] == "snaptable" for v in p["external_views"]]
    assert views and views[0]["href"] == "/snaptable/"

    status, index = _get(api_server + "/snaptable/")
    assert status == 200
    # Every snaptable connection (the session's metadata DB may hold others, e.g. the CLI test's), no other type.
    listed = [a["data-conn-id"] for tag, a in DOM(index).elements if a.get("class") == "connection"]
    assert CONN_ID in listed and "not_a_table" not in listed
    status, error_page = _get(api_server + "/snaptable/timeline?" + urlencode({"conn_id": CONN_ID, "table": "no_such_table"}))
    assert status == 400 and "TableNotFoundError" in error_page
    status, _ = _get(api_server + "/snaptable/timeline?" + urlencode({"conn_id": "not_a_table", "table": "x"}))
    assert status == 404

    # The index shows each connection's root and links to its lake page.
    (row,) = [a for tag, a in DOM(index).elements if a.get("data-conn-id") == CONN_ID]
    assert f'href="lake?{urlencode({"conn_id": CONN_ID})}"' in index and f"<td class=\"root\">{warehouse}</td>" in index

    # The lake page: every table of the connection, the failed one first, each linking to its timeline.
    lake_text = _chromium_page(chromium, api_server + "/snaptable/lake?" + urlencode({"conn_id": CONN_ID}),
                               tmp_path / "lake.png", tmp_path / "profile")
    lake = DOM(lake_text)
    rows = [a for tag, a in lake.elements if tag == "tr" and "lake-table" in a.get("class", "")]
    assert [(r["data-table"], r["data-failed"]) for r in rows][:1] == [("lake.broken", "true")]
    assert {r["data-table"] for r in rows} >= {"lake.broken", "lake.good"}
    assert all(r["data-failed"] == "false" for r in rows[1:])
    links = [a["href"] for tag, a in lake.elements if tag == "a" and a.get("class") == "timeline-link"]
    assert links[0] == "timeline?" + urlencode({"conn_id": CONN_ID, "table": "lake/broken"})
    assert "timeline?" + urlencode({"conn_id": CONN_ID, "table": "lake/good"}) in links
    statuses = {(a["data-job"], a["data-status"]) for tag, a in lake.elements if tag == "div" and "job" in a.get("class", "").split()}
    assert ("snapshot-expiry", "Failed") in statuses and ("snapshot-expiry", "Successful") in statuses
    assert "next due after 3 more snapshot(s)" in lake_text and "CorruptMetadataError" in lake_text
    assert _get(api_server + "/snaptable/" + links[-1])[0] == 200  # a link target opens

    url = api_server + "/snaptable/timeline?" + urlencode({"conn_id": CONN_ID, "table": HOSTILE_DIR})
    dom_text = _chromium_page(chromium, url, tmp_path / "timeline.png", tmp_path / "profile")

    # The rendered DOM against the table itself.
    table = Table.open(str(warehouse / HOSTILE_DIR))
    dom = DOM(dom_text)
    expected = {s.id: s for s in table.snapshots()}
    for tag in table.tags():
        expected.setdefault(tag.snapshot_id, tag.snapshot)
    drawn = {int(a["data-snapshot-id"]): a for a in dom.groups("snapshot")}
    assert {i: a["data-kind"] for i, a in drawn.items()} == {i: s.commit_kind.value for i, s in expected.items()}
    assert {i: int(a["data-records"]) for i, a in drawn.items()} == {i: s.total_record_count for i, s in expected.items()}
    assert drawn[1]["data-retained"] == "false"

    tags = {a["data-tag"]: (int(a["data-snapshot-id"]), a["data-source"]) for a in dom.groups("tag")}
    assert tags == {t.name: (t.snapshot_id, t.source) for t in table.tags()}
    assert tags[HOSTILE_TAG] == (1, "manual") and "periodic" in {source for _, source in tags.values()}
    consumers = {a["data-consumer"]: int(a["data-next-snapshot"]) for a in dom.groups("consumer")}
    assert consumers == {c.id: c.next_snapshot for c in table.consumers()} == {"reader": 6, "caught-up": 9}
    (window,) = dom.groups("expiry-window")
    assert window["data-snapshot-ids"] == " ".join(map(str, table.expire_snapshots(dry_run=True).expired_snapshot_ids))
    assert window["data-snapshot-ids"]  # something is pending
    assert [a["data-to-snapshot-id"] for a in dom.groups("rollback")] == ["5"]

    # The complete legend, the connection's root, a link back to its tables and one to share.
    assert {a["data-legend"] for a in dom.groups("legend-item")} == {"rollback", "consumer", "gap"}
    assert f"connection {CONN_ID}, root {warehouse}" in dom_text
    (permalink,) = [a for tag, a in dom.elements if tag == "a" and a.get("class") == "permalink"]
    assert permalink["target"] == "_top" and permalink["href"] == "/snaptable/timeline?" + urlencode({"conn_id": CONN_ID, "table": HOSTILE_DIR})
    assert [a for tag, a in dom.elements if tag == "a" and a.get("href") == "lake?" + urlencode({"conn_id": CONN_ID})]

    # Escaped names made no elements; the page shows the table URI and no credential.
    assert not [tag for tag, _ in dom.elements if tag in ("script", "b", "iframe", "img")]
    assert f"{warehouse / HOSTILE_DIR}" in [a.get("data-table-uri") for tag, a in dom.elements if tag == "svg"]
    for page in (dom_text, index, error_page, lake_text):
        for secret in (SECRET_PASSWORD, SECRET_OPTION, LOGIN):
            assert secret not in page
