"""Keeping credentials out of spark-submit's command line, the task log and rendered fields.

- Every ``spark_conf`` entry whose key looks secret (spark/handoff.py ``looks_secret``: ``key``,
  ``secret``, ``token``, ``password``, ``storage-options``, ``credential``) leaves the ``--conf``
  list. The runner hands it, with the connection's storage options and catalog properties, to
  the job in a file only its user reads (0600, in a private temporary directory removed after
  the run), named by ``SNAPTABLE_SECRETS_FILE``; the job sets those confs on its session.
- Each such value (and each storage option and catalog property, and each secret-looking
  ``env_vars`` entry) is registered with Airflow's secrets masker, so the task log and the
  rendered ``spark_conf`` field show ``***``; a warning names the keys and suggests the connection.
- :class:`SnapTableSparkSubmitHook` logs the command as it is: it holds no secret, and the Spark
  provider's keyword masking (any token containing ``secret`` or ``password`` masks the *next*
  token, so ``--conf`` became ``******``) would only mangle it. Registered secrets are still masked.
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any, Iterable, Mapping

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_snaptable.core.io.storage_options import CATALOG_ENV, STORAGE_OPTIONS_ENV
from airflow_snaptable.spark.handoff import SECRETS_FILE_ENV, JobSecrets, looks_secret, write_secrets

log = logging.getLogger(__name__)


#: Keys of storage options and catalog properties whose value is a credential though no word of
#: ``looks_secret`` is in them (Azure's connection string carries the account key).
_CREDENTIAL_KEYS = ("connection_string", "connection-string", "sas")
_URL_PASSWORD = re.compile(r"://[^/:@\s]+:([^/@\s]+)@")


def mask_values(value: Any) -> None:
    """Register every string leaf of ``value`` (a JSON text's too) with Airflow's secrets masker."""
    from airflow.sdk.log import mask_secret

    if isinstance(value, Mapping):
        for item in value.values():
            mask_values(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            mask_values(item)
    elif isinstance(value, str) and value.strip():
        mask_secret(value)
        parsed = _json(value)
        if isinstance(parsed, (dict, list)):
            mask_values(parsed)


def mask_credentials(options: Any) -> None:
    """Mask the credentials among storage options or catalog properties: the values of secret-looking
    keys (all of a nested object's), and a password inside a URL (``postgresql://user:pw@host``).
    Other values (endpoints, regions, flags) stay readable in the log."""
    from airflow.sdk.log import mask_secret

    if isinstance(options, str):
        options = _json(options)
    if not isinstance(options, Mapping):
        return
    for key, value in options.items():
        if looks_secret(key) or str(key).lower() in _CREDENTIAL_KEYS:
            mask_values(value)
        elif isinstance(value, Mapping):
            mask_credentials(value)
        elif isinstance(value, str):
            for password in _URL_PASSWORD.findall(value):
                mask_secret(password)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def mask_secret_conf(spark_conf: Mapping[str, Any] | None, where: str = "spark_conf", warn: bool = True) -> list[str]:
    """Mask the values of the secret-looking keys of ``spark_conf``; the keys, sorted (warned about once
    per call when ``warn``)."""
    if not isinstance(spark_conf, Mapping):
        return []
    from airflow.sdk.log import mask_secret

    keys = sorted(str(key) for key in spark_conf if looks_secret(key))
    for key in keys:
        mask_secret(str(spark_conf[key]))  # the whole value, and the credentials of a JSON one
        mask_credentials(str(spark_conf[key]))
    if keys and warn:
        log.warning(
            "%s key(s) %s look secret: they are masked, kept off the spark-submit command line and handed to the "
            "job in a private file; keep credentials in the snaptable connection instead (extra storage_options, "
            "or catalog for iceberg:// tables), which reaches the job the same way", where, keys,
        )
    return keys


def hand_off_secrets(
    workdir: str,
    env: dict[str, str],
    storage_options: Mapping[str, Any] | None,
    catalog: Mapping[str, Any] | None,
    secret_conf: Mapping[str, str],
    keep: Iterable[str] = (),
) -> str:
    """Write the job's secrets file in ``workdir`` (private: a TemporaryDirectory) and name it in ``env``
    (the spark-submit process's environment), in place of the plain-text environment variables.

    The Airflow worker's own secrets inherited in ``env`` (connections, variables, secret settings:
    :func:`airflow_secret_variable`) are dropped, unless named in ``keep`` (the task's ``env_vars``):
    the job needs none of them. Every value handed over is masked in the task log first."""
    mask_credentials(storage_options)
    mask_credentials(catalog)
    mask_secret_conf(secret_conf, warn=False)
    for name, value in env.items():
        if looks_secret(name) and name != SECRETS_FILE_ENV:
            mask_values(value)
    path = write_secrets(
        os.path.join(workdir, "secrets.json"),
        JobSecrets(dict(storage_options) if storage_options else None, dict(catalog) if catalog else None, dict(secret_conf)),
    )
    env.pop(STORAGE_OPTIONS_ENV, None)
    env.pop(CATALOG_ENV, None)
    kept = set(keep)
    for name in [name for name in env if airflow_secret_variable(name) and name not in kept]:
        del env[name]
    env[SECRETS_FILE_ENV] = path
    return path


def airflow_secret_variable(name: str) -> bool:
    """An environment variable of the Airflow worker that holds a secret: a connection, a variable, or a
    setting such as ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` or ``AIRFLOW__CORE__FERNET_KEY``."""
    upper = name.upper()
    if upper.startswith(("AIRFLOW_CONN_", "AIRFLOW_VAR_")):
        return True
    return upper.startswith("AIRFLOW__") and (looks_secret(name) or "CONN" in upper or upper.endswith(("_CMD", "_SECRET")))


class SnapTableSparkSubmitHook(SparkSubmitHook):
    """The Spark provider's hook, logging commands through Airflow's secrets masker only (see the module)."""

    def _mask_cmd(self, connection_cmd: str | list[str]) -> str:
        from airflow.sdk.log import redact

        if isinstance(connection_cmd, str):
            connection_cmd = [connection_cmd]
        return str(redact(" ".join(connection_cmd)))
