"""The action contract: what a maintenance action is, and how values become one.

An action (core/actions/maintenance.py) is a frozen dataclass: ``table`` plus one keyword-only field
per argument of the core call it runs, and ``run(table)``. Each field carries what every
front end needs (:class:`Param`): its help text, its strict checks, whether operators take
it as a template, whether the CLI takes it as a positional word, whether it is internal.
The CLI, the Spark job, the hook and the operators are built from the fields, so an
argument is defined once, here in core.

Values reach an action in three forms, read by one set of rules:

- JSON (``action_from_json``: the Spark job, ``snaptable run-action``) and Python code
  constructing an action: every value strictly of its field's kind (a bool is only True or
  False: ``"false"`` is truthy and once forced a rollback);
- Python values given to an operator or the hook: datetimes, dates and timedeltas become
  their JSON text first (:func:`json_value`);
- text (rendered templates, command-line words): read by the field's kind
  (:func:`~airflow_snaptable.core.arguments.checks.value_from_text`).

An action is checked when it is made (each field, then the choices between fields, then
``validate()``), so a bad action fails before it reaches a table or a Spark job.
"""

from __future__ import annotations

import abc
import dataclasses
import datetime as dt
import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Collection, Mapping

from airflow_snaptable.core.arguments.checks import check_exclusive, check_int, check_kinds, is_int, value_from_text
from airflow_snaptable.core.errors import InvalidArgumentError, InvalidOptionError
from airflow_snaptable.core.arguments.names import validate_name
from airflow_snaptable.core.arguments.table_options import duration_text, parse_duration, parse_size
from airflow_snaptable.core.io.storage import check_location
from airflow_snaptable.core.table import Table
from airflow_snaptable.core.arguments.times import duration_argument, is_epoch_millis_text, with_iso_times

Check = Callable[[Any, str], Any]


@dataclass(frozen=True)
class Param:
    """What the front ends know about an action field besides its type and default."""

    #: The CLI flag's help and the operator's ``:param:`` text (no ``%``: argparse formats help).
    help: str
    #: The lowest value of an integer field.
    minimum: int | None = None
    #: ``check(value, name)`` vets a value its kind allows; raises InvalidArgumentError.
    check: Check | None = None
    #: The CLI takes it as a word after the table (``snaptable tag create URI NAME``), not as a flag.
    positional: bool = False
    #: For JSON and Python callers only (a clock for tests, an alias): no CLI flag, no operator argument.
    internal: bool = False


def arg(default: Any = dataclasses.MISSING, **param: Any) -> Any:
    """An action field: its ``default`` (none given: the argument is required) and its :class:`Param`."""
    return dataclasses.field(default=default, metadata={"param": Param(**param)})


@dataclass(frozen=True)
class Choice:
    """At most one of ``names`` may be given; with ``required``, exactly one."""

    names: tuple[str, ...]
    required: bool = False


@dataclass(frozen=True)
class ActionField:
    """One argument of an action, as the front ends see it."""

    name: str
    #: The annotation's kinds: ``int | None`` is ``{"int", "None"}`` (checks.py's vocabulary).
    kinds: frozenset[str]
    #: ``dataclasses.MISSING`` when the argument is required.
    default: Any
    param: Param

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING

    def read_text(self, value: Any) -> Any:
        """``value`` if it is not text, else what the text stands for in this field's kinds."""
        return value_from_text(value, self.kinds, self.name) if isinstance(value, str) else value

    def check(self, value: Any, action_name: str) -> None:
        where = f"{action_name}: {self.name}"
        if value is None and self.required:
            raise InvalidArgumentError(f"{where} is required")
        if self.param.minimum is not None and value is not None and self.kinds - {"None"} == {"int"}:
            check_int(value, where, self.param.minimum)
        else:
            check_kinds(value, where, self.kinds)
        if self.param.check is not None and value is not None:
            self.param.check(value, where)


