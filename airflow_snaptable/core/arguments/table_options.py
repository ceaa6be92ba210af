"""Table options: Paimon-style keys, validated when the table is created.

Unknown keys and unparsable values are errors at ``Table.create`` time, never
silently ignored later (a typo in ``snapshot.num-retained.min`` would otherwise
mean "keep the default" without anyone noticing).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from typing import Any, Callable, Mapping

from airflow_snaptable.core.errors import InvalidOptionError

_DURATION_UNITS = {
    "ms": 0.001, "milli": 0.001, "millis": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "min": 60, "mins": 60, "minute": 60, "minutes": 60, "m": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}
_SIZE_UNITS = {"b": 1, "kb": 1024, "k": 1024, "mb": 1024**2, "m": 1024**2, "gb": 1024**3, "g": 1024**3}
_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
#: A duration's number may also be written with an exponent (``2.592e+06 s``): text some callers wrote.
_DURATION_TEXT = re.compile(r"^\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*([a-zA-Z]*)\s*$")
_MICROS = timedelta(microseconds=1)
_MAX_SECONDS = timedelta.max.total_seconds()


def parse_duration(value: Any, key: str = "duration") -> timedelta:
    """Parse ``"1 h"``, ``"30min"``, ``"7 d"``, ``"100 ms"``, a timedelta, or seconds as a number.

    Text is read exactly (decimal, to the microsecond a timedelta holds), so that
    :func:`duration_text` and this are inverses: a duration written as text reads back the same.
    """
    if isinstance(value, timedelta):
        result = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):  # timedelta(seconds=nan) raises a bare ValueError
            raise InvalidOptionError(f"{key}: duration must be a finite number of seconds, got {value!r}")
        try:
            result = timedelta(seconds=value)
        except OverflowError:
            raise InvalidOptionError(f"{key}: duration {value!r} is too large") from None
    elif isinstance(value, str):
        match = _DURATION_TEXT.match(value)
        unit = match.group(2).lower() if match else None
        if not match or (unit and unit not in _DURATION_UNITS):
            raise InvalidOptionError(f"{key}: cannot parse duration {value!r} (examples: '1 h', '30 min', '7 d')")
        scale = _DURATION_UNITS[unit or "s"]
        approximate = float(match.group(1)) * scale  # first: an exponent must not make a huge exact number
        if approximate > _MAX_SECONDS:
            raise InvalidOptionError(f"{key}: duration {value!r} is too large")
        micros = 0 if approximate < 1e-7 else round(Fraction(match.group(1)) * Fraction(str(scale)) * 1_000_000)
        try:
            result = timedelta(microseconds=micros)
        except OverflowError:
            raise InvalidOptionError(f"{key}: duration {value!r} is too large") from None
    else:
        raise InvalidOptionError(f"{key}: expected a duration, got {type(value).__name__}")
    if result < timedelta(0):
        raise InvalidOptionError(f"{key}: duration must not be negative, got {value!r}")
    return result


#: The units :func:`duration_text` writes, largest first, in microseconds.
_TEXT_UNITS = (("d", 86_400_000_000), ("h", 3_600_000_000), ("min", 60_000_000), ("s", 1_000_000), ("ms", 1000))


def duration_text(duration: timedelta) -> str:
    """``duration`` as exact text that :func:`parse_duration` reads back to it: in the largest unit that
    holds it whole (``30 d``, ``36 h``, ``90 s``, ``1500 ms``), else seconds to the microsecond (``0.000250 s``).

    Never a float's ``%g`` form: ``2.592e+06 s`` lost digits, and the parser refused it.
    """
    if not isinstance(duration, timedelta):
        raise InvalidOptionError(f"expected a timedelta, got {type(duration).__name__}")
    micros = duration // _MICROS
    sign, micros = ("-", -micros) if micros < 0 else ("", micros)
    if micros == 0:
        return "0 s"
    for unit, size in _TEXT_UNITS:
        if micros % size == 0:
            return f"{sign}{micros // size} {unit}"
    seconds, rest = divmod(micros, 1_000_000)
    return f"{sign}{seconds}.{rest:06d} s"


def parse_size(value: Any, key: str = "size") -> int:
    """Parse ``"8 mb"``, ``"128MB"``, ``"64kb"`` or a byte count."""
    if isinstance(value, int) and not isinstance(value, bool):
        result = value
    elif isinstance(value, str):
        match = _NUMBER_UNIT.match(value)
        unit = match.group(2).lower() if match else None
        if not match or (unit and unit not in _SIZE_UNITS):
            raise InvalidOptionError(f"{key}: cannot parse size {value!r} (examples: '8 mb', '128 mb')")
        result = int(float(match.group(1)) * _SIZE_UNITS[unit or "b"])
    else:
        raise InvalidOptionError(f"{key}: expected a size, got {type(value).__name__}")
    if result <= 0:
        raise InvalidOptionError(f"{key}: size must be positive, got {value!r}")
    return result


def _positive_int(value: Any, key: str) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        result = int(str(value).strip())
    except ValueError:
        raise InvalidOptionError(f"{key}: expected a positive integer, got {value!r}") from None
    if result < 1:
        raise InvalidOptionError(f"{key}: must be >= 1, got {value!r}")
    return result


def _non_negative_int(value: Any, key: str) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        result = int(str(value).strip())
    except ValueError:
        raise InvalidOptionError(f"{key}: expected a whole number of days >= 0, got {value!r}") from None
    if result < 0:
        raise InvalidOptionError(f"{key}: must be >= 0, got {value!r}")
    return result


def _period_duration(value: Any, key: str) -> timedelta:
    """Paimon's ``tag.creation-period-duration``: whole minutes, the resolution of its tag names (yyyyMMddHHmm)."""
    result = parse_duration(value, key)
    if result < timedelta(minutes=1) or result % timedelta(minutes=1):
        raise InvalidOptionError(f"{key}: must be a whole number of minutes, got {value!r}")
    return result


