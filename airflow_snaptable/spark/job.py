"""The snaptable maintenance job: ``spark-submit job.py --action-file ACTION.json --result RESULT.json``.

Runs one maintenance action (core.actions' JSON format, e.g.
``{"action": "expire-snapshots", "table": "s3://bucket/t", "retain_max": 5}``)
with the same core call the CLI and the operators use; bulk file deletes run on
the executors (see airflow_snaptable.spark.maintenance).

A JSON array of actions runs them in order in one Spark application (one
submit instead of one per step, e.g. tag -> expire -> expire tags -> orphans),
stopping at the first failure. The result is then the array of the finished
actions' results, followed on failure by the failed action's error document.

Arguments (give one of --action-file and --action):
  --action-file PATH   a file holding the action JSON (local path or fsspec URL)
  --action JSON        the action JSON itself (actions hold no credentials)
  --result PATH        where to write the result JSON (local path or fsspec URL);
                       on success core's result ``{"action", "table", "result"}``,
                       on failure ``{"action", "table", "error": {"type", "message"}}``

Storage credentials never go on the command line: the job reads fsspec storage
options (a JSON object) from the Spark conf ``spark.snaptable.storage-options``
(set it in a properties file or spark-defaults.conf) or from the environment
variable ``SNAPTABLE_STORAGE_OPTIONS``; without either, fsspec's defaults apply
(for S3: AWS_* variables, instance profiles ...). They are never printed.

Deletion progress is printed as ``snaptable-progress: <phase>: done/total (percent), rate``
lines (core/lifecycle/progress.py).

Exit status: 0 done; 1 the action failed (the last line the job prints on
stderr is ``snaptable-job: <ErrorType>: <message>``; spark-submit merges the
Python driver's stderr into its own stdout); 2 bad command line.
"""

from __future__ import annotations

import os
import sys

# spark-submit puts this file's directory first on sys.path; the package is imported by its full name.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import argparse  # noqa: E402
import json  # noqa: E402
from typing import Any  # noqa: E402

PROG = "snaptable-job"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run one snaptable maintenance action (core.actions JSON) in Spark.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    # No "-" for stdin: under spark-submit the driver's stdin is a pipe the JVM never closes.
    source.add_argument("--action-file", metavar="PATH_OR_URL", help="a file holding the action JSON")
    source.add_argument("--action", metavar="JSON", help="the action JSON itself")
    parser.add_argument("--result", metavar="PATH_OR_URL", help="write the result JSON here (local path or fsspec URL)")
    return parser.parse_args(argv)


def _read_action_text(args: argparse.Namespace) -> str:
    import fsspec

    from airflow_snaptable.core.errors import InvalidArgumentError

    if args.action is not None:
        return args.action
    try:
        with fsspec.open(args.action_file, "r", encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read the action file {args.action_file}: {exc.strerror or exc}") from None


def write_result(location: str, doc: Any, storage_options: dict | None) -> None:
    import fsspec

    data = json.dumps(doc, indent=2, sort_keys=True, default=str)
    protocol = fsspec.core.split_protocol(location)[0]
    if protocol in (None, "file", "local"):
        path = location[len("file://"):] if location.startswith("file://") else location
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(tmp, path)
        return
    with fsspec.open(location, "w", **(storage_options or {})) as handle:
        handle.write(data)


def _storage_options(spark) -> dict | None:
    from airflow_snaptable.core.io.storage_options import parse_storage_options, storage_options_from_environment
    from airflow_snaptable.spark._common import STORAGE_OPTIONS_CONF

    text = spark.sparkContext.getConf().get(STORAGE_OPTIONS_CONF, None)
    if text:
        return parse_storage_options(text, f"Spark conf {STORAGE_OPTIONS_CONF}")
    return storage_options_from_environment()


def _log_progress_to_stderr() -> None:
    """Deletion progress (core/lifecycle/progress.py) as ``snaptable-progress: ...`` lines in the driver's output."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("snaptable-progress: %(message)s"))
    logger = logging.getLogger("airflow_snaptable.progress")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _log_progress_to_stderr()
    action = None
    storage_options = None
    spark = None
    results: list[dict[str, Any]] = []
    many = False
    try:
        from airflow_snaptable.core.actions import actions_from_json

        # Every action is checked before Spark starts: a typo in the last step changes nothing.
        actions, many = actions_from_json(_read_action_text(args))
        from pyspark.sql import SparkSession

        from airflow_snaptable.spark.maintenance import run_action_distributed

        first = actions[0]
        name = first.name if len(actions) == 1 else f"{len(actions)} actions"
        spark = SparkSession.builder.appName(f"snaptable {name} {first.table}").getOrCreate()
        from airflow_snaptable.spark.executor_check import check_executors

        check_executors(spark)  # before any action: executors that cannot run the package fail here, clearly
        storage_options = _storage_options(spark)
        from airflow_snaptable.core.io.storage_options import catalog_from_environment

        catalog = catalog_from_environment()
        for action in actions:
            run = run_action_distributed(spark, action, storage_options, catalog=catalog)
            results.append(run.result)
            print(
                f"{PROG}: {action.name} on {action.table} done"
                f" ({run.deleted_on_executors} files deleted on executors in {run.spark_jobs} Spark job(s))",
                file=sys.stderr,
            )
        doc: Any = results if many else results[0]
        if args.result:
            write_result(args.result, doc, storage_options)
        print(json.dumps(doc, sort_keys=True, default=str))
        return 0
    except Exception as exc:  # noqa: BLE001 - every failure becomes one clear line and exit status 1
        message = f"{type(exc).__name__}: {' '.join(str(exc).split()) or 'no message'}"
        if args.result:
            error = {
                "action": getattr(action, "name", None),
                "table": getattr(action, "table", None),
                "error": {"type": type(exc).__name__, "message": str(exc)},
            }
            try:
                write_result(args.result, results + [error] if many else error, storage_options)
            except Exception as write_exc:  # noqa: BLE001 - the original failure is the one to report
                print(f"{PROG}: could not write the result to {args.result}: {type(write_exc).__name__}", file=sys.stderr)
        print(f"{PROG}: {message}", file=sys.stderr)
        return 1
    finally:
        if spark is not None:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
