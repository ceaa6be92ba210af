"""Periodic tags (Paimon's tag.automatic-creation, by commit time or by watermark).

Rules:
- Periods are aligned to the Unix epoch in UTC: days start at 00:00 UTC.
- The period ``[start, start + period)`` is complete once ``now - delay`` has
  reached its end. Its tag is named after its *start* in the one pattern of the
  table's period and formatter (Paimon's TagPeriodHandler: ``2026-11-21`` holds
  the state at the end of 21 November) and points at the last snapshot committed
  before the end.
- Which tags are automatic: on our own tables, those that record being periodic.
  Where a tag records no source (Paimon's tag files, Iceberg's refs, tags our
  tables wrote before recording it), those whose whole name is the table's own
  pattern (:class:`PeriodNaming`) and names a complete period. A name in another
  pattern ("20200101" on a daily ``with_dashes`` table) or of a period not over
  yet ("20991231") is a manual tag: periodic tagging never made it.
- Without ``catch_up`` only the latest complete period is tagged; with it every
  period after the newest automatic tag's (or from the earliest snapshot's) is.
  The newest automatic tag is the one naming the latest complete period: its
  name is read back to its period start (Paimon's TagAutoCreation does the
  same); its snapshot's time says nothing, as an idle table's tags hold
  snapshots from earlier periods. A tag naming a period not over yet never
  moves the start (one named "20991231" would stop periodic tagging until 2100).
- ``time_source="watermark"`` (option ``tag.automatic-creation = watermark``) judges periods by
  the snapshots' watermarks (event time) instead: "now" is the latest snapshot's watermark, a
  period is complete once it passed the period's end plus the delay, and its tag holds the
  last snapshot whose watermark is below the end. Watermarks never go backwards, so this is a
  search like the time one. Snapshots without a watermark are before any period.
- A period whose end state is no longer retained (its snapshots expired) is
  skipped and reported, never tagged with a later state.
- Only automatic tags count toward ``num_retained_max``, oldest period deleted
  first; manual tags are never deleted by it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Callable

from airflow_snaptable.core.arguments.checks import check_bool, check_int
from airflow_snaptable.core.errors import InvalidArgumentError, TagAlreadyExistsError, UnsupportedOperationError
from airflow_snaptable.core.arguments.table_options import TableOptions
from airflow_snaptable.core.lifecycle.store import TableStore
from airflow_snaptable.core.lifecycle.tags import TagLifecycle
from airflow_snaptable.core.native.tags import MANUAL, PERIODIC, UNRECORDED, Tag
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


#: Paimon's TagPeriodHandler: the one name pattern of a period's automatic tags, by period and formatter.
#: Daily tags have no hour, so two formatters give one pattern; "two-hours" and a period duration
#: (option ``tag.creation-period-duration``, or a timedelta) ignore the formatter.
_PERIOD_PATTERNS = {
    "daily": {"with_dashes": "%Y-%m-%d", "without_dashes": "%Y%m%d", "without_dashes_and_spaces": "%Y%m%d"},
    "hourly": {"with_dashes": "%Y-%m-%d %H", "without_dashes": "%Y%m%d %H", "without_dashes_and_spaces": "%Y%m%d%H"},
    "two-hours": dict.fromkeys(FORMATTERS, "%Y-%m-%d %H"),
}
_DURATION_PATTERN = "%Y%m%d%H%M"
#: Every pattern a periodic tag's name has had here, including the minute patterns of earlier versions
#: ("2026-11-21 13:30", "20261121 1330"). Only for tags that record being periodic (our own tables):
#: their period start, whatever period and formatter made them. No name fits two of them (with 4-digit
#: years their lengths and separators differ).
_RECORDED_PATTERNS = sorted(
    {p for patterns in _PERIOD_PATTERNS.values() for p in patterns.values()}
    | {_DURATION_PATTERN, "%Y-%m-%d %H:%M", "%Y%m%d %H%M"}
)


def _parse_exactly(name: str, pattern: str) -> int | None:
    """The epoch millis (UTC) ``name`` spells in ``pattern``, only if formatting them gives ``name`` back."""
    try:
        start = dt.datetime.strptime(name, pattern).replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None
    return int(start.timestamp() * 1000) if start.strftime(pattern) == name else None


@dataclass(frozen=True)
class PeriodNaming:
    """The period of a table's automatic tags and the one pattern of their names (Paimon's TagPeriodHandler).

    A tag that records no source (Paimon's tags, Iceberg's refs, a tag file of ours without one) is
    automatic only if its whole name is this pattern, naming a period start on
    this period's boundaries: "20200101" or "2020-01-01 05" on a daily ``with_dashes`` table is
    someone's manual tag. Paimon itself is laxer (its daily handler drops what follows a space, its
    parsers are lenient); being stricter only keeps more tags.
    """

    step: timedelta
    pattern: str

    @classmethod
    def of(cls, period, formatter: str) -> "PeriodNaming":
        """``period``: "daily", "hourly", "two-hours", or a duration (a timedelta: Paimon's ``tag.creation-period-duration``)."""
        if formatter not in FORMATTERS:
            raise InvalidArgumentError(f"formatter must be one of {', '.join(FORMATTERS)}, got {formatter!r}")
        if isinstance(period, str) and period in PERIODS:
            return cls(PERIODS[period], _PERIOD_PATTERNS[period][formatter])
        if isinstance(period, timedelta):
            if period < timedelta(minutes=1) or period % timedelta(minutes=1):
                raise InvalidArgumentError(f"a period duration must be a whole number of minutes, got {period}")
            return cls(period, _DURATION_PATTERN)
        raise InvalidArgumentError(f"period must be one of {', '.join(PERIODS)} or a timedelta, got {period!r}")

    @property
    def step_millis(self) -> int:
        return millis(self.step)

    def name(self, period_start_millis: int) -> str:
        return dt.datetime.fromtimestamp(period_start_millis / 1000, dt.timezone.utc).strftime(self.pattern)

    def start_of(self, name: str) -> int | None:
        """The start of the period ``name`` names in this pattern, or None: not exactly this pattern, or off the period's boundaries."""
        start = _parse_exactly(name, self.pattern)
        return start if start is not None and start % self.step_millis == 0 else None


def tag_name(period_start_millis: int, period, formatter: str) -> str:
    """The name of the automatic tag of the period starting at ``period_start_millis``."""
    return PeriodNaming.of(period, formatter).name(period_start_millis)


def period_start_of(name: str) -> int | None:
    """The period start a periodic tag's name gives, in any pattern a periodic tag has had here, or None.

    For tags that record being periodic (Paimon's ``TagPeriodHandler.tagToTime``, for any period and
    formatter, including earlier versions' names); only an exact round trip counts, so
    "2026-11-21x" or "20261121 1" are not read as periods. Whether a tag that records no source is
    automatic is :meth:`PeriodNaming.start_of`'s question, never this one's.
    """
    for pattern in _RECORDED_PATTERNS:
        start = _parse_exactly(name, pattern)
        if start is not None:
            return start
    return None


@dataclass(frozen=True)
class AutomaticTags:
    """Which tags periodic tagging made, by the table's rules at one time (the module rules)."""

    naming: PeriodNaming
    #: The end of the newest complete period: a name of a later period is no automatic tag's.
    complete_until: int

    def period_start(self, tag: Tag) -> int | None:
        """The period an automatic tag names (None: not an automatic tag)."""
        if tag.source == PERIODIC:
            return period_start_of(tag.name)
        if tag.source != UNRECORDED:
            return None
        start = self.naming.start_of(tag.name)
        if start is None or start + self.naming.step_millis > self.complete_until:
            return None  # another pattern, or a period not over yet: periodic tagging never made it
        return start

    def is_automatic(self, tag: Tag) -> bool:
        return tag.source == PERIODIC or self.period_start(tag) is not None

    def key(self, tag: Tag) -> tuple:
        """Orders automatic tags by the period they name (a recorded one naming none: by its snapshot's time)."""
        start = self.period_start(tag)
        return (tag.snapshot.time_millis if start is None else start, tag.name)

    def newest_start(self, tags) -> int | None:
        """The latest complete period an automatic tag names: where catch-up resumes (None: no such tag)."""
        starts = (self.key(t)[0] for t in tags if self.is_automatic(t))
        return max((s for s in starts if s + self.naming.step_millis <= self.complete_until), default=None)

    def resolve(self, tag: Tag) -> Tag:
        """``tag`` with its source told (periodic or manual) where it records none."""
        if tag.source != UNRECORDED:
            return tag
        return dataclasses.replace(tag, source=PERIODIC if self.is_automatic(tag) else MANUAL)


def table_naming(options: TableOptions) -> PeriodNaming:
    """The naming of the table's automatic tags, by its options and Paimon's defaults (daily, with dashes)."""
    period = options.get("tag.creation-period-duration") or options.get("tag.creation-period") or "daily"
    return PeriodNaming.of(period, options.get("tag.period-formatter"))


def resolve_sources(tags: list[Tag], options: TableOptions, now_millis: int) -> list[Tag]:
    """Tags as shown to users: one that records no source is periodic when it is one of the automatic
    tags of the table's options at ``now_millis`` (Paimon's TagPeriodHandler with the table's options), else manual."""
    naming = table_naming(options)
    delay = millis(options.get("tag.creation-delay"))
    rules = AutomaticTags(naming, (now_millis - delay) // naming.step_millis * naming.step_millis)
    return [rules.resolve(t) for t in tags]


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

        ``period``: "daily", "hourly", "two-hours" or a timedelta (a period duration); defaults come from the
        options ``tag.creation-period-duration`` (before ``tag.creation-period``, as in Paimon),
        ``tag.creation-delay``, ``tag.period-formatter`` and ``tag.num-retained-max``.
        """
        check_bool(catch_up, "catch_up")
        options = self.options
        if period is None:
            period = options.get("tag.creation-period-duration") or options.get("tag.creation-period")
        if period is None:
            raise InvalidArgumentError("no period: pass period= or set the table option tag.creation-period")
        naming = PeriodNaming.of(period, formatter or options.get("tag.period-formatter"))
        wait = duration_argument(delay, "delay") if delay is not None else options.get("tag.creation-delay")
        if wait >= naming.step:
            raise InvalidArgumentError(f"delay ({wait}) must be shorter than the period ({naming.step})")
        if num_retained_max is None:
            num_retained_max = options.get("tag.num-retained-max")
        else:
            check_int(num_retained_max, "num_retained_max", minimum=1)
        now_millis = self.clock() if now is None else to_millis(now)
        source = time_source if time_source is not None else options.get("tag.automatic-creation")
        source = PROCESS_TIME if source in ("none", "batch") else source  # Paimon's other modes: ours is a call
        if source not in TIME_SOURCES:
            raise InvalidArgumentError(f"time_source must be one of {', '.join(TIME_SOURCES)}, got {source!r}")

        step_ms = naming.step_millis
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
        automatic = AutomaticTags(naming, last_end)

        existing = {t.name: t for t in self.store.tags.tags()}
        if catch_up:
            # From the period after the newest automatic tag (so expired periods get reported as
            # skipped), or, with none yet, from the period of the earliest retained snapshot.
            # "Newest" is the period the tag names, not its snapshot's time: a tag on an idle table
            # holds a snapshot from periods before its own, and starting there re-tagged periods
            # older than it (and ones num_retained_max had pruned). Only complete periods count: a
            # tag naming a later one (a manual "20991231", or a run given a future ``now``) would
            # stop every period before it from being tagged.
            newest = automatic.newest_start(existing.values())
            if newest is None:
                first_end = (first_millis // step_ms + 1) * step_ms
            else:
                first_end = (newest // step_ms + 1) * step_ms + step_ms  # the first period starting after the newest's start
            ends = range(first_end, last_end + 1, step_ms)
        else:
            ends = [last_end]

        for end in ends:
            name = naming.name(end - step_ms)
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
            periodic = sorted((t for t in self.store.tags.tags() if automatic.is_automatic(t)), key=automatic.key)
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
