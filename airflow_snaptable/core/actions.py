"""Maintenance actions as plain values.

Each action is a small dataclass that serialises to JSON and names the Table
method it runs. The CLI, the Spark job and the Airflow operators all build
one of these and call :func:`run_action`, so every front end runs the same
core call and returns the same result dict.

Every field is checked when the action is made, against its annotation (a
``bool`` is only True or False: ``"false"`` is truthy and once forced a
rollback) and its ``_arg`` checks, so a bad action fails before it reaches a
table or a Spark job.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

from airflow_snaptable.core.checks import check_int, check_kinds
from airflow_snaptable.core.errors import InvalidArgumentError, InvalidOptionError, TagAlreadyExistsError
from airflow_snaptable.core.names import validate_name
from airflow_snaptable.core.options import parse_duration, parse_size
from airflow_snaptable.core.periodic import FORMATTERS, PERIODS
from airflow_snaptable.core.storage import check_location
from airflow_snaptable.core.table import Table

Check = Callable[[Any, str], Any]


def _arg(default: Any = None, *, minimum: int | None = None, check: Check | None = None) -> Any:
    """An action field: ``minimum`` bounds an integer, ``check(value, name)`` vets a value its type allows."""
    return dataclasses.field(default=default, metadata={"minimum": minimum, "check": check})


def _time(value: Any, name: str) -> None:
    try:
        Table.to_millis(value)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{name}: {exc}") from None


def _duration(value: Any, name: str) -> None:
    try:
        parse_duration(value, name)
    except InvalidOptionError as exc:
        raise InvalidArgumentError(str(exc)) from None


def _time_or_duration(value: Any, name: str) -> None:
    """Orphan cleaning's ``older_than``, read as core reads it: a duration text back from now, else a time."""
    if isinstance(value, str):
        try:
            parse_duration(value, name)
            return
        except InvalidOptionError:
            pass
    _time(value, name)


def _size(value: Any, name: str) -> None:
    try:
        parse_size(value, name)
    except InvalidOptionError as exc:
        raise InvalidArgumentError(str(exc)) from None


def _name(what: str) -> Check:
    def check(value: str, name: str) -> None:
        if not value.strip():
            raise InvalidArgumentError(f"{name} must be a non-empty string, got {value!r}")
        validate_name(value, what)

    return check


def _one_of(allowed) -> Check:
    def check(value: str, name: str) -> None:
        if value not in allowed:
            raise InvalidArgumentError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")

    return check


def _partitions(value: list, name: str) -> None:
    """Core checks keys and value types against the table; here only the JSON shape."""
    if not value:
        raise InvalidArgumentError(f"{name} must not be empty (None means every partition)")
    for spec in value:
        if not isinstance(spec, dict) or not spec or not all(isinstance(key, str) for key in spec):
            raise InvalidArgumentError(f"{name} must be a list of non-empty objects like [{{\"day\": \"2026-01-01\"}}], got {value!r}")


def _location(value: str, name: str) -> None:
    try:
        check_location(value)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{name}: {exc}") from None


@dataclass(frozen=True)
class Action:
    """Base: ``table`` is the table URI; subclasses add the method's arguments."""

    table: str = dataclasses.field(metadata={"check": _location})
    name: ClassVar[str] = ""
    method: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            name = f"{self.name}: {field.name}"
            kinds = [kind.strip() for kind in str(field.type).split("|")]
            minimum = field.metadata.get("minimum")
            if minimum is not None and value is not None and set(kinds) - {"None"} == {"int"}:
                check_int(value, name, minimum)
            else:
                check_kinds(value, name, kinds)
            check = field.metadata.get("check")
            if check is not None and value is not None:
                check(value, name)
        self.validate()

    def validate(self) -> None:
        """Checks across fields, after every field's own; subclasses add theirs."""

    def arguments(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "table"}

    def to_json(self) -> str:
        return json.dumps({"action": self.name, **dataclasses.asdict(self)})


@dataclass(frozen=True)
class ExpireSnapshots(Action):
    retain_min: int | None = _arg(minimum=1)
    retain_max: int | None = _arg(minimum=1)
    time_retained: str | None = _arg(check=_duration)
    older_than: str | int | None = _arg(check=_time)
    retain_last: int | None = _arg(minimum=1)
    limit: int | None = _arg(minimum=1)
    dry_run: bool = False
    now: str | int | None = _arg(check=_time)
    skip_missing: bool = False
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

    tag_name: str = _arg("", check=_name("tag"))
    snapshot_id: int | None = _arg(minimum=1)
    as_of: str | int | None = _arg(check=_time)
    time_retained: str | None = _arg(check=_duration)
    if_exists: str = _arg("fail", check=_one_of(IF_EXISTS))
    name: ClassVar[str] = "create-tag"
    method: ClassVar[str] = "create_tag"

    def validate(self) -> None:
        if self.snapshot_id is not None and self.as_of is not None:
            raise InvalidArgumentError("create-tag: give snapshot_id or as_of, not both")


