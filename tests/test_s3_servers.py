"""The S3 test servers (tests/s3_servers.py) and the conditional-create behaviour
the commit protocol relies on: ``pipe_file(path, data, mode="create")`` sends
``PutObject`` with ``If-None-Match: *``; exactly one of several concurrent
creators of a key may succeed, and a failed create never overwrites.

What a failed conditional create raises (s3fs 2026.9.0 / botocore 1.43, observed
on this machine; both servers answer HTTP 412 ``PreconditionFailed``):

* moto 5.2.5: ``FileExistsError`` with ``errno is None`` (args = the message only),
  str = "At least one of the pre-conditions you specified did not hold".
  moto puts ``<Condition>If-None-Match</Condition>`` in the error body, which is
  what makes s3fs.errors.translate_boto_error pick FileExistsError.
* SeaweedFS 4.48: plain ``OSError`` with ``errno == errno.EINVAL`` (22),
  str = "[Errno 22] At least one of the pre-conditions you specified did not hold".
  No ``Condition`` element in the error body, so s3fs falls back to its
  generic mapping PreconditionFailed -> OSError(EINVAL).

In both cases ``exc.__cause__`` is a ``botocore.exceptions.ClientError`` with
``response["Error"]["Code"] == "PreconditionFailed"`` and
``response["ResponseMetadata"]["HTTPStatusCode"] == 412``; ``exc.__context__``
is None (s3fs raises the translated error outside the ``except`` block and sets
``__cause__`` by hand, so ``__suppress_context__`` is True); the ClientError
itself has no cause/context.  The same holds for the multipart path
(``CompleteMultipartUpload`` with ``If-None-Match``).  So neither the exception
type nor errno is portable; the ClientError code in ``__cause__`` is.
"""

from __future__ import annotations

import errno
import os
import queue
import time
import uuid

import fsspec
import pytest

from tests.s3_servers import SeaweedS3Server

pytestmark = pytest.mark.s3

PRECONDITION_MESSAGE = "At least one of the pre-conditions you specified did not hold"

# Observed structure of the exception raised by a failed pipe_file(..., mode="create").
EXPECTED_CREATE_CONFLICT = {
    "moto": {
        "type": "builtins.FileExistsError",
        "errno": None,
        "str": PRECONDITION_MESSAGE,
        "context": None,
        "cause_type": "botocore.exceptions.ClientError",
        "code": "PreconditionFailed",
        "condition": "If-None-Match",
        "status": 412,
    },
    "seaweedfs": {
        "type": "builtins.OSError",
        "errno": errno.EINVAL,
        "str": f"[Errno {errno.EINVAL}] {PRECONDITION_MESSAGE}",
        "context": None,
        "cause_type": "botocore.exceptions.ClientError",
        "code": "PreconditionFailed",
        "condition": None,
        "status": 412,
    },
}

RACE_WORKERS = 8
RACE_ROUNDS = 20


def describe_exception(exc: BaseException) -> dict:
    """A picklable summary of an exception and its ``__cause__`` (a botocore ClientError)."""
    cause = exc.__cause__
    response = getattr(cause, "response", None) or {}
    return {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "errno": getattr(exc, "errno", None),
        "str": str(exc),
        "context": None if exc.__context__ is None else type(exc.__context__).__qualname__,
        "cause_type": None if cause is None else f"{type(cause).__module__}.{type(cause).__qualname__}",
        "code": response.get("Error", {}).get("Code"),
        "condition": response.get("Error", {}).get("Condition"),
        "status": response.get("ResponseMetadata", {}).get("HTTPStatusCode"),
    }


# -- fixtures ----------------------------------------------------------------------


# ``s3_server`` (session-scoped, params "moto"/"seaweedfs", built with
# tests.s3_servers.make_server) and ``s3_bucket`` (one bucket per server) come from
# tests/conftest.py, so the whole suite shares one server of each kind.


@pytest.fixture
def s3_prefix(s3_bucket) -> str:
    return f"{s3_bucket}/{uuid.uuid4().hex}"


@pytest.fixture
def fs(s3_server):
    return fsspec.filesystem("s3", **s3_server.storage_options())


# -- basic object I/O ----------------------------------------------------------------