@dataclass(frozen=True)
class Action(abc.ABC):
    """Base: ``table`` is the table's URI; subclasses add their call's arguments (keyword-only fields)."""

    table: str
    #: The action's name in JSON (``{"action": "expire-snapshots", ...}``).
    name: ClassVar[str] = ""
    #: Groups of fields that are two forms of one argument.
    choices: ClassVar[tuple[Choice, ...]] = ()

    def __post_init__(self) -> None:
        where = f"{self.name}: table"
        check_location_argument(check_kinds(self.table, where, ["str"]), where)
        for field in self.parameters():
            field.check(getattr(self, field.name), self.name)
        self.check_choices(self.arguments())
        self.validate()

    def validate(self) -> None:
        """Checks that no field and no choice expresses; subclasses add theirs."""

    @abc.abstractmethod
    def run(self, table: Table) -> dict[str, Any]:
        """Run on ``table`` (the table at ``self.table``); the result document (:meth:`result_document`)."""

    def result_document(self, result: Any, **extra: Any) -> dict[str, Any]:
        """What every front end returns: ``{"action", "table", "result"}`` with the result as JSON (every
        time in epoch millis with its ISO-8601 text beside it: ``older_than_millis``, ``older_than_iso``)."""
        return {"action": self.name, "table": self.table, "result": with_iso_times(to_jsonable(result)), **extra}

    def arguments(self) -> dict[str, Any]:
        """The call's arguments: every field but ``table``."""
        return {field.name: getattr(self, field.name) for field in self.parameters()}

    def to_json(self) -> str:
        return json.dumps({"action": self.name, **dataclasses.asdict(self)})

    # -- the fields, for the front ends -------------------------------------------------

    @classmethod
    def parameters(cls) -> tuple[ActionField, ...]:
        """Every field but ``table``, in definition order."""
        return tuple(
            ActionField(
                field.name,
                frozenset(kind.strip() for kind in str(field.type).split("|")),
                field.default,
                field.metadata["param"],
            )
            for field in dataclasses.fields(cls)
            if field.name != "table"
        )

    @classmethod
    def summary(cls) -> str:
        """The docstring's first paragraph as plain text on one line (the CLI command's help and description): a
        whole sentence, also where it wraps in the docstring."""
        return plain_text(" ".join(inspect.getdoc(cls).split("\n\n", 1)[0].split()))

    @classmethod
    def check_choices(cls, values: Mapping[str, Any]) -> None:
        """The choices between fields, over ``values`` (a value that is not None counts as given)."""
        for choice in cls.choices:
            check_exclusive({name: values.get(name) for name in choice.names}, choice.required, cls.name)

    # -- making one -----------------------------------------------------------------------

    @classmethod
    def from_values(cls, table: Any, values: Mapping[str, Any]) -> "Action":
        """The action on ``table`` from argument values of the fields' kinds (JSON's values).

        Unknown argument names and missing required ones are errors (a typo never falls back
        to a default).
        """
        fields = {field.name: field for field in cls.parameters()}
        unknown = sorted(set(values) - set(fields), key=str)
        if unknown:
            raise InvalidArgumentError(f"action {cls.name!r} takes no argument(s) {unknown}")
        missing = [name for name, field in fields.items() if field.required and name not in values]
        if missing:
            raise InvalidArgumentError(f"{cls.name}: {', '.join(missing)} is required")
        return cls(table, **values)

    @classmethod
    def from_python(cls, table: Any, values: Mapping[str, Any], text: Collection[str] = ()) -> "Action":
        """The action from Python values; the string values of the fields named in ``text`` are text."""
        return cls.from_values(table, cls.read_values(values, text))

    @classmethod
    def read_values(cls, values: Mapping[str, Any], text: Collection[str] = ()) -> dict[str, Any]:
        """``values`` in their JSON form (:func:`json_value`), the text of the fields in ``text`` read by kind."""
        fields = {field.name: field for field in cls.parameters()}
        read = {}
        for name, value in values.items():
            value = json_value(value)
            read[name] = fields[name].read_text(value) if name in text and name in fields else value
        return read

    @classmethod
    def check_known(cls, values: Mapping[str, Any], text: Collection[str] = (), pending: Collection[str] = ()) -> None:
        """Check what can be checked before the values named in ``pending`` are known (templates
        rendered at run time): every other value on its own, and the choices, where a pending
        value counts as given. Making the action later runs every check again."""
        fields = {field.name: field for field in cls.parameters()}
        known = cls.read_values({name: value for name, value in values.items() if name not in pending}, text)
        for name, value in known.items():
            fields[name].check(value, cls.name)
        cls.check_choices({**values, **known})


