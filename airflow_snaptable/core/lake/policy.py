"""A lake's maintenance policy: which job runs on which table, with which settings (docs/maintenance.md).

One document (JSON, or YAML when PyYAML is installed) with three sections::

    {"defaults":   {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}},
     "namespaces": {"ops": {"snapshot-expiry": {"min-snapshots-to-keep": 4}}},
     "tables":     {"sales.returns": {"snapshot-expiry": {"enabled": false}}}}

Each section maps a job (:data:`JOBS`) to its settings. Precedence, key by key, least specific
first: ``defaults``, then every namespace section whose name is the table's namespace or a
dotted prefix of it, shorter before longer (``a`` applies to ``a.b.t``, and ``a.b`` overrides it:
the longest matching prefix wins, as Apache Polaris's inheritance), then the ``tables`` section
of the table's own name. A key set to ``null`` in a more specific section unsets it there: the
table's own setting applies (core/lake/jobs.py).

A job runs on a table only when some section of its chain names the job and the most specific
``enabled`` it sees is not false: deleting is opt-in, nothing runs because a job exists.

A policy never runs half-understood: an unknown section, job or key, a value of the wrong type
or range, and settings that contradict each other in any table's chain are an
:class:`InvalidPolicyError` naming them, raised when the policy is loaded. A section naming a
table or a namespace that a location does not hold is not an error (one policy serves several
locations): :meth:`Policy.unmatched` reports them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from airflow_snaptable.core.lifecycle.hudi_clean import POLICIES as CLEAN_POLICIES
from airflow_snaptable.core.errors import InvalidOptionError, InvalidPolicyError
from airflow_snaptable.core.arguments.table_options import parse_duration, parse_size
from airflow_snaptable.core.arguments.times import MAX_DURATION
from airflow_snaptable.core.lifecycle.noncurrent.journal import MAX_NONCURRENT_DAYS
from airflow_snaptable.core.lifecycle.periodic_tags import FORMATTERS, PERIODS
from airflow_snaptable.core.lake.triggers import TRIGGER, check_trigger
from airflow_snaptable.core.lifecycle.store import NATIVE_FORMAT

SECTIONS = ("defaults", "namespaces", "tables")
ENABLED = "enabled"
ALL_FORMATS = frozenset({NATIVE_FORMAT, "paimon", "iceberg"})

Check = Callable[[Any, str], None]


def _fail(where: str, expected: str, value: Any) -> None:
    raise InvalidPolicyError(f"policy: {where} must be {expected}, got {value!r}")


def integer(minimum: int, maximum: int | None = None) -> Check:
    def check(value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            _fail(where, f"an integer >= {minimum}", value)
        if maximum is not None and value > maximum:
            _fail(where, f"an integer from {minimum} to {maximum}", value)

    return check


def boolean(value: Any, where: str) -> None:
    if not isinstance(value, bool):
        _fail(where, "true or false", value)


def one_of(choices: Iterable[str]) -> Check:
    choices = tuple(choices)

    def check(value: Any, where: str) -> None:
        if not isinstance(value, str) or value not in choices:
            _fail(where, f"one of {', '.join(choices)}", value)

    return check


def column_name(value: Any, where: str) -> None:
    if not isinstance(value, str) or not value:
        _fail(where, "a column name", value)


#: The longest duration a policy takes is an argument's (a thousand years, core/arguments/times.py). The shortest
#: but zero: a millisecond, the resolution of every time a table keeps.
MIN_DURATION = timedelta(milliseconds=1)


def _check_range(length: timedelta, where: str, given: Any, unit: str, allow_zero: bool) -> None:
    """``length`` (what ``given`` stands for) is zero (where allowed) or from 1 ms to a thousand years."""
    if (length == timedelta(0) and allow_zero) or MIN_DURATION <= length <= MAX_DURATION:
        return
    low, high = MIN_DURATION / _UNITS[unit], MAX_DURATION / _UNITS[unit]
    _fail(where, f"{'0 or ' if allow_zero else ''}from 1 ms to 1000 years ({low:.4g} to {high:.10g} {unit})", given)


_UNITS = {"seconds": timedelta(seconds=1), "hours": timedelta(hours=1), "days": timedelta(days=1)}


def duration_number(unit: str, *, allow_zero: bool) -> Check:
    """A length of time as a number of ``unit`` (``max-snapshot-age-hours``, ``older-than-days``): finite,
    and in the range a duration may have (checked here, not when a job first runs)."""

    def check(value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            _fail(where, f"a number of {unit} >= 0" if allow_zero else f"a number of {unit} > 0", value)
        if value == 0 and not allow_zero:
            _fail(where, f"a number of {unit} > 0", value)
        try:
            length = value * _UNITS[unit]
        except OverflowError:
            length = MAX_DURATION + _UNITS[unit]
        _check_range(length, where, value, unit, allow_zero)

    return check


def duration(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        _fail(where, "a duration such as '10 min' (or seconds)", value)
    try:
        length = parse_duration(value, where)
    except InvalidOptionError as exc:
        raise InvalidPolicyError(f"policy: {exc}") from None
    _check_range(length, where, value, "seconds", allow_zero=True)


def size(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        _fail(where, "a size such as '128 mb' (or bytes)", value)
    try:
        parse_size(value, where)
    except InvalidOptionError as exc:
        raise InvalidPolicyError(f"policy: {exc}") from None


@dataclass(frozen=True)
class JobSpec:
    """A job a policy may configure: its keys (besides ``enabled``) and the formats that support it."""

    name: str
    keys: Mapping[str, Check]
    formats: frozenset[str] = ALL_FORMATS
    help: str = ""


#: The key of every deleting job: keep what it removes noncurrent (undoable) this many days, then purge deletes it
#: (core/lifecycle/noncurrent/; the actions' ``noncurrent_days``).
RETAINING: dict[str, Check] = {"noncurrent-days": integer(0, MAX_NONCURRENT_DAYS)}


def file_rewrite_jobs() -> tuple["JobSpec", ...]:
    """Jobs that rewrite files without changing rows, after compaction (which adds manifests) and before expiry."""
    return (
        JobSpec(
            "manifest-rewrite", {"target-manifest-size": size}, frozenset({"iceberg"}),
            help="cluster the current snapshot's manifests by partition into manifests near the target size",
        ),
    )


#: Every job, in the order a run carries them out on a table: consumers first (an expired consumer
#: no longer holds snapshots back), tags before snapshot expiry (a period's tag is made while its
#: state is still retained), compaction before expiry, orphan removal last.
JOBS: dict[str, JobSpec] = {
    spec.name: spec
    for spec in (
        JobSpec("consumer-expiry", {"expiration-time": duration, **RETAINING},
                help="delete consumers idle longer than expiration-time (default: the table's consumer.expiration-time)"),
        JobSpec("tag-expiry", {**RETAINING}, help="delete tags whose time to live has passed"),
        JobSpec(
            "periodic-tags",
            {"period": one_of(PERIODS), "delay": duration, "formatter": one_of(FORMATTERS), "num-retained-max": integer(1)},
            help="tag the state at the end of each period (Paimon's automatic tags)",
        ),
        JobSpec(
            "data-compaction", {"target-file-size": size, "min-file-num": integer(2), "min-input-files": integer(1)},
            frozenset({NATIVE_FORMAT, "iceberg"}),
            help="rewrite each partition's small files into fewer files (Iceberg: bin-pack, one replace snapshot)",
        ),
        *file_rewrite_jobs(),
        JobSpec(
            "data-expiry", {"column": column_name, "retention": duration}, frozenset({NATIVE_FORMAT, "iceberg"}),
            help="delete the rows older than a retention by a time column (Paimon's partition.expiration-time)",
        ),
        JobSpec(
            "snapshot-expiry",
            {"min-snapshots-to-keep": integer(1), "max-snapshot-age-hours": duration_number("hours", allow_zero=True), "max-snapshots": integer(1), **RETAINING},
            help="expire old snapshots and delete the files nothing retained uses",
        ),
        JobSpec(
            "clean",
            {"policy": one_of(CLEAN_POLICIES), "commits-retained": integer(1), "hours-retained": integer(1),
             "file-versions-retained": integer(1), **RETAINING},
            frozenset({NATIVE_FORMAT, "paimon"}),
            help="a Hudi cleaning policy",
        ),
        JobSpec(
            "orphan-file-removal", {"older-than-days": duration_number("days", allow_zero=False), **RETAINING},
            help="delete files under the table that nothing references",
        ),
        JobSpec(
            "purge", {},
            help="delete the noncurrent files (of runs with noncurrent-days) whose retention has passed",
        ),
    )
}


@dataclass(frozen=True)
class ResolvedJob:
    """One job's settings for one table, after precedence."""

    job: str
    #: Runs on the table (when its format supports the job).
    enabled: bool
    #: The merged keys (``enabled`` and unset keys left out).
    settings: dict[str, Any]
    #: key -> the section it came from (``defaults``, ``namespaces.ops``, ``tables.sales.returns``),
    #: ``enabled`` included when a section set it.
    sources: dict[str, str]
    #: Why it does not run, for the status (None when enabled).
    disabled_reason: str | None = None
    #: When it runs: ``{"snapshots": N, "small-files": M}`` (core/lake/triggers.py); None: every run.
    trigger: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        doc = {"enabled": self.enabled, "settings": dict(self.settings), "sources": dict(self.sources)}
        if self.trigger is not None:
            doc["trigger"] = dict(self.trigger)
        return doc