def test_write_read_list_delete(s3_server, fs, s3_prefix):
    fs.pipe_file(f"{s3_prefix}/a.txt", b"alpha")
    fs.pipe_file(f"{s3_prefix}/dir/b.bin", bytes(range(256)))
    with fs.open(f"{s3_prefix}/dir/c.txt", "wb") as f:
        f.write(b"gamma")

    assert fs.cat_file(f"{s3_prefix}/a.txt") == b"alpha"
    assert fs.cat_file(f"{s3_prefix}/dir/b.bin") == bytes(range(256))
    with fs.open(f"{s3_prefix}/dir/c.txt", "rb") as f:
        assert f.read() == b"gamma"
    assert fs.cat_file(f"{s3_prefix}/dir/b.bin", start=10, end=13) == bytes([10, 11, 12])
    assert fs.info(f"{s3_prefix}/a.txt")["size"] == 5

    assert sorted(fs.ls(s3_prefix, detail=False)) == [f"{s3_prefix}/a.txt", f"{s3_prefix}/dir"]
    assert sorted(fs.find(s3_prefix)) == [f"{s3_prefix}/a.txt", f"{s3_prefix}/dir/b.bin", f"{s3_prefix}/dir/c.txt"]
    assert fs.exists(f"{s3_prefix}/a.txt")
    assert not fs.exists(f"{s3_prefix}/missing")
    with pytest.raises(FileNotFoundError):
        fs.cat_file(f"{s3_prefix}/missing")

    fs.rm_file(f"{s3_prefix}/a.txt")
    assert not fs.exists(f"{s3_prefix}/a.txt")
    fs.rm(s3_prefix, recursive=True)
    fs.invalidate_cache()
    left = fs.find(s3_prefix, detail=True)
    assert [name for name, info in left.items() if info["type"] != "directory"] == []
    # moto (like AWS) has no directories: the prefix vanishes with its last object.
    # SeaweedFS 4.48 keeps emptied sub-"directories" (here dir/ is still listed as a
    # CommonPrefix), so the prefix still "exists" as an empty directory.
    assert fs.exists(s3_prefix) is (s3_server.name == "seaweedfs"), left


def test_fresh_bucket_and_env(s3_server, fs):
    bucket = s3_server.create_bucket("fresh")
    assert bucket.startswith("fresh-")
    assert bucket != s3_server.create_bucket("fresh")
    fs.pipe_file(f"{bucket}/k", b"v")
    assert fs.cat_file(f"{bucket}/k") == b"v"
    assert fs.ls(bucket, detail=False) == [f"{bucket}/k"]
    # ListBuckets: SeaweedFS 4.48 without configured identities returns an empty
    # list (buckets are still usable by name); moto lists them.
    fs.invalidate_cache()
    assert (bucket in fs.ls("", detail=False)) is (s3_server.name == "moto")

    env = s3_server.env()
    assert env["AWS_ENDPOINT_URL"] == s3_server.endpoint_url
    assert s3_server.endpoint_url.startswith("http://127.0.0.1:")
    assert env["AWS_ACCESS_KEY_ID"] and env["AWS_SECRET_ACCESS_KEY"]
    opts = s3_server.storage_options()
    assert opts["client_kwargs"]["endpoint_url"] == s3_server.endpoint_url
    assert opts["client_kwargs"]["region_name"] != "us-east-1"


# -- conditional create --------------------------------------------------------------


def _assert_create_conflict(server_name: str, exc: BaseException) -> None:
    assert isinstance(exc, OSError)  # the only common Python type
    assert describe_exception(exc) == EXPECTED_CREATE_CONFLICT[server_name]
    assert exc.__cause__.__cause__ is None and exc.__cause__.__context__ is None


def test_conditional_create(s3_server, fs, s3_prefix):
    path = f"{s3_prefix}/commit-00001.json"
    fs.pipe_file(path, b"first", mode="create")
    assert fs.cat_file(path) == b"first"

    with pytest.raises(OSError) as info:
        fs.pipe_file(path, b"second", mode="create")
    _assert_create_conflict(s3_server.name, info.value)
    assert fs.cat_file(path) == b"first"  # not overwritten

    # a fresh client sees the same (no client-side caching involved)
    other = fsspec.filesystem("s3", skip_instance_cache=True, **s3_server.storage_options())
    assert other.cat_file(path) == b"first"
    with pytest.raises(OSError) as info:
        other.pipe_file(path, b"third", mode="create")
    _assert_create_conflict(s3_server.name, info.value)
    assert other.cat_file(path) == b"first"

    # plain (overwrite) mode still overwrites, and a deleted key can be created again
    fs.pipe_file(path, b"overwritten")
    assert fs.cat_file(path) == b"overwritten"
    fs.rm_file(path)
    fs.pipe_file(path, b"recreated", mode="create")
    assert fs.cat_file(path) == b"recreated"


def test_conditional_create_multipart(s3_server, fs, s3_prefix):
    # >= 2 * chunksize goes through CompleteMultipartUpload(IfNoneMatch="*")
    chunk = 5 * 2**20
    path = f"{s3_prefix}/big.bin"
    fs.pipe_file(path, b"small", mode="create")
    with pytest.raises(OSError) as info:
        fs.pipe_file(path, b"x" * (2 * chunk + 1), mode="create", chunksize=chunk)
    _assert_create_conflict(s3_server.name, info.value)
    assert "CompleteMultipartUpload" in str(info.value.__cause__)
    assert fs.cat_file(path) == b"small"


# -- the race ------------------------------------------------------------------------


