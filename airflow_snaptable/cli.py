"""``snaptable``: a thin command line over the core, for people and for tests.

Every command prints an aligned table for people, or JSON with ``--json``.
Typed errors exit with status 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from typing import Any, Sequence

from airflow_snaptable import __version__
from airflow_snaptable.core import SnapTableError, Table
from airflow_snaptable.core import actions
from airflow_snaptable.core.lifecycle import progress
from airflow_snaptable.core.actions.contract import ActionField, plain_text
from airflow_snaptable.core.arguments.times import with_iso_times
from airflow_snaptable.core.incremental import DATA_COMMIT_KINDS
from airflow_snaptable.core.lake import Policy, lake_status, maintain
from airflow_snaptable.core.io.storage_options import parse_storage_options

URI_HELP = (
    "table location: a local path or an fsspec URL such as s3://bucket/table (this package's tables and "
    "Apache Paimon table directories), or iceberg://<namespace>.<table> with --catalog"
)
CATALOG_HELP = "the catalog properties of an iceberg:// table as JSON, as pyiceberg's load_catalog takes them"


def format_time(millis: int | None) -> str:
    if millis is None:
        return "-"
    return datetime.fromtimestamp(millis / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Aligned plain-text columns; numbers right-aligned."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [bool(rows) and all(_is_number(row[i]) for row in rows if row[i] is not None) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))).rstrip()

    return "\n".join([line(list(headers)), line(["-" * w for w in widths])] + [line(r) for r in cells])


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _storage_options(args) -> dict[str, Any] | None:
    return parse_storage_options(args.storage_options, "--storage-options")


def _catalog(args) -> dict[str, Any] | None:
    return parse_storage_options(getattr(args, "catalog", None), "--catalog")


def _open(args) -> Table:
    return Table.open(args.uri, _storage_options(args), catalog=_catalog(args))


def cmd_snapshots(args) -> Any:
    from airflow_snaptable.core.formats.describe import file_counts

    table = _open(args)
    snapshots = table.snapshots()
    counts = file_counts(table, snapshots, index_files=True)
    # Index files (Paimon's hash indexes) only where the format keeps them.
    indexed = any(c.index_files is not None for c in counts.values())
    # Changelog files (Paimon's changelog producers) only where a snapshot has a changelog.
    changelogged = any(c.changelog_files is not None for c in counts.values())
    if args.json:
        return [
            {**s.to_dict(), "added_files": counts[s.id].added, "deleted_files": counts[s.id].deleted,
             **({"index_files": counts[s.id].index_files} if indexed else {}),
             **({"changelog_files": counts[s.id].changelog_files} if changelogged else {})}
            for s in snapshots
        ]
    rows = [
        (s.id, s.commit_kind.value, format_time(s.time_millis), s.total_record_count, s.delta_record_count,
         counts[s.id].added, counts[s.id].deleted, *((counts[s.id].index_files,) if indexed else ()),
         *((counts[s.id].changelog_files,) if changelogged else ()), s.commit_user, s.watermark)
        for s in snapshots
    ]
    header = ["id", "kind", "committed (UTC)", "records", "delta", "+files", "-files", *(["index files"] if indexed else []),
              *(["changelog files"] if changelogged else []), "user", "watermark"]
    return render_table(header, rows)


def cmd_show(args) -> Any:
    """The table's description (core/formats/describe.py), on every format."""
    from airflow_snaptable.core.formats.describe import describe

    info = describe(_open(args))
    if args.json:
        return info.to_dict()
    lines = [
        f"table       {info.uri}",
        f"format      {info.format}",
        f"partitions  {', '.join(info.partition_keys) or '(none)'}",
    ]
    if info.primary_keys:
        lines.append(f"primary key {', '.join(info.primary_keys)}")
    lines += [
        f"snapshots   {_id(info.earliest_snapshot_id)} .. {_id(info.latest_snapshot_id)} ({info.snapshot_count})",
        f"records     {info.total_record_count}",
        f"data files  {info.data_files}" + ("" if info.delete_files is None else f", delete files {info.delete_files}")
        + ("" if info.index_files is None else f", index files {info.index_files}")
        + ("" if info.changelog_files is None else f", changelog files {info.changelog_files}"),
        "tags        " + _listed([f"{t['name']} ({t['snapshot_id']})" for t in info.tags]),
        "consumers   " + _listed([f"{c['id']} (next {c['next_snapshot']})" for c in info.consumers]),
        "options     " + (", ".join(f"{k}={v}" for k, v in sorted(info.options.items())) or "(defaults)"),
        "",
        render_table(["column", "type", "nullable"], [(c["name"], c["type"], c["nullable"]) for c in info.schema]),
    ]
    return "\n".join(lines)