@dataclass(frozen=True)
class Policy:
    """A loaded, checked policy. Build with :meth:`load` (a file), :meth:`from_text` or :meth:`from_mapping`."""

    defaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    namespaces: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    tables: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    # -- loading -----------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> "Policy":
        """A policy file: YAML when it ends in ``.yaml`` / ``.yml``, JSON otherwise."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidPolicyError(f"policy: cannot read {str(path)!r}: {exc}") from None
        return cls.from_text(text, yaml=path.suffix.lower() in (".yaml", ".yml"), source=str(path))

    @classmethod
    def from_text(cls, text: str, *, yaml: bool = False, source: str = "policy") -> "Policy":
        return cls.from_mapping(_parse_yaml(text, source) if yaml else _parse_json(text, source))

    @classmethod
    def from_mapping(cls, doc: Any) -> "Policy":
        if not isinstance(doc, Mapping):
            raise InvalidPolicyError(f"policy: must be an object with sections {', '.join(SECTIONS)}, got {type(doc).__name__}")
        unknown = [key for key in doc if key not in SECTIONS]
        if unknown:
            raise InvalidPolicyError(f"policy: unknown section(s) {unknown}; known: {', '.join(SECTIONS)}")
        policy = cls(
            defaults=_section(doc.get("defaults"), "defaults"),
            namespaces=_named_sections(doc.get("namespaces"), "namespaces"),
            tables=_named_sections(doc.get("tables"), "tables"),
        )
        policy._check_chains()
        return policy

    # -- precedence ----------------------------------------------------------------------------

    def chain(self, table_name: str) -> list[tuple[str, dict[str, dict[str, Any]]]]:
        """The sections that apply to ``table_name``, least specific first, each with its label."""
        found = self._namespace_chain(table_name.rpartition(".")[0])
        if table_name in self.tables:
            found.append((f"tables.{table_name}", self.tables[table_name]))
        return found

    def _namespace_chain(self, namespace: str) -> list[tuple[str, dict[str, dict[str, Any]]]]:
        """``defaults``, then the namespace sections that apply to ``namespace``, shorter names first."""
        matching = sorted((name for name in self.namespaces if namespace_applies(name, namespace)), key=lambda n: n.count("."))
        return [("defaults", self.defaults)] + [(f"namespaces.{name}", self.namespaces[name]) for name in matching]

    def resolve(self, table_name: str) -> dict[str, ResolvedJob]:
        """Every job's settings for ``table_name``, in :data:`JOBS` order."""
        return {job: _resolve(job, self.chain(table_name)) for job in JOBS}

    def unmatched(self, table_names: Iterable[str]) -> dict[str, list[str]]:
        """The ``tables`` and ``namespaces`` sections that none of ``table_names`` matches."""
        names = set(table_names)
        namespaces = {name.rpartition(".")[0] for name in names}
        return {
            "tables": sorted(name for name in self.tables if name not in names),
            "namespaces": sorted(n for n in self.namespaces if not any(namespace_applies(n, ns) for ns in namespaces)),
        }

    def _check_chains(self) -> None:
        """Contradictions show only after merging: check every chain the policy tells apart (the
        defaults alone, each namespace's, each named table's), each named by its most specific section."""
        chains = [("defaults", self._namespace_chain(""))]
        chains += [(f"namespaces.{name}", self._namespace_chain(name)) for name in self.namespaces]
        chains += [(f"tables.{name}", self.chain(name)) for name in self.tables]
        for label, chain in chains:
            for job in JOBS:
                _check_combination(_resolve(job, chain), label)

    def to_dict(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "namespaces": self.namespaces, "tables": self.tables}


