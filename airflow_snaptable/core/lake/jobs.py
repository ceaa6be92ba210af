"""A policy job on one table, as one of the existing maintenance actions (core/actions/maintenance.py).

The lifecycle rules are the actions': this module only says which action a job is and with
which arguments, after the table's own settings had their say (docs/maintenance.md, "Precedence"):

- where the policy says nothing, the action gets no argument and the table's own retention
  applies, as when the action runs alone (our and Paimon's options ``snapshot.num-retained.*``,
  ``snapshot.time-retained``, ``tag.num-retained-max``; Iceberg's ``history.expire.*``
  properties), then the action's defaults;
- floors: where the policy would keep less than a retention the table set explicitly (a smaller
  minimum, a shorter age, fewer tags, a shorter consumer idle time, fewer noncurrent days), the
  table's setting wins, for every deleting job (``clean`` too: the table's minimum and age are
  its floor), and the job's status says so in ``notes``: a lake-wide policy never deletes
  history a table's owner asked to keep;
- ceilings: the table's explicit maximum bounds the policy's counts (its minimum and its
  maximum become it, noted), so a policy never contradicts a table into failing every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable

from airflow_snaptable.core import actions
from airflow_snaptable.core.actions.contract import Action, json_value
from airflow_snaptable.core.actions.hudi_clean import Clean
from airflow_snaptable.core.errors import InvalidOptionError
from airflow_snaptable.core.formats.iceberg.retention import MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP
from airflow_snaptable.core.formats.iceberg.table import NONCURRENT_DAYS_PROPERTY
from airflow_snaptable.core.lake.policy import ResolvedJob
from airflow_snaptable.core.arguments.table_options import OPTION_SPECS, duration_text, parse_duration

ICEBERG = "iceberg"
#: Jobs whose action can plan without changing the table (``dry_run=True``).
DRY_RUNNABLE = frozenset({"snapshot-expiry", "orphan-file-removal", "clean", "manifest-rewrite", "data-expiry"})


@dataclass
class JobPlan:
    """The action a job runs on a table, and what the status should say about how it was chosen."""

    action: Action | None
    #: The action's arguments the job chose (the JSON form of the action, less ``table``).
    arguments: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Notes only the run can tell (the action's result -> notes), e.g. that a clean's floor kept more than its policy.
    result_notes: Callable[[Any], list[str]] | None = None


@dataclass(frozen=True)
class ExplicitRetention:
    """The retention a table set explicitly (None: not set, its default applies), in the policy's units."""

    min_snapshots: int | None = None
    max_snapshots: int | None = None
    max_age: timedelta | None = None
    tags_retained_max: int | None = None
    #: key -> the table's own name of the setting, for the notes.
    keys: dict[str, str] = field(default_factory=dict)


def explicit_retention(table) -> ExplicitRetention:
    """What the table's own options (ours, Paimon's) or properties (Iceberg's) set explicitly."""
    if table.format == ICEBERG:
        props = dict(table.iceberg.metadata.properties or {})
        minimum = _int(props.get(MIN_SNAPSHOTS_TO_KEEP))
        age = _int(props.get(MAX_SNAPSHOT_AGE_MS))
        tags = props.get("tag.num-retained-max")
        return ExplicitRetention(
            min_snapshots=minimum, max_age=None if age is None else timedelta(milliseconds=age),
            tags_retained_max=None if tags is None else _option("tag.num-retained-max", tags),
            keys={"min": MIN_SNAPSHOTS_TO_KEEP, "age": MAX_SNAPSHOT_AGE_MS, "tags": "tag.num-retained-max"},
        )
    raw = table.schema.options  # only what the table's creator set
    given = {key: table.options.get(key) for key in raw if key in OPTION_SPECS}
    return ExplicitRetention(
        min_snapshots=given.get("snapshot.num-retained.min"),
        max_snapshots=given.get("snapshot.num-retained.max"),
        max_age=given.get("snapshot.time-retained"),
        tags_retained_max=given.get("tag.num-retained-max"),
        keys={"min": "snapshot.num-retained.min", "max": "snapshot.num-retained.max", "age": "snapshot.time-retained",
              "tags": "tag.num-retained-max"},
    )


