"""Draw a :class:`~airflow_snaptable.core.timeline.model.Timeline`: standalone SVG text, and an HTML page around it.

The SVG needs nothing from outside (no fonts, scripts or images: generic font families, one
inline ``<style>``). Every drawn thing is a ``<g>`` whose class and ``data-*`` attributes say
what it is, with a ``<title>`` tooltip::

    <g class="snapshot" data-snapshot-id="3" data-kind="APPEND" data-records="30" data-retained="true" ...>
    <g class="tag" data-tag="t1" data-snapshot-id="2" data-source="manual" data-snapshot-expired="false">
    <g class="consumer" data-consumer="reader" data-next-snapshot="4">
    <g class="expiry-window" data-snapshot-ids="1 2">
    <g class="rollback" data-from-snapshot-id="7" data-to-snapshot-id="3">, <g class="gap" ...>

Layout: one slot per snapshot in commit-time order, evenly spaced (commits minutes and months apart
stay readable; each slot is labelled with its commit time), marks on the total-records line; tags
hang below their snapshot, consumers below them, at the snapshot they read next (a "next" slot
after the latest when they have read everything). All text from the table is escaped.
"""

from __future__ import annotations

import html
import re
from datetime import datetime, timezone
from typing import Sequence

from airflow_snaptable.core.timeline.model import Timeline

STEP = 104
LEFT = 84
RIGHT = 48
CHART_TOP = 92
CHART_HEIGHT = 170
AXIS_Y = CHART_TOP + CHART_HEIGHT
ROW = 20
MAX_LABEL = 16
ID_LABEL = 11  # characters of a snapshot id over its mark (Iceberg's have 19; the tooltip has it whole)
LEGEND_WIDTH = LEFT + 4 * 96 + 170 + 110 + 200
FONT = "'DejaVu Sans', 'Liberation Sans', Arial, Helvetica, sans-serif"
KIND_COLORS = {"APPEND": "#2e7d32", "OVERWRITE": "#ef6c00", "DELETE": "#c62828", "COMPACT": "#1565c0"}
KIND_LABELS = {"APPEND": "append", "OVERWRITE": "overwrite", "DELETE": "delete", "COMPACT": "compact"}
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

STYLE = f"""
.snaptable-timeline text {{ font-family: {FONT}; font-size: 11px; fill: #263238; }}
.snaptable-timeline .title {{ font-size: 15px; font-weight: bold; }}
.snaptable-timeline .muted {{ fill: #607d8b; }}
.snaptable-timeline .axis {{ stroke: #90a4ae; stroke-width: 1; }}
.snaptable-timeline .grid {{ stroke: #eceff1; stroke-width: 1; }}
.snaptable-timeline .records-line {{ fill: none; stroke: #78909c; stroke-width: 1.5; }}
.snaptable-timeline .expiry-window rect {{ fill: #ffcdd2; fill-opacity: 0.45; stroke: #e57373; stroke-dasharray: 4 3; }}
.snaptable-timeline .expiry-window text {{ fill: #c62828; }}
.snaptable-timeline .tag line, .snaptable-timeline .consumer line {{ stroke: #b0bec5; stroke-dasharray: 2 2; }}
.snaptable-timeline .tag rect {{ fill: #fff8e1; stroke: #f9a825; }}
.snaptable-timeline .tag.periodic rect {{ fill: #e8f5e9; stroke: #43a047; }}
.snaptable-timeline .tag.expired-snapshot rect {{ stroke-dasharray: 3 2; }}
.snaptable-timeline .consumer path {{ fill: #6a1b9a; }}
.snaptable-timeline .rollback path {{ fill: none; stroke: #6a1b9a; stroke-width: 1.5; stroke-dasharray: 5 3; }}
.snaptable-timeline .gap path {{ fill: none; stroke: #90a4ae; stroke-width: 1.5; }}
"""


def esc(value: object) -> str:
    """Text or attribute value: markup characters and quotes escaped, characters XML forbids replaced."""
    return html.escape(_NOT_XML.sub("\ufffd", str(value)), quote=True)