def namespace_applies(section: str, namespace: str) -> bool:
    """A namespace section applies to the tables of that namespace and of every namespace below it."""
    return namespace == section or namespace.startswith(section + ".")


def _resolve(job: str, chain: list[tuple[str, dict[str, dict[str, Any]]]]) -> ResolvedJob:
    settings: dict[str, Any] = {}
    sources: dict[str, str] = {}
    named = False
    for label, section in chain:
        if job not in section:
            continue
        named = True
        for key, value in section[job].items():
            sources[key] = label
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
    enabled_value = settings.pop(ENABLED, None)
    trigger = settings.pop(TRIGGER, None)  # one value: a more specific section's trigger replaces it whole
    if not named:
        return ResolvedJob(job, False, {}, {}, "no policy section names this job")
    if enabled_value is False:
        return ResolvedJob(job, False, settings, sources, f"disabled by the policy ({sources[ENABLED]})", trigger)
    return ResolvedJob(job, True, settings, sources, None, trigger)


def _check_combination(job: ResolvedJob, label: str) -> None:
    """What no single key can say: settings that contradict each other once merged."""
    settings, where = job.settings, f"{label}.{job.job}"
    if job.job == "snapshot-expiry":
        low, high = settings.get("min-snapshots-to-keep"), settings.get("max-snapshots")
        if low is not None and high is not None and high < low:
            raise InvalidPolicyError(f"policy: {where}: max-snapshots ({high}) must be >= min-snapshots-to-keep ({low})")
    elif job.job == "periodic-tags":
        period, delay = settings.get("period"), settings.get("delay")
        if period is not None and delay is not None and parse_duration(delay) >= PERIODS[period]:
            raise InvalidPolicyError(f"policy: {where}: delay ({delay}) must be shorter than the period ({period})")
    elif job.job == "data-expiry" and job.enabled:
        missing = [key for key in ("column", "retention") if key not in settings]
        if missing:
            raise InvalidPolicyError(f"policy: {where}: data-expiry needs {' and '.join(missing)}")
    elif job.job == "clean" and job.enabled:
        policy = settings.get("policy")
        if policy is None:
            raise InvalidPolicyError(f"policy: {where}: clean needs policy ({', '.join(CLEAN_POLICIES)})")
        wanted = CLEAN_POLICIES[policy].replace("_", "-")
        wrong = sorted(k for k in settings if k not in ("policy", wanted, *RETAINING))  # noncurrent-days as every deleting job
        if wrong:
            raise InvalidPolicyError(
                f"policy: {where}: clean policy {policy} takes {wanted}, not {', '.join(wrong)} "
                f"(set {', '.join(wrong)} to null where policy {policy} is chosen)"
            )
        if CLEAN_POLICIES[policy] == "hours_retained" and wanted not in settings:
            raise InvalidPolicyError(f"policy: {where}: clean policy {policy} needs {wanted}")


