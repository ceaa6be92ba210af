"""Strict checks of argument types, shared by the Table methods and the actions.

Python's truthiness is the trap these close: the string ``"false"`` is true, so a
flag given as text forced a rollback. A flag is only ``True`` or ``False``; a
count or an id is an ``int`` that is not a ``bool`` (``True == 1``) and not a
float or a digit string. A failed check raises InvalidArgumentError before
anything is read or written.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping

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


def value_from_text(text: str, kinds: Iterable[str], name: str) -> Any:
    """What ``text`` (a rendered template, a word of a command line) stands for, read by the kinds a value may have.

    Strict, so that a typo never decides a flag: an ``int`` is digits (a sign allowed), a
    ``bool`` is ``true`` or ``false`` in any case (how templates render Python and JSON
    booleans), a ``list`` is a JSON array; ``""`` and ``none`` are None where None is
    allowed. Text for a value that may be a string stays the text.
    """
    kinds = set(kinds)
    stripped = text.strip()
    if stripped == "" or stripped.lower() == "none":
        return None if "None" in kinds else text
    wanted = kinds - {"None"}
    if wanted == {"int"}:
        if not re.fullmatch(r"[+-]?[0-9]+", stripped):
            raise InvalidArgumentError(f"{name} must be an integer, got {text!r}")
        return int(stripped)
    if wanted == {"bool"}:
        if stripped.lower() not in ("true", "false"):
            raise InvalidArgumentError(f"{name} must be true or false, got {text!r}")
        return stripped.lower() == "true"
    if wanted == {"list"}:
        try:
            value = json.loads(stripped)
        except (json.JSONDecodeError, RecursionError):
            value = None
        if not isinstance(value, list):
            raise InvalidArgumentError(f"{name} must be a JSON list, got {text!r}")
        return value
    return text


def check_exclusive(values: Mapping[str, Any], required: bool = False, where: str = "") -> None:
    """At most one of ``values`` is given (not None); with ``required``, exactly one.

    ``where`` prefixes the message (an action's name). Arguments that are two forms of one
    thing (a snapshot id, a tag or a time as a target) are refused together, never ranked.
    """
    given = [name for name, value in values.items() if value is not None]
    prefix = f"{where}: " if where else ""
    if len(given) > 1:
        raise InvalidArgumentError(f"{prefix}give only one of {', '.join(values)}; got {', '.join(given)}")
    if required and not given:
        raise InvalidArgumentError(f"{prefix}give one of {', '.join(values)}")