@dataclass(frozen=True)
class DeleteTag(Action):
    tag_name: str = _arg("", check=_name("tag"))
    name: ClassVar[str] = "delete-tag"
    method: ClassVar[str] = "delete_tag"


@dataclass(frozen=True)
class CreatePeriodicTags(Action):
    period: str | None = _arg(check=_one_of(tuple(PERIODS)))
    delay: str | None = _arg(check=_duration)
    formatter: str | None = _arg(check=_one_of(FORMATTERS))
    num_retained_max: int | None = _arg(minimum=1)
    catch_up: bool = False
    time_retained: str | None = _arg(check=_duration)
    now: str | int | None = _arg(check=_time)
    name: ClassVar[str] = "periodic-tags"
    method: ClassVar[str] = "create_periodic_tags"


@dataclass(frozen=True)
class ExpireTags(Action):
    now: str | int | None = _arg(check=_time)
    name: ClassVar[str] = "expire-tags"
    method: ClassVar[str] = "expire_tags"


@dataclass(frozen=True)
class Rollback(Action):
    snapshot_id: int | None = _arg(minimum=1)
    tag: str | None = _arg(check=_name("tag"))
    as_of: str | int | None = _arg(check=_time)
    keep_history: bool = False
    force: bool = False
    name: ClassVar[str] = "rollback"
    method: ClassVar[str] = "rollback_to"

    def validate(self) -> None:
        if sum(target is not None for target in (self.snapshot_id, self.tag, self.as_of)) != 1:
            raise InvalidArgumentError("rollback: give exactly one of snapshot_id, tag and as_of")


@dataclass(frozen=True)
class RemoveOrphanFiles(Action):
    older_than: str | int | None = _arg(check=_time_or_duration)
    dry_run: bool = True
    now: str | int | None = _arg(check=_time)
    name: ClassVar[str] = "remove-orphan-files"
    method: ClassVar[str] = "remove_orphan_files"


@dataclass(frozen=True)
class Compact(Action):
    partitions: list | None = _arg(check=_partitions)
    target_file_size: str | int | None = _arg(check=_size)
    min_file_num: int | None = _arg(minimum=2)
    name: ClassVar[str] = "compact"
    method: ClassVar[str] = "compact"


@dataclass(frozen=True)
class ExpireConsumers(Action):
    now: str | int | None = _arg(check=_time)
    name: ClassVar[str] = "expire-consumers"
    method: ClassVar[str] = "expire_consumers"


@dataclass(frozen=True)
class UpdateConsumer(Action):
    """Commit a consumer's position: every snapshot before ``next_snapshot`` counts as read.

    Checked when the value is made (a bad action fails before it reaches a table or a Spark job);
    the range ``[earliest, latest + 1]`` is checked by ``Table.update_consumer``.
    """

    consumer_id: str = _arg("", check=_name("consumer"))
    next_snapshot: int | None = _arg(minimum=1)
    name: ClassVar[str] = "update-consumer"
    method: ClassVar[str] = "update_consumer"

    def validate(self) -> None:
        if self.next_snapshot is None:
            raise InvalidArgumentError("update-consumer: next_snapshot is required (the first snapshot not read yet)")


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


def action_from_json(text: str | Mapping) -> Action:
    """Parse ``{"action": "<name>", "table": "...", ...}``; unknown actions or arguments are errors."""
    if isinstance(text, str):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"action is not valid JSON: {exc}") from exc
        except RecursionError:
            raise InvalidArgumentError("action JSON is nested too deeply") from None
    elif isinstance(text, Mapping):
        doc = text
    else:
        raise InvalidArgumentError(f"an action is JSON text or a mapping, got {type(text).__name__}")
    if not isinstance(doc, Mapping):
        raise InvalidArgumentError(
            f'an action is a JSON object like {{"action": "expire-snapshots", "table": "..."}}, got {type(doc).__name__}'
        )
    doc = dict(doc)
    name = doc.pop("action", None)
    cls = ACTIONS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InvalidArgumentError(f"unknown action {name!r}; known: {', '.join(sorted(ACTIONS))}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(doc) - known, key=str)
    if unknown:
        raise InvalidArgumentError(f"action {name!r} takes no argument(s) {unknown}")
    if "table" not in doc:
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
