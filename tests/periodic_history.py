"""Seeded random periodic-tag histories and an oracle of the periodic rules, for any table format.

The oracle is written from the rules (docs/lifecycle.md, Paimon's TagPeriodHandler and
TagAutoCreation), not from core/lifecycle/periodic_tags.py: it knows who made each tag (a run or a person), where
the code has to tell automatic tags by their names (Paimon and Iceberg record no source). Each
history is one table: commits at random times, manual tags named in every pattern but the table's
own (and in its own pattern for periods far in the future), then runs at growing times, with or
without catch-up, each followed now and then by a snapshot expiry. After every run the tags must be
exactly the oracle's: manual tags never deleted, automatic ones created as the rules say and pruned
to ``tag.num-retained-max``, oldest period first.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field

H = 3_600_000
MINUTE = 60_000
FORMATTERS = ("with_dashes", "without_dashes", "without_dashes_and_spaces")
#: (option tag.creation-period, or a duration in minutes for tag.creation-period-duration) -> step in millis.
PERIODS = {"daily": 24 * H, "hourly": H, "two-hours": 2 * H, 30: 30 * MINUTE, 90: 90 * MINUTE}

#: Paimon's TagPeriodHandler formats (Java patterns in strftime), by period and formatter.
_JAVA_PATTERNS = {
    ("daily", "with_dashes"): "%Y-%m-%d", ("daily", "without_dashes"): "%Y%m%d",
    ("daily", "without_dashes_and_spaces"): "%Y%m%d",
    ("hourly", "with_dashes"): "%Y-%m-%d %H", ("hourly", "without_dashes"): "%Y%m%d %H",
    ("hourly", "without_dashes_and_spaces"): "%Y%m%d%H",
}
#: Every pattern a tag name can be read in: Paimon's, and the minute names earlier versions of this package wrote.
ALL_PATTERNS = sorted(set(_JAVA_PATTERNS.values()) | {"%Y%m%d%H%M", "%Y-%m-%d %H:%M", "%Y%m%d %H%M"})


def pattern_of(period, formatter: str) -> str:
    """The one name pattern of a table's automatic tags: two-hours and period durations ignore the formatter."""
    if period == "two-hours":
        return "%Y-%m-%d %H"
    if isinstance(period, int):
        return "%Y%m%d%H%M"
    return _JAVA_PATTERNS[(period, formatter)]


def spell(millis: int, pattern: str) -> str:
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).strftime(pattern)


def table_options(period, formatter: str, retained_max: int, delay_millis: int) -> dict[str, str]:
    options = {"tag.period-formatter": formatter, "tag.num-retained-max": str(retained_max)}
    if isinstance(period, int):
        options["tag.creation-period-duration"] = f"{period} min"
    else:
        options["tag.creation-period"] = period
    if delay_millis:
        options["tag.creation-delay"] = f"{delay_millis // 1000} s"
    return options


@dataclass
class Run:
    now: int
    catch_up: bool
    #: Expire down to this many newest snapshots after the run (None: no expiry).
    expire_to: int | None


@dataclass
class History:
    """One random table history (times in epoch millis)."""

    period: object
    formatter: str
    retained_max: int
    delay: int
    commits: list[int]
    #: Manual tags created before the first run: name -> snapshot id (1-based).
    manual: dict[str, int]
    #: Manual tags created between runs: run index -> {name: snapshot id}.
    manual_later: dict[int, dict[str, int]]
    runs: list[Run]

    @property
    def step(self) -> int:
        return PERIODS[self.period]

    @property
    def pattern(self) -> str:
        return pattern_of(self.period, self.formatter)

    def options(self) -> dict[str, str]:
        return table_options(self.period, self.formatter, self.retained_max, self.delay)


