"""An object store that cannot be reached or signed for is a typed StorageError (issue 34 item 16): one line, exit 2
(bad input or environment), never botocore's traceback and exit 1 (which says a lake job failed)."""

from __future__ import annotations

import json
import socket

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import StorageError
from airflow_snaptable.core.lake import Policy, maintain


def _closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _unreachable() -> dict:
    return {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{_closed_port()}"},
            "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2}}


@pytest.fixture
def no_aws_credentials(monkeypatch, tmp_path):
    """Nothing botocore's credential chain could find (the tests never consult real ones anyway)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.parametrize("command", [["snapshots", "s3://b/t"], ["maintain", "s3://b/lake", "--policy", "POLICY"],
                                     ["status", "s3://b/lake"], ["expire", "s3://b/t", "--retain-max", "2"]],
                         ids=lambda c: c[0])
def test_an_unreachable_endpoint_is_one_typed_line_and_exit_2(command, tmp_path, capsys):
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps({"defaults": {"snapshot-expiry": {}}}))
    argv = [str(policy) if word == "POLICY" else word for word in command]
    assert main([*argv, "--storage-options", json.dumps(_unreachable())]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: StorageError: s3://b/") and "cannot reach the storage" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_the_python_api_raises_the_typed_error_too():
    with pytest.raises(StorageError, match="cannot reach the storage"):
        Table.open("s3://b/t", _unreachable())
    with pytest.raises(StorageError, match="cannot reach the storage"):
        maintain("s3://b/lake", Policy.from_mapping({"defaults": {"snapshot-expiry": {}}}), storage_options=_unreachable())


def test_missing_credentials_are_one_typed_line_and_exit_2(store_servers, no_aws_credentials, capsys):
    server = store_servers("moto")
    options = {key: value for key, value in server.storage_options().items() if key not in ("key", "secret", "token")}
    assert main(["snapshots", "s3://snaptable/t", "--storage-options", json.dumps(options)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: StorageError: s3://snaptable/t: no usable credentials") and err.count("\n") == 1, err



def test_azure_s_and_google_s_client_errors_are_the_same_typed_errors():
    """The siblings on Azure and GCS: azure-core's and google-auth's errors are no OSError either. (The real
    classes, raised by their clients; an unreachable Azure endpoint takes the SDK's retries, over a minute, to say so.)"""
    from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError
    from google.auth.exceptions import DefaultCredentialsError

    from airflow_snaptable.core.io.storage import unreachable_storage_error

    assert "cannot reach the storage" in str(unreachable_storage_error("abfs://c/t", ServiceRequestError("refused")))
    assert "no usable credentials" in str(unreachable_storage_error("abfs://c/t", ClientAuthenticationError("no key")))
    assert "no usable credentials" in str(unreachable_storage_error("gs://b/t", DefaultCredentialsError("none")))
    assert unreachable_storage_error("gs://b/t", ConnectionRefusedError("an OSError")) is None  # the CLI's one line already
