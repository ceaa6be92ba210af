"""Provider registration: the entry point, Airflow's provider-info schema, and the airflow CLI."""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import entry_points
from pathlib import Path

import jsonschema
import pytest

from airflow_snaptable.get_provider_info import get_provider_info
from tests.airflow.conftest import AIRFLOW_BIN, base_env, run_airflow


def _airflow_schema(name: str) -> dict:
    import airflow

    return json.loads((Path(airflow.__file__).parent / name).read_text())


def test_entry_point_and_schema():
    (entry,) = [e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("airflow_snaptable")]
    info = entry.load()()
    assert info == get_provider_info()
    jsonschema.validate(info, _airflow_schema("provider_info.schema.json"))
    assert info["package-name"] == "airflow-snaptable"  # the canonical distribution name
    assert info["asset-uris"][0]["schemes"] == ["snaptable"]
    from importlib.metadata import distribution

    meta = distribution("airflow-snaptable").metadata
    assert "Framework :: Apache Airflow :: Provider" in meta.get_all("Classifier")
    import airflow_snaptable

    assert (Path(airflow_snaptable.__file__).parent / "py.typed").exists()
    (conn,) = info["connection-types"]
    behaviour = conn["ui-field-behaviour"]
    jsonschema.validate(
        {"hidden_fields": behaviour["hidden-fields"], "relabeling": behaviour["relabeling"], "placeholders": behaviour["placeholders"]},
        _airflow_schema("customized_form_field_behaviours.schema.json"),
    )
    # Every module named in the provider info imports, and names the classes it should.
    import importlib

    for kind in ("hooks", "operators", "sensors", "triggers"):
        for module in info[kind][0]["python-modules"]:
            importlib.import_module(module)
    assert importlib.import_module("airflow_snaptable.hooks.snaptable").SnapTableHook.conn_type == conn["connection-type"]


def test_providers_manager_sees_the_hook_form_fields_and_triggers():
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    manager = ProvidersManager()
    assert "airflow-snaptable" in manager.providers
    hook = ProvidersManagerTaskRuntime().hooks["snaptable"]
    assert hook.hook_class_name == "airflow_snaptable.hooks.snaptable.SnapTableHook"
    assert hook.connection_id_attribute_name == "snaptable_conn_id"
    widgets = manager.connection_form_widgets
    assert {"extra__snaptable__root", "extra__snaptable__storage_options", "extra__snaptable__catalog"} <= set(widgets)
    # Every setting is an extra field (Airflow draws its standard fields first): all of those are hidden.
    assert manager.field_behaviours["snaptable"]["hidden_fields"] == ["schema", "host", "port", "login", "password"]
    assert any(t.package_name == "airflow-snaptable" for t in manager.trigger)


def test_airflow_cli_lists_the_provider_and_handles_snaptable_connections(airflow_db):
    env = base_env(AIRFLOW_CONN_SNAPTABLE_ENV='{"conn_type": "snaptable", "login": "AKID", "extra": {"root": "s3://b/w"}}')
    # Read-only commands in parallel (each starts a Python with Airflow: seconds).
    commands = {
        "list": ["providers", "list"],
        "get_env": ["connections", "get", "snaptable_env", "-o", "json"],
    }
    procs = {k: subprocess.Popen([AIRFLOW_BIN, *v], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k, v in commands.items()}
    out = {}
    for key, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{commands[key]}: {stderr[-3000:]}"
        out[key] = stdout
    assert "airflow-snaptable" in out["list"]
    assert json.loads(out["get_env"])[0]["extra_dejson"] == {"root": "s3://b/w"}

    # A connection stored in the metadata database, through the CLI.
    run_airflow(
        ["connections", "add", "snap_cli", "--conn-type", "snaptable", "--conn-login", "AKID", "--conn-password", "pw",
         "--conn-extra", json.dumps({"root": "/data/tables", "storage_options": "{}"})],
        env=env,
    )
    got = json.loads(run_airflow(["connections", "get", "snap_cli", "-o", "json"], env=env).stdout)[0]
    assert got["conn_type"] == "snaptable" and got["extra_dejson"]["root"] == "/data/tables"


@pytest.mark.parametrize("package", ["airflow_snaptable.operators", "airflow_snaptable.sensors", "airflow_snaptable.triggers", "airflow_snaptable.hooks"])
def test_public_names_import_from_the_packages(package):
    import importlib

    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name).__module__.endswith(".snaptable")