def _choice(*allowed: str) -> Callable[[Any, str], str]:
    def parse(value: Any, key: str) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise InvalidOptionError(f"{key}: must be one of {', '.join(allowed)}; got {value!r}")
        return text

    return parse


@dataclass(frozen=True)
class OptionSpec:
    key: str
    parse: Callable[[Any, str], Any]
    default: Any
    doc: str


_SPECS = [
    OptionSpec("snapshot.num-retained.min", _positive_int, 10, "Newest snapshots always kept by expiry."),
    OptionSpec("snapshot.num-retained.max", _positive_int, None, "Snapshots beyond this count expire regardless of age."),
    OptionSpec("snapshot.time-retained", parse_duration, timedelta(hours=1), "Snapshots younger than this are kept."),
    OptionSpec("snapshot.expire.limit", _positive_int, 50, "Most snapshots one expiry run removes."),
    OptionSpec("consumer.expiration-time", parse_duration, None, "Consumers not updated for this long are removed."),
    OptionSpec(
        "tag.automatic-creation", _choice("none", "process-time", "watermark", "batch"), "process-time",
        "What periodic tags judge periods by: commit time (process-time) or the snapshots' watermark.",
    ),
    OptionSpec("tag.creation-period", _choice("daily", "hourly", "two-hours"), None, "Period of automatic tags."),
    OptionSpec(
        "tag.creation-period-duration", _period_duration, None,
        "Period of automatic tags as a duration (whole minutes; named yyyyMMddHHmm); wins over tag.creation-period.",
    ),
    OptionSpec("tag.creation-delay", parse_duration, timedelta(0), "Wait after a period ends before tagging it."),
    OptionSpec(
        "tag.period-formatter",
        _choice("with_dashes", "without_dashes", "without_dashes_and_spaces"),
        "with_dashes",
        "Name format of automatic tags.",
    ),
    OptionSpec("tag.num-retained-max", _positive_int, None, "Most automatic tags kept."),
    OptionSpec("tag.default-time-retained", parse_duration, None, "Default time-to-live of new tags."),
    OptionSpec("target-file-size", parse_size, 128 * 1024**2, "Target size of data files written and compacted."),
    OptionSpec("compaction.min.file-num", _positive_int, 5, "Small files in a partition before compaction rewrites them."),
    OptionSpec("manifest.target-file-size", parse_size, 8 * 1024**2, "Manifests smaller than this are merged."),
    OptionSpec("manifest.merge-min-count", _positive_int, 30, "Small manifests that trigger a merge."),
    OptionSpec("commit.max-retries", _positive_int, 20, "Attempts of one commit before giving up."),
    OptionSpec(
        "commit.max-clock-skew", parse_duration, timedelta(minutes=1),
        "A commit whose clock is further behind the latest snapshot's time fails (ClockSkewError).",
    ),
    OptionSpec(
        "noncurrent-days", _non_negative_int, None,
        "Deleting runs keep what they remove noncurrent (undoable) this many days, then purge deletes it "
        "(core/lifecycle/noncurrent/); unset: they delete at once.",
    ),
    OptionSpec("file.compression", _choice("zstd", "snappy", "gzip", "lz4", "none"), "zstd", "Parquet compression."),
]
OPTION_SPECS: dict[str, OptionSpec] = {spec.key: spec for spec in _SPECS}
_RETAIN_MIN, _RETAIN_MAX = "snapshot.num-retained.min", "snapshot.num-retained.max"


class TableOptions:
    """Validated, typed view of a table's options; ``raw`` is what is stored."""

    def __init__(self, raw: Mapping[str, Any] | None = None):
        if raw is not None and not isinstance(raw, Mapping):
            raise InvalidOptionError(f"table options must be a mapping of option key -> value, got {type(raw).__name__}")
        self.raw: dict[str, str] = {}
        self._parsed: dict[str, Any] = {}
        for key, value in (raw or {}).items():
            spec = OPTION_SPECS.get(key)
            if spec is None:
                raise InvalidOptionError(f"unknown table option {key!r}; known options: {', '.join(sorted(OPTION_SPECS))}")
            if value is None:
                continue
            self._parsed[key] = spec.parse(value, key)
            self.raw[key] = value if isinstance(value, str) else _to_text(value)
        self._check_consistency()

    def is_set(self, key: str) -> bool:
        """Did the table's creator set ``key`` (not its default)?"""
        if key not in OPTION_SPECS:
            raise InvalidOptionError(f"unknown table option {key!r}")
        return key in self._parsed

    def get(self, key: str) -> Any:
        if key not in OPTION_SPECS:
            raise InvalidOptionError(f"unknown table option {key!r}")
        if key == _RETAIN_MIN and key not in self._parsed and self._parsed.get(_RETAIN_MAX) is not None:
            # A minimum nobody set follows a lower maximum: a table that keeps at most 3 keeps 3, as expire_snapshots'
            # retain_max does (core/lifecycle/expiry/plan.py); only two bounds both set can contradict each other.
            return min(OPTION_SPECS[key].default, self._parsed[_RETAIN_MAX])
        return self._parsed.get(key, OPTION_SPECS[key].default)

    def _check_consistency(self) -> None:
        low, high = self.get("snapshot.num-retained.min"), self.get("snapshot.num-retained.max")
        if high is not None and high < low:
            raise InvalidOptionError(
                f"snapshot.num-retained.max ({high}) must be >= snapshot.num-retained.min ({low})"
            )


def _to_text(value: Any) -> str:
    if isinstance(value, timedelta):
        return duration_text(value)
    return str(value)