#: Names ``show`` prints on one line before it says how many more there are (``--json`` lists them all).
SHOWN_NAMES = 10


def _id(snapshot_id: int | None) -> str:
    return "-" if snapshot_id is None else str(snapshot_id)


def _listed(names: list[str]) -> str:
    if not names:
        return "(none)"
    more = f", ... ({len(names)} in all)" if len(names) > SHOWN_NAMES else ""
    return ", ".join(names[:SHOWN_NAMES]) + more


def cmd_tags(args) -> Any:
    tags = _open(args).tags()
    if args.json:
        return [t.to_dict() for t in tags]
    rows = [
        (t.name, t.snapshot_id, format_time(t.snapshot.time_millis), t.snapshot.total_record_count, t.source,
         format_time(t.expires_at_millis) if t.expires_at_millis else None)
        for t in tags
    ]
    return render_table(["tag", "snapshot", "snapshot committed (UTC)", "records", "source", "expires (UTC)"], rows)


def cmd_savepoints(args) -> Any:
    savepoints = _open(args).savepoints()
    if args.json:
        return [t.to_dict() for t in savepoints]
    rows = [(t.snapshot_id, t.name, format_time(t.snapshot.time_millis), t.snapshot.total_record_count) for t in savepoints]
    return render_table(["snapshot", "savepoint", "snapshot committed (UTC)", "records"], rows)


def cmd_consumers(args) -> Any:
    consumers = _open(args).consumers()
    if args.json:
        return [c.to_dict() for c in consumers]
    return render_table(["consumer", "next snapshot", "updated (UTC)"], [(c.id, c.next_snapshot, format_time(c.update_time_millis)) for c in consumers])


def cmd_delete_consumer(args) -> Any:
    _open(args).delete_consumer(args.consumer_id)
    return {"deleted": args.consumer_id} if args.json else f"consumer {args.consumer_id} deleted"


def cmd_new_snapshots(args) -> Any:
    """The same answer SnapTableNewSnapshotSensor gets (core.incremental.find_new_snapshots)."""
    from airflow_snaptable.core.incremental import find_new_snapshots

    # Given no kinds, the sensor's and the triggers' default (core.incremental.DATA_COMMIT_KINDS): the same answer.
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()] if args.kinds else list(DATA_COMMIT_KINDS)
    found = find_new_snapshots(_open(args), after_snapshot_id=args.after_snapshot_id, consumer_id=args.consumer_id, commit_kinds=kinds)
    args.exit_code = 0 if found.found else 1
    if args.json:
        return found.to_dict()
    if not found.found:
        return f"nothing new after snapshot {found.from_snapshot_id} (latest {found.latest_snapshot_id})"
    rows = [(i, kind, "yes" if i in found.matching_snapshot_ids else "") for i, kind in zip(found.snapshot_ids, found.commit_kinds)]
    header = f"new snapshots {found.from_snapshot_id + 1}..{found.to_snapshot_id}: +{found.added_records} / -{found.deleted_records} records"
    return header + "\n" + render_table(["snapshot", "kind", "matches"], rows)


def cmd_timeline(args) -> Any:
    """Draw the table's life to ``--out`` (.svg: the picture; .html: a page around it)."""
    from pathlib import Path

    from airflow_snaptable.core.errors import InvalidArgumentError
    from airflow_snaptable.core.timeline.model import build_timeline
    from airflow_snaptable.core.timeline.render import render_html, render_svg

    out = Path(args.out)
    if out.suffix.lower() not in (".svg", ".html", ".htm"):
        raise InvalidArgumentError(f"--out must end in .svg or .html, got {args.out!r}")
    timeline = build_timeline(_open(args))
    out.write_text(render_svg(timeline) if out.suffix.lower() == ".svg" else render_html(timeline), encoding="utf-8")
    if args.json:
        return {"out": str(out), **timeline.to_dict()}
    return (f"wrote {out}: {len(timeline.snapshots)} snapshot(s), {len(timeline.tags)} tag(s), "
            f"{len(timeline.consumers)} consumer(s); next expiry removes {timeline.expiry_window or 'nothing'}")


