"""The maintenance actions: each one defined once, here, and run the same way by every front end.

An action is a value (a frozen dataclass, core/actions/contract.py): its fields are the arguments
of the core call, with their defaults, checks and documentation; ``run(table)`` makes the
call. The CLI (``snaptable expire ...``), the Spark job (``--action-file``), the hook and the
Airflow operators are built from these definitions and return the same result document
``{"action", "table", "result"}``. An argument added to an action's core call is added here
as a field, and every front end takes it.

Actions travel as JSON (``{"action": "expire-snapshots", "table": "s3://b/t", "retain_max": 5}``):
:func:`action_from_json` is the one way JSON becomes an action.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import fsspec

from airflow_snaptable.core.actions.contract import (
    Action,
    Choice,
    allowed,
    arg,
    check_duration,
    check_partitions,
    check_snapshot_ids,
    check_size,
    check_time,
    check_location_argument,
    check_time_or_duration,
    valid_name,
)
from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.formats.iceberg.orphans import DEFAULT_WINDOW as ICEBERG_ORPHAN_WINDOW
from airflow_snaptable.core.lifecycle import orphans
from airflow_snaptable.core.lifecycle.orphans import DEFAULT_ORPHAN_WINDOW
from airflow_snaptable.core.lifecycle.periodic_tags import FORMATTERS, PERIODS, TIME_SOURCES
from airflow_snaptable.core.actions.data_expiry import ExpireData
from airflow_snaptable.core.actions.noncurrent import Purge, Trash, Undo, noncurrent_days_arg, run_retaining
from airflow_snaptable.core.actions.hudi_clean import Clean, CreateSavepoint, DeleteSavepoint, RestoreSavepoint
from airflow_snaptable.core.actions.table_files import RewriteManifests
from airflow_snaptable.core.table import Table
from airflow_snaptable.core.native.tags import IF_EXISTS

#: Orphan paths a result (an XCom, the CLI's output) lists at most; ``orphan_list`` writes them all.
MAX_RESULT_ORPHANS = 100

_NOW = "The time the action runs at (default: the table's clock), for tests and replays."


@dataclass(frozen=True, kw_only=True)
class ExpireSnapshots(Action):
    """Expire old snapshots and delete the files nothing retained still uses.

    Tags and consumers always protect what they hold. Unset bounds come from the table
    options (``snapshot.num-retained.min`` / ``.max``, ``snapshot.time-retained``,
    ``snapshot.expire.limit``).
    """

    name: ClassVar[str] = "expire-snapshots"
    choices: ClassVar[tuple[Choice, ...]] = (Choice(("older_than", "time_retained")),)

    retain_min: int | None = arg(None, minimum=1, help="Always keep at least this many newest snapshots.")
    retain_max: int | None = arg(None, minimum=1, help="Keep at most this many snapshots, whatever their age.")
    time_retained: str | None = arg(
        None, check=check_duration,
        help="Keep snapshots younger than this duration, e.g. '7 d' (default: option snapshot.time-retained).",
    )
    older_than: str | int | None = arg(
        None, check=check_time,
        help="Or: expire only snapshots whose successor is older than this time (ISO-8601 or epoch millis).",
    )
    retain_last: int | None = arg(None, minimum=1, internal=True, help="Iceberg's name for retain_min.")
    limit: int | None = arg(None, minimum=1, help="Expire at most this many snapshots in one run.")
    dry_run: bool = arg(False, help="Plan only: report what would be deleted, delete nothing.")
    now: str | int | None = arg(None, check=check_time, internal=True, help=_NOW)
    skip_missing: bool = arg(
        False,
        help="Repair path: skip metadata of the snapshots being expired that is already missing (what it named "
        "is left for orphan cleaning); what protects must still read.",
    )
    snapshot_ids: list | None = arg(
        None, check=check_snapshot_ids,
        help="Or: expire exactly these snapshots, e.g. [3, 4] (the oldest retained ones; never the latest or one "
        "a consumer holds), instead of the retain rules.",
    )
    delete_files: bool = arg(
        True,
        help="Delete the files only the expired snapshots used (default). Off: remove the snapshots only, "
        "like Iceberg's cleanExpiredFiles(false); orphan cleaning removes their files later.",
    )

    noncurrent_days: int | None = noncurrent_days_arg()

    def run(self, table: Table) -> dict[str, Any]:
        return run_retaining(self, table, lambda arguments: table.expire_snapshots(**arguments))


@dataclass(frozen=True, kw_only=True)
class CreateTag(Action):
    """Tag a snapshot so its state outlives the snapshot's expiry.

    The snapshot is ``snapshot_id``, or the latest committed at or before ``as_of``, or the
    latest when the action runs. With ``if_exists="skip"`` a tag of that name on the
    requested snapshot is the result, marked ``"skipped": True`` (atomic: the create is a
    create-if-absent, and only its "exists already" answer leads to the skip).
    """

    name: ClassVar[str] = "create-tag"
    choices: ClassVar[tuple[Choice, ...]] = (Choice(("snapshot_id", "as_of")),)

    tag_name: str = arg(check=valid_name("tag"), positional=True, help="The tag's name.")
    snapshot_id: int | None = arg(None, minimum=1, help="The snapshot to tag (default: the latest).")
    as_of: str | int | None = arg(
        None, check=check_time,
        help="Or: tag the latest snapshot committed at or before this time (ISO-8601), so a late or "
        "backfilled run tags the state at the period boundary.",
    )
    time_retained: str | None = arg(
        None, check=check_duration,
        help="The tag's time to live, e.g. '30 d' (default: option tag.default-time-retained, else kept until deleted).",
    )
    if_exists: str = arg(
        "fail", check=allowed(IF_EXISTS),
        help="'fail' when a tag of that name exists, or 'skip': keep it and return it when it points at "
        "the requested snapshot (re-runs are idempotent), fail when it points elsewhere.",
    )

    def run(self, table: Table) -> dict[str, Any]:
        tag, kept = table.tag_lifecycle().create_or_keep(
            self.tag_name, self.snapshot_id, as_of=self.as_of, time_retained=self.time_retained, if_exists=self.if_exists
        )
        return self.result_document(tag, skipped=True) if kept else self.result_document(tag)


@dataclass(frozen=True, kw_only=True)
class DeleteTag(Action):
    """Delete a tag, and the data files only it still held."""

    name: ClassVar[str] = "delete-tag"

    tag_name: str = arg(check=valid_name("tag"), positional=True, help="The tag to delete.")
    noncurrent_days: int | None = noncurrent_days_arg()

    def run(self, table: Table) -> dict[str, Any]:
        return run_retaining(self, table, lambda arguments: table.delete_tag(self.tag_name))


@dataclass(frozen=True, kw_only=True)
class RenameTag(Action):
    """Rename a tag (it keeps its snapshot, create time, time to live and source)."""

    name: ClassVar[str] = "rename-tag"

    tag_name: str = arg(check=valid_name("tag"), positional=True, help="The tag to rename.")
    new_name: str = arg(check=valid_name("tag"), positional=True, help="Its new name.")

    def run(self, table: Table) -> dict[str, Any]:
        return self.result_document(table.rename_tag(self.tag_name, self.new_name))


@dataclass(frozen=True, kw_only=True)
class CreatePeriodicTags(Action):
    """Tag the state at the end of each elapsed period (Paimon's automatic tag creation).

    Unset arguments come from the table options ``tag.creation-period`` (or
    ``tag.creation-period-duration``), ``tag.creation-delay``, ``tag.period-formatter`` and
    ``tag.num-retained-max``.
    """

    name: ClassVar[str] = "periodic-tags"

    period: str | None = arg(None, check=allowed(tuple(PERIODS)), help="daily, hourly or two-hours.")
    delay: str | None = arg(
        None, check=check_duration, help="How long after a period ends its tag may be created (less than one period)."
    )
    formatter: str | None = arg(
        None, check=allowed(FORMATTERS), help="The form of the tag names: with_dashes, without_dashes or without_dashes_and_spaces."
    )
    num_retained_max: int | None = arg(
        None, minimum=1, help="Keep at most this many periodic tags (the oldest are deleted)."
    )
    catch_up: bool = arg(False, help="Create the tags of every missed period, not only the newest.")
    time_source: str | None = arg(
        None, check=allowed(TIME_SOURCES),
        help="process-time (commit time) or watermark (the snapshots' event time); default: option tag.automatic-creation.",
    )
    time_retained: str | None = arg(None, check=check_duration, help="Time to live of the tags created.")
    now: str | int | None = arg(None, check=check_time, internal=True, help=_NOW)

    def run(self, table: Table) -> dict[str, Any]:
        return self.result_document(table.create_periodic_tags(**self.arguments()))


@dataclass(frozen=True, kw_only=True)
class ExpireTags(Action):
    """Delete the tags whose time to live has passed (and the files only they held)."""

    name: ClassVar[str] = "expire-tags"

    now: str | int | None = arg(None, check=check_time, internal=True, help=_NOW)

    noncurrent_days: int | None = noncurrent_days_arg()

    def run(self, table: Table) -> dict[str, Any]:
        return run_retaining(self, table, lambda arguments: table.expire_tags(**arguments))


@dataclass(frozen=True, kw_only=True)
class Rollback(Action):
    """Make the table's state that of a snapshot, a tag or a time.

    Default: later snapshots and tags are discarded with the files only they used;
    consumers that read past the target refuse it unless forced.
    """

    name: ClassVar[str] = "rollback"
    choices: ClassVar[tuple[Choice, ...]] = (Choice(("snapshot_id", "tag", "as_of"), required=True),)

    snapshot_id: int | None = arg(None, minimum=1, help="Roll back to this snapshot.")
    tag: str | None = arg(None, check=valid_name("tag"), help="Or: to this tag.")
    as_of: str | int | None = arg(None, check=check_time, help="Or: to the latest snapshot at or before this time.")
    keep_history: bool = arg(
        False,
        help="Commit the target's state as a new snapshot instead of discarding the later snapshots and tags.",
    )
    force: bool = arg(
        False, help="Roll back even if consumers have read past the target (they move back); default mode only."
    )

    noncurrent_days: int | None = noncurrent_days_arg()

    def run(self, table: Table) -> dict[str, Any]:
        return run_retaining(self, table, lambda arguments: table.rollback_to(**arguments))


def _days(window) -> str:
    days = window.total_seconds() / 86_400
    return f"{days:g} day" + ("" if days == 1 else "s")


@dataclass(frozen=True, kw_only=True)
class RemoveOrphanFiles(Action):
    """Delete files under the table that nothing references (left behind by crashed writers)."""

    name: ClassVar[str] = "remove-orphan-files"

    older_than: str | int | None = arg(
        None, check=check_time_or_duration,
        help="Only files older than this: a time, or a duration back from now such as '2 d' (default: "
        f"{_days(DEFAULT_ORPHAN_WINDOW)} on this package's and Paimon tables, {_days(ICEBERG_ORPHAN_WINDOW)} on "
        "Iceberg tables, as Iceberg's DeleteOrphanFiles).",
    )
    # One default for the CLI, the operators and JSON: a dry run. A deletion cannot be undone, and a
    # wrong location or window (a path typo, a clock off by a day) would delete live files.
    dry_run: bool = arg(
        True,
        help="List the orphan files only, delete nothing (the default everywhere: deleting cannot be undone; "
        "review the list, then run with dry_run=False, or --no-dry-run).",
    )
    list_files: bool = arg(
        False,
        help=f"Return the first {MAX_RESULT_ORPHANS} deleted paths too (a dry run always lists them); by default a "
        "deleting run returns counts and bytes only. Every path: orphan_list.",
    )
    orphan_list: str | None = arg(
        None, check=check_location_argument,
        help=f"Also write the path of every orphan (all of them; the result lists at most {MAX_RESULT_ORPHANS}), "
        "relative to the table, one per line, to this file: a local path or an fsspec URL.",
    )
    now: str | int | None = arg(None, check=check_time, internal=True, help=_NOW)
    noncurrent_days: int | None = noncurrent_days_arg()

    def run(self, table: Table) -> dict[str, Any]:
        listing: dict[str, Any] = {}

        def remove(arguments: dict[str, Any]):
            listing["listed"] = arguments.pop("list_files") or self.dry_run
            listing["target"] = target = arguments.pop("orphan_list")
            if target is None:
                return table.remove_orphan_files(**arguments)
            with fsspec.open(target, "w", encoding="utf-8") as out, orphans.listing_to(lambda path: out.write(path + "\n")):
                return table.remove_orphan_files(**arguments)

        document = run_retaining(self, table, remove)
        # The result travels as an XCom and a log line: a few paths to look at, the counts of all.
        result, listed = document["result"], listing["listed"]
        shown = result["orphan_files"][:MAX_RESULT_ORPHANS] if listed else []
        result.update(orphan_files=shown, orphan_files_truncated=len(shown) < result["orphan_count"] and listed)
        if listing["target"] is not None:
            result["orphan_list"] = listing["target"]
        return document


@dataclass(frozen=True, kw_only=True)
class Compact(Action):
    """Rewrite the small files of each partition into fewer files (a COMPACT snapshot)."""

    name: ClassVar[str] = "compact"

    partitions: list | None = arg(
        None, check=check_partitions, help='Only these partitions, e.g. [{"day": "2026-01-01"}] (default: all).'
    )
    target_file_size: str | int | None = arg(
        None, check=check_size,
        help="Files smaller than this are compacted, e.g. '128 mb' (default: option target-file-size).",
    )
    min_file_num: int | None = arg(
        None, minimum=2,
        help="A partition is compacted when it has at least this many small files (default: option compaction.min.file-num).",
    )
    min_input_files: int | None = arg(
        None, minimum=1,
        help="Iceberg's name for min_file_num (Iceberg tables: default 5, Iceberg's min-input-files); give one of the two.",
    )
    dry_run: bool = arg(False, help="Iceberg tables: list the file groups that would be rewritten, change nothing.")

    def run(self, table: Table) -> dict[str, Any]:
        from airflow_snaptable.core.actions.table_files import compact_arguments

        return self.result_document(table.compact(**compact_arguments(table, self.arguments())))


@dataclass(frozen=True, kw_only=True)
class ExpireConsumers(Action):
    """Delete consumers not updated for ``expiration_time`` (default: the table option ``consumer.expiration-time``)."""

    name: ClassVar[str] = "expire-consumers"

    expiration_time: str | None = arg(
        None, check=check_duration,
        help="Delete consumers not updated for this long, e.g. '7 d' (default: option consumer.expiration-time; "
        "neither set: no consumer expires).",
    )
    now: str | int | None = arg(None, check=check_time, internal=True, help=_NOW)

    noncurrent_days: int | None = noncurrent_days_arg()

    def run(self, table: Table) -> dict[str, Any]:
        return run_retaining(self, table, lambda arguments: table.expire_consumers(**arguments))


@dataclass(frozen=True, kw_only=True)
class UpdateConsumer(Action):
    """Commit a consumer's position: every snapshot before ``next_snapshot`` counts as read.

    ``next_snapshot`` and later snapshots are protected from expiry while the consumer lives.
    """

    name: ClassVar[str] = "update-consumer"

    consumer_id: str = arg(check=valid_name("consumer"), positional=True, help="The consumer.")
    next_snapshot: int = arg(
        minimum=1, positional=True, help="The first snapshot not read yet: in [earliest, latest + 1]."
    )

    def run(self, table: Table) -> dict[str, Any]:
        return self.result_document(table.update_consumer(**self.arguments()))


#: Every action by its JSON name: what the Spark job and ``snaptable run-action`` can run.
ACTIONS: dict[str, type[Action]] = {
    cls.name: cls
    for cls in (
        ExpireSnapshots,
        CreateTag,
        DeleteTag,
        RenameTag,
        CreatePeriodicTags,
        ExpireTags,
        Rollback,
        RemoveOrphanFiles,
        Compact,
        RewriteManifests,
        ExpireConsumers,
        UpdateConsumer,
        Clean,
        CreateSavepoint,
        DeleteSavepoint,
        RestoreSavepoint,
        Undo,
        Purge,
        Trash,
        ExpireData,
    )
}


def action_class(name: Any) -> type[Action]:
    """The action registered under ``name``."""
    cls = ACTIONS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InvalidArgumentError(f"unknown action {name!r}; known: {', '.join(sorted(ACTIONS))}")
    return cls


def action_from_json(text: str | Mapping) -> Action:
    """Parse ``{"action": "<name>", "table": "...", ...}``; unknown actions or arguments are errors."""
    doc = _json_document(text) if isinstance(text, str) else text
    if not isinstance(doc, Mapping):
        if not isinstance(text, str):
            raise InvalidArgumentError(f"an action is JSON text or a mapping, got {type(text).__name__}")
        raise InvalidArgumentError(
            f'an action is a JSON object like {{"action": "expire-snapshots", "table": "..."}}, got {type(doc).__name__}'
        )
    arguments = dict(doc)
    cls = action_class(arguments.pop("action", None))
    if "table" not in arguments:
        raise InvalidArgumentError(f"action {cls.name!r} needs 'table'")
    return cls.from_values(arguments.pop("table"), arguments)


def actions_from_json(text: str) -> tuple[list[Action], bool]:
    """The actions in ``text`` (one object, or an array of them), and whether it was an array.

    Every action is checked before any runs: a typo in the last step fails before the
    first step changes anything.
    """
    doc = _json_document(text)
    items = doc if isinstance(doc, list) else [doc]
    if not items:
        raise InvalidArgumentError("the action array is empty")
    parsed = []
    for position, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidArgumentError(f"action {position} is not a JSON object: {item!r}")
        parsed.append(action_from_json(item))
    return parsed, isinstance(doc, list)


def build_action(cls_or_name: type[Action] | str, table: str, **values: Any) -> Action:
    """An action from Python values and text (a hook's caller, rendered templates).

    Datetimes and timedeltas become their JSON text, and every string is read by its
    field's kind (``"5"`` is 5 for a count, ``"True"`` True for a flag, strictly).
    """
    cls = action_class(cls_or_name) if isinstance(cls_or_name, str) else cls_or_name
    return cls.from_python(table, values, text=values.keys())


def run_action(
    action: Action, storage_options: dict | None = None, table: Table | None = None, catalog: dict | None = None
) -> dict[str, Any]:
    """Run ``action`` on its table (or on ``table``, opened already): the result ``{"action", "table", "result"}``.

    ``catalog``: the catalog properties of an ``iceberg://`` table (core/formats/foreign.py).
    """
    return action.run(table or Table.open(action.table, storage_options, catalog=catalog))


def _json_document(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"action is not valid JSON: {exc}") from exc
    except RecursionError:
        raise InvalidArgumentError("action JSON is nested too deeply") from None
