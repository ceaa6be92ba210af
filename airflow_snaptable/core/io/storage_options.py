"""fsspec storage options and catalog properties given as text: one parser for the CLI, the Spark
job, the data source and the hook.

Storage options (and an Iceberg catalog's properties) hold credentials, so they never go on a command line or into a Spark conf
that is logged: the data source (and a job started by hand) read them as a JSON object from the
environment variable :data:`STORAGE_OPTIONS_ENV`; the Airflow spark-submit runner hands them to
the job in a private file instead (airflow_snaptable/spark/handoff.py).
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from airflow_snaptable.core.errors import InvalidArgumentError

#: Environment variable holding fsspec storage options as a JSON object.
STORAGE_OPTIONS_ENV = "SNAPTABLE_STORAGE_OPTIONS"
#: Environment variable holding the catalog properties of ``iceberg://`` tables as a JSON object.
CATALOG_ENV = "SNAPTABLE_CATALOG"


def parse_storage_options(value: str | Mapping[str, Any] | None, source: str) -> dict[str, Any] | None:
    """Storage options from a JSON object's text or a mapping; None when empty.

    ``source`` names where the value came from in errors. The text is never echoed: it may hold secrets.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{source} must be a JSON object, got {type(value).__name__}")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"{source} is not valid JSON ({exc.msg} at position {exc.pos})") from None
    except RecursionError:
        raise InvalidArgumentError(f"{source} is nested too deeply to be storage options") from None
    if not isinstance(parsed, dict):
        raise InvalidArgumentError(f"{source} must be a JSON object, got {type(parsed).__name__}")
    return parsed


def storage_options_from_environment() -> dict[str, Any] | None:
    """The storage options in :data:`STORAGE_OPTIONS_ENV`, or None (fsspec's own defaults then apply)."""
    return parse_storage_options(os.environ.get(STORAGE_OPTIONS_ENV), f"environment variable {STORAGE_OPTIONS_ENV}")


def catalog_from_environment() -> dict[str, Any] | None:
    """The catalog properties in :data:`CATALOG_ENV`, or None."""
    return parse_storage_options(os.environ.get(CATALOG_ENV), f"environment variable {CATALOG_ENV}")
