"""``snaptable``: a thin command line over the core, for people and for tests.

Every command prints an aligned table for people, or JSON with ``--json``.
Typed errors exit with status 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import Any, Sequence

from airflow_snaptable.core import SnapTableError, Table


def format_time(millis: int | None) -> str:
    if millis is None:
        return "-"
    return datetime.fromtimestamp(millis / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Aligned plain-text columns; numbers right-aligned."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [bool(rows) and all(_is_number(row[i]) for row in rows if row[i] is not None) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))).rstrip()

    return "\n".join([line(list(headers)), line(["-" * w for w in widths])] + [line(r) for r in cells])


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _open(args) -> Table:
    options = json.loads(args.storage_options) if args.storage_options else None
    return Table.open(args.uri, options)


def cmd_snapshots(args) -> Any:
    table = _open(args)
    snapshots = table.snapshots()
    if args.json:
        return [s.to_dict() for s in snapshots]
    rows = [
        (s.id, s.commit_kind.value, format_time(s.time_millis), s.total_record_count, s.delta_record_count,
         s.summary.get("added_files", 0), s.summary.get("deleted_files", 0), s.commit_user, s.watermark)
        for s in snapshots
    ]
    return render_table(["id", "kind", "committed (UTC)", "records", "delta", "+files", "-files", "user", "watermark"], rows)


def cmd_show(args) -> Any:
    table = _open(args)
    latest, earliest = table.latest_snapshot(), table.earliest_snapshot()
    info = {
        "uri": table.uri,
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in table.arrow_schema],
        "partition_keys": list(table.partition_keys),
        "options": table.schema.options,
        "earliest_snapshot_id": earliest.id if earliest else None,
        "latest_snapshot_id": latest.id if latest else None,
        "total_record_count": latest.total_record_count if latest else 0,
        "data_files": len(table.scan().files()) if latest else 0,
    }
    if args.json:
        return info
    lines = [
        f"table       {info['uri']}",
        f"partitions  {', '.join(info['partition_keys']) or '(none)'}",
        f"snapshots   {info['earliest_snapshot_id'] or '-'} .. {info['latest_snapshot_id'] or '-'}",
        f"records     {info['total_record_count']}",
        f"data files  {info['data_files']}",
        "options     " + (", ".join(f"{k}={v}" for k, v in sorted(info["options"].items())) or "(defaults)"),
        "",
        render_table(["column", "type", "nullable"], [(c["name"], c["type"], c["nullable"]) for c in info["schema"]]),
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="snaptable", description="Inspect and maintain snapshot tables.")
    commands = parser.add_subparsers(dest="command", required=True)

    def add(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("uri", help="table location: a local path or an fsspec URL such as s3://bucket/table")
        sub.add_argument("--storage-options", help="fsspec storage options as JSON")
        sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
        sub.set_defaults(handler=handler)
        return sub

    add("snapshots", cmd_snapshots, "list the table's snapshots, earliest first")
    add("show", cmd_show, "show the table's schema, options and snapshot range")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.handler(args)
    except SnapTableError as exc:
        print(f"snaptable: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str) if args.json else result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