def random_history(rng: random.Random, period, formatter: str, *, commits: int = 9, runs: int = 7) -> History:
    step = PERIODS[period]
    start = dt.datetime(2024, 3, 10, tzinfo=dt.timezone.utc).timestamp() * 1000
    t = int(start) + rng.randrange(0, 3 * step) // 1000 * 1000
    times = []
    for _ in range(commits):
        times.append(t)
        t += rng.choice([1000, step // 7, step // 2, step, 2 * step + step // 3, 3 * step])
    delay = rng.choice([0, 0, step // 4 // 1000 * 1000])
    retained_max = rng.randint(1, 4)
    own = pattern_of(period, formatter)

    def manual_names(count: int) -> list[str]:
        """Names in every other pattern, of times inside the history, plus the table's own pattern far ahead."""
        names = []
        for pattern in ALL_PATTERNS:
            if pattern != own:
                names.append(spell(rng.randrange(times[0], times[-1] + 2 * step) // step * step, pattern))
        for _ in range(count):
            names.append(spell(rng.randrange(4_000_000_000_000, 4_102_444_800_000) // step * step, own))  # 2096..2099
        if period == "two-hours" or isinstance(period, int):
            # The table's pattern off the period's boundaries (an odd hour of a two-hour table): no run makes it.
            names.append(spell(times[0] // step * step + (H if period == "two-hours" else 10 * MINUTE), own))
        names.append(rng.choice(["release", "savepoint-11", "v1.0"]))
        return sorted(set(names))

    manual = {name: rng.randint(1, commits) for name in manual_names(2)}
    later_names = [n for n in manual_names(1) if n not in manual]
    schedule = []
    now = times[0] - rng.randrange(0, step)
    for _ in range(runs):
        now += rng.choice([step // 3, step, 2 * step, 3 * step + step // 2, 5 * step])
        schedule.append(Run(now, rng.random() < 0.6, rng.choice([None, None, None, rng.randint(1, 4)])))
    manual_later: dict[int, dict[str, int]] = {}
    for name in later_names:
        manual_later.setdefault(rng.randrange(1, runs), {})[name] = rng.randint(1, commits)
    return History(period, formatter, retained_max, delay, times, manual, manual_later, schedule)


@dataclass
class Oracle:
    """What the rules say the tags are: name -> (snapshot id, made by a run)."""

    history: History
    tags: dict[str, tuple[int, bool]] = field(default_factory=dict)
    earliest: int = 1  # the earliest retained snapshot id

    def add_manual(self, tags: dict[str, int]) -> None:
        for name, snapshot_id in tags.items():
            self.tags[name] = (snapshot_id, False)

    def run(self, run: Run) -> tuple[list[str], list[str], list[str]]:
        """(created, deleted, skipped) of one periodic run at ``run.now``."""
        h, step = self.history, self.history.step
        last_end = (run.now - h.delay) // step * step
        starts = {name: self._start(name) for name, (_, auto) in self.tags.items() if auto}
        times = h.commits
        if run.catch_up:
            if starts:
                first_end = max(starts.values()) + 2 * step
            else:
                first_end = (times[self.earliest - 1] // step + 1) * step
            ends = list(range(first_end, last_end + 1, step))
        else:
            ends = [last_end]
        created, skipped = [], []
        for end in ends:
            name = spell(end - step, h.pattern)
            if name in self.tags:
                continue
            before_end = [i for i in range(self.earliest, len(times) + 1) if times[i - 1] <= end - 1]
            if not before_end:
                if self.earliest > 1:
                    skipped.append(name)
                continue
            self.tags[name] = (before_end[-1], True)
            created.append(name)
        automatic = sorted((self._start(n), n) for n, (_, auto) in self.tags.items() if auto)
        deleted = [n for _, n in automatic[: max(0, len(automatic) - h.retained_max)]]
        for name in deleted:
            del self.tags[name]
        if run.expire_to is not None:
            self.earliest = max(self.earliest, len(times) - run.expire_to + 1)
        return created, deleted, skipped

    def _start(self, name: str) -> int:
        return int(dt.datetime.strptime(name, self.history.pattern).replace(tzinfo=dt.timezone.utc).timestamp() * 1000)

    def snapshot_ids(self) -> dict[str, int]:
        return {name: snapshot_id for name, (snapshot_id, _) in self.tags.items()}

    def manual(self) -> dict[str, int]:
        return {name: snapshot_id for name, (snapshot_id, auto) in self.tags.items() if not auto}


def combinations() -> list[tuple[object, str]]:
    return [(period, formatter) for period in PERIODS for formatter in FORMATTERS]
