"""Shared helpers: deterministic data, timing statistics, aligned text tables, run context."""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import math
import os
import platform
import random
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

#: The systems, in report order. ``ours`` is the baseline of every ratio.
#: ``delta`` calls ``write_deltalake(path, ...)`` (the log is loaded from storage on every
#: commit, as in a fresh Airflow task); ``delta-open`` passes one DeltaTable kept open.
SYSTEMS = ("ours", "delta", "delta-open", "iceberg")
SYSTEM_LABELS = {
    "ours": "snaptable (ours)",
    "delta": "deltalake",
    "delta-open": "deltalake (open DeltaTable)",
    "iceberg": "pyiceberg",
}

#: The kinds of storage operation our Storage counts.
OP_KINDS = ("read", "write", "list", "delete", "exists")

PARTITION_COLUMN = "p"

#: The schema of every benchmark table: a partition column and a few data columns.
SCHEMA = pa.schema(
    [
        pa.field("p", pa.int64()),
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("value", pa.float64()),
    ]
)


class BenchmarkError(Exception):
    """A run that must not print figures (a validation failed, a system is missing)."""


# -- data -----------------------------------------------------------------------


class DataGen:
    """Deterministic batches: the same seed and the same calls give the same rows.

    Ids are unique and increasing across batches. Rows go round-robin over the
    partitions, so every batch of >= ``partitions`` rows touches every partition
    (each commit writes the same number of files); names and values come from a
    generator seeded per batch.
    """

    def __init__(self, seed: int = 42, partitions: int = 10):
        self.seed = seed
        self.partitions = partitions
        self.next_id = 0
        self.batches = 0

    def batch(self, rows: int) -> pa.Table:
        rng = random.Random(self.seed * 1_000_003 + self.batches)
        start = self.next_id
        ids = list(range(start, start + rows))
        table = pa.table(
            {
                "p": pa.array([i % self.partitions for i in ids], pa.int64()),
                "id": pa.array(ids, pa.int64()),
                "name": pa.array([f"name-{rng.randrange(1_000_000):06d}" for _ in ids], pa.string()),
                "value": pa.array([rng.random() * 1000.0 for _ in ids], pa.float64()),
            },
            schema=SCHEMA,
        )
        self.next_id += rows
        self.batches += 1
        return table


