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

from airflow_snaptable.core.errors import InvalidArgumentError
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


@dataclass(frozen=True)
class CreateTag(Action):
    tag_name: str = ""
    snapshot_id: int | None = None
    as_of: str | int | None = None
    time_retained: str | None = None
    name: ClassVar[str] = "create-tag"
    method: ClassVar[str] = "create_tag"


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


ACTIONS: dict[str, type[Action]] = {
    cls.name: cls
    for cls in (ExpireSnapshots, CreateTag, DeleteTag, CreatePeriodicTags, ExpireTags, Rollback, RemoveOrphanFiles, Compact, ExpireConsumers)
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
        arguments = _create_tag_arguments(table, arguments)
    result = getattr(table, action.method)(**arguments)
    return {"action": action.name, "table": action.table, "result": to_jsonable(result)}


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
