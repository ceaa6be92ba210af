"""W1: commit cost. Many small appends, then one full overwrite, on each system.

Every system gets the same rows: ``appends`` batches of ``rows_per_append`` rows
spread over ``partitions`` partitions (column ``p``), then one overwrite of the
whole table with ``overwrite_rows`` rows. The timed unit is one ``append`` /
``overwrite`` call as a user makes it (data files + metadata + commit), on an
empty table created beforehand (untimed).

For ours it also counts the storage operations of every commit, and extends the
history (``history_commits``; "commit #1000 vs commit #10") to show that the
cost of a commit does not grow with the number of snapshots before it. The
extension uses small ``history_rows`` appends, except for the commits that are
compared, which have the same size as the W1 appends they are compared with.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.common import (
    OP_KINDS,
    SYSTEM_LABELS,
    SYSTEMS,
    BenchmarkError,
    DataGen,
    RunContext,
    Stats,
    WarningLog,
    capture_warnings,
    collect_garbage,
    fmt_ms,
    frozen_heap,
    fmt_num,
    fmt_ratio,
    heading,
    median,
    ratio,
    render_table,
)
from benchmarks.systems import open_system, validate_state

NAME = "w1"
DESCRIPTION = "commit cost: N appends of small batches over 10 partitions, then one full overwrite"

#: Targets: peer/ours per-commit ratio must be at least this.
TARGETS = {"delta": 1.0, "delta-open": 1.0, "iceberg": 3.0}
TARGET_TEXT = {"delta": ">= 1.00 (ours <= delta)", "delta-open": ">= 1.00 (ours <= delta)", "iceberg": ">= 3.00"}
#: Late/early commit time of ours above this is reported as growing.
FLAT_LIMIT = 1.25


@dataclass(frozen=True)
class W1Config:
    appends: int = 200
    rows_per_append: int = 1000
    partitions: int = 10
    overwrite_rows: int = 1000
    #: Ours: extend the history to this many commits (+ half a window) for "commit #N vs #10".
    history_commits: int = 1000
    history_rows: int = 100
    #: Commits compared early (1-based, inclusive): 5..15.
    early_window: tuple[int, int] = (5, 15)
    half_window: int = 5
    seed: int = 42

    @classmethod
    def for_context(cls, ctx: RunContext) -> "W1Config":
        config = cls(appends=50, history_commits=300) if ctx.quick else cls()
        config = replace(config, seed=ctx.seed)
        known = {k: v for k, v in ctx.overrides.items() if v is not None and k in cls.__dataclass_fields__}
        config = replace(config, **known)
        config.check()
        return config

    def check(self) -> None:
        lo, hi = self.early_window
        if self.appends < hi:
            raise BenchmarkError(f"W1 needs at least {hi} appends (commits {lo}..{hi} are compared), got {self.appends}")
        if self.history_commits and self.late_window[0] <= self.appends + 1:
            raise BenchmarkError(
                f"history_commits ({self.history_commits}) must exceed appends + 1 + {self.half_window} ({self.appends + 1 + self.half_window})"
            )

    @property
    def late_window(self) -> tuple[int, int]:
        """Commits compared late: history_commits +- half_window (995..1005)."""
        return (self.history_commits - self.half_window, self.history_commits + self.half_window)

    @property
    def tail_window(self) -> tuple[int, int]:
        """The last appends of W1, same width as the early window (190..200)."""
        lo, hi = self.early_window
        return (self.appends - (hi - lo), self.appends)


def make_w1_data(config: W1Config) -> tuple[DataGen, list[pa.Table], pa.Table]:
    """The W1 batches and the overwrite batch; identical for every system. The generator continues after them."""
    gen = DataGen(config.seed, config.partitions)
    batches = [gen.batch(config.rows_per_append) for _ in range(config.appends)]
    overwrite = gen.batch(config.overwrite_rows)
    return gen, batches, overwrite


def window(values: list, first_commit: int, lo: int, hi: int) -> list:
    """values[i] belongs to commit ``first_commit + i``; the items of commits lo..hi."""
    return values[max(0, lo - first_commit) : max(0, hi - first_commit + 1)]


def mean_ops(ops: list[dict[str, int]] | None) -> dict[str, float] | None:
    if not ops:
        return None
    out = {kind: sum(o[kind] for o in ops) / len(ops) for kind in OP_KINDS}
    out["total"] = sum(out[kind] for kind in OP_KINDS)
    return out


# -- one system -------------------------------------------------------------------------


class W1Run:
    """One system's W1, step by step, so several systems can be run in turn or interleaved.

    ``append_next()`` / ``overwrite()`` time one commit each; ``validate_*``
    read the table back (untimed); ``figures()`` summarises.
    """

    def __init__(self, system: str, directory: Path, config: W1Config, data=None):
        self.system = system
        self.config = config
        _gen, self.batches, self.overwrite_batch = data or make_w1_data(config)
        self.handle = open_system(system, directory, name="w1")
        self.counting = self.handle.ops() is not None
        self.durations: list[float] = []
        self.ops: list[dict[str, int]] = []
        self.overwrite_s: float | None = None
        self.overwrite_ops: dict[str, int] | None = None
        self.rows_after_overwrite: int | None = None
        self.warnings = WarningLog()

    @property
    def appended(self) -> int:
        return len(self.durations)

    def _commit(self, fn, data) -> float:
        self.handle.reset_ops()
        with capture_warnings(self.warnings):
            t0 = time.perf_counter()
            fn(data)
            elapsed = time.perf_counter() - t0
        return elapsed

    def append_next(self) -> float:
        elapsed = self._commit(self.handle.append, self.batches[self.appended])
        self.durations.append(elapsed)
        if self.counting:
            self.ops.append(self.handle.ops())
        return elapsed

    def validate_appends(self) -> None:
        """Every appended row must be there before the overwrite."""
        with capture_warnings(self.warnings):
            validate_state(self.handle, expected_rows=self.appended * self.config.rows_per_append, where="after the appends")

    def overwrite(self) -> float:
        self.overwrite_s = self._commit(self.handle.overwrite, self.overwrite_batch)
        if self.counting:
            self.overwrite_ops = self.handle.ops()
        return self.overwrite_s

    def validate_overwrite(self) -> None:
        with capture_warnings(self.warnings):
            validation = validate_state(self.handle, expected=self.overwrite_batch, where="after the overwrite")
        if validation["rows"] != self.config.overwrite_rows:
            raise BenchmarkError(f"{self.system}: {validation['rows']} rows after the overwrite, expected {self.config.overwrite_rows}")
        self.rows_after_overwrite = validation["rows"]

    def figures(self) -> dict[str, Any]:
        if self.rows_after_overwrite is None:
            raise BenchmarkError(f"{self.system}: W1 was not validated")
        config = self.config
        early = window(self.durations, 1, *config.early_window)
        tail = window(self.durations, 1, *config.tail_window)
        figures: dict[str, Any] = {
            "system": self.system,
            "label": SYSTEM_LABELS[self.system],
            "appends": Stats.of_seconds(self.durations).to_dict(),
            "overwrite_ms": self.overwrite_s * 1000,
            "early_median_ms": median(early) * 1000,
            "tail_median_ms": median(tail) * 1000,
            "growth_tail_vs_early": ratio(median(tail), median(early)),
            "commits_in_history": self.handle.commit_count(),
            "rows_after_overwrite": self.rows_after_overwrite,
            "validated": True,
            "append_ms": [d * 1000 for d in self.durations],
            "warnings": self.warnings.to_list(),
        }
        if self.counting:
            figures["ops"] = {
                "appends_mean": mean_ops(self.ops),
                "overwrite": {**self.overwrite_ops, "total": sum(self.overwrite_ops.values())},
                "early_mean": mean_ops(window(self.ops, 1, *config.early_window)),
                "per_append": self.ops,
            }
        return figures


def build_w1_table(system: str, directory: Path, config: W1Config, data=None, ctx: RunContext | None = None):
    """Create ``system``'s W1 table under ``directory``, run the appends and the overwrite, validate.

    Returns ``(handle, figures)``; the handle stays usable (e.g. for the history
    extension or an expiry workload). Raises BenchmarkError if the table read
    back is not what was written.
    """
    runs = build_w1_tables([system], {system: directory}, config, data=data, ctx=ctx, interleave=False)
    return runs[system].handle, runs[system].figures()


def build_w1_tables(
    systems, directories: dict[str, Path], config: W1Config, data=None, ctx: RunContext | None = None, interleave: bool = True
) -> dict[str, W1Run]:
    """W1 on several systems: one after the other, or interleaved commit by commit.

    Interleaved, round i makes commit i on every system, in an order rotated
    each round, with a garbage collection before each commit: every system then
    sees the same machine load over time (on a shared machine the load drifts
    by more than the differences measured). In turn, the garbage is collected
    between systems. Either way the harness's objects are frozen out of the
    garbage collector's sight while commits are timed (:func:`frozen_heap`),
    and every table is read back and checked.
    """
    log = ctx.log if ctx else (lambda _msg: None)
    data = data or make_w1_data(config)
    runs: dict[str, W1Run] = {}
    every = max(1, config.appends // 4)
    if interleave:
        runs = {s: W1Run(s, directories[s], config, data) for s in systems}
        order = list(runs)
        with frozen_heap():
            for i in range(config.appends):
                k = i % len(order)
                for system in order[k:] + order[:k]:
                    collect_garbage()
                    runs[system].append_next()
                if (i + 1) % every == 0:
                    last = ", ".join(f"{s} {r.durations[-1] * 1000:.1f}" for s, r in runs.items())
                    log(f"{i + 1}/{config.appends} appends interleaved; last ms: {last}")
        for run in runs.values():
            run.validate_appends()
        with frozen_heap():
            for system in order:
                collect_garbage()
                runs[system].overwrite()
        for run in runs.values():
            run.validate_overwrite()
        return runs
    for system in systems:
        log(f"W1 on {SYSTEM_LABELS[system]} ...")
        run = W1Run(system, directories[system], config, data)
        with frozen_heap():
            for i in range(config.appends):
                run.append_next()
                if (i + 1) % every == 0:
                    log(f"{system}: {i + 1}/{config.appends} appends, last {run.durations[-1] * 1000:.1f} ms")
        run.validate_appends()
        with frozen_heap():
            run.overwrite()
        run.validate_overwrite()
        runs[system] = run
    collect_garbage()
    return runs


def count_fsyncs(handle, batch: pa.Table) -> int:
    """fsync/fdatasync calls made from Python during one append (untimed probe).

    Counts only calls through Python's ``os`` module, so it means something for
    ours; deltalake (Rust) and pyiceberg's SQLite sync outside Python.
    """
    import os

    calls = 0
    real = {name: getattr(os, name) for name in ("fsync", "fdatasync") if hasattr(os, name)}

    def counting(fn):
        def wrapper(fd):
            nonlocal calls
            calls += 1
            return fn(fd)

        return wrapper

    try:
        for name, fn in real.items():
            setattr(os, name, counting(fn))
        handle.append(batch)
    finally:
        for name, fn in real.items():
            setattr(os, name, fn)
    return calls


def extend_history(
    handle, gen: DataGen, config: W1Config, first_commit: int, ctx: RunContext | None = None, control=None, gc_each: bool = False
) -> dict[str, Any]:
    """Append until the table has ``late_window[1]`` commits; time and count the commits of the late window.

    ``first_commit`` is the number the next commit will get. Commits in the late
    window use ``rows_per_append`` rows (like the early W1 commits they are
    compared with); the others ``history_rows``.

    ``control``, a fresh empty table handle of the same system, gets its early
    window (commits 5..15) interleaved one to one with the late window of the
    long table, so both are timed under the same machine load: on a shared
    machine the early window, timed minutes before, can be slower or faster for
    reasons that have nothing to do with history. ``gc_each``: collect garbage
    before each timed commit (as the interleaved W1 does).
    """
    log = ctx.log if ctx else (lambda _msg: None)
    lo, hi = config.late_window
    clo, chi = config.early_window
    durations: list[float] = []
    ops: list[dict[str, int]] = []
    control_durations: list[float] = []
    control_ops: list[dict[str, int]] = []
    control_gen = DataGen(config.seed + 7919, config.partitions)
    expected_total = config.overwrite_rows
    counting = handle.ops() is not None

    def commit(target, batch, times, op_log):
        if gc_each and times is not None:
            collect_garbage()
        target.reset_ops()
        t0 = time.perf_counter()
        target.append(batch)
        elapsed = time.perf_counter() - t0
        if times is not None:
            times.append(elapsed)
            if counting:
                op_log.append(target.ops())
        return elapsed

    started = time.perf_counter()
    n = first_commit
    control_n = 1
    while n <= hi:
        in_window = lo <= n <= hi
        paired = control is not None and in_window
        if paired:
            # Bring the control table to the start of its window; then one control commit per late
            # commit, alternately before and after it.
            while control_n < clo:
                commit(control, control_gen.batch(config.rows_per_append), None, None)
                control_n += 1
        control_first = (n - lo) % 2 == 0
        if paired and control_first and control_n <= chi:
            commit(control, control_gen.batch(config.rows_per_append), control_durations, control_ops)
            control_n += 1
        size = config.rows_per_append if in_window else config.history_rows
        batch = gen.batch(size)
        elapsed = commit(handle, batch, durations if in_window else None, ops)
        if paired and not control_first and control_n <= chi:
            commit(control, control_gen.batch(config.rows_per_append), control_durations, control_ops)
            control_n += 1
        expected_total += size
        got = handle.last_commit_id()
        if handle.system == "ours" and got != n:
            raise BenchmarkError(f"ours: history commit got snapshot id {got}, expected {n}")
        if n % 200 == 0:
            log(f"{handle.system}: history at commit {n}, last {elapsed * 1000:.1f} ms")
        n += 1
    wall = time.perf_counter() - started
    if handle.system == "ours":
        total = handle.last_snapshot.total_record_count
        if total != expected_total:
            raise BenchmarkError(f"ours: snapshot {n - 1} says {total} rows, expected {expected_total}")
    out = {
        "late_window": [lo, hi],
        "late_ms": [d * 1000 for d in durations],
        "late_median_ms": median(durations) * 1000,
        "late_mean_ms": sum(durations) / len(durations) * 1000,
        "late_ops_mean": mean_ops(ops) if counting else None,
        "late_ops": ops if counting else None,
        "commits": n - 1,
        "rows": expected_total,
        "extension_wall_s": wall,
    }
    if control is not None and control_durations:
        out["control_window"] = [clo, chi]
        out["control_ms"] = [d * 1000 for d in control_durations]
        out["control_median_ms"] = median(control_durations) * 1000
        out["control_mean_ms"] = sum(control_durations) / len(control_durations) * 1000
        out["control_ops_mean"] = mean_ops(control_ops) if counting else None
        out["ratio_median_paired"] = ratio(out["late_median_ms"], out["control_median_ms"])
    return out


# -- the workload -------------------------------------------------------------------------


def run(ctx: RunContext) -> dict[str, Any]:
    config = W1Config.for_context(ctx)
    interleave = ctx.overrides.get("order", "interleaved") != "sequential"
    data = make_w1_data(config)
    systems = [s for s in SYSTEMS if s in ctx.systems]
    result: dict[str, Any] = {
        "workload": NAME,
        "order": "interleaved" if interleave else "sequential",
        "config": {**asdict(config), "late_window": list(config.late_window)},
        "systems": {},
    }
    ctx.log(f"W1 on {', '.join(systems)} ({result['order']}) ...")
    started = time.perf_counter()
    runs = build_w1_tables(systems, {s: ctx.workdir(NAME, s) for s in systems}, config, data=data, ctx=ctx, interleave=interleave)
    result["w1_wall_s"] = time.perf_counter() - started
    for system, w1 in runs.items():
        result["systems"][system] = w1.figures()
    ours_run = runs.get("ours")
    runs = None  # drop the peers' handles
    collect_garbage(3)
    if ours_run is not None and config.history_commits:
        figures = result["systems"]["ours"]
        # The generator continues after the W1 rows, so ids stay unique.
        gen = DataGen(config.seed, config.partitions)
        gen.next_id, gen.batches = data[0].next_id, data[0].batches
        control = open_system("ours", ctx.workdir(NAME, "ours-control"), name="w1-control")
        ctx.log(f"ours: extending the history to {config.late_window[1]} commits ...")
        with frozen_heap():
            history = extend_history(ours_run.handle, gen, config, first_commit=config.appends + 2, ctx=ctx, control=control, gc_each=interleave)
        # Untimed probe on the control table: how many fsyncs one commit makes.
        history["fsyncs_per_commit"] = count_fsyncs(control, DataGen(config.seed + 1, config.partitions).batch(config.rows_per_append))
        del control
        early = window(figures["append_ms"], 1, *config.early_window)
        history["early_window"] = list(config.early_window)
        history["early_median_ms"] = median(early)
        history["early_mean_ms"] = sum(early) / len(early)
        history["early_ops_mean"] = figures["ops"]["early_mean"]
        history["ratio_median"] = ratio(history["late_median_ms"], history["early_median_ms"])
        history["ratio_mean"] = ratio(history["late_mean_ms"], history["early_mean_ms"])
        if history["late_ops_mean"] and history["early_ops_mean"]:
            history["ratio_ops"] = ratio(history["late_ops_mean"]["total"], history["early_ops_mean"]["total"])
        figures["history"] = history
    ours_run = None
    collect_garbage()
    ours = result["systems"].get("ours")
    result["ratios"] = {}
    if ours:
        for peer in ("delta", "delta-open", "iceberg"):
            other = result["systems"].get(peer)
            if not other:
                continue
            r = {
                "mean": ratio(other["appends"]["mean_ms"], ours["appends"]["mean_ms"]),
                "median": ratio(other["appends"]["median_ms"], ours["appends"]["median_ms"]),
                "p95": ratio(other["appends"]["p95_ms"], ours["appends"]["p95_ms"]),
                "overwrite": ratio(other["overwrite_ms"], ours["overwrite_ms"]),
                "target": TARGETS[peer],
            }
            r["met_median"] = bool(r["median"] >= TARGETS[peer])
            r["met_mean"] = bool(r["mean"] >= TARGETS[peer])
            result["ratios"][f"{peer}/ours"] = r
    return result


def _verdict(r: dict[str, Any]) -> str:
    if r["met_median"] and r["met_mean"]:
        return "MET"
    if r["met_median"]:
        return "MET on median (not on mean)"
    if r["met_mean"]:
        return "MET on mean only -> MISSED"
    return "MISSED"


def render(result: dict[str, Any]) -> str:
    config = result["config"]
    systems = result["systems"]
    lo, hi = config["early_window"]
    tlo, thi = config["appends"] - (hi - lo), config["appends"]
    out = [
        heading(
            f"W1 commits: {config['appends']} appends x {config['rows_per_append']:,} rows over "
            f"{config['partitions']} partitions, then 1 overwrite of {config['overwrite_rows']:,} rows"
        )
    ]

    rows = []
    for system in SYSTEMS:
        f = systems.get(system)
        if not f:
            continue
        a = f["appends"]
        rows.append(
            [
                f["label"],
                a["n"],
                fmt_ms(a["mean_ms"]),
                fmt_ms(a["median_ms"]),
                fmt_ms(a["p95_ms"]),
                fmt_ms(a["min_ms"]),
                fmt_ms(a["max_ms"]),
                fmt_ms(f["overwrite_ms"]),
                fmt_ms(f["early_median_ms"]),
                fmt_ms(f["tail_median_ms"]),
                fmt_ratio(f["growth_tail_vs_early"]),
                f"{a['total_s']:.1f}",
            ]
        )
    order = result.get("order", "sequential")
    out.append(
        f"\nPer-commit time of the appends, ms ({order}; every table read back and checked after the appends and the overwrite)"
    )
    out.append(
        render_table(
            ["system", "commits", "mean", "median", "p95", "min", "max", "overwrite", f"med {lo}..{hi}", f"med {tlo}..{thi}", "growth", "sum s"],
            rows,
        )
    )

    bucket = max(1, math.ceil(config["appends"] / 10))
    starts = list(range(0, config["appends"], bucket))
    rows = []
    for system in SYSTEMS:
        f = systems.get(system)
        if f:
            rows.append([f["label"]] + [fmt_ms(median(f["append_ms"][i : i + bucket])) for i in starts])
    if rows:
        out.append("\nMedian ms per commit by commit range (growth with history shows here)")
        out.append(render_table(["system"] + [f"{i + 1}..{min(i + bucket, config['appends'])}" for i in starts], rows))

    if result["ratios"]:
        rows = []
        for key, r in result["ratios"].items():
            peer = key.rsplit("/", 1)[0]
            rows.append(
                [
                    f"{SYSTEM_LABELS[peer]} / ours",
                    fmt_ratio(r["mean"]),
                    fmt_ratio(r["median"]),
                    fmt_ratio(r["p95"]),
                    fmt_ratio(r["overwrite"]),
                    TARGET_TEXT[peer],
                    _verdict(r),
                ]
            )
        out.append("\nRatios vs ours (per-commit append time; > 1 means ours is faster)")
        out.append(render_table(["ratio", "mean", "median", "p95", "overwrite", "target (per commit)", "verdict"], rows, align="lrrrrll"))
    elif "ours" not in systems:
        out.append("\n(no ratios: ours did not run)")

    ours = systems.get("ours")
    if ours and "ops" in ours:
        ops = ours["ops"]
        history = ours.get("history")
        n = config["appends"]
        rows = [[f"W1 appends 1..{n} (mean)"] + [fmt_num(ops["appends_mean"][k], 2) for k in (*OP_KINDS, "total")]]
        rows.append([f"W1 overwrite (#{n + 1})"] + [fmt_num(ops["overwrite"][k], 2) for k in (*OP_KINDS, "total")])
        rows.append([f"commits {lo}..{hi} (mean)"] + [fmt_num(ops["early_mean"][k], 2) for k in (*OP_KINDS, "total")])
        if history and history.get("late_ops_mean"):
            llo, lhi = history["late_window"]
            rows.append([f"commits {llo}..{lhi} (mean)"] + [fmt_num(history["late_ops_mean"][k], 2) for k in (*OP_KINDS, "total")])
        out.append("\nStorage operations per commit, ours")
        out.append(render_table(["commits", *OP_KINDS, "total"], rows))

    if ours and ours.get("history"):
        h = ours["history"]
        llo, lhi = h["late_window"]
        out.append(
            f"\nCommit #{config['history_commits']:,} vs commit #10, ours (history extended to {h['commits']:,} commits "
            f"with {config['history_rows']}-row appends; the compared commits are all {config['rows_per_append']:,}-row appends)"
        )

        def ops_total(key):
            return fmt_num((h.get(key) or {}).get("total"), 2)

        rows = [[f"commits {lo}..{hi} (W1, timed earlier)", fmt_ms(h["early_median_ms"]), fmt_ms(h["early_mean_ms"]), ops_total("early_ops_mean")]]
        if "control_median_ms" in h:
            rows.append(
                [f"commits {lo}..{hi} (fresh table, interleaved)", fmt_ms(h["control_median_ms"]), fmt_ms(h["control_mean_ms"]), ops_total("control_ops_mean")]
            )
        rows.append([f"commits {llo}..{lhi}", fmt_ms(h["late_median_ms"]), fmt_ms(h["late_mean_ms"]), ops_total("late_ops_mean")])
        rows.append([f"late / early (W1)", fmt_ratio(h["ratio_median"]), fmt_ratio(h["ratio_mean"]), fmt_ratio(h.get("ratio_ops"))])
        if "control_median_ms" in h:
            rows.append(
                [
                    "late / early (interleaved)",
                    fmt_ratio(h["ratio_median_paired"]),
                    fmt_ratio(ratio(h["late_mean_ms"], h["control_mean_ms"])),
                    fmt_ratio(ratio((h.get("late_ops_mean") or {}).get("total"), (h.get("control_ops_mean") or {}).get("total"))),
                ]
            )
        out.append(render_table(["window", "median ms", "mean ms", "ops/commit"], rows))
        judged = h.get("ratio_median_paired", h["ratio_median"])
        basis = "interleaved" if "ratio_median_paired" in h else "W1"
        out.append(
            f"  target: flat (ratio ~1.0) -> {'FLAT' if judged <= FLAT_LIMIT else 'GROWS'} "
            f"(median ratio {judged:.2f} {basis}, flagged above {FLAT_LIMIT:.2f}); extension took {h['extension_wall_s']:.1f} s"
        )

    notes = []
    if ours and ours.get("history", {}).get("fsyncs_per_commit"):
        notes.append(
            f"snaptable (ours): one {config['rows_per_append']:,}-row append called fsync {ours['history']['fsyncs_per_commit']} times"
            "; deltalake writes local files without fsync and pyiceberg syncs only its SQLite catalog, "
            "so ours' times include durability work the peers skip (it weighs most when other processes load the disk)"
        )
    for system in SYSTEMS:
        f = systems.get(system)
        if not f:
            continue
        g = f["growth_tail_vs_early"]
        if not math.isnan(g) and g > FLAT_LIMIT:
            extra = " (noise or growth: see the interleaved history check above)" if system == "ours" and f.get("history") else ""
            notes.append(
                f"{f['label']}: per-commit time grows with history: median {fmt_ms(f['early_median_ms'])} ms "
                f"at commits {lo}..{hi} -> {fmt_ms(f['tail_median_ms'])} ms at {tlo}..{thi} ({fmt_ratio(g)}){extra}"
            )
        for w in f["warnings"]:
            notes.append(f"{f['label']}: warning x{w['count']}: {w['message']}")
    if notes:
        out.append("\nNotes")
        out.extend(f"  - {n}" for n in notes)
    return "\n".join(out)
