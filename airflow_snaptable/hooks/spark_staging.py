"""The maintenance job's document and result through storage: what cluster deploy mode needs.

In client mode the driver runs on the Airflow worker and reads its action file and writes its result
file in the runner's private temporary directory. In cluster deploy mode (YARN, Kubernetes) the driver
runs on a cluster node, which sees neither: the runner then writes the action or lake document to
``<staging>/<run>/job.json`` and the job writes its result (or its error document) to
``<staging>/<run>/result.json``, where ``<staging>`` is the Spark conf :data:`STAGING_CONF` (any
fsspec URL both sides reach, e.g. ``s3://bucket/snaptable-staging``). The Airflow task writes and
reads them with the connection's storage options and removes ``<staging>/<run>`` after the run. The
staging location works in client mode too (the job reads and writes it just the same).

Standalone masters refuse Python applications in cluster mode (Spark's own check), so cluster mode is
accepted for ``yarn`` and ``k8s://`` masters only. Credentials reach a cluster-mode driver:

- on YARN, as the secrets file (spark/handoff.py) shipped with ``--files`` (YARN's private staging
  directory of the application) and named by ``spark.yarn.appMasterEnv.SNAPTABLE_SECRETS_FILE``;
- on Kubernetes, not from the runner: ``--files`` would upload the file to
  ``spark.kubernetes.file.upload.path``, shared storage that outlives the run. The driver pod uses
  its own credentials (its service account, or environment variables from Kubernetes secrets:
  ``spark.kubernetes.driver.secretKeyRef.AWS_SECRET_ACCESS_KEY=secret:key``); secret-looking
  ``spark_conf`` entries are refused there.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping

from airflow_snaptable.core.errors import InvalidArgumentError

#: Spark conf (in ``spark_conf``): the fsspec URL of the staging location for job documents and results.
STAGING_CONF = "spark.snaptable.stagingLocation"


def accepts_cluster_mode(master: str) -> bool:
    """Masters whose cluster deploy mode runs Python applications: YARN and Kubernetes."""
    return master == "yarn" or master.startswith("yarn") or master.startswith("k8s://")


@dataclass
class Staging:
    """One run's directory under the staging location: the job's document and its result."""

    directory: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def under(cls, location: str, storage_options: Mapping[str, Any] | None) -> "Staging":
        return cls(f"{location.rstrip('/')}/{uuid.uuid4().hex}", dict(storage_options or {}))

    @property
    def document_uri(self) -> str:
        return f"{self.directory}/job.json"

    @property
    def result_uri(self) -> str:
        return f"{self.directory}/result.json"

    def _fs(self):
        import fsspec

        fs, path = fsspec.core.url_to_fs(self.directory, **self.storage_options)
        return fs, path

    def write_document(self, text: str) -> None:
        fs, path = self._fs()
        fs.makedirs(path, exist_ok=True)
        with fs.open(f"{path}/job.json", "w") as handle:
            handle.write(text)  # actions and lake documents hold no credentials

    def read_result(self) -> dict[str, Any] | None:
        """The job's result or error document; None when it wrote none (it never started, or died)."""
        fs, path = self._fs()
        try:
            with fs.open(f"{path}/result.json", "r") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        fs, path = self._fs()
        try:
            fs.rm(path, recursive=True)
        except (OSError, FileNotFoundError):
            pass


def staging_for(conf: Mapping[str, Any] | None, storage_options: Mapping[str, Any] | None) -> Staging | None:
    """This run's staging directory when ``spark_conf`` names a staging location, else None."""
    location = str((conf or {}).get(STAGING_CONF) or "").strip()
    if not location:
        return None
    if "://" not in location and not location.startswith("/"):
        raise InvalidArgumentError(f"{STAGING_CONF} must be a URL (s3://bucket/dir, hdfs:///dir) or an absolute path, got {location!r}")
    return Staging.under(location, storage_options)


def cluster_mode_arguments(
    master: str, secrets_file: str, secret_conf: Mapping[str, str], storage_options: Mapping[str, Any] | None,
    catalog: Mapping[str, Any] | None, pythonpath: str | None = None, log=None,
) -> tuple[str | None, dict[str, str]]:
    """``(--files entry, --conf)`` for a cluster-mode driver: the shipped package on its Python path
    (``pythonpath``, the executors' own, from spark/shipping.py) and the secrets file (module docstring)."""
    from airflow_snaptable.spark.handoff import SECRETS_FILE_ENV

    driver_env = "spark.kubernetes.driverEnv." if master.startswith("k8s://") else "spark.yarn.appMasterEnv."
    conf = {f"{driver_env}PYTHONPATH": pythonpath} if pythonpath else {}
    if master.startswith("k8s://"):
        if secret_conf:
            raise InvalidArgumentError(
                f"cluster deploy mode on Kubernetes cannot hand the secret-looking spark_conf entries {sorted(secret_conf)} to the "
                "driver pod without putting them on shared storage or the command line: put them in a Kubernetes secret "
                "(spark.kubernetes.driver.secretKeyRef.<ENV>=<secret>:<key>) or use client mode"
            )
        if (storage_options or catalog) and log is not None:
            log.warning(
                "cluster deploy mode on Kubernetes: the connection's storage options and catalog properties are not sent to "
                "the driver pod; it uses its own credentials (service account, or spark.kubernetes.driverEnv / secretKeyRef)"
            )
        return None, conf
    name = "snaptable-secrets.json"
    return f"{secrets_file}#{name}", {**conf, f"{driver_env}{SECRETS_FILE_ENV}": name}


def cluster_mode_refusal(source: str, master: str) -> str:
    """Why cluster deploy mode is refused for ``master`` (asked for in ``source``), and the way out."""
    return (
        f"spark runner: {source} is not supported with master {master!r}. Spark refuses Python applications in "
        "cluster mode on standalone masters (\"Cluster deploy mode is currently not supported for python applications "
        "on standalone clusters\"), and a local master has no cluster. Use client mode (remove deploy_mode, or set "
        "deploy-mode to client in the Spark connection): the driver then runs on the Airflow worker. On YARN or "
        f"Kubernetes, cluster mode is supported with a staging location for the job's result ({STAGING_CONF})."
    )


def missing_staging(master: str) -> str:
    return (
        f"spark runner: cluster deploy mode on {master!r} runs the driver on the cluster, which cannot read the Airflow "
        f"worker's files: set {STAGING_CONF} in spark_conf to a location both reach (s3://bucket/snaptable-staging, "
        "hdfs:///tmp/snaptable), where the job's document and result go, or use client mode"
    )