def short(text: str, limit: int = MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def format_millis(millis: int | None, with_date: bool = True) -> str:
    if millis is None:
        return "-"
    when = datetime.fromtimestamp(millis / 1000, timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC" if with_date else "%H:%M:%S")


def _attrs(**values: object) -> str:
    """``data-*`` attributes (``snapshot_id`` -> ``data-snapshot-id``); booleans as true/false, None left out."""
    parts = []
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        parts.append(f' data-{key.replace("_", "-")}="{esc(value)}"')
    return "".join(parts)


def _mark(kind: str, x: float, y: float, retained: bool) -> str:
    """The shape of a commit kind: append circle, overwrite square, delete triangle, compact diamond."""
    color = KIND_COLORS.get(kind, "#455a64")
    style = f'fill="{color}" stroke="{color}"' if retained else f'fill="#ffffff" stroke="{color}" stroke-dasharray="2 1.5"'
    style += ' stroke-width="1.5" class="mark"'
    r = 7
    if kind == "OVERWRITE":
        return f'<rect x="{x - r + 1}" y="{y - r + 1}" width="{2 * r - 2}" height="{2 * r - 2}" {style}/>'
    if kind == "DELETE":
        return f'<path d="M{x - r},{y - r + 1} L{x + r},{y - r + 1} L{x},{y + r} Z" {style}/>'
    if kind == "COMPACT":
        return f'<path d="M{x},{y - r - 1} L{x + r + 1},{y} L{x},{y + r + 1} L{x - r - 1},{y} Z" {style}/>'
    return f'<circle cx="{x}" cy="{y}" r="{r}" {style}/>'


class _Layout:
    """Where each snapshot (and the "next" slot) goes."""

    def __init__(self, timeline: Timeline):
        self.timeline = timeline
        self.slots = {p.id: i for i, p in enumerate(timeline.snapshots)}
        self.count = len(timeline.snapshots)
        self.next_slot = any(c.caught_up for c in timeline.consumers)
        self.next_id = (timeline.latest_snapshot_id or 0) + 1 if timeline.numbered_ids else None  # Iceberg's: random
        if self.next_slot:
            self.count += 1
        self.width = max(LEFT + self.count * STEP + RIGHT, LEGEND_WIDTH)
        self.top_records = max([p.total_records for p in timeline.snapshots] + [1])

    def x(self, snapshot_id: int | None) -> float | None:
        if snapshot_id in self.slots:
            return LEFT + (self.slots[snapshot_id] + 0.5) * STEP
        return None

    def consumer_x(self, consumer) -> float | None:
        """Its next snapshot's slot; once it has read everything, the slot of the snapshot not committed yet."""
        return LEFT + (self.count - 0.5) * STEP if consumer.caught_up else self.x(consumer.next_snapshot_id)

    def y(self, records: int) -> float:
        return round(AXIS_Y - 14 - (CHART_HEIGHT - 40) * records / self.top_records, 1)


def render_svg(timeline: Timeline, *, xml_declaration: bool = True) -> str:
    """The timeline as standalone SVG text (``xml_declaration=False`` to embed it in HTML)."""
    layout = _Layout(timeline)
    body: list[str] = []
    body += _expiry(timeline, layout)
    body += _axes(timeline, layout)
    body += _gaps(timeline, layout)
    body += _rollbacks(timeline, layout)
    body += _snapshots(timeline, layout)
    y, tags = _tags(timeline, layout, AXIS_Y + 52)
    y, consumers = _consumers(timeline, layout, y + 14)
    body += tags + consumers
    y, legend = _legend(y + 26)
    body += legend
    height = y + 16
    latest = timeline.latest_snapshot_id
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" class="snaptable-timeline" role="img" '
        f'width="{layout.width}" height="{height}" viewBox="0 0 {layout.width} {height}" '
        f'aria-label="{esc("timeline of " + timeline.uri)}"'
        + _attrs(table_uri=timeline.uri, format=timeline.format, earliest_snapshot_id=timeline.earliest_snapshot_id,
                 latest_snapshot_id=latest, generated_at_millis=timeline.generated_at_millis)
        + ">"
    )
    subtitle = (
        f"{timeline.format} table \u00b7 snapshots {timeline.earliest_snapshot_id or '-'}..{latest or '-'} \u00b7 "
        f"{len(timeline.tags)} tag(s) \u00b7 {len(timeline.consumers)} consumer(s) \u00b7 drawn {format_millis(timeline.generated_at_millis)}"
    )
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>' if xml_declaration else "", head,
        f"<title>{esc('Timeline of ' + timeline.uri)}</title>", f"<style>{STYLE}</style>",
        f'<rect x="0" y="0" width="{layout.width}" height="{height}" fill="#ffffff"/>',
        f'<text class="title" x="12" y="24">{esc(timeline.uri)}</text>', f'<text class="muted" x="12" y="42">{esc(subtitle)}</text>',
        *body, "</svg>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _axes(timeline: Timeline, layout: _Layout) -> list[str]:
    out = ['<g class="axes">']
    for fraction in (0, 0.5, 1):
        records = round(layout.top_records * fraction)
        y = layout.y(records)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{y}" x2="{layout.width - RIGHT}" y2="{y}"/>')
        out.append(f'<text class="muted" x="{LEFT - 8}" y="{y + 4}" text-anchor="end">{records}</text>')
    out.append(f'<text class="muted" x="12" y="{CHART_TOP - 4}">total records</text>')
    out.append(f'<line class="axis" x1="{LEFT}" y1="{AXIS_Y}" x2="{layout.width - RIGHT}" y2="{AXIS_Y}"/>')
    out.append(f'<text class="muted" x="12" y="{AXIS_Y + 16}">committed</text>')
    out.append("</g>")
    points = [f"{layout.x(p.id)},{layout.y(p.total_records)}" for p in timeline.snapshots]
    if len(points) > 1:
        out.append(f'<polyline class="records-line" points="{" ".join(points)}"/>')
    return out


def _expiry(timeline: Timeline, layout: _Layout) -> list[str]:
    ids = timeline.expiry_window
    xs = [x for x in (layout.x(i) for i in ids) if x is not None]
    if timeline.expiry_error:
        label = "next expiry: cannot tell (" + timeline.expiry_error + ")"
    elif ids:
        label = "next expiry removes " + (f"#{ids[0]}" if len(ids) == 1 else f"#{ids[0]}\u2013#{ids[-1]}")
    else:
        label = "next expiry removes nothing"
    options = ", ".join(f"{k}={v}" for k, v in timeline.expiry_options.items()) or "default expiry options"
    tooltip = f"{label} (a dry run of expire_snapshots under the table's options: {options})"
    out = [f'<g class="expiry-window"{_attrs(snapshot_ids=" ".join(map(str, ids)), error=timeline.expiry_error)}>',
           f"<title>{esc(tooltip)}</title>"]
    if xs:
        left, right = min(xs) - STEP / 2 + 4, max(xs) + STEP / 2 - 4
        out.append(f'<rect x="{left}" y="{CHART_TOP - 18}" width="{right - left}" height="{AXIS_Y - CHART_TOP + 18}" rx="4"/>')
        out.append(f'<text x="{left + 6}" y="{CHART_TOP - 6}">{esc(label)}</text>')
    else:
        out.append(f'<text x="{layout.width - RIGHT}" y="{CHART_TOP - 24}" text-anchor="end">{esc(short(label, 90))}</text>')
    out.append("</g>")
    return out


def _gaps(timeline: Timeline, layout: _Layout) -> list[str]:
    out = []
    order = [p.id for p in timeline.snapshots]
    for gap in timeline.gaps:
        before = next((i for i in order if i == gap.first_missing - 1), None)
        after = next((i for i in order if i == gap.last_missing + 1), None)
        if before is None or after is None or abs(layout.slots[after] - layout.slots[before]) != 1:
            continue
        x = (layout.x(before) + layout.x(after)) / 2
        span = f"#{gap.first_missing}" if gap.first_missing == gap.last_missing else f"#{gap.first_missing}\u2013#{gap.last_missing}"
        why = "expired" if gap.reason == "expired" else "missing (an interrupted rollback, or removed by hand)"
        y = AXIS_Y
        out.append(
            f'<g class="gap"{_attrs(first_missing=gap.first_missing, last_missing=gap.last_missing, reason=gap.reason)}>'
            f"<title>{esc(f'snapshots {span} {why}')}</title>"
            f'<path d="M{x - 5},{y + 6} L{x - 1},{y - 6} M{x + 1},{y + 6} L{x + 5},{y - 6}"/>'
            f'<text class="muted" x="{x}" y="{y - 10}" text-anchor="middle">{esc(span)}</text></g>'
        )
    return out


def _rollbacks(timeline: Timeline, layout: _Layout) -> list[str]:
    out = []
    for rollback in timeline.rollbacks:
        x1, x2 = layout.x(rollback.from_snapshot_id), layout.x(rollback.to_snapshot_id)
        source = timeline.snapshot(rollback.from_snapshot_id)
        if x1 is None or source is None:
            continue
        target = timeline.snapshot(rollback.to_snapshot_id)
        y1 = layout.y(source.total_records) - 24
        if x2 is None or target is None:  # the target expired with no tag: point off to the left
            x2, y2 = LEFT + 4, CHART_TOP
        else:
            y2 = layout.y(target.total_records) - 24
        control = CHART_TOP - 24
        tooltip = f"snapshot {rollback.from_snapshot_id} rolled the table back to snapshot {rollback.to_snapshot_id} (history kept)"
        out.append(
            f'<g class="rollback"{_attrs(rollback_kind=rollback.kind, from_snapshot_id=rollback.from_snapshot_id, to_snapshot_id=rollback.to_snapshot_id)}>'
            f"<title>{esc(tooltip)}</title>"
            f'<path d="M{x1},{y1} Q{(x1 + x2) / 2},{control} {x2},{y2}"/>'
            f'<path d="M{x2 - 5},{y2 - 7} L{x2},{y2} L{x2 + 5},{y2 - 7}"/></g>'
        )
    return out


def _snapshots(timeline: Timeline, layout: _Layout) -> list[str]:
    out = []
    pending = set(timeline.expiry_window)
    for point in timeline.snapshots:
        x, y = layout.x(point.id), layout.y(point.total_records)
        state = "kept only by a tag (expired)" if not point.retained else ("removed by the next expiry" if point.id in pending else "retained")
        if point.restorable_run_id is not None:
            state = f"removed, restorable until purged: snaptable undo <table> {point.restorable_run_id}"
        lines = [f"snapshot {point.id}: {point.kind}", f"committed {format_millis(point.time_millis)} by {point.commit_user}",
                 f"{point.total_records} records ({point.delta_records:+d}), " + (
                     "files changed: unknown" if point.added_files is None else f"+{point.added_files} / -{point.deleted_files} files")
                 + ("" if point.index_files is None else f", {point.index_files} index files"), state]
        if point.rollback_to is not None:
            lines.append(f"restores the state of snapshot {point.rollback_to}")
        attrs = _attrs(snapshot_id=point.id, kind=point.kind, records=point.total_records, time_millis=point.time_millis,
                       retained=point.retained, pending_expiry=point.id in pending, rollback_to=point.rollback_to,
                       restorable_run_id=point.restorable_run_id)
        out.append(
            f'<g class="snapshot"{attrs}><title>{esc(chr(10).join(lines))}</title>'
            f'<line class="grid" x1="{x}" y1="{y + 9}" x2="{x}" y2="{AXIS_Y}"/>'
            + _mark(point.kind, x, y, point.retained)
            + f'<text x="{x}" y="{y - 12}" text-anchor="middle">#{esc(short(str(point.id), ID_LABEL))}</text>'
            f'<text class="muted" x="{x}" y="{AXIS_Y + 16}" text-anchor="middle">{esc(format_millis(point.time_millis, False))}</text>'
            f'<text class="muted" x="{x}" y="{AXIS_Y + 29}" text-anchor="middle">{esc(format_millis(point.time_millis)[:10])}</text>'
            "</g>"
        )
    if layout.next_slot:
        x, label = LEFT + (layout.count - 0.5) * STEP, "next" if layout.next_id is None else f"next (#{layout.next_id})"
        out.append(f'<g class="next-snapshot"{_attrs(snapshot_id=layout.next_id)}><title>the next snapshot, not committed yet</title>'
                   f'<circle cx="{x}" cy="{AXIS_Y}" r="5" fill="#ffffff" stroke="#90a4ae" stroke-dasharray="2 2"/>'
                   f'<text class="muted" x="{x}" y="{AXIS_Y + 16}" text-anchor="middle">{label}</text></g>')
    return out


def _stacked(marks, top: int, x_of) -> tuple[dict[int, int], int]:
    """Row of each mark below its slot (several on one snapshot stack up); returns rows and the lane's bottom."""
    used: dict[float | None, int] = {}
    rows = {}
    for index, mark in enumerate(marks):
        x = x_of(mark)
        rows[index] = used.get(x, 0)
        used[x] = rows[index] + 1
    bottom = top + max(used.values(), default=0) * ROW
    return rows, bottom


def _tags(timeline: Timeline, layout: _Layout, top: int) -> tuple[int, list[str]]:
    out = [f'<text class="muted" x="12" y="{top + 13}">tags</text>']
    rows, bottom = _stacked(timeline.tags, top, lambda t: layout.x(t.snapshot_id))
    for index, tag in enumerate(timeline.tags):
        x = layout.x(tag.snapshot_id)
        if x is None:
            continue
        y = top + rows[index] * ROW
        kept = "its snapshot expired: the tag holds the only copy" if tag.snapshot_expired else "on a retained snapshot"
        expires = f"expires {format_millis(tag.expires_at_millis)}" if tag.expires_at_millis else "kept until deleted"
        lines = [f"tag {tag.name} ({tag.source}) on snapshot {tag.snapshot_id}", f"created {format_millis(tag.create_time_millis)}, {expires}", kept]
        if tag.id_reused:
            lines.append(f"snapshot id {tag.snapshot_id} now names another commit (a rollback reused it)")
        classes = " ".join(["tag", tag.source] + (["expired-snapshot"] if tag.snapshot_expired else []))
        label = short(tag.name)
        out.append(
            f'<g class="{esc(classes)}"{_attrs(tag=tag.name, snapshot_id=tag.snapshot_id, source=tag.source, snapshot_expired=tag.snapshot_expired, id_reused=tag.id_reused)}>'
            f"<title>{esc(chr(10).join(lines))}</title>"
            f'<line x1="{x}" y1="{AXIS_Y + 34}" x2="{x}" y2="{y + 2}"/>'
            f'<rect x="{x - STEP / 2 + 4}" y="{y + 1}" width="{STEP - 8}" height="{ROW - 4}" rx="3"/>'
            f'<text x="{x}" y="{y + 13}" text-anchor="middle">{esc(label)}</text></g>'
        )
    return max(bottom, top + ROW), out


def _consumers(timeline: Timeline, layout: _Layout, top: int) -> tuple[int, list[str]]:
    out = [f'<text class="muted" x="12" y="{top + 13}">consumers</text>']
    rows, bottom = _stacked(timeline.consumers, top, layout.consumer_x)
    for index, consumer in enumerate(timeline.consumers):
        x = layout.consumer_x(consumer)
        if x is None:
            continue  # a position outside the snapshots shown (expired below a tag-only one): listed in the page
        y = top + rows[index] * ROW
        state = "has read everything" if consumer.caught_up else f"reads snapshot {consumer.next_snapshot_id} next"
        # Iceberg's position is a sequence number along main: the consumer holds main's snapshot at the one before.
        keeps = f"snapshot {consumer.next_snapshot}" if timeline.numbered_ids else f"position {consumer.next_snapshot - 1}"
        tooltip = f"consumer {consumer.id}: {state}; expiry keeps {keeps} and later\nupdated {format_millis(consumer.update_time_millis)}"
        out.append(
            f'<g class="consumer"{_attrs(consumer=consumer.id, next_snapshot=consumer.next_snapshot, caught_up=consumer.caught_up, next_snapshot_id=consumer.next_snapshot_id)}>'
            f"<title>{esc(tooltip)}</title>"
            f'<path d="M{x - STEP / 2 + 8},{y + 3} l8,6 l-8,6 Z"/>'
            f'<text x="{x - STEP / 2 + 20}" y="{y + 13}">{esc(short(consumer.id, 14))}</text></g>'
        )
    return max(bottom, top + ROW), out


def _legend(top: int) -> tuple[int, list[str]]:
    """Two rows: the snapshot marks, expiry and tags; then the rollback arc, the consumer marker and a gap."""
    out = ['<g class="legend">']
    x = LEFT

    def item(name: str, drawing: str, label: str) -> str:
        return f'<g class="legend-item" data-legend="{name}">{drawing}<text x="{x + 12}" y="{top}">{label}</text></g>'

    for kind, label in KIND_LABELS.items():
        out.append(_mark(kind, x, top - 4, True) + f'<text x="{x + 12}" y="{top}">{label}</text>')
        x += 96
    out.append(_mark("APPEND", x, top - 4, False) + f'<text x="{x + 12}" y="{top}">expired, kept by a tag</text>')
    x += 170
    out.append(f'<rect x="{x - 7}" y="{top - 11}" width="14" height="14" fill="#ffebee" stroke="#e57373" stroke-dasharray="4 3"/>'
               f'<text x="{x + 12}" y="{top}">next expiry</text>')
    x += 110
    for source, fill, stroke in (("manual", "#fff8e1", "#f9a825"), ("periodic", "#e8f5e9", "#43a047")):
        out.append(f'<rect x="{x - 7}" y="{top - 11}" width="14" height="14" rx="3" fill="{fill}" stroke="{stroke}"/>'
                   f'<text x="{x + 12}" y="{top}">{source} tag</text>')
        x += 100
    # The marks drawn elsewhere in the picture, in the same strokes and fills as there.
    top, x = top + ROW, LEFT
    out.append(item("rollback", f'<path d="M{x - 9},{top - 1} Q{x},{top - 16} {x + 9},{top - 1}" fill="none" stroke="#6a1b9a" '
                                f'stroke-width="1.5" stroke-dasharray="5 3"/>', "rollback that kept history (arc to its target)"))
    x += 300
    out.append(item("consumer", f'<path d="M{x - 6},{top - 10} l8,6 l-8,6 Z" fill="#6a1b9a"/>', "consumer, at the snapshot it reads next"))
    x += 270
    out.append(item("gap", f'<path d="M{x - 5},{top + 2} L{x - 1},{top - 10} M{x + 1},{top + 2} L{x + 5},{top - 10}" fill="none" '
                           f'stroke="#90a4ae" stroke-width="1.5"/>', "gap in the ids (expired or missing)"))
    out.append("</g>")
    return top, out


def render_html(timeline: Timeline, *, links: Sequence[tuple[str, str]] = (), title: str = "Table timeline") -> str:
    """A standalone HTML page: the table's URI, the picture, and the facts behind it as text.

    ``links``: (label, href) pairs shown above the picture (escaped here, like everything else).
    """
    nav = " \u00b7 ".join(f'<a href="{esc(href)}">{esc(label)}</a>' for label, href in links)
    window = ", ".join(map(str, timeline.expiry_window)) or "nothing"
    if timeline.expiry_error:
        window = "cannot tell: " + timeline.expiry_error
    tags = "".join(
        f"<li>{esc(t.name)} ({esc(t.source)}) \u2192 snapshot {t.snapshot_id}{' (expired; the tag holds it)' if t.snapshot_expired else ''}</li>"
        for t in timeline.tags
    ) or "<li>none</li>"
    consumers = "".join(f"<li>{esc(c.id)} \u2192 next {'snapshot' if timeline.numbered_ids else 'position'} {c.next_snapshot}</li>"
                        for c in timeline.consumers) or "<li>none</li>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>{esc(title)}: {esc(timeline.uri)}</title>
<style>
body {{ font-family: {FONT}; margin: 16px; color: #263238; background: #fafafa; }}
h1 {{ font-size: 18px; margin: 4px 0; }} .table-uri {{ font-family: monospace; font-size: 14px; }}
.picture {{ overflow-x: auto; background: #fff; border: 1px solid #cfd8dc; padding: 4px; }}
.facts {{ font-size: 13px; }} nav {{ font-size: 13px; margin-bottom: 8px; }}
</style></head>
<body>
{f'<nav>{nav}</nav>' if nav else ''}
<h1>{esc(title)}</h1>
<p class="table-uri">{esc(timeline.uri)}</p>
<div class="picture">
{render_svg(timeline, xml_declaration=False)}</div>
<div class="facts">
<p>Next expiry (dry run under the table's options) removes: <span class="expiry-ids">{esc(window)}</span></p>
<p>Tags:</p><ul class="tag-list">{tags}</ul>
<p>Consumers:</p><ul class="consumer-list">{consumers}</ul>
<p class="muted">Rollbacks that keep history are drawn as arcs; a default rollback discards later snapshots and leaves no record to draw.</p>
</div>
</body></html>
"""
