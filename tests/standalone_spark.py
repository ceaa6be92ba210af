"""A real Spark standalone cluster on 127.0.0.1 for tests: one master and one worker, started from
pyspark's own ``bin/spark-class``, whose executors run a bare Python without this package (like
a real cluster's nodes): a venv of the base interpreter with nothing installed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def bare_python(directory: str) -> str:
    """A venv of the base interpreter with nothing installed (no pip, no site-packages of ours)."""
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", directory], check=True)
    python = os.path.join(directory, "bin", "python")
    probe = subprocess.run([python, "-c", "import airflow_snaptable"], env={"PATH": "/usr/bin:/bin"}, cwd="/", capture_output=True)
    assert probe.returncode != 0, "the bare Python must not import the package"
    return python


def _daemon_env(python: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update(
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP="127.0.0.1",
        # The worker's executors, like a cluster node's: the bare Python, no PYTHONPATH of ours.
        PYSPARK_PYTHON=python,
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        SPARK_NO_DAEMONIZE="1",
    )
    return env


@dataclass
class StandaloneCluster:
    python: str
    workdir: str
    master_port: int = 0
    ui_port: int = 0
    rest_port: int = 0
    processes: list = field(default_factory=list)

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def start(self) -> "StandaloneCluster":
        spark_class = os.path.join(spark_home(), "bin", "spark-class")
        env = _daemon_env(self.python)
        self.master_port, self.ui_port, self.rest_port = free_port(), free_port(), free_port()
        logs = Path(self.workdir, "logs")
        logs.mkdir(parents=True, exist_ok=True)
        self.processes.append(
            subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.master_port),
                 "--webui-port", str(self.ui_port), "--properties-file", self._properties()],
                env=env, stdout=open(logs / "master.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,
            )
        )
        self.processes.append(
            subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", self.master, "--host", "127.0.0.1",
                 "--cores", "2", "--memory", "2g", "--webui-port", str(free_port()), "--work-dir", str(Path(self.workdir, "work"))],
                env=env, stdout=open(logs / "worker.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,
            )
        )
        self._wait_for_worker()
        return self

    def _properties(self) -> str:
        path = os.path.join(self.workdir, "master.properties")
        with open(path, "w") as handle:
            # The REST submission server: cluster deploy mode submits and tracks drivers through it.
            handle.write(f"spark.master.rest.enabled true\nspark.master.rest.port {self.rest_port}\nspark.master.rest.host 127.0.0.1\n")
        return path

    def _wait_for_worker(self, limit: float = 120.0) -> None:
        """Readiness, not a timing claim: poll the master's status page until the worker is ALIVE."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited: {self.logs()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as response:
                    status = json.load(response)
                if any(w.get("state") == "ALIVE" for w in status.get("workers", [])):
                    return
            except (OSError, ValueError):  # not listening yet, or a page served before the JSON view is up
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the Spark worker did not register: {self.logs()}")

    def logs(self) -> str:
        out = []
        for name in ("master.log", "worker.log"):
            path = Path(self.workdir, "logs", name)
            if path.exists():
                out.append(f"--- {name}\n" + path.read_text(errors="replace")[-3000:])
        return "\n".join(out)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        self.processes.clear()


def start_cluster() -> StandaloneCluster:
    workdir = tempfile.mkdtemp(prefix="snaptable-standalone-")
    python = bare_python(os.path.join(workdir, "bare-venv"))
    return StandaloneCluster(python, workdir).start()


def remove(cluster: StandaloneCluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.workdir, ignore_errors=True)