def _race_worker(tasks, barrier, results, worker_id) -> None:
    """Child process (spawn).  Serves one task per race: (storage_options, bucket, keys).

    For each task it builds its own s3fs instance (skip_instance_cache=True).  For
    each key, all workers pass a barrier and then try to create the key with
    their own bytes.  The create is handed to a thread so the next round can
    start without waiting for this one to finish: SeaweedFS makes conflicting
    creates of one key wait for each other in ~1 s steps (a loser's 412 can take
    1-5 s), so strictly sequential rounds would take ~1 s each.  Every key still
    sees RACE_WORKERS creators from different processes starting together.
    ``None`` ends the loop.
    """
    from concurrent.futures import ThreadPoolExecutor

    import fsspec  # noqa: F401 - import before the first barrier, off the clock

    def attempt(fs, bucket, key, data):
        try:
            fs.pipe_file(f"{bucket}/{key}", data, mode="create")
        except Exception as exc:
            return key, data, describe_exception(exc)
        return key, data, None

    while (task := tasks.get()) is not None:
        storage_options, bucket, keys = task
        try:
            fs = fsspec.filesystem("s3", skip_instance_cache=True, **storage_options)
            fs.ls(bucket)  # session/client set-up before the first race
            with ThreadPoolExecutor(len(keys)) as pool:
                futures = []
                for key in keys:
                    data = f"worker={worker_id} key={key} nonce={uuid.uuid4().hex}".encode()
                    barrier.wait(timeout=60)
                    futures.append(pool.submit(attempt, fs, bucket, key, data))
                outcomes = [f.result() for f in futures]
            results.put((worker_id, outcomes, None))
        except BaseException as exc:  # report instead of hanging the parent
            barrier.abort()
            results.put((worker_id, None, repr(exc)))
    # Flush our results, then skip interpreter teardown: tearing down 8
    # interpreters full of botocore/aiohttp/pytest modules takes seconds.
    results.close()
    results.join_thread()
    os._exit(0)


class RaceWorkers:
    """RACE_WORKERS spawned processes, shared by the races against both servers."""

    def __init__(self, n: int):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.barrier = ctx.Barrier(n)
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(n)]
        self.procs = [
            ctx.Process(target=_race_worker, args=(q, self.barrier, self.results, w), daemon=True)
            for w, q in enumerate(self.tasks)
        ]
        for p in self.procs:
            p.start()

    def run(self, storage_options: dict, bucket: str, keys: list[str], timeout: float = 120) -> dict[int, list]:
        for q in self.tasks:
            q.put((storage_options, bucket, keys))
        collected: dict[int, list] = {}
        deadline = time.monotonic() + timeout
        while len(collected) < len(self.procs):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"race workers timed out; got results from {sorted(collected)}"
            try:
                worker_id, outcomes, error = self.results.get(timeout=min(remaining, 5))
            except queue.Empty:
                dead = [w for w, p in enumerate(self.procs) if not p.is_alive()]
                assert not dead, f"race workers {dead} died"
                continue
            assert error is None, f"race worker {worker_id} failed: {error}"
            collected[worker_id] = outcomes
        return collected

    def close(self) -> None:
        for q in self.tasks:
            q.put(None)
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()


@pytest.fixture(scope="session")
def race_workers():
    workers = RaceWorkers(RACE_WORKERS)
    yield workers
    workers.close()


def test_concurrent_conditional_create_has_one_winner(s3_server, fs, s3_bucket, race_workers):
    run = uuid.uuid4().hex[:8]
    keys = [f"race-{run}/_commits/{i:05d}.json" for i in range(RACE_ROUNDS)]
    collected = race_workers.run(s3_server.storage_options(), s3_bucket, keys)

    expected = EXPECTED_CREATE_CONFLICT[s3_server.name]
    for i, key in enumerate(keys):
        attempts = [(w, collected[w][i]) for w in range(RACE_WORKERS)]
        assert all(outcome[0] == key for _, outcome in attempts)
        winners = [(w, data) for w, (_, data, exc) in attempts if exc is None]
        assert len(winners) == 1, f"{key}: {len(winners)} winners: {winners}"
        for w, (_, _data, exc) in attempts:
            if exc is not None:
                assert exc == expected, f"{key}: worker {w} failed unexpectedly: {exc}"
        assert fs.cat_file(f"{s3_bucket}/{key}") == winners[0][1]


# -- hermeticity / cleanup -----------------------------------------------------------


def test_servers_listen_on_loopback_only(s3_server):
    if s3_server.name == "moto":
        assert s3_server._server._server.server_address[0] == "127.0.0.1"
        return
    psutil = pytest.importorskip("psutil")
    proc = psutil.Process(s3_server._proc.pid)
    conns = proc.net_connections(kind="inet")
    listening = [c for c in conns if c.status == psutil.CONN_LISTEN]
    assert listening
    for c in conns:
        assert c.laddr.ip == "127.0.0.1", c
        if c.raddr:
            assert c.raddr.ip == "127.0.0.1", c
    assert {c.laddr.port for c in listening} >= {
        s3_server.ports[o] for o in ("master.port", "volume.port", "filer.port", "s3.port")
    }


def test_seaweed_stop_kills_process_and_removes_files():
    server = SeaweedS3Server().start()
    pid = server._proc.pid
    data_dir = server.data_dir
    grpc_ports = dict(server.ports)
    log = server.log_path
    assert log.exists() and log.parent == data_dir
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not data_dir.exists()
    for comp in ("master", "volume", "filer", "s3", "admin"):
        assert not os.path.exists(f"/tmp/seaweedfs-{comp}-grpc-{grpc_ports[comp + '.port.grpc']}.sock")
