"""Strict checks of argument types, shared by the Table methods and the actions.

Python's truthiness is the trap these close: the string ``"false"`` is true, so a
flag given as text forced a rollback. A flag is only ``True`` or ``False``; a
count or an id is an ``int`` that is not a ``bool`` (``True == 1``) and not a
float or a digit string. A failed check raises InvalidArgumentError before
anything is read or written.
"""

from __future__ import annotations

from typing import Any, Iterable

from airflow_snaptable.core.errors import InvalidArgumentError

#: Annotation names (as the action dataclasses spell them) -> (what the message says, the test).
_KINDS = {
    "bool": ("True or False", lambda v: isinstance(v, bool)),
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "list": ("a list", lambda v: isinstance(v, list)),
    "None": ("None", lambda v: v is None),
}


def is_int(value: Any) -> bool:
    return _KINDS["int"][1](value)


def check_kinds(value: Any, name: str, kinds: Iterable[str]) -> Any:
    """``value`` if it is of one of ``kinds`` (names from :data:`_KINDS`), else InvalidArgumentError."""
    kinds = list(kinds)
    if any(_KINDS[kind][1](value) for kind in kinds):
        return value
    expected = " or ".join(_KINDS[kind][0] for kind in kinds)
    raise InvalidArgumentError(f"{name} must be {expected}, got {value!r}")


def check_bool(value: Any, name: str) -> bool:
    return check_kinds(value, name, ("bool",))


def check_int(value: Any, name: str, minimum: int | None = None) -> int:
    if not is_int(value) or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum}"
        raise InvalidArgumentError(f"{name} must be an integer{bound}, got {value!r}")
    return value


def check_optional_int(value: Any, name: str, minimum: int | None = None) -> int | None:
    return None if value is None else check_int(value, name, minimum)
