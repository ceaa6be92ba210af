"""Shared fixtures: tables on local files, and (session-wide) real S3, GCS and Azure servers on 127.0.0.1."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from hypothesis import settings

from airflow_snaptable.core import Table

# Randomised tests draw the same examples on every run (derandomized, no example database), so CI
# judges the code, not the draw; HYPOTHESIS_PROFILE=explore draws new examples each run.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

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


# -- S3, GCS and Azure: real servers and emulators on 127.0.0.1, each started once per session -------------
#
# ``s3_server`` (moto, SeaweedFS), ``cloud_server`` (GCS, Azure) and ``object_store`` (all four: a test that
# holds on every store) hand out the same server instances: a server is started the first time a test
# asks for it and stopped when the session ends.

S3_SERVERS = ("moto", "seaweedfs")
CLOUD_SERVERS = ("gcs", "azure")


@pytest.fixture(scope="session")
def store_servers():
    """``get(name)``: the session's server of that name, started on first use."""
    import contextlib

    with contextlib.ExitStack() as stack:
        started: dict = {}

        def get(name: str):
            if name not in started:
                if name in S3_SERVERS:
                    from tests.s3_servers import make_server

                    started[name] = stack.enter_context(make_server(name))
                else:
                    from tests.cloud_servers import CLOUD_SERVERS as classes

                    started[name] = stack.enter_context(classes[name]())
            return started[name]

        yield get


def _bucket(server) -> str:
    # One bucket per server: a new SeaweedFS bucket costs a volume allocation.
    if getattr(server, "session_bucket", None) is None:
        server.session_bucket = server.create_bucket("snaptable")
    return server.session_bucket


@pytest.fixture(scope="session", params=S3_SERVERS)
def s3_server(request, store_servers):
    return store_servers(request.param)


@pytest.fixture(scope="session")
def s3_bucket(s3_server) -> str:
    return _bucket(s3_server)


@pytest.fixture
def s3_table_uri(s3_bucket) -> str:
    import uuid

    return f"s3://{s3_bucket}/{uuid.uuid4().hex}/table"


@pytest.fixture(scope="session", params=CLOUD_SERVERS)
def cloud_server(request, store_servers):
    return store_servers(request.param)


@pytest.fixture(scope="session")
def cloud_bucket(cloud_server) -> str:
    return _bucket(cloud_server)


@pytest.fixture
def cloud_table_uri(cloud_server, cloud_bucket) -> str:
    import uuid

    return f"{cloud_server.scheme}://{cloud_bucket}/{uuid.uuid4().hex}/table"


@pytest.fixture(scope="session", params=[*(pytest.param(name, marks=pytest.mark.s3) for name in S3_SERVERS),
                                         *(pytest.param(name, marks=pytest.mark.cloud) for name in CLOUD_SERVERS)])
def object_store(request, store_servers):
    """Each of the four servers in turn (``scheme``, ``storage_options()``, ``filesystem()``)."""
    return store_servers(request.param)


@pytest.fixture
def object_store_uri(object_store) -> str:
    """A fresh location in the store's session bucket."""
    import uuid

    return f"{object_store.scheme}://{_bucket(object_store)}/{uuid.uuid4().hex}"