# -- timing -------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class Stats:
    """Summary of durations, in milliseconds."""

    n: int
    mean_ms: float
    median_ms: float
    p95_ms: float
    min_ms: float
    max_ms: float
    total_s: float

    @classmethod
    def of_seconds(cls, seconds: Sequence[float]) -> "Stats":
        ms = [s * 1000.0 for s in seconds]
        if not ms:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan, 0.0)
        return cls(
            n=len(ms),
            mean_ms=sum(ms) / len(ms),
            median_ms=percentile(ms, 50),
            p95_ms=percentile(ms, 95),
            min_ms=min(ms),
            max_ms=max(ms),
            total_s=sum(seconds),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def timed(fn: Callable, *args, **kwargs) -> tuple[Any, float]:
    """(result, seconds) of one call, by time.perf_counter."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def ratio(numerator: float, denominator: float) -> float:
    if denominator is None or numerator is None or denominator == 0 or math.isnan(denominator):
        return math.nan
    return numerator / denominator


def collect_garbage(rounds: int = 1) -> None:
    """Run between systems, so one system's garbage is not collected on another's clock."""
    for _ in range(rounds):
        gc.collect()


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Collect, then move every object alive now out of the collector's sight (gc.freeze).

    The harness's own objects (pre-generated batches, imported modules, handles)
    then neither slow down the collections that happen during a timed commit nor
    make the collections between commits expensive (~100 ms each without it).
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.collect()


# -- warnings and log records raised during a run ------------------------------------------


class WarningLog:
    """Distinct warnings (Python warnings and WARNING+ log records) with how often each came."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, text: str) -> None:
        text = " ".join(text.split())
        if len(text) > 300:
            text = text[:297] + "..."
        self.counts[text] = self.counts.get(text, 0) + 1

    def to_list(self) -> list[dict[str, Any]]:
        return [{"message": m, "count": c} for m, c in self.counts.items()]


class _LogCollector(logging.Handler):
    def __init__(self, sink: WarningLog):
        super().__init__(level=logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink.add(f"[log {record.name}] {record.getMessage()}")
        except Exception:  # noqa: BLE001 - never let a log record break a benchmark
            pass


@contextlib.contextmanager
def capture_warnings(sink: WarningLog | None = None) -> Iterator[WarningLog]:
    """Collect Python warnings and WARNING+ log records raised inside, into ``sink`` (or a new log)."""
    sink = sink if sink is not None else WarningLog()
    handler = _LogCollector(sink)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield sink
    finally:
        root.removeHandler(handler)
    for w in caught:
        sink.add(f"[{w.category.__name__}] {w.message} ({Path(w.filename).name}:{w.lineno})")


# -- formatting ---------------------------------------------------------------------------


def fmt_ms(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def fmt_ratio(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.2f}x"


def fmt_num(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None, indent: str = "  ") -> str:
    """An aligned text table. ``align``: one char per column, 'l' or 'r' (default: first left, rest right)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    ncols = len(headers)
    align = align or ("l" + "r" * (ncols - 1))
    widths = [max(len(r[i]) for r in cells) for i in range(ncols)]

    def line(row: Sequence[str]) -> str:
        parts = [row[i].ljust(widths[i]) if align[i] == "l" else row[i].rjust(widths[i]) for i in range(ncols)]
        return (indent + "  ".join(parts)).rstrip()

    out = [line(cells[0]), indent + "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in cells[1:])
    return "\n".join(out)


def heading(text: str) -> str:
    return f"\n{text}\n{'=' * len(text)}"


# -- run context -------------------------------------------------------------------------


@dataclass
class RunContext:
    """What every workload gets: where to put tables, which systems, quick or full."""

    root: Path
    systems: tuple[str, ...]
    quick: bool = False
    seed: int = 42
    verbose: bool = True
    overrides: dict[str, Any] = field(default_factory=dict)

    def log(self, message: str) -> None:
        if self.verbose:
            print(f"  .. {message}", file=sys.stderr, flush=True)

    def workdir(self, *parts: str) -> Path:
        path = self.root.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path


def filesystem_type(path: Path) -> str:
    """The mounted filesystem type holding ``path`` (Linux /proc/mounts), or '?'."""
    try:
        target = os.path.realpath(path)
        best, best_type = "", "?"
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    mount, fstype = parts[1], parts[2]
                    if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best):
                        best, best_type = mount, fstype
        return best_type
    except OSError:
        return "?"


def machine_load() -> dict[str, Any]:
    """Load average and, where the kernel has it, CPU/IO pressure (share of time stalled, last 10 s)."""
    out: dict[str, Any] = {}
    try:
        out["loadavg_1m"] = os.getloadavg()[0]
    except OSError:
        out["loadavg_1m"] = None
    for kind in ("cpu", "io"):
        try:
            with open(f"/proc/pressure/{kind}") as f:
                some = f.readline().split()
            out[f"{kind}_pressure_10s"] = float(some[1].split("=")[1])
        except (OSError, IndexError, ValueError):
            out[f"{kind}_pressure_10s"] = None
    return out


def describe_load(load: dict[str, Any]) -> str:
    parts = []
    if load.get("loadavg_1m") is not None:
        parts.append(f"load average {load['loadavg_1m']:.2f}")
    for kind in ("cpu", "io"):
        if load.get(f"{kind}_pressure_10s") is not None:
            parts.append(f"{kind} pressure {load[f'{kind}_pressure_10s']:.0f}%")
    return ", ".join(parts) or "unknown"


def environment_info(root: Path) -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "dir": str(root),
        "dir_filesystem": filesystem_type(root),
        "versions": {},
    }
    for module in ("pyarrow", "fsspec", "deltalake", "pyiceberg", "sqlalchemy"):
        try:
            info["versions"][module] = __import__(module).__version__
        except Exception:  # noqa: BLE001 - missing or odd module: report it as absent
            info["versions"][module] = None
    return info


# -- what several benchmarks share ------------------------------------------------------------


def benchmark_parser(module: str, doc: str) -> argparse.ArgumentParser:
    """The parser of ``python -m <module>``, described by the first line of its docstring."""
    return argparse.ArgumentParser(prog=f"python -m {module}", description=doc.splitlines()[0])


def add_spark_run_arguments(parser: argparse.ArgumentParser, *, repeat: int, runs: str, master: str, place: str, quick: str) -> None:
    """The options of every Spark benchmark: timed rounds, the Spark master, where its tables go, a smoke test."""
    parser.add_argument("--repeat", type=int, default=repeat, help=f"{runs} (default {repeat})")
    parser.add_argument("--master", default=master, help=f"Spark master (default {master})")
    parser.add_argument("--dir", help=f"{place} (default: a temporary directory)")
    parser.add_argument("--quick", action="store_true", help=f"smoke test: {quick}")


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bulk_delete_bound(storage, doomed: list[str], read_seconds: float, **figures: Any) -> dict:
    """An expiry's lower bound, finished: the caller timed the reads it cannot avoid (``read_seconds``);
    this times the bulk delete of the files it must delete (``doomed``) and returns both, with ``figures``."""
    started = time.perf_counter()
    storage.delete_files(doomed)
    delete_seconds = time.perf_counter() - started
    return {
        "seconds": read_seconds + delete_seconds, "read_seconds": read_seconds, "delete_seconds": delete_seconds,
        **figures, "files_deleted": len(doomed), "peak_rss_mb": peak_rss_mb(),
    }
