"""Maintenance actions as plain values.

Each action is a small dataclass that serialises to JSON and names the Table
method it runs. The CLI, the Spark job and the Airflow operators all build
one of these and call :func:`run_action`, so every front end runs the same
core call and returns the same result dict.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar

from airflow_snaptable.core.errors import InvalidArgumentError, TagAlreadyExistsError
from airflow_snaptable.core.table import Table


@dataclass(frozen=True)
class Action:
    """Base: ``table`` is the table URI; subclasses add the method's arguments."""

    table: str
    name: ClassVar[str] = ""
    method: ClassVar[str] = ""

    def arguments(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "table"}

    def to_json(self) -> str:
        return json.dumps({"action": self.name, **dataclasses.asdict(self)})


@dataclass(frozen=True)
class ExpireSnapshots(Action):
    retain_min: int | None = None
    retain_max: int | None = None
    time_retained: str | None = None
    older_than: str | None = None
    retain_last: int | None = None
    limit: int | None = None
    dry_run: bool = False
    now: str | int | None = None
    name: ClassVar[str] = "expire-snapshots"
    method: ClassVar[str] = "expire_snapshots"


#: What CreateTag does when a tag of that name exists.
IF_EXISTS = ("fail", "skip")


@dataclass(frozen=True)
class CreateTag(Action):
    """Tag a snapshot (``snapshot_id``, or the latest at ``as_of``, or the latest).

    ``if_exists="skip"`` makes retries and re-runs idempotent: when the tag exists and points
    at the requested snapshot, that tag is the result (``"skipped": True``); when it points
    elsewhere, TagAlreadyExistsError. It never checks before creating: tag creation is an
    atomic create-if-absent, and only its "exists already" answer leads to the skip.
    """

    tag_name: str = ""
    snapshot_id: int | None = None
    as_of: str | int | None = None
    time_retained: str | None = None
    if_exists: str = "fail"
    name: ClassVar[str] = "create-tag"
    method: ClassVar[str] = "create_tag"

    def __post_init__(self) -> None:
        if self.if_exists not in IF_EXISTS:
            raise InvalidArgumentError(f"create-tag: if_exists must be one of {', '.join(IF_EXISTS)}, got {self.if_exists!r}")


@dataclass(frozen=True)
class DeleteTag(Action):
    tag_name: str = ""
    name: ClassVar[str] = "delete-tag"
    method: ClassVar[str] = "delete_tag"


@dataclass(frozen=True)
class CreatePeriodicTags(Action):
    period: str | None = None
    delay: str | None = None
    formatter: str | None = None
    num_retained_max: int | None = None
    catch_up: bool = False
    time_retained: str | None = None
    now: str | int | None = None
    name: ClassVar[str] = "periodic-tags"
    method: ClassVar[str] = "create_periodic_tags"


@dataclass(frozen=True)
class ExpireTags(Action):
    now: str | int | None = None
    name: ClassVar[str] = "expire-tags"
    method: ClassVar[str] = "expire_tags"


@dataclass(frozen=True)
class Rollback(Action):
    snapshot_id: int | None = None
    tag: str | None = None
    as_of: str | int | None = None
    keep_history: bool = False
    force: bool = False
    name: ClassVar[str] = "rollback"
    method: ClassVar[str] = "rollback_to"


@dataclass(frozen=True)
class RemoveOrphanFiles(Action):
    older_than: str | int | None = None
    dry_run: bool = True
    now: str | int | None = None
    name: ClassVar[str] = "remove-orphan-files"
    method: ClassVar[str] = "remove_orphan_files"


@dataclass(frozen=True)
class Compact(Action):
    partitions: list | None = None
    target_file_size: str | int | None = None
    min_file_num: int | None = None
    name: ClassVar[str] = "compact"
    method: ClassVar[str] = "compact"


@dataclass(frozen=True)
class ExpireConsumers(Action):
    now: str | int | None = None
    name: ClassVar[str] = "expire-consumers"
    method: ClassVar[str] = "expire_consumers"