def cmd_verify(args) -> Any:
    result = _open(args).verify()
    args.exit_code = 0 if result.ok else 1
    if args.json:
        return result.to_dict()
    lines = [f"snapshots {len(result.snapshot_ids)}, tags {len(result.tags)}: " + ("OK" if result.ok else "PROBLEMS")]
    lines += [f"missing      {m['path']} (referenced by {m['referenced_by']})" for m in result.missing_files]
    lines += [f"unreferenced {path}" for path in result.unreferenced_files]
    for gap in result.snapshot_gaps:
        first, last = gap["first_missing"], gap["last_missing"]
        what = f"snapshot {first} is" if first == last else f"snapshots {first}..{last} are"
        lines.append(f"gap          {what} missing (between {gap['after']} and {gap['before']})")
    lines += [
        f"wrong size   {m['path']}: recorded {m['recorded_size']} bytes, found {m['actual_size']} bytes (referenced by {m['referenced_by']})"
        for m in result.size_mismatches
    ]
    lines += [f"corrupt      {c['path']}: {c['error']}" for c in result.corrupt_metadata]
    lines += [
        f"future       snapshot {f['snapshot_id']} committed at {format_time(f['time_millis'])}, "
        f"{f['ahead_millis'] // 1000} s ahead of this machine's clock"
        for f in result.future_snapshots
    ]
    if result.snapshot_gaps:
        # The usual cause, and the one a command fixes: a rollback to an expired snapshot that was killed.
        lines.append("a gap left by an interrupted rollback closes when it is re-run (or by any expire / rollback run)")
    return "\n".join(lines)


#: ``--json`` / ``--no-json``: every flag of every command has its ``--no-`` form (README).
JSON_FLAG: dict[str, Any] = {"action": argparse.BooleanOptionalAction, "default": False, "help": "print JSON instead of a table"}


def sentence(text: str) -> str:
    """A command's summary as its description: a whole sentence (capitalised, with its full stop)."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


RUN_ACTION_HELP = (
    'the action as JSON: {"action": NAME, "table": URI, ...its arguments}, e.g. '
    '\'{"action": "expire-snapshots", "table": "/data/orders", "retain_max": 5}\'; NAME is one of '
    + ", ".join(sorted(actions.ACTIONS)) + " (the arguments are the flags of the matching command, with underscores)"
)
LAKE_HELP = "a directory or fsspec URL with tables anywhere below it (ours; Paimon's <db>.db/<table>), or iceberg://[<namespace>]"


def cmd_lake(args) -> Any:
    """``maintain``: every policy job on every table of the location (core/lake/), exit 1 when a job failed; ``status``: as stored."""
    where = {"storage_options": _storage_options(args), "catalog": _catalog(args), "max_depth": args.max_depth}
    if args.command == "maintain":
        report = maintain(args.uri, Policy.load(args.policy), dry_run=args.dry_run, parallel=args.parallel, run_id=args.run_id, **where)
        args.exit_code = int(report.failed)
    else:
        report = lake_status(args.uri, **where)
    return report.to_dict() if args.json else "\n".join([render_table(report.COLUMNS, report.rows()), *report.footer()])


HEALTH_COLUMNS = ("table", "format", "snapshots", "data files", "size", "oldest", "jobs")


def cmd_health(args) -> Any:
    """``health``: core/lake/health.py's rows, failed tables first, in 120 columns (the lake page's figures:
    sizes and ages in units, the jobs counted by status); a table's error on a line of its own below."""
    from airflow_snaptable.core.lake.health import lake_health
    from airflow_snaptable.plugins.lake_page import human_age, human_bytes

    found = lake_health(args.uri, storage_options=_storage_options(args), catalog=_catalog(args), max_depth=args.max_depth)
    if args.json:
        return {"tables": [health.to_dict() for health in found]}
    rows = [
        (h.table, h.format, "-" if h.snapshots is None else h.snapshots, "-" if h.data_files is None else h.data_files,
         human_bytes(h.bytes), human_age(h.oldest_snapshot_age_seconds), health_jobs_cell(h.jobs))
        for h in found
    ]
    errors = [shortened(f"{h.table}: {' '.join(h.error.split())}", HEALTH_LINE) for h in found if h.error]
    return "\n".join([render_table(HEALTH_COLUMNS, rows), *errors])


#: ``health`` fits 120 columns (a terminal, a log line): the jobs cell holds this many characters, an error line
#: the whole width; ``--json`` has every job's status and the whole message.
HEALTH_LINE = 120
HEALTH_JOBS_SHOWN = 40


def shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def health_jobs_cell(jobs: dict[str, dict[str, Any]]) -> str:
    """The jobs of one table in a few words: the failed ones by name, then a count per other status
    (``FAILED snapshot-expiry; 7 ok, 1 not yet run``), not each job's name and status (230 characters)."""
    from collections import Counter

    from airflow_snaptable.core.lake.status import FAILED

    if not jobs:
        return "-"
    failed = sorted(job for job, record in jobs.items() if record.get("status") == FAILED)
    counts = Counter(str(record.get("status")) for record in jobs.values() if record.get("status") != FAILED)
    words = {"Successful": "ok", "Not_Yet_Run": "not yet run", "Disabled": "disabled"}
    rest = ", ".join(f"{n} {words.get(status, status)}" for status, n in sorted(counts.items(), key=lambda c: -c[1]))
    head = f"FAILED {', '.join(failed)}" if failed else ""
    if head and len(head) + len(rest) + 2 > HEALTH_JOBS_SHOWN:  # many failed: their count, names in --json
        head = f"FAILED {len(failed)}" if len(failed) > 1 else shortened(head, HEALTH_JOBS_SHOWN - len(rest) - 2)
    return "; ".join(part for part in (head, rest) if part)


def _run_action(action: actions.Action, args) -> Any:
    outcome = actions.run_action(action, storage_options=_storage_options(args), catalog=_catalog(args))
    return outcome if args.json else render_result(outcome["result"])


def cmd_run_action(args) -> Any:
    return _run_action(actions.action_from_json(args.action_json), args)


def add_file_rewrite_commands(commands) -> None:
    """Commands that rewrite files without changing rows, besides ``compact``: Iceberg's manifest rewriting."""
    add_action_command(commands, "rewrite-manifests", actions.RewriteManifests)


def add_action_command(commands, word: str, action_cls: type[actions.Action]) -> argparse.ArgumentParser:
    """The command ``word`` that runs ``action_cls``, its arguments made from the action's fields.

    ``URI``, then the positional fields as words, then every other field as a flag
    (``retain_min`` -> ``--retain-min``; internal fields are left out). A bool field is a pair
    of flags (``--dry-run`` / ``--no-dry-run``); given neither, the command passes nothing and
    the action's own default applies, so the CLI, the operators and JSON share one default per
    action (``clean-orphans`` is a dry run unless told ``--no-dry-run``).
    Fields of a required choice (rollback's target) form a required group of exclusive flags.
    """
    fields = [field for field in action_cls.parameters() if not field.param.internal]
    sub = commands.add_parser(word, help=action_cls.summary(), description=action_cls.summary())
    sub.add_argument("uri", help=URI_HELP)
    for field in fields:
        if field.param.positional:
            sub.add_argument(field.name, help=_help(field), **_argparse_kind(field))
    sub.add_argument("--storage-options", help="fsspec storage options as JSON")
    sub.add_argument("--catalog", help=CATALOG_HELP)
    sub.add_argument("--json", **JSON_FLAG)
    groups: dict[str, Any] = {}
    for choice in action_cls.choices:
        if choice.required:
            groups.update(dict.fromkeys(choice.names, sub.add_mutually_exclusive_group(required=True)))
    for field in fields:
        if not field.param.positional:
            flag = "--" + field.name.replace("_", "-")
            groups.get(field.name, sub).add_argument(flag, dest=field.name, help=_help(field), **_argparse_kind(field))
    # What argparse leaves as text although the field is not a string (a JSON list) is read by its kind.
    text = [field.name for field in fields if field.kinds - {"None"} == {"list"}]

    def run(args) -> Any:
        values = {field.name: getattr(args, field.name) for field in fields if getattr(args, field.name) is not None}
        return _run_action(action_cls.from_python(args.uri, values, text=text), args)

    sub.set_defaults(handler=run)
    return sub


def _argparse_kind(field: ActionField) -> dict[str, Any]:
    """How argparse reads the field's words: a flag for a bool, an int for an integer, else the text."""
    kinds = field.kinds - {"None"}
    if kinds == {"bool"}:
        return {"action": argparse.BooleanOptionalAction, "default": None}
    if kinds == {"int"}:
        return {"type": int}
    return {}


def _help(field: ActionField) -> str:
    text = plain_text(field.param.help)
    if field.kinds - {"None"} == {"bool"}:
        text += f" (default: {'on' if field.default else 'off'})"
    return text.replace("%", "%%")  # argparse formats help text


