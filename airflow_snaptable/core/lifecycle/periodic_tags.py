"""Periodic tags (Paimon's tag.automatic-creation, by commit time or by watermark).

Rules:
- Periods are aligned to the Unix epoch in UTC: days start at 00:00 UTC.
- The period ``[start, start + period)`` is complete once ``now - delay`` has
  reached its end. Its tag is named after its *start* (``2026-11-21`` holds the
  state at the end of 21 November) and points at the last snapshot committed
  before the end.
- Without ``catch_up`` only the latest complete period is tagged; with it every
  period after the newest periodic tag's (or from the earliest snapshot's) is.
  The newest periodic tag is the one naming the latest period: its name is read
  back to its period start (Paimon's TagAutoCreation does the same), whatever
  period and formatter made it; its snapshot's time says nothing, as an idle
  table's tags hold snapshots from earlier periods.
- ``time_source="watermark"`` (option ``tag.automatic-creation = watermark``) judges periods by
  the snapshots' watermarks (event time) instead: "now" is the latest snapshot's watermark, a
  period is complete once it passed the period's end plus the delay, and its tag holds the
  last snapshot whose watermark is below the end. Watermarks never go backwards, so this is a
  search like the time one. Snapshots without a watermark are before any period.
- A period whose end state is no longer retained (its snapshots expired) is
  skipped and reported, never tagged with a later state.
- Only periodic tags count toward ``num_retained_max``, oldest period deleted
  first; manual tags are never deleted by it, whatever their names.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Callable

from airflow_snaptable.core.arguments.checks import check_bool, check_int
from airflow_snaptable.core.errors import InvalidArgumentError, TagAlreadyExistsError, UnsupportedOperationError
from airflow_snaptable.core.arguments.table_options import TableOptions
from airflow_snaptable.core.lifecycle.store import TableStore
from airflow_snaptable.core.lifecycle.tags import TagLifecycle
from airflow_snaptable.core.native.tags import PERIODIC
from airflow_snaptable.core.arguments.times import duration_argument, millis, to_millis

PERIODS = {"daily": timedelta(days=1), "hourly": timedelta(hours=1), "two-hours": timedelta(hours=2)}
PROCESS_TIME = "process-time"
WATERMARK = "watermark"
TIME_SOURCES = (PROCESS_TIME, WATERMARK)
FORMATTERS = ("with_dashes", "without_dashes", "without_dashes_and_spaces")


@dataclass
class PeriodicTagResult:
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # complete periods whose state is no longer retained

    def to_dict(self) -> dict:
        return asdict(self)


_DAY_PATTERNS = {"with_dashes": "%Y-%m-%d", "without_dashes": "%Y%m%d", "without_dashes_and_spaces": "%Y%m%d"}
_HOUR_PATTERNS = {"with_dashes": "%Y-%m-%d %H", "without_dashes": "%Y%m%d %H", "without_dashes_and_spaces": "%Y%m%d%H"}
_MINUTE_PATTERNS = {"with_dashes": "%Y-%m-%d %H:%M", "without_dashes": "%Y%m%d %H%M", "without_dashes_and_spaces": "%Y%m%d%H%M"}
#: Every pattern a name can have. No name fits two of them (with 4-digit years their lengths and
#: separators differ), so a periodic tag's name gives its period start whatever period and formatter made it.
_ALL_PATTERNS = sorted({p for patterns in (_DAY_PATTERNS, _HOUR_PATTERNS, _MINUTE_PATTERNS) for p in patterns.values()})


def tag_name(period_start_millis: int, period: timedelta, formatter: str) -> str:
    start = dt.datetime.fromtimestamp(period_start_millis / 1000, dt.timezone.utc)
    if period >= timedelta(days=1) and period % timedelta(days=1) == timedelta(0):
        pattern = _DAY_PATTERNS
    elif period % timedelta(hours=1) == timedelta(0):
        pattern = _HOUR_PATTERNS
    else:
        pattern = _MINUTE_PATTERNS
    return start.strftime(pattern[formatter])


def period_start_of(name: str) -> int | None:
    """The start (epoch millis, UTC) of the period a periodic tag's name names, or None for another name.

    The inverse of :func:`tag_name` for every period and formatter (Paimon's
    ``TagPeriodHandler.tagToTime``); only an exact round trip counts, so "2026-11-21x" or
    "20261121 1" are not read as periods.
    """
    for pattern in _ALL_PATTERNS:
        try:
            start = dt.datetime.strptime(name, pattern).replace(tzinfo=dt.timezone.utc)
        except ValueError:
            continue
        if start.strftime(pattern) == name:
            return int(start.timestamp() * 1000)
    return None


def _period_key(tag) -> tuple:
    """Orders periodic tags by the period they name (a name that names none: by its snapshot's time)."""
    start = period_start_of(tag.name)
    return (tag.snapshot.time_millis if start is None else start, tag.name)


def _period(value) -> timedelta:
    if isinstance(value, str) and value in PERIODS:
        return PERIODS[value]
    if isinstance(value, timedelta):
        if value < timedelta(minutes=1) or value % timedelta(minutes=1):
            raise InvalidArgumentError(f"a custom period must be a whole number of minutes, got {value}")
        return value
    raise InvalidArgumentError(f"period must be one of {', '.join(PERIODS)} or a timedelta, got {value!r}")


class PeriodicTagging:
    """Periodic tags of one table, created through its tag lifecycle (core/lifecycle/tags.py)."""

    def __init__(self, store: TableStore, tagging: TagLifecycle, options: TableOptions, clock: Callable[[], int]):
        self.store = store
        self.tagging = tagging
        self.options = options
        self.clock = clock

    def create(
        self,
        period=None,
        *,
        delay=None,
        formatter: str | None = None,
        num_retained_max: int | None = None,
        catch_up: bool = False,
        time_retained=None,
        now=None,
        time_source: str | None = None,
    ) -> PeriodicTagResult:
        """Tag the state at the end of each elapsed period (see the module rules); unset arguments come from the options.

        ``period``: "daily", "hourly", "two-hours" or a timedelta; defaults come from the options
        ``tag.creation-period``, ``tag.creation-delay``, ``tag.period-formatter`` and ``tag.num-retained-max``.
        """
        check_bool(catch_up, "catch_up")
        options = self.options
        period = period if period is not None else options.get("tag.creation-period")
        if period is None:
            raise InvalidArgumentError("no period: pass period= or set the table option tag.creation-period")
        step = _period(period)
        wait = duration_argument(delay, "delay") if delay is not None else options.get("tag.creation-delay")
        if wait >= step:
            raise InvalidArgumentError(f"delay ({wait}) must be shorter than the period ({step})")
        formatter = formatter or options.get("tag.period-formatter")
        if formatter not in FORMATTERS:
            raise InvalidArgumentError(f"formatter must be one of {', '.join(FORMATTERS)}, got {formatter!r}")
        if num_retained_max is None:
            num_retained_max = options.get("tag.num-retained-max")
        else:
            check_int(num_retained_max, "num_retained_max", minimum=1)
        now_millis = self.clock() if now is None else to_millis(now)
        source = time_source if time_source is not None else options.get("tag.automatic-creation")
        source = PROCESS_TIME if source in ("none", "batch") else source  # Paimon's other modes: ours is a call
        if source not in TIME_SOURCES:
            raise InvalidArgumentError(f"time_source must be one of {', '.join(TIME_SOURCES)}, got {source!r}")

        step_ms = millis(step)
        result = PeriodicTagResult()
        earliest = self.store.snapshots.earliest_snapshot()
        if earliest is None:
            return result
        by_watermark = source == WATERMARK
        if by_watermark:
            latest = self.store.snapshots.latest_snapshot()
            first_marked = self._first_with_watermark()
            if latest is None or latest.watermark is None or first_marked is None:
                return result  # no watermark yet: no period of event time has ended
            clock_millis, first_millis = latest.watermark, first_marked.watermark
        else:
            clock_millis, first_millis = now_millis, earliest.time_millis
        last_end = (clock_millis - millis(wait)) // step_ms * step_ms  # end of the newest complete period

        existing = {t.name: t for t in self.store.tags.tags()}
        periodic = [t for t in existing.values() if t.source == PERIODIC]
        if catch_up:
            # From the period after the newest periodic tag (so expired periods get reported as
            # skipped), or, with none yet, from the period of the earliest retained snapshot.
            # "Newest" is the period the tag names, not its snapshot's time: a tag on an idle table
            # holds a snapshot from periods before its own, and starting there re-tagged periods
            # older than it (and ones num_retained_max had pruned).
            newest = max((_period_key(t)[0] for t in periodic), default=None)
            if newest is None:
                first_end = (first_millis // step_ms + 1) * step_ms
            else:
                first_end = (newest // step_ms + 1) * step_ms + step_ms  # the first period starting after the newest's start
            ends = range(first_end, last_end + 1, step_ms)
        else:
            ends = [last_end]

        for end in ends:
            name = tag_name(end - step_ms, step, formatter)
            if name in existing:
                continue
            snapshot = self._state_at(end, earliest.id) if by_watermark else self.store.snapshots.snapshot_at(end - 1)
            if snapshot is None:
                # Every retained snapshot came after this boundary. If earlier ones expired,
                # the state at the boundary is gone; if none ever existed, there is nothing to tag.
                if earliest.parent_id is not None:
                    result.skipped.append(name)
                continue
            try:
                self.tagging.create(name, snapshot.id, time_retained, source=PERIODIC, now_millis=now_millis)
            except TagAlreadyExistsError:
                continue  # created concurrently: the same state
            result.created.append(name)

        if num_retained_max is not None:
            # The oldest periods go first. By period, not by snapshot: tags of periods on an idle table
            # share a snapshot, and their names sort by spelling, not time, across formatters.
            periodic = sorted((t for t in self.store.tags.tags() if t.source == PERIODIC), key=_period_key)
            for tag in periodic[: max(0, len(periodic) - num_retained_max)]:
                self.tagging.delete(tag.name)
                result.deleted.append(tag.name)
        return result

    def _first_with_watermark(self):
        return self._snapshot_at_watermark(-(2**62))

    def _state_at(self, end_watermark: int, earliest_id: int):
        """The last snapshot whose watermark is below ``end_watermark`` (None if it expired or never was)."""
        first_past = self._snapshot_at_watermark(end_watermark)
        if first_past is None or first_past.id - 1 < earliest_id:
            return None
        return self.store.snapshots.snapshot(first_past.id - 1)

    def _snapshot_at_watermark(self, watermark: int):
        search = getattr(self.store.snapshots, "snapshot_at_watermark", None)
        if search is None:
            raise UnsupportedOperationError("periodic tags by watermark need snapshots that record watermarks")
        return search(watermark)