def _int(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None  # the action reads the property itself and names what is wrong with it


def _option(key: str, value: Any) -> Any:
    try:
        return OPTION_SPECS[key].parse(value, key)
    except InvalidOptionError:
        return None


def plan_job(job: ResolvedJob, table, *, dry_run: bool = False) -> JobPlan:
    """The action ``job`` runs on ``table`` (opened), with the table's explicit retention applied."""
    return _PLANNERS[job.job](job.settings, table, dry_run)


def _keep_more(policy_value, table_value, policy_key: str, table_key: str, notes: list[str], show=str):
    """The larger of the two (the one that keeps more), noting when the table's explicit setting won."""
    if policy_value is None or table_value is None or table_value <= policy_value:
        return policy_value
    notes.append(
        f"the table's {table_key}={show(table_value)} keeps more than the policy's {policy_key}={show(policy_value)}: "
        "the table's setting wins"
    )
    return table_value


def _hours(value: timedelta) -> str:
    return f"{value.total_seconds() / 3600:g}"


def _snapshot_expiry(settings: dict, table, dry_run: bool) -> JobPlan:
    explicit, notes = explicit_retention(table), []
    retain_min = _keep_more(settings.get("min-snapshots-to-keep"), explicit.min_snapshots, "min-snapshots-to-keep",
                            explicit.keys["min"], notes)
    hours = settings.get("max-snapshot-age-hours")
    age = None if hours is None else timedelta(hours=hours)
    age = _keep_more(age, explicit.max_age, "max-snapshot-age-hours", explicit.keys["age"], notes,
                     show=lambda d: f"{_hours(d)} h" if d is not None else "-")
    retain_max = settings.get("max-snapshots")
    ceiling = explicit.max_snapshots
    if ceiling is not None:
        # The table's explicit maximum is the ceiling of what the policy keeps: its minimum and its maximum.
        retain_max = _table_ceiling(retain_max, ceiling, "max-snapshots", explicit.keys["max"], notes)
        retain_min = _table_ceiling(retain_min, ceiling, "min-snapshots-to-keep", explicit.keys["max"], notes)
    if retain_max is not None:
        floor = retain_min if retain_min is not None else explicit.min_snapshots
        if floor is not None and retain_max < floor:
            # The table set a minimum above the policy's maximum: the minimum it asked for is kept.
            notes.append(f"max-snapshots={retain_max} is below the {floor} snapshots always kept: {floor} is the maximum")
            retain_max = floor
        # else only a default minimum stands against it, which follows a lower maximum (core's rule).
    arguments = {
        "retain_min": retain_min,
        "retain_max": retain_max,
        "time_retained": age,
        "dry_run": dry_run,
        "noncurrent_days": _noncurrent_days(settings, table, notes),
    }
    return _plan(actions.ExpireSnapshots, table, arguments, notes)


def _table_ceiling(policy_value: int | None, ceiling: int, policy_key: str, table_key: str, notes: list[str]) -> int | None:
    """``policy_value`` bounded by the table's explicit maximum ``ceiling`` (noted when it changes): a policy count
    above it becomes it (the owner allowed no more), and so does a smaller policy maximum (it would keep fewer than
    the table's maximum lets stay); a smaller policy minimum stands."""
    if policy_value is None or policy_value == ceiling:
        return policy_value
    if policy_value > ceiling:
        notes.append(f"the policy's {policy_key}={policy_value} is above the table's {table_key}={ceiling}: "
                     "the table's setting wins")
        return ceiling
    if policy_key == "max-snapshots":
        notes.append(f"the table's {table_key}={ceiling} keeps more than the policy's {policy_key}={policy_value}: "
                     "the table's setting wins")
        return ceiling
    return policy_value


def _periodic_tags(settings: dict, table, dry_run: bool) -> JobPlan:
    notes: list[str] = []
    explicit = explicit_retention(table)
    retained = _keep_more(settings.get("num-retained-max"), explicit.tags_retained_max, "num-retained-max",
                          explicit.keys["tags"], notes)
    arguments = {
        "period": settings.get("period"),
        "delay": _duration(settings, "delay"),
        "formatter": settings.get("formatter"),
        "num_retained_max": retained,
    }
    return _plan(actions.CreatePeriodicTags, table, arguments, notes)


def _orphan_file_removal(settings: dict, table, dry_run: bool) -> JobPlan:
    days, notes = settings.get("older-than-days"), []
    arguments = {"older_than": None if days is None else timedelta(days=days), "dry_run": dry_run,
                 "noncurrent_days": _noncurrent_days(settings, table, notes)}
    return _plan(actions.RemoveOrphanFiles, table, arguments, notes)


def _clean(settings: dict, table, dry_run: bool) -> JobPlan:
    """The policy's clean, with the table's explicit minimum and age as its floor: the clean keeps at least what
    the table's own expiry would (and says so, once it ran, when the floor kept more than the policy)."""
    explicit, notes = explicit_retention(table), []
    arguments = {key.replace("-", "_"): value for key, value in settings.items()}
    arguments["noncurrent_days"] = _noncurrent_days(settings, table, notes)
    floor = {"retain_min": explicit.min_snapshots, "time_retained": explicit.max_age}
    plan = _plan(Clean, table, {**arguments, **floor, "dry_run": dry_run}, notes)
    shown = {"retain_min": f"{explicit.keys['min']}={explicit.min_snapshots}",
             "time_retained": f"{explicit.keys['age']}={None if explicit.max_age is None else duration_text(explicit.max_age)}"}
    described = ", ".join(f"{key}={value}" for key, value in settings.items())

    def table_won(result: dict) -> list[str]:
        by = result.get("floor_kept_by") if isinstance(result, dict) else None
        if by is None:
            return []
        return [f"the table's {shown[by]} keeps more than the policy's clean ({described}): the table's setting wins "
                f"(kept from snapshot {result['floor_kept_from']})"]

    plan.result_notes = table_won
    return plan


def _data_compaction(settings: dict, table, dry_run: bool) -> JobPlan:
    arguments = {"target_file_size": settings.get("target-file-size"), "min_file_num": settings.get("min-file-num")}
    return _plan(actions.Compact, table, {**arguments, **_iceberg_compaction(settings, table, dry_run)}, [])


def _iceberg_compaction(settings: dict, table, dry_run: bool) -> dict:
    """Iceberg's compaction takes ``min-input-files`` (its name) and plans without committing on a dry run."""
    if getattr(table, "format", None) != "iceberg":
        return {}
    return {"min_input_files": settings.get("min-input-files"), "dry_run": dry_run or None}


def _manifest_rewrite(settings: dict, table, dry_run: bool) -> JobPlan:
    arguments = {"target_manifest_size": settings.get("target-manifest-size"), "dry_run": dry_run or None}
    return _plan(actions.RewriteManifests, table, arguments, [])


def _consumer_expiry(settings: dict, table, dry_run: bool) -> JobPlan:
    """The policy's idle time, unless the table explicitly keeps its consumers longer."""
    notes: list[str] = []
    expiration = _keep_more(_duration(settings, "expiration-time"), _explicit_consumer_expiration(table), "expiration-time",
                            "consumer.expiration-time", notes, show=duration_text)
    arguments = {"expiration_time": expiration, "noncurrent_days": _noncurrent_days(settings, table, notes)}
    return _plan(actions.ExpireConsumers, table, arguments, notes)


def _explicit_consumer_expiration(table) -> timedelta | None:
    """The table's own ``consumer.expiration-time`` when its creator set it (Iceberg: a table property)."""
    if table.format == ICEBERG:
        raw = (table.iceberg.metadata.properties or {}).get("consumer.expiration-time")
        return None if raw is None else _option("consumer.expiration-time", raw)
    return table.options.get("consumer.expiration-time") if "consumer.expiration-time" in table.schema.options else None


def _tag_expiry(settings: dict, table, dry_run: bool) -> JobPlan:
    """Each tag's own time to live decides; what the run removes stays noncurrent as long as the table asks."""
    notes: list[str] = []
    return _plan(actions.ExpireTags, table, {"noncurrent_days": _noncurrent_days(settings, table, notes)}, notes)


def _data_expiry(settings: dict, table, dry_run: bool) -> JobPlan:
    arguments = {
        "column": settings.get("column"),
        "retention": _duration(settings, "retention"),
        "dry_run": dry_run,
    }
    return _plan(actions.ExpireData, table, arguments, [])


def _no_settings(action: type[Action]) -> Callable[[dict, Any, bool], JobPlan]:
    return lambda settings, table, dry_run: _plan(action, table, {key.replace("-", "_"): v for key, v in settings.items()}, [])


def _noncurrent_days(settings: dict, table, notes: list[str]) -> int | None:
    """The policy's ``noncurrent-days``, unless the table explicitly keeps what its deleting runs remove longer
    (its option ``noncurrent-days``; Iceberg: the property ``snaptable.noncurrent-days``): the longer wins."""
    if table.format == ICEBERG:
        key = NONCURRENT_DAYS_PROPERTY
        own = _int((table.iceberg.metadata.properties or {}).get(key))
    else:
        key = "noncurrent-days"
        own = table.options.get(key) if key in table.schema.options else None
    return _keep_more(settings.get("noncurrent-days"), own, "noncurrent-days", key, notes)


def _duration(settings: dict, key: str) -> timedelta | None:
    """A duration setting (text such as "30 d", or seconds) as the duration it is: jobs work on typed durations."""
    value = settings.get(key)
    return None if value is None else parse_duration(value, key)


def _plan(action: type[Action], table, arguments: dict, notes: list[str]) -> JobPlan:
    """The action with ``arguments``: typed values (durations) become their exact JSON form only here, where the
    action is made (:func:`json_value`), so no job formats a number for a parser to read back."""
    given = {key: json_value(value) for key, value in arguments.items() if value is not None}
    shown = {key: value for key, value in given.items() if key != "dry_run"}  # the report says dryRun itself
    return JobPlan(action.from_values(table.uri, given), shown, notes)


_PLANNERS: dict[str, Callable[[dict, Any, bool], JobPlan]] = {
    "consumer-expiry": _consumer_expiry,
    "tag-expiry": _tag_expiry,
    "periodic-tags": _periodic_tags,
    "data-compaction": _data_compaction,
    "manifest-rewrite": _manifest_rewrite,
    "data-expiry": _data_expiry,
    "snapshot-expiry": _snapshot_expiry,
    "clean": _clean,
    "orphan-file-removal": _orphan_file_removal,
    "purge": _no_settings(actions.Purge),
}
