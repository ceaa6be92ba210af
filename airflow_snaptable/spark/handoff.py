"""Credentials for the maintenance job, handed over in a private file: never on a command line.

Whatever spark-submit is given on its command line, anyone on the host reads (``ps``), and the
Spark provider logs it (``Spark-Submit cmd:``). So the runner (hooks/spark_submit.py) writes the
job's secrets to a file only its user can read (mode 0600, in a private temporary directory it
deletes after the run) and names the file in the environment variable :data:`SECRETS_FILE_ENV`:

``{"storageOptions": {...} | null, "catalog": {...} | null, "sparkConf": {"spark.hadoop...": "..."}}``

- ``storageOptions`` / ``catalog``: the connection's fsspec storage options and an ``iceberg://``
  table's catalog properties;
- ``sparkConf``: the ``spark_conf`` entries whose key looks secret (:func:`looks_secret`), which the
  job sets on its SparkSession when it starts (so they reach Hadoop and the executors as any
  conf does, with :data:`REDACTION_REGEX` hiding them in the Spark UI and event log).

The job reads the file once and deletes it (:func:`take_secrets`). Importing this module imports
neither pyspark nor airflow.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from airflow_snaptable.core.errors import InvalidArgumentError

#: Environment variable naming the secrets file (its path only: the secrets are in the file).
SECRETS_FILE_ENV = "SNAPTABLE_SECRETS_FILE"

#: Words that make a Spark conf key secret (matched in the lower-cased key): what a credential's
#: key is called in Hadoop's S3A / ABFS / GCS connectors, JDBC and this package's own storage options.
SECRET_KEY_WORDS = ("key", "secret", "token", "password", "storage-options", "credential")

#: ``spark.redaction.regex`` the job sets: Spark's default (secret|password|token|access[.]?key)
#: plus every word above, so the Spark UI's environment page and the event log hide those confs.
REDACTION_REGEX = "(?i)secret|password|token|access[.]?key|key|credential|storage-options"

_SECRET_KEY_RE = re.compile("|".join(re.escape(word) for word in SECRET_KEY_WORDS), re.IGNORECASE)

#: Keys holding the word but naming a file or a Kubernetes secret, not a credential's value, which
#: spark-submit itself reads when it submits (a keytab to log in with, secrets to mount): they stay
#: on the command line, unmasked.
_REFERENCE_KEY_RE = re.compile(
    r"(\.keytab|keystore|truststore|keyfile|tokenfile)$"
    r"|^spark\.kubernetes\.(driver|executor)\.(secrets|secretKeyRef)\.",
    re.IGNORECASE,
)


def looks_secret(key: Any) -> bool:
    """Whether a conf key (or an environment variable's name) names a credential."""
    text = str(key)
    return bool(_SECRET_KEY_RE.search(text.replace("_", "-"))) and not _REFERENCE_KEY_RE.search(text)


def split_secret_conf(conf: Mapping[str, Any] | None) -> tuple[dict[str, str], dict[str, str]]:
    """``(public, secret)``: the conf entries for ``--conf``, and those whose key looks secret."""
    public: dict[str, str] = {}
    secret: dict[str, str] = {}
    for key, value in (conf or {}).items():
        (secret if looks_secret(key) else public)[str(key)] = str(value)
    return public, secret


@dataclass
class JobSecrets:
    """What the secrets file holds."""

    storage_options: dict[str, Any] | None = None
    catalog: dict[str, Any] | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"storageOptions": self.storage_options, "catalog": self.catalog, "sparkConf": self.spark_conf}

    @classmethod
    def from_dict(cls, doc: Any, source: str) -> "JobSecrets":
        if not isinstance(doc, dict):
            raise InvalidArgumentError(f"{source} must hold a JSON object")
        storage_options, catalog, conf = doc.get("storageOptions"), doc.get("catalog"), doc.get("sparkConf") or {}
        for name, value in (("storageOptions", storage_options), ("catalog", catalog), ("sparkConf", conf)):
            if value is not None and not isinstance(value, dict):
                raise InvalidArgumentError(f"{source}: {name} must be a JSON object, got {type(value).__name__}")
        return cls(storage_options, catalog, {str(k): str(v) for k, v in conf.items()})


def write_secrets(path: str, secrets: JobSecrets) -> str:
    """Write the secrets file, readable by its owner only from the moment it exists."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(secrets.to_dict(), handle)
    return path


def take_secrets(environ: Mapping[str, str] | None = None) -> JobSecrets | None:
    """The secrets file :data:`SECRETS_FILE_ENV` names, read once and deleted; None without one."""
    environ = os.environ if environ is None else environ
    path = environ.get(SECRETS_FILE_ENV)
    if not path:
        return None
    source = f"the secrets file ({SECRETS_FILE_ENV})"
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read {source}: {exc.strerror or type(exc).__name__}") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"{source} is not valid JSON ({exc.msg} at position {exc.pos})") from None
    try:
        os.unlink(path)  # read once: the credentials do not outlive the job's start
    except OSError:
        pass
    return JobSecrets.from_dict(doc, source)
