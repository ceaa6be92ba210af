"""The GCS and Azure emulators themselves (tests/cloud_servers.py): a conditional create has one winner
when clients race for the same objects, they listen on 127.0.0.1 only, and stopping them leaves nothing."""

from __future__ import annotations

import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from airflow_snaptable.core.io.storage import Storage
from tests.cloud_servers import FakeGcsServer

pytestmark = pytest.mark.cloud

RACERS = 6
ROUNDS = 40


def test_racing_creates_of_one_object_have_one_winner(cloud_server, cloud_table_uri):
    """The commit point's guarantee on the emulator itself: of RACERS clients creating one object at once,
    exactly one succeeds, the others are told it exists, and the object holds the winner's bytes.

    The racers are threads, each with its own client and connections (the server sees RACERS concurrent
    requests, as from processes); processes racing whole commits are in tests/core/test_cloud_storage.py."""
    root = Storage.from_uri(cloud_table_uri, cloud_server.storage_options())
    racers = [Storage(cloud_server.filesystem(), root.root, root.uri) for _ in range(RACERS)]
    keys = [f"_commits/{i:03d}" for i in range(ROUNDS)]
    barrier = threading.Barrier(RACERS)

    def race(racer: int) -> list[bool]:
        storage = racers[racer]
        outcomes = []
        for key in keys:
            barrier.wait(timeout=60)
            outcomes.append(storage.create_exclusive(key, f"racer={racer} key={key}".encode()))
        return outcomes

    with ThreadPoolExecutor(RACERS) as pool:
        outcomes = list(pool.map(race, range(RACERS)))
    for i, key in enumerate(keys):
        winners = [racer for racer in range(RACERS) if outcomes[racer][i]]
        assert len(winners) == 1, f"{key}: winners {winners}"
        assert root.read_bytes(key) == f"racer={winners[0]} key={key}".encode()


def test_emulators_listen_on_loopback_only(cloud_server):
    psutil = pytest.importorskip("psutil")
    process = psutil.Process(cloud_server._proc.pid)
    connections = process.net_connections(kind="inet")
    listening = [c for c in connections if c.status == psutil.CONN_LISTEN]
    assert {c.laddr.port for c in listening} == {cloud_server.port}
    for connection in connections:
        assert connection.laddr.ip == "127.0.0.1", connection
        if connection.raddr:
            assert connection.raddr.ip == "127.0.0.1", connection


def test_stop_kills_the_emulator_and_removes_its_files():
    server = FakeGcsServer().start()
    pid, data_dir = server._proc.pid, server.data_dir
    bucket = server.create_bucket()
    server.filesystem().pipe_file(f"{bucket}/{uuid.uuid4().hex}", b"x")
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not data_dir.exists()
