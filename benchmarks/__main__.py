"""``python -m benchmarks``: run the selected workloads on the selected systems and print the figures."""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import w1_commits, w2_expiry
from benchmarks.common import SYSTEM_LABELS, SYSTEMS, BenchmarkError, RunContext, describe_load, environment_info, machine_load
from benchmarks.systems import unavailable_reason

#: name -> module with NAME, DESCRIPTION, run(ctx) and render(result).
WORKLOADS = {w1_commits.NAME: w1_commits, w2_expiry.NAME: w2_expiry}

_SYSTEM_ALIASES = {
    "ours": "ours",
    "snaptable": "ours",
    "delta": "delta",
    "deltalake": "delta",
    "delta-open": "delta-open",
    "delta_open": "delta-open",
    "iceberg": "iceberg",
    "pyiceberg": "iceberg",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Compare airflow_snaptable's commit performance with deltalake and pyiceberg, in one run, on local files.",
        epilog="Workloads: " + "; ".join(f"{name}: {mod.DESCRIPTION}" for name, mod in WORKLOADS.items()),
    )
    parser.add_argument("--quick", action="store_true", help="smoke test: 50 appends, 300-commit history for ours (W2: 2 runs, histories of 300 and 1500)")
    parser.add_argument(
        "--only",
        action="append",
        metavar="SYSTEM",
        help=(
            "run only these systems: ours, delta (write_deltalake(path)), delta-open (write_deltalake(DeltaTable) "
            "kept open), iceberg; repeat or comma-separate; default all"
        ),
    )
    parser.add_argument(
        "--workload", action="append", metavar="NAME", help=f"run only these workloads ({', '.join(WORKLOADS)}; default all)"
    )
    parser.add_argument("--dir", type=Path, help="put the tables under a new directory inside DIR and keep them (default: a temp dir, removed)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write every figure (and the raw timings) as JSON to PATH")
    parser.add_argument("--seed", type=int, default=42, help="seed of the data generator (default 42)")
    parser.add_argument("--appends", type=int, help="W1 and W2: number of appends (default 200, --quick 50)")
    parser.add_argument("--repeats", type=int, help="W2: timed runs per system, each on a fresh copy, medians reported (default 3, --quick 2)")
    parser.add_argument("--skip-flat", action="store_true", help="W2: skip the flat-in-n part (two long histories of ours)")
    parser.add_argument("--history", type=int, help="W1: extend ours to this many commits (default 1000, --quick 300; 0 = skip)")
    parser.add_argument(
        "--order",
        choices=("interleaved", "sequential"),
        default="interleaved",
        help=(
            "interleaved (default): commit i on every system in turn, rotating, so all see the same machine load; "
            "sequential: one system after the other, garbage collected between them"
        ),
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    return parser.parse_args(argv)


def selected_systems(only: list[str] | None) -> tuple[str, ...]:
    if not only:
        return SYSTEMS
    chosen = set()
    for item in only:
        for name in item.split(","):
            name = name.strip().lower()
            if not name:
                continue
            if name not in _SYSTEM_ALIASES:
                raise SystemExit(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")
            chosen.add(_SYSTEM_ALIASES[name])
    return tuple(s for s in SYSTEMS if s in chosen)


def _clean_for_json(value: Any) -> Any:
    """NaN/inf are not JSON: write them as null."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {str(k): _clean_for_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_for_json(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wanted = selected_systems(args.only)
    workloads = args.workload or list(WORKLOADS)
    for name in workloads:
        if name not in WORKLOADS:
            raise SystemExit(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")

    systems = []
    skipped: dict[str, str] = {}
    for system in wanted:
        reason = unavailable_reason(system)
        if reason is None:
            systems.append(system)
        else:
            skipped[system] = reason
            print(f"warning: skipping {SYSTEM_LABELS[system]}: {reason}", file=sys.stderr)
    if args.only and skipped:
        print("error: a system asked for with --only cannot run", file=sys.stderr)
        return 2
    if not systems:
        print("error: no system can run", file=sys.stderr)
        return 2

    temp = None
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix="bench-", dir=args.dir)).resolve()
    else:
        temp = tempfile.TemporaryDirectory(prefix="snaptable-bench-")
        root = Path(temp.name).resolve()

    ctx = RunContext(
        root=root,
        systems=tuple(systems),
        quick=args.quick,
        seed=args.seed,
        verbose=not args.quiet,
        overrides={
            "appends": args.appends, "history_commits": args.history, "order": args.order, "repeats": args.repeats,
            "skip_flat": args.skip_flat,
        },
    )
    env = environment_info(root)
    report: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv[1:] if argv is None else argv,
        "quick": args.quick,
        "systems": list(systems),
        "skipped": skipped,
        "environment": env,
        "workloads": {},
    }
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v and k != "sqlalchemy")
    print(f"snaptable benchmarks{' (quick)' if args.quick else ''}: {', '.join(SYSTEM_LABELS[s] for s in systems)}")
    print(f"  python {env['python']}, {env['cpu_count']} CPUs, {versions}")
    print(f"  tables under {root} ({env['dir_filesystem']}){'' if temp else ', kept'}")
    report["load_start"] = machine_load()
    print(f"  machine at start: {describe_load(report['load_start'])}")
    busy = (report["load_start"].get("loadavg_1m") or 0) > (env["cpu_count"] or 1)
    if busy:
        print("  warning: the machine is busy (load average above the CPU count): the figures will be noisy")
    started = time.perf_counter()
    status = 0
    try:
        for name in workloads:
            module = WORKLOADS[name]
            try:
                result = module.run(ctx)
            except BenchmarkError as exc:
                print(f"\nerror: workload {name} failed validation, no figures printed: {exc}", file=sys.stderr)
                report["workloads"][name] = {"error": str(exc)}
                status = 1
                continue
            report["workloads"][name] = result
            print(module.render(result), flush=True)
    finally:
        report["elapsed_s"] = time.perf_counter() - started
        if temp is not None:
            temp.cleanup()
    report["load_end"] = machine_load()
    print(f"\ntotal {report['elapsed_s']:.1f} s; machine at end: {describe_load(report['load_end'])}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(_clean_for_json(report), indent=2) + "\n")
        print(f"figures written to {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
