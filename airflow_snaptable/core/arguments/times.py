"""Times as the table keeps them: epoch milliseconds, UTC.

Every time a caller gives (a commit's ``as_of``, expiry's ``older_than``, a ``now`` for
tests and replays) is read here, so a time means the same everywhere: an int is epoch
millis, and so is the text of one (a command-line word, a rendered template, a JSON string),
a datetime without a zone is UTC, other text is ISO-8601. Digits that also read as an
ISO-8601 basic date (``2026``, ``2026001``, ``20260101``) are refused as ambiguous, never
guessed. Durations are parsed by core/arguments/table_options.py (the table options use them too); here they
become arguments.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from datetime import timedelta
from typing import Any

import pendulum

from airflow_snaptable.core.errors import InvalidArgumentError
from airflow_snaptable.core.arguments.table_options import parse_duration

# The epoch millis of the first and the last millisecond a datetime holds (years 1 and 9999, UTC).
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MIN_MILLIS = (dt.datetime.min.replace(tzinfo=dt.timezone.utc) - _EPOCH) // timedelta(milliseconds=1)
_MAX_MILLIS = (dt.datetime.max.replace(tzinfo=dt.timezone.utc) - _EPOCH) // timedelta(milliseconds=1)


_INTEGER_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")


def is_epoch_millis_text(value: Any) -> bool:
    """Is ``value`` the text of an integer, which a time field reads as epoch millis (not a duration, not a date)?"""
    return isinstance(value, str) and _INTEGER_TEXT.fullmatch(value) is not None


def now_millis() -> int:
    """The real clock (a table's default clock)."""
    return int(time.time() * 1000)


def to_millis(when: Any) -> int:
    """Epoch milliseconds from an int (millis), a datetime (naive means UTC), a date or an ISO-8601 string."""
    if isinstance(when, bool):
        raise InvalidArgumentError(f"not a time: {when!r}")
    if isinstance(when, int):
        # Times are turned into dates (tag names, messages): one no date can hold fails there, untyped.
        if not _MIN_MILLIS <= when <= _MAX_MILLIS:
            raise InvalidArgumentError(f"time {when!r} (epoch millis) is outside the years 1 to 9999")
        return when
    if is_epoch_millis_text(when):
        try:
            pendulum.parse(when.strip())
        except Exception:  # noqa: BLE001 - pendulum raises several types: not a date, so only millis
            return to_millis(int(when))
        raise InvalidArgumentError(
            f"time {when!r} is ambiguous: epoch millis (a moment of 1970), or an ISO-8601 basic date; "
            "write the date with dashes (2026-01-01)"
        )
    if isinstance(when, str):
        try:
            when = pendulum.parse(when)
        except Exception as exc:  # noqa: BLE001 - pendulum raises several types
            raise InvalidArgumentError(f"cannot parse time {when!r}: {exc}") from exc
    if isinstance(when, dt.datetime):
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        return int(when.timestamp() * 1000)
    if isinstance(when, dt.date):
        return int(dt.datetime(when.year, when.month, when.day, tzinfo=dt.timezone.utc).timestamp() * 1000)
    raise InvalidArgumentError(f"not a time: {when!r}")


#: The longest duration an argument takes: a thousand years (a time to live, a retention or a window
#: longer keeps everything, and now plus or minus it must still be a date: ``expires_at_iso: null`` otherwise).
MAX_DURATION = timedelta(days=365_000)


def duration_argument(value: Any, name: str) -> timedelta:
    """A duration given as an argument ("7 d", a timedelta, seconds), at most :data:`MAX_DURATION`:
    InvalidArgumentError when it is none or longer.

    (A table option that is no duration is an InvalidOptionError, raised by parse_duration itself.)
    """
    try:
        duration = parse_duration(value, name)
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from exc
    if duration > MAX_DURATION:
        raise InvalidArgumentError(f"{name}: duration {value!r} is longer than 1000 years")
    return duration


def millis(duration: timedelta) -> int:
    """A duration in whole milliseconds."""
    return int(duration / timedelta(milliseconds=1))


#: Words that make a ``*_millis`` field a length of time, not a point in time (no ISO text for those).
_DURATION_WORDS = ("retained", "ahead", "ttl", "step", "skew", "duration", "interval", "delay", "timeout", "elapsed", "age")


def iso_time(millis: int) -> str | None:
    """Epoch millis as ISO-8601 UTC text (``2026-11-26T17:48:50.227Z``); None outside the calendar."""
    try:
        when = dt.datetime.fromtimestamp(millis / 1000, tz=dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_time_field(name: str) -> bool:
    """A ``*_millis`` name that is a point in time (``time_millis``, ``older_than_millis``), not a duration."""
    return name.endswith("_millis") and not any(word in name for word in _DURATION_WORDS)


def with_iso_times(value: Any) -> Any:
    """``value`` (JSON values) with ``<name>_iso`` right after every time field ``<name>_millis``, at any depth.

    Epoch millis stay the machine-readable value; the ISO text beside them is what a person reads in a
    task log, an XCom or a terminal. Applying it twice changes nothing.
    """
    if isinstance(value, list):
        return [with_iso_times(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict = {}
    for key, item in value.items():
        out[key] = with_iso_times(item)
        if isinstance(key, str) and is_time_field(key) and isinstance(item, int) and not isinstance(item, bool):
            iso_key = key[: -len("_millis")] + "_iso"
            if iso_key not in value:
                out[iso_key] = iso_time(item)
    return out
