"""What the expiry tests of sub-ranges and parts share (test_expire_subranges.py, test_expire_parts.py):
the arguments that expire all they may, and small histories. Their fixtures are in conftest.py."""

from __future__ import annotations

import os

from tests.core.test_lifecycle import FAR_FUTURE, make_table

EXPIRE_ARGS = dict(retain_min=1, time_retained="0 s", now=FAR_FUTURE)
#: A bound no test history reaches.
HUGE = 10**9


def without_plans(files: dict[str, bytes]) -> dict[str, bytes]:
    return {path: data for path, data in files.items() if not path.startswith("plan/")}


def appends_then_overwrite(uri: str):
    """Snapshots 1-5 append, 6 overwrites the whole table (deletes every earlier file), 7-8 append."""
    history = make_table(uri)
    history.appends(5)
    history.overwrite(3)
    history.appends(2)
    return history


def data_files(uri: str) -> set[str]:
    root = os.path.join(uri, "data")
    return {os.path.relpath(os.path.join(d, f), uri) for d, _dirs, names in os.walk(root) for f in names}