_RST_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]+\.)?([^`]+)`")
_RST_LITERAL = re.compile(r"``([^`]+)``")


def plain_text(text: str) -> str:
    """Docstring text without reStructuredText markup, for a terminal: ``x`` is x and
    :class:`~a.b.C` is C (a command's help is read in a shell, not rendered by Sphinx)."""
    return _RST_LITERAL.sub(r"\1", _RST_ROLE.sub(r"\1", text))


def json_value(value: Any) -> Any:
    """A Python value in its JSON form: a timedelta is its exact text (``"2592000 s"``, :func:`duration_text`), a datetime or date ISO text (naive: UTC)."""
    if isinstance(value, dt.timedelta):
        return duration_text(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [json_value(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): json_value(item) for key, item in value.items()}
    return value


def to_jsonable(value: Any) -> Any:
    """A core result (a dataclass, a Tag, a list of them ...) as JSON values."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_jsonable(v) for v in value]
    return str(value)


# -- field checks (a field's ``check``): the value is of the field's kind already --------------


def check_time(value: Any, name: str) -> None:
    try:
        Table.to_millis(value)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{name}: {exc}") from None


def check_duration(value: Any, name: str) -> None:
    duration_argument(value, name)  # a duration, at most 1000 years: refused here, before any table is read


def check_time_or_duration(value: Any, name: str) -> None:
    """Orphan cleaning's ``older_than``, read as core reads it: a duration text back from now, else a time
    (the text of an integer is a time: epoch millis)."""
    if isinstance(value, str) and not is_epoch_millis_text(value):
        try:
            parse_duration(value, name)
        except InvalidOptionError:
            pass
        else:
            duration_argument(value, name)  # at most 1000 years back, as every duration argument
            return
    check_time(value, name)


def check_size(value: Any, name: str) -> None:
    try:
        parse_size(value, name)
    except InvalidOptionError as exc:
        raise InvalidArgumentError(str(exc)) from None


def valid_name(what: str) -> Check:
    """A name that becomes a path (a tag, a consumer): core/arguments/names.py's rules."""

    def check(value: str, name: str) -> None:
        if not value.strip():
            raise InvalidArgumentError(f"{name} must be a non-empty string, got {value!r}")
        validate_name(value, what)

    return check


def allowed(values: Collection[str]) -> Check:
    def check(value: str, name: str) -> None:
        if value not in values:
            raise InvalidArgumentError(f"{name} must be one of {', '.join(values)}, got {value!r}")

    return check


def check_partitions(value: list, name: str) -> None:
    """Core checks keys and value types against the table; here only the JSON shape."""
    if not value:
        raise InvalidArgumentError(f"{name} must not be empty (None means every partition)")
    for spec in value:
        if not isinstance(spec, dict) or not spec or not all(isinstance(key, str) for key in spec):
            raise InvalidArgumentError(f"{name} must be a list of dicts like [{{\"day\": \"2026-01-01\"}}], got {value!r}")


def check_snapshot_ids(value: list, name: str) -> None:
    if not value or not all(is_int(i) and i >= 1 for i in value):
        raise InvalidArgumentError(f"{name} must be a non-empty list of snapshot ids (integers >= 1), got {value!r}")


def check_location_argument(value: str, name: str) -> None:
    try:
        check_location(value)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{name}: {exc}") from None