@dataclass(frozen=True)
class UpdateConsumer(Action):
    """Commit a consumer's position: every snapshot before ``next_snapshot`` counts as read.

    Checked when the value is made (a bad action fails before it reaches a table or a Spark job);
    the range ``[earliest, latest + 1]`` is checked by ``Table.update_consumer``.
    """

    consumer_id: str = ""
    next_snapshot: int | None = None
    name: ClassVar[str] = "update-consumer"
    method: ClassVar[str] = "update_consumer"

    def __post_init__(self) -> None:
        if not isinstance(self.consumer_id, str) or not self.consumer_id.strip():
            raise InvalidArgumentError(f"update-consumer: consumer_id must be a non-empty string, got {self.consumer_id!r}")
        if self.next_snapshot is None:
            raise InvalidArgumentError("update-consumer: next_snapshot is required (the first snapshot not read yet)")
        if isinstance(self.next_snapshot, bool) or not isinstance(self.next_snapshot, int) or self.next_snapshot < 1:
            raise InvalidArgumentError(f"update-consumer: next_snapshot must be an integer >= 1, got {self.next_snapshot!r}")


ACTIONS: dict[str, type[Action]] = {
    cls.name: cls
    for cls in (
        ExpireSnapshots,
        CreateTag,
        DeleteTag,
        CreatePeriodicTags,
        ExpireTags,
        Rollback,
        RemoveOrphanFiles,
        Compact,
        ExpireConsumers,
        UpdateConsumer,
    )
}


def action_from_json(text: str | dict) -> Action:
    """Parse ``{"action": "<name>", "table": "...", ...}``; unknown actions or arguments are errors."""
    try:
        doc = json.loads(text) if isinstance(text, str) else dict(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"action is not valid JSON: {exc}") from exc
    name = doc.pop("action", None)
    cls = ACTIONS.get(name)
    if cls is None:
        raise InvalidArgumentError(f"unknown action {name!r}; known: {', '.join(sorted(ACTIONS))}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise InvalidArgumentError(f"action {name!r} takes no argument(s) {unknown}")
    if not doc.get("table"):
        raise InvalidArgumentError(f"action {name!r} needs 'table'")
    return cls(**doc)


def run_action(action: Action, storage_options: dict | None = None, table: Table | None = None) -> dict[str, Any]:
    """Run ``action`` on its table and return a JSON-ready result dict (``{"action", "table", "result"}``)."""
    table = table or Table.open(action.table, storage_options)
    arguments = action.arguments()
    if "tag_name" in arguments:
        arguments["name"] = arguments.pop("tag_name")
    if isinstance(action, CreateTag):
        return _create_tag(table, action, arguments)
    result = getattr(table, action.method)(**arguments)
    return {"action": action.name, "table": action.table, "result": to_jsonable(result)}


def _create_tag(table: Table, action: CreateTag, arguments: dict) -> dict[str, Any]:
    if_exists = arguments.pop("if_exists")
    arguments = _create_tag_arguments(table, arguments)
    try:
        tag = table.create_tag(**arguments)
    except TagAlreadyExistsError:
        if if_exists != "skip":
            raise
        existing = table.tag(arguments["name"])  # the create lost to this tag: it exists (or was deleted since: an error)
        requested = arguments.get("snapshot_id")
        if requested is None:
            requested = table.snapshot_manager.latest_id()
        if existing.snapshot_id != requested:
            raise TagAlreadyExistsError(
                f"tag {existing.name!r} exists already and points at snapshot {existing.snapshot_id}, "
                f"not at the requested snapshot {requested}: not skipped (delete or rename the tag)"
            ) from None
        return {"action": action.name, "table": action.table, "result": to_jsonable(existing), "skipped": True}
    return {"action": action.name, "table": action.table, "result": to_jsonable(tag)}


def _create_tag_arguments(table: Table, arguments: dict) -> dict:
    """``as_of`` picks the snapshot by time, so a late or backfilled run tags the state at the boundary."""
    as_of = arguments.pop("as_of")
    if as_of is not None:
        if arguments.get("snapshot_id") is not None:
            raise InvalidArgumentError("give snapshot_id or as_of, not both")
        snapshot = table.snapshot_at(as_of)
        if snapshot is None:
            raise InvalidArgumentError(f"no retained snapshot at or before {as_of}")
        arguments["snapshot_id"] = snapshot.id
    return arguments


def to_jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_jsonable(v) for v in value]
    return str(value)
