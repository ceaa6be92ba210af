"""Periodic tags (Paimon's tag.automatic-creation by snapshot time).

Rules:
- Periods are aligned to the Unix epoch in UTC: days start at 00:00 UTC.
- The period ``[start, start + period)`` is complete once ``now - delay`` has
  reached its end. Its tag is named after its *start* (``2026-11-21`` holds the
  state at the end of 21 November) and points at the last snapshot committed
  before the end.
- Without ``catch_up`` only the latest complete period is tagged; with it every
  period since the newest periodic tag (or since the earliest snapshot) is.
- A period whose end state is no longer retained (its snapshots expired) is
  skipped and reported, never tagged with a later state.
- Only periodic tags count toward ``num_retained_max``; manual tags are never
  deleted by it, whatever their names.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_snaptable.core.errors import InvalidArgumentError, TagAlreadyExistsError
from airflow_snaptable.core.options import parse_duration
from airflow_snaptable.core.tags import PERIODIC, create_tag

if TYPE_CHECKING:
    from airflow_snaptable.core.table import Table

PERIODS = {"daily": timedelta(days=1), "hourly": timedelta(hours=1), "two-hours": timedelta(hours=2)}
FORMATTERS = ("with_dashes", "without_dashes", "without_dashes_and_spaces")


@dataclass
class PeriodicTagResult:
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # complete periods whose state is no longer retained

    def to_dict(self) -> dict:
        return asdict(self)


def tag_name(period_start_millis: int, period: timedelta, formatter: str) -> str:
    start = dt.datetime.fromtimestamp(period_start_millis / 1000, dt.timezone.utc)
    if period >= timedelta(days=1) and period % timedelta(days=1) == timedelta(0):
        pattern = {"with_dashes": "%Y-%m-%d", "without_dashes": "%Y%m%d", "without_dashes_and_spaces": "%Y%m%d"}
    elif period % timedelta(hours=1) == timedelta(0):
        pattern = {"with_dashes": "%Y-%m-%d %H", "without_dashes": "%Y%m%d %H", "without_dashes_and_spaces": "%Y%m%d%H"}
    else:
        pattern = {"with_dashes": "%Y-%m-%d %H:%M", "without_dashes": "%Y%m%d %H%M", "without_dashes_and_spaces": "%Y%m%d%H%M"}
    return start.strftime(pattern[formatter])


def _period(value) -> timedelta:
    if isinstance(value, str) and value in PERIODS:
        return PERIODS[value]
    if isinstance(value, timedelta):
        if value < timedelta(minutes=1) or value % timedelta(minutes=1):
            raise InvalidArgumentError(f"a custom period must be a whole number of minutes, got {value}")
        return value
    raise InvalidArgumentError(f"period must be one of {', '.join(PERIODS)} or a timedelta, got {value!r}")


def create_periodic_tags(
    table: "Table",
    period=None,
    delay=None,
    formatter: str | None = None,
    num_retained_max: int | None = None,
    catch_up: bool = False,
    time_retained=None,
    now=None,
) -> PeriodicTagResult:
    options = table.options
    period = period if period is not None else options.get("tag.creation-period")
    if period is None:
        raise InvalidArgumentError("no period: pass period= or set the table option tag.creation-period")
    step = _period(period)
    try:
        wait = parse_duration(delay, "delay") if delay is not None else options.get("tag.creation-delay")
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from exc
    if wait >= step:
        raise InvalidArgumentError(f"delay ({wait}) must be shorter than the period ({step})")
    formatter = formatter or options.get("tag.period-formatter")
    if formatter not in FORMATTERS:
        raise InvalidArgumentError(f"formatter must be one of {', '.join(FORMATTERS)}, got {formatter!r}")
    if num_retained_max is None:
        num_retained_max = options.get("tag.num-retained-max")
    elif isinstance(num_retained_max, bool) or not isinstance(num_retained_max, int) or num_retained_max < 1:
        raise InvalidArgumentError(f"num_retained_max must be an int >= 1, got {num_retained_max!r}")
    now_millis = table.clock() if now is None else table.to_millis(now)

    step_ms = int(step / timedelta(milliseconds=1))
    last_end = (now_millis - int(wait / timedelta(milliseconds=1))) // step_ms * step_ms  # end of the newest complete period
    result = PeriodicTagResult()
    earliest = table.earliest_snapshot()
    if earliest is None:
        return result

    existing = {t.name: t for t in table.tag_manager.tags()}
    periodic = [t for t in existing.values() if t.source == PERIODIC]
    if catch_up:
        # From the period after the newest periodic tag (so expired periods get reported as
        # skipped), or, with none yet, from the period of the earliest retained snapshot.
        newest = max((t.snapshot.time_millis for t in periodic), default=None)
        start = earliest.time_millis if newest is None else newest
        first_end = (start // step_ms + 1) * step_ms
        ends = range(first_end, last_end + 1, step_ms)
    else:
        ends = [last_end]

    for end in ends:
        name = tag_name(end - step_ms, step, formatter)
        if name in existing:
            continue
        snapshot = table.snapshot_manager.snapshot_at(end - 1)
        if snapshot is None:
            # Every retained snapshot came after this boundary. If earlier ones expired,
            # the state at the boundary is gone; if none ever existed, there is nothing to tag.
            if earliest.id > 1:
                result.skipped.append(name)
            continue
        try:
            create_tag(table, name, snapshot.id, time_retained, source=PERIODIC, now_millis=now_millis)
        except TagAlreadyExistsError:
            continue  # created concurrently: the same state
        result.created.append(name)

    if num_retained_max is not None:
        periodic = sorted((t for t in table.tag_manager.tags() if t.source == PERIODIC), key=lambda t: (t.snapshot.time_millis, t.name))
        for tag in periodic[: max(0, len(periodic) - num_retained_max)]:
            table.delete_tag(tag.name)
            result.deleted.append(tag.name)
    return result