#: What a command prints when its action made no change and returns nothing (a compaction with nothing to
#: compact): a sentence, not Python's ``None``. ``--json`` keeps ``"result": null``.
NOTHING_DONE = "nothing to do: the table is unchanged"


def render_result(result: Any) -> str:
    if result is None:
        return NOTHING_DONE
    if isinstance(result, dict):
        rows = []
        for key, value in result.items():
            if isinstance(value, list) and len(value) > 8:
                value = f"{len(value)} items: " + ", ".join(map(str, value[:8])) + ", ..."
            rows.append((key, value))
        return render_table(["field", "value"], rows)
    if isinstance(result, list):
        return "\n".join(map(str, result)) or "(none)"
    return str(result)


def add_data_commands(commands) -> None:
    """Commands that delete rows by a rule (``expire-data``: rows older than a retention)."""
    add_action_command(commands, "expire-data", actions.ExpireData)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="snaptable", description="Inspect and maintain snapshot tables.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def add(name: str, handler, help_text: str, uri_help: str = URI_HELP) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=sentence(help_text))
        sub.add_argument("uri", help=uri_help)
        sub.add_argument("--storage-options", help="fsspec storage options as JSON")
        sub.add_argument("--catalog", help=CATALOG_HELP)
        sub.add_argument("--json", **JSON_FLAG)
        sub.set_defaults(handler=handler)
        return sub

    add("snapshots", cmd_snapshots, "list the table's snapshots, earliest first")
    add("show", cmd_show, "show the table's schema, options and snapshot range")
    add("tags", cmd_tags, "list the table's tags")
    add("consumers", cmd_consumers, "list the table's consumers")
    add("savepoints", cmd_savepoints, "list the table's savepoints")
    add("verify", cmd_verify, "report missing and unreferenced files (exit 1 if any)")
    timeline = add("timeline", cmd_timeline, "draw the table's snapshots, tags, consumers and next expiry as SVG or HTML")
    timeline.add_argument("--out", required=True, help="the picture to write: FILE.svg, or FILE.html for a page around it")

    tag = commands.add_parser("tag", help="create, delete, rename, expire or periodically create tags",
                              description="Create, delete, rename, expire or periodically create tags.")
    tag_commands = tag.add_subparsers(dest="tag_command", required=True)
    add_action_command(tag_commands, "create", actions.CreateTag)
    add_action_command(tag_commands, "delete", actions.DeleteTag)
    add_action_command(tag_commands, "rename", actions.RenameTag)
    add_action_command(tag_commands, "periodic", actions.CreatePeriodicTags)
    add_action_command(tag_commands, "expire", actions.ExpireTags)
    add_action_command(commands, "expire", actions.ExpireSnapshots)
    add_action_command(commands, "rollback", actions.Rollback)
    add_action_command(commands, "clean-orphans", actions.RemoveOrphanFiles)
    add_action_command(commands, "compact", actions.Compact)
    add_file_rewrite_commands(commands)
    add_action_command(commands, "clean", actions.Clean)
    add_data_commands(commands)

    savepoint = commands.add_parser("savepoint", help="create, delete or restore savepoints (Hudi)",
                                    description="Create, delete or restore savepoints (Hudi).")
    savepoint_commands = savepoint.add_subparsers(dest="savepoint_command", required=True)
    add_action_command(savepoint_commands, "create", actions.CreateSavepoint)
    add_action_command(savepoint_commands, "delete", actions.DeleteSavepoint)
    add_action_command(savepoint_commands, "restore", actions.RestoreSavepoint)

    consumer = commands.add_parser("consumer", help="move or delete a consumer", description="Move or delete a consumer.")
    consumer_commands = consumer.add_subparsers(dest="consumer_command", required=True)
    add_action_command(consumer_commands, "update", actions.UpdateConsumer)
    delete = consumer_commands.add_parser("delete", help="delete a consumer (expiry no longer keeps its snapshots)",
                                         description="Delete a consumer (expiry no longer keeps its snapshots).")
    delete.add_argument("uri", help=URI_HELP)
    delete.add_argument("consumer_id", help="the consumer")
    delete.add_argument("--storage-options", help="fsspec storage options as JSON")
    delete.add_argument("--catalog", help=CATALOG_HELP)
    delete.add_argument("--json", **JSON_FLAG)
    delete.set_defaults(handler=cmd_delete_consumer)

    new = add("new-snapshots", cmd_new_snapshots, "snapshots after a snapshot id or a consumer's position (exit 1 if none)")
    baseline = new.add_mutually_exclusive_group(required=True)
    # The sensor's parameter names (after_snapshot_id, consumer_id, commit_kinds); the short forms are the older names.
    baseline.add_argument("--after-snapshot-id", "--after", type=int, dest="after_snapshot_id",
                          help="the last snapshot already processed (--after: the older name)")
    baseline.add_argument("--consumer-id", "--consumer", dest="consumer_id",
                          help="a consumer whose position is the baseline (--consumer: the older name)")
    new.add_argument("--commit-kinds", "--kinds", dest="kinds",
                     help="comma-separated commit kinds that count, e.g. APPEND,OVERWRITE (default: "
                     f"{','.join(DATA_COMMIT_KINDS)}, the sensor's and the triggers'; --kinds: the older name)")

    maintain = add("maintain", cmd_lake, "run a policy's jobs on every table of a location (exit 1 if a job failed)", LAKE_HELP)
    maintain.add_argument("--policy", required=True, help="the policy file: JSON, or YAML (.yaml, .yml) with PyYAML installed")
    maintain.add_argument("--dry-run", action=argparse.BooleanOptionalAction, default=False,
                          help="report what expiry, orphan removal and clean would do; change nothing")
    maintain.add_argument("--parallel", type=int, default=4, help="tables maintained at once (threads; default 4)")
    maintain.add_argument("--lake-run-id", "--run-id", dest="run_id",  # the operator's lake_run_id; --run-id: the older name
                          help="name the run; a rerun with a crashed run's id skips the jobs it completed (--run-id: the older name)")
    health = add("health", cmd_health, "every table of a location: snapshots, files, bytes, oldest snapshot, each job's "
                 "last status; failed tables first (the UI's lake page)", LAKE_HELP)
    for sub in (maintain, add("status", cmd_lake, "the maintenance status of every table of a location", LAKE_HELP), health):
        sub.add_argument("--max-depth", type=int, default=6, help="levels below a directory location tables may sit at (default 6)")

    add_noncurrent_commands(commands)

    run_help = "run one maintenance action given as JSON, as the Spark job and the operators run it"
    run = commands.add_parser("run-action", help=run_help, description=sentence(run_help))
    run.add_argument("action_json", help=RUN_ACTION_HELP)
    run.add_argument("--storage-options", help="fsspec storage options as JSON")
    run.add_argument("--catalog", help=CATALOG_HELP)
    run.add_argument("--json", **JSON_FLAG)
    run.set_defaults(handler=cmd_run_action)
    return parser


