"""The UI's ways in: each snaptable task's "Table timeline" link, and the connection form's order (issue 28 item 6)."""

from __future__ import annotations

import importlib
import inspect
from urllib.parse import parse_qs, urlsplit

from airflow_snaptable.get_provider_info import get_provider_info
from airflow_snaptable.operators import snaptable as operators
from airflow_snaptable.operators.lake import SnapTableListLakeTablesOperator, SnapTableMaintainTableOperator
from airflow_snaptable.operators.links import LakeHealthLink, TableTimelineLink
from airflow_snaptable.sensors.snaptable import SnapTableNewSnapshotSensor

POLICY = {"defaults": {"tag-expiry": {}}}


def _link(operator, name: str) -> tuple[str, dict]:
    (link,) = [link for link in operator.operator_extra_links if link.name == name]
    url = link.get_link(operator, ti_key=None)
    parts = urlsplit(url)
    return parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}


def test_every_snaptable_task_links_to_its_table_timeline(monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080/")
    classes = [c for _, c in inspect.getmembers(operators, inspect.isclass)
               if issubclass(c, operators.SnapTableBaseOperator) and c is not operators.SnapTableBaseOperator and hasattr(c, "action")]
    assert len(classes) >= 10
    for cls in classes:
        assert "Table timeline" in [link.name for link in cls.operator_extra_links], cls.__name__
    expire = operators.SnapTableExpireSnapshotsOperator(task_id="expire", table="sales/orders", snaptable_conn_id="lake_conn")
    assert _link(expire, "Table timeline") == ("/snaptable/timeline", {"conn_id": "lake_conn", "table": "sales/orders"})
    sensor = SnapTableNewSnapshotSensor(task_id="wait", table="s3://bucket/w/t?x=1&y", after_snapshot_id=1)
    assert _link(sensor, "Table timeline") == ("/snaptable/timeline", {"conn_id": "snaptable_default", "table": "s3://bucket/w/t?x=1&y"})
    # A lake DAG's table task links to the table it maintained; its list task to the connection's lake page.
    maintain = SnapTableMaintainTableOperator(task_id="m", table={"name": "pm.clicks", "format": "paimon", "uri": "/w/pm.db/clicks"},
                                              policy=POLICY, location="lake", snaptable_conn_id="c1")
    assert _link(maintain, "Table timeline") == ("/snaptable/timeline", {"conn_id": "c1", "table": "/w/pm.db/clicks"})
    assert _link(maintain, "Lake health") == ("/snaptable/lake", {"conn_id": "c1"})
    listed = SnapTableListLakeTablesOperator(task_id="l", location="lake", snaptable_conn_id="c1")
    assert _link(listed, "Lake health") == ("/snaptable/lake", {"conn_id": "c1"})


def test_links_follow_the_api_base_url_path(monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://example.com/airflow/")
    expire = operators.SnapTableExpireSnapshotsOperator(task_id="expire", table="t")
    assert _link(expire, "Table timeline")[0] == "/airflow/snaptable/timeline"


def test_the_provider_registers_the_links_and_the_form_puts_root_and_catalog_first():
    info = get_provider_info()
    for dotted in info["extra-links"]:
        module, _, name = dotted.rpartition(".")
        assert getattr(importlib.import_module(module), name) in (TableTimelineLink, LakeHealthLink)
    (conn,) = info["connection-types"]
    fields = conn["conn-fields"]
    assert list(fields) == ["root", "catalog", "storage_options", "endpoint_url", "region_name", "aws_access_key_id",
                            "aws_secret_access_key"]
    # Airflow's form draws its standard fields before every extra field: all hidden, so root and catalog come first.
    assert set(conn["ui-field-behaviour"]["hidden-fields"]) == {"schema", "host", "port", "login", "password"}
    # The S3 fields are one section of the form, the secret a password field (masked, never shown again).
    sections = {name: field["schema"].get("section") for name, field in fields.items()}
    assert {name for name, section in sections.items() if section} == {"endpoint_url", "region_name", "aws_access_key_id",
                                                                      "aws_secret_access_key"}
    assert len({s for s in sections.values() if s}) == 1 and all(fields[n]["label"].startswith("S3 ") for n in sections if sections[n])
    assert fields["aws_secret_access_key"]["schema"]["format"] == "password"

    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    widgets = [name for name in manager.connection_form_widgets if name.startswith("extra__snaptable__")]
    assert widgets[:2] == ["extra__snaptable__root", "extra__snaptable__catalog"]
    assert manager.connection_form_widgets["extra__snaptable__aws_secret_access_key"].is_sensitive


def test_the_s3_fields_of_the_form_reach_the_storage_options(monkeypatch):
    from airflow_snaptable.hooks.snaptable import SnapTableHook
    from tests.airflow.conftest import snaptable_conn

    extra = {"endpoint_url": "http://minio:9000", "region_name": "eu-west-1", "aws_access_key_id": "AKIAFORM",
             "aws_secret_access_key": "form-secret"}
    monkeypatch.setenv("AIRFLOW_CONN_FORM", snaptable_conn("s3://bucket/wh", extra=extra))
    options = SnapTableHook("form").storage_options("s3://bucket/wh/t")
    assert (options["key"], options["secret"], options["endpoint_url"]) == ("AKIAFORM", "form-secret", "http://minio:9000")
    assert options["client_kwargs"] == {"region_name": "eu-west-1"}
    # A connection made with the CLI's login and password keeps them: they win over the extras.
    monkeypatch.setenv("AIRFLOW_CONN_CLI", snaptable_conn("s3://bucket/wh", login="AKIACLI", password="cli-secret", extra=extra))
    options = SnapTableHook("cli").storage_options("s3://bucket/wh/t")
    assert (options["key"], options["secret"]) == ("AKIACLI", "cli-secret")
    assert "key" not in SnapTableHook("form").storage_options("/local/t")  # S3 fields only for S3 tables
