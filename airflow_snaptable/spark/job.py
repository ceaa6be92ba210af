"""The snaptable maintenance job: ``spark-submit job.py --action-file ACTION.json --result RESULT.json``.

Runs one maintenance action (core.actions' JSON format, e.g.
``{"action": "expire-snapshots", "table": "s3://bucket/t", "retain_max": 5}``)
with the same core call the CLI and the operators use; bulk file deletes run on
the executors (see airflow_snaptable.spark.maintenance).

A JSON array of actions runs them in order in one Spark application (one
submit instead of one per step, e.g. tag -> expire -> expire tags -> orphans),
stopping at the first failure. The result is then the array of the finished
actions' results, followed on failure by the failed action's error document.

A lake document (``--lake-file``, airflow_snaptable/spark/lake.py) runs a policy's jobs on
many tables in this one application, exactly as ``snaptable maintain`` does per table; the
result is ``{"tables": [every table's report], "mode", "sparkTasks"}``.

Arguments (give one of --action-file, --action and --lake-file):
  --action-file PATH   a file holding the action JSON (local path or fsspec URL, read with the
                       storage options below: in cluster deploy mode, the runner's staging location)
  --action JSON        the action JSON itself (actions hold no credentials)
  --lake-file PATH     a file holding a lake document (tables and policy; no credentials; as above)
  --result PATH        where to write the result JSON (local path or fsspec URL);
                       on success core's result ``{"action", "table", "result"}`` and where
                       its work ran, ``"ranOn"`` (spark/maintenance.py ``ran_on``),
                       on failure ``{"action", "table", "error": {"type", "message"}}``

Storage credentials never go on the command line: the job reads fsspec storage
options (a JSON object) from the Spark conf ``spark.snaptable.storage-options``,
else from the secrets file the environment variable ``SNAPTABLE_SECRETS_FILE``
names (written by the Airflow runner, read once and deleted; it also holds the
catalog properties and the secret-looking ``spark_conf`` entries, which the job
sets on its session: spark/handoff.py), else from the environment variable
``SNAPTABLE_STORAGE_OPTIONS``; without any, fsspec's defaults apply (for S3:
AWS_* variables, instance profiles ...). They are never printed, and the job
sets ``spark.redaction.regex`` so the Spark UI and event log hide them.

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
    source.add_argument("--lake-file", metavar="PATH_OR_URL", help="a file holding a lake document (spark/lake.py)")
    parser.add_argument("--result", metavar="PATH_OR_URL", help="write the result JSON here (local path or fsspec URL)")
    return parser.parse_args(argv)


def _read_action_text(args: argparse.Namespace, storage_options: dict | None = None) -> str:
    """The action or lake document: inline, a local file, or a URL read with the job's storage options
    (a cluster-mode driver's document is on the staging location: hooks/spark_staging.py)."""
    import fsspec

    from airflow_snaptable.core.errors import InvalidArgumentError

    if args.action is not None:
        return args.action
    path, what = (args.lake_file, "lake") if args.lake_file else (args.action_file, "action")
    protocol = fsspec.core.split_protocol(path)[0]
    options = {} if protocol in (None, "file", "local") else dict(storage_options or {})
    try:
        with fsspec.open(path, "r", encoding="utf-8", **options) as handle:
            return handle.read()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read the {what} file {path}: {exc.strerror or exc}") from None


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


def _storage_options(spark, secrets=None) -> dict | None:
    from airflow_snaptable.core.io.storage_options import parse_storage_options, storage_options_from_environment
    from airflow_snaptable.spark._common import STORAGE_OPTIONS_CONF
    from airflow_snaptable.spark.job_session import conf_value

    text = conf_value(spark, STORAGE_OPTIONS_CONF, None)
    if text:
        return parse_storage_options(text, f"Spark conf {STORAGE_OPTIONS_CONF}")
    if secrets is not None and secrets.storage_options is not None:
        return secrets.storage_options
    return storage_options_from_environment()


def _catalog(secrets=None) -> dict | None:
    from airflow_snaptable.core.io.storage_options import catalog_from_environment

    if secrets is not None and secrets.catalog is not None:
        return secrets.catalog
    return catalog_from_environment()


def _session(app_name: str, secrets=None):
    """The job's Spark (spark/job_session.py): its conf at once, its SparkSession when the work first needs
    Spark (:func:`_start`). The session gets the secret confs the runner handed over (never on the command
    line) and ``spark.redaction.regex`` covering them in the Spark UI and event log; the executors are
    checked before the first work sent to them."""
    from airflow_snaptable.spark.job_session import JobSpark

    spark = JobSpark(app_name, secrets.spark_conf if secrets is not None else None)
    spark.redaction_regex = _redaction_regex(spark.get_conf("spark.redaction.regex"))
    return spark


def _start(spark, app_name: str) -> None:
    """Name the application; start its session now if asked to (``spark.snaptable.lazySession=false``) or in
    cluster deploy mode (YARN's application master fails a driver that never starts one)."""
    spark.app_name = app_name
    if spark.must_start():
        spark.session  # noqa: B018 - started now, as asked


def _lake_job(text: str):
    from airflow_snaptable.core.errors import InvalidArgumentError
    from airflow_snaptable.spark.lake import LakeJob

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"the lake file is not valid JSON ({exc.msg} at position {exc.pos})") from None
    return LakeJob.from_dict(doc)