def add_noncurrent_commands(commands) -> None:
    """Recoverable deletes (docs/lifecycle.md, "Undo a bad expiry"): ``undo URI RUN_ID``, ``purge URI``,
    ``trash URI``; the deleting commands take ``--noncurrent-days N`` from their actions."""
    add_action_command(commands, "undo", actions.Undo)
    add_action_command(commands, "purge", actions.Purge)
    add_action_command(commands, "trash", actions.Trash)


class TerminalBar:
    """Draws deletion progress as a bar on a terminal (core/lifecycle/progress.py events), one line per phase."""

    WIDTH = 30

    def __init__(self, stream):
        self.stream = stream

    def __call__(self, event) -> None:
        filled = self.WIDTH * event.done // event.total if event.total else self.WIDTH
        bar = "#" * filled + "." * (self.WIDTH - filled)
        end = "\n" if event.done >= event.total else ""
        self.stream.write(f"\r[{bar}] {event}{end}")
        self.stream.flush()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader left (``snaptable snapshots URI | head``): what it read is what it wanted. Point
        # stdout at /dev/null so the interpreter's final flush finds no broken pipe either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command whose reader left


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    args.exit_code = 0
    try:
        if sys.stderr.isatty():
            with progress.reporting(TerminalBar(sys.stderr)):
                result = args.handler(args)
        else:
            result = args.handler(args)
    except SnapTableError as exc:
        print(f"snaptable: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a local file the command itself writes or reads (timeline --out, --policy)
        print(f"snaptable: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130  # as a shell reports an interrupted command; no traceback
    print(json.dumps(with_iso_times(result), indent=2, default=str) if args.json else result)
    sys.stdout.flush()  # a reader gone shows here, inside main, not in the interpreter's exit
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