# -- reading the document ------------------------------------------------------------------------


def _section(value: Any, where: str) -> dict[str, dict[str, Any]]:
    """One section: job -> its keys, every key checked."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidPolicyError(f"policy: {where} must be an object of jobs, got {type(value).__name__}")
    section: dict[str, dict[str, Any]] = {}
    for job, keys in value.items():
        spec = JOBS.get(job) if isinstance(job, str) else None
        if spec is None:
            raise InvalidPolicyError(f"policy: {where}: unknown job {job!r}; known: {', '.join(JOBS)}")
        if not isinstance(keys, Mapping):
            raise InvalidPolicyError(f"policy: {where}.{job} must be an object of settings, got {type(keys).__name__}")
        checked = {}
        for key, setting in keys.items():
            path = f"{where}.{job}.{key}"
            if key == ENABLED:
                check: Check = boolean
            elif key == TRIGGER:
                check = check_trigger
            elif isinstance(key, str) and key in spec.keys:
                check = spec.keys[key]
            else:
                known = ", ".join([ENABLED, TRIGGER, *spec.keys])
                raise InvalidPolicyError(f"policy: {where}.{job}: unknown key {key!r}; known: {known}")
            if setting is not None:
                check(setting, path)
            checked[key] = setting
        section[job] = checked
    return section


def _named_sections(value: Any, where: str) -> dict[str, dict[str, dict[str, Any]]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidPolicyError(f"policy: {where} must be an object of names, got {type(value).__name__}")
    named = {}
    for name, section in value.items():
        if not isinstance(name, str) or not name or any(not part for part in name.split(".")) or name != name.strip():
            raise InvalidPolicyError(f"policy: {where}: {name!r} is not a dotted name such as 'sales' or 'sales.orders'")
        named[name] = _section(section, f"{where}.{name}")
    return named


def _no_duplicates(pairs: list[tuple[Any, Any]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise InvalidPolicyError(f"policy: key {key!r} is given twice in one object")
        seen[key] = value
    return seen


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise InvalidPolicyError(f"policy: {source} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InvalidPolicyError(f"policy: {source} is nested too deeply") from None


def _parse_yaml(text: str, source: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise InvalidPolicyError(f"policy: {source}: YAML policies need PyYAML (pip install pyyaml); JSON needs nothing") from None

    class StrictLoader(yaml.SafeLoader):
        """SafeLoader refusing a key given twice in one mapping (PyYAML keeps the last silently)."""

    def mapping(loader, node, deep=False):
        # A mapping's own keys given twice are refused; keys a merge (``<<: *base``) brings in are overridden by
        # the mapping's own, as YAML's merge key specifies (flatten_mapping puts the merged pairs first).
        merge = "tag:yaml.org,2002:merge"
        _no_duplicates([(loader.construct_object(k, deep=deep), None) for k, _v in node.value if k.tag != merge])
        loader.flatten_mapping(node)
        return {loader.construct_object(k, deep=deep): loader.construct_object(v, deep=deep) for k, v in node.value}

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise InvalidPolicyError(f"policy: {source} is not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise InvalidPolicyError(f"policy: {source} is nested too deeply") from None


def _yaml_problem(exc: Exception) -> str:
    """PyYAML's error on one line: what is wrong and where (its own text spans several lines with a snippet)."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
    context = getattr(exc, "context", None)
    during = f" ({context})" if context and context != problem else ""
    return f"{problem}{where}{during}"