def _redaction_regex(given: str | None) -> str:
    """Ours, joined to the one spark-submit was given (a user's regex is widened, never replaced)."""
    from airflow_snaptable.spark.handoff import REDACTION_REGEX

    return f"{given}|{REDACTION_REGEX}" if given and given != REDACTION_REGEX else REDACTION_REGEX


def _run_lake(spark, job, secrets, storage_options) -> dict[str, Any]:
    """A lake document's tables maintained in this application."""
    from airflow_snaptable.core.lake.report import failed_in_run
    from airflow_snaptable.spark.lake import run_lake

    result = run_lake(spark, job, storage_options, _catalog(secrets))
    failed = sum(1 for table in result["tables"] if failed_in_run(table, job.run_id))
    print(f"{PROG}: {len(result['tables'])} table(s) maintained on the {result['mode']} in {result['seconds']:.1f} s"
          f" ({result['sparkTasks']} Spark task(s)), {failed} with a failed job"
          f"{'' if spark.started else '; no SparkContext was needed'}", file=sys.stderr)
    return result


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
        from airflow_snaptable.spark.handoff import take_secrets

        secrets = take_secrets()
        spark = _session(PROG, secrets)  # its conf now; its SparkSession when work needs it
        storage_options = _storage_options(spark, secrets)  # also for a document and result on storage
        if args.lake_file:
            job = _lake_job(_read_action_text(args, storage_options))  # checked before Spark starts
            _start(spark, f"snaptable lake: {len(job.tables)} tables")
            doc = _run_lake(spark, job, secrets, storage_options)
            if args.result:
                write_result(args.result, doc, storage_options)
            else:  # with a result file, the summary line above is the log's: a lake's report is long
                print(json.dumps(doc, sort_keys=True, default=str))
            return 0
        from airflow_snaptable.core.actions import actions_from_json

        # Every action is checked before Spark starts: a typo in the last step changes nothing.
        actions, many = actions_from_json(_read_action_text(args, storage_options))
        from airflow_snaptable.spark.maintenance import run_action_distributed

        first = actions[0]
        name = first.name if len(actions) == 1 else f"{len(actions)} actions"
        _start(spark, f"snaptable {name} {first.table}")
        catalog = _catalog(secrets)
        for action in actions:
            run = run_action_distributed(spark, action, storage_options, catalog=catalog)
            results.append(run.job_result())
            where = run.ran_on
            print(
                f"{PROG}: {action.name} on {action.table} done: reads on the {where['reads']}, deletes on the"
                f" {where['deletes']} ({run.deleted_on_executors} files deleted on executors in {run.spark_jobs} Spark job(s),"
                f" {where['sparkTasks']} task(s))",
                file=sys.stderr,
            )
        doc = results if many else results[0]
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
