"""Shared fixtures: tables on local files, and (session-wide) real S3 servers on 127.0.0.1."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_snaptable.core import Table

# Keep the suite hermetic: no real AWS credentials or config are ever consulted.
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
# gcsfs's default filesystem asks GCS's gRPC control plane for each bucket's layout (zonal, hierarchical);
# an emulator has no control plane, so the tests use gcsfs's plain JSON-API filesystem (docs/storage.md).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

SCHEMA = pa.schema([("p", pa.int64()), ("id", pa.int64()), ("name", pa.string()), ("value", pa.float64())])


def make_rows(ids, partitions: int = 3) -> pa.Table:
    """Deterministic rows for the given ids; partition p = id % partitions."""
    ids = list(ids)
    return pa.table(
        {
            "p": [i % partitions for i in ids],
            "id": ids,
            "name": [f"name-{i}" for i in ids],
            "value": [i * 0.5 for i in ids],
        },
        schema=SCHEMA,
    )


def sorted_ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.fixture
def table_uri(tmp_path) -> str:
    return str(tmp_path / "table")


@pytest.fixture
def table(table_uri) -> Table:
    return Table.create(table_uri, SCHEMA, partition_by=["p"])


class FailAt:
    """Crash injector for ``Storage.on_operation``: every operation from the n-th on fails (the process "died")."""

    def __init__(self, n: int):
        self.n = n
        self.seen = 0

    def __call__(self, kind: str, path: str) -> None:
        self.seen += 1
        if self.seen >= self.n:
            raise InjectedCrash(f"injected crash at operation {self.seen} ({kind} {path})")


class InjectedCrash(Exception):
    pass


@pytest.fixture
def fail_at():
    return FailAt


# -- Apache Paimon tables pypaimon wrote (tests/paimon/conftest.py), once per session ---------


@pytest.fixture(scope="session")
def paimon(tmp_path_factory):
    from tests.paimon.conftest import make_paimon

    return make_paimon(tmp_path_factory)


# -- S3: real servers on 127.0.0.1, started once per session -------------------------


@pytest.fixture(scope="session", params=["moto", "seaweedfs"])
def s3_server(request):
    from tests.s3_servers import make_server

    with make_server(request.param) as server:
        yield server


@pytest.fixture(scope="session")
def s3_bucket(s3_server) -> str:
    # One bucket per server: a new SeaweedFS bucket costs a volume allocation.
    return s3_server.create_bucket("snaptable")


@pytest.fixture
def s3_table_uri(s3_bucket) -> str:
    import uuid

    return f"s3://{s3_bucket}/{uuid.uuid4().hex}/table"


# -- GCS and Azure: emulators on 127.0.0.1 (tests/cloud_servers.py), started once per session -------


@pytest.fixture(scope="session", params=["gcs", "azure"])
def cloud_server(request):
    from tests.cloud_servers import CLOUD_SERVERS

    with CLOUD_SERVERS[request.param]() as server:
        yield server


@pytest.fixture(scope="session")
def cloud_bucket(cloud_server) -> str:
    return cloud_server.create_bucket("snaptable")


@pytest.fixture
def cloud_table_uri(cloud_server, cloud_bucket) -> str:
    import uuid

    return f"{cloud_server.scheme}://{cloud_bucket}/{uuid.uuid4().hex}/table"

