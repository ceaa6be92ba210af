"""The timeline of a table (core/timeline/model.py) and its pictures (core/timeline/render.py), and ``snaptable timeline``.

One real table, built with a fake clock (hours since the epoch), has every thing the picture
draws: appends, an overwrite, a delete, a compaction, a keep-history rollback, a manual tag on
a snapshot that expired since (the tag holds its only copy), a periodic tag, a consumer in the
middle, one that has read everything, and snapshots the next expiry would remove. Its
directory and its manual tag have hostile names: markup must come out escaped.
"""

from __future__ import annotations

import html.parser
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_snaptable.cli import main as cli_main
from airflow_snaptable.core import Table
from airflow_snaptable.core.timeline.model import Gap, RollbackMark, build_timeline
from airflow_snaptable.core.timeline.render import render_html, render_svg

H = 3_600_000
SVG = "{http://www.w3.org/2000/svg}"
HOSTILE_TAG = '<script>alert("x")&'
HOSTILE_DIR = 'orders <b>&"bold"'
SCHEMA = pa.schema([("day", pa.string()), ("v", pa.int64())])
#: What the scenario leaves: snapshot id -> (kind, retained); 2 and 3 expired untagged.
EXPECTED_SNAPSHOTS = {1: ("APPEND", False), 4: ("DELETE", True), 5: ("COMPACT", True), 6: ("APPEND", True),
                      7: ("APPEND", True), 8: ("OVERWRITE", True)}


def _rows(day: str, count: int, start: int = 0) -> pa.Table:
    return pa.table({"day": [day] * count, "v": list(range(start, start + count))}, schema=SCHEMA)


def build_scenario_table(uri: str) -> Table:
    """The table described in the module docstring; its clock stops at 7.5 h (the picture is drawn at 8 h)."""
    now = [0]
    table = Table.create(uri, SCHEMA, partition_by=["day"],
                         options={"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "4"})
    table.clock = lambda: now[0]

    def at(hours: float) -> None:
        now[0] = int(hours * H)

    at(1), table.append(_rows("a", 10))                                    # 1
    table.create_tag(HOSTILE_TAG)                                          # manual, on 1
    at(2), table.append(_rows("a", 10, 10))                                # 2
    at(3), table.overwrite(_rows("b", 4), partitions=[{"day": "b"}])       # 3
    at(4), table.delete(partitions=[{"day": "b"}])                         # 4
    at(5), table.compact(min_file_num=2)                                   # 5
    at(5.5)
    assert table.create_periodic_tags("hourly").created == ["1970-01-01 04"]  # periodic, on 4
    assert table.expire_snapshots(retain_max=3).expired_snapshot_ids == [1, 2, 3]
    at(6), table.append(_rows("c", 7))                                     # 6
    at(7), table.append(_rows("c", 7, 50))                                 # 7
    table.update_consumer("reader", 6)
    at(7.5), table.rollback_to(5, keep_history=True)                       # 8: OVERWRITE, rollback_to 5
    table.update_consumer("caught-up", 9)
    return table


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Table:
    return build_scenario_table(str(tmp_path_factory.mktemp("timeline") / HOSTILE_DIR))


@pytest.fixture(scope="module")
def timeline(table):
    return build_timeline(table, now=8 * H)


def groups(svg_text: str, css_class: str) -> list[ET.Element]:
    """The ``<g>`` elements whose class list has ``css_class`` (parsing also proves the SVG is well-formed XML)."""
    root = ET.fromstring(svg_text.encode())
    return [g for g in root.iter(f"{SVG}g") if css_class in g.get("class", "").split()]


def tooltip(element: ET.Element) -> str:
    title = element.find(f"{SVG}title")
    return "" if title is None else title.text or ""


# -- the model -----------------------------------------------------------------------------------


def test_the_model_matches_the_table(table, timeline):
    assert {p.id: (p.kind, p.retained) for p in timeline.snapshots} == EXPECTED_SNAPSHOTS
    assert [p.id for p in timeline.snapshots] == [1, 4, 5, 6, 7, 8]  # commit-time order
    tagged_copy = table.tag(HOSTILE_TAG).snapshot
    for point in timeline.snapshots:
        source = table.snapshot(point.id) if point.retained else tagged_copy
        assert (point.time_millis, point.total_records, point.kind) == (
            source.time_millis, source.total_record_count, source.commit_kind.value)
    assert (timeline.earliest_snapshot_id, timeline.latest_snapshot_id) == (4, 8)

    assert [(t.name, t.snapshot_id, t.source, t.snapshot_expired) for t in timeline.tags] == [
        (HOSTILE_TAG, 1, "manual", True), ("1970-01-01 04", 4, "periodic", False)]
    assert [(c.id, c.next_snapshot, c.caught_up) for c in timeline.consumers] == [("reader", 6, False), ("caught-up", 9, True)]
    assert timeline.rollbacks == [RollbackMark("keep-history", 8, 5)]
    assert timeline.gaps == [Gap(2, 3, "expired")]


def test_the_expiry_window_is_the_real_expirys_dry_run_and_deletes_nothing(table, timeline):
    # Retained 4..8 is one over snapshot.num-retained.max = 4; the reader holds 5 (the base of 6).
    assert timeline.expiry_window == table.expire_snapshots(dry_run=True, now=8 * H).expired_snapshot_ids == [4]
    assert timeline.expiry_error is None
    assert [s.id for s in table.snapshots()] == [4, 5, 6, 7, 8]
    assert timeline.expiry_options == {"snapshot.num-retained.max": "4", "snapshot.num-retained.min": "2"}


def test_a_new_table_has_nothing_to_expire(tmp_path):
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    table.append(_rows("a", 1))
    timeline = build_timeline(table)
    assert timeline.expiry_window == [] and [p.id for p in timeline.snapshots] == [1]
    (window,) = groups(render_svg(timeline), "expiry-window")
    assert window.get("data-snapshot-ids") == "" and "removes nothing" in tooltip(window)


# -- the SVG -------------------------------------------------------------------------------------


def test_the_svg_has_an_element_for_every_thing_and_they_match_the_table(table, timeline):
    svg = render_svg(timeline)
    root = ET.fromstring(svg.encode())
    assert root.get("data-table-uri") == table.uri and root.get("data-latest-snapshot-id") == "8"

    snapshots = {int(g.get("data-snapshot-id")): g for g in groups(svg, "snapshot")}
    assert {i: (g.get("data-kind"), g.get("data-retained") == "true") for i, g in snapshots.items()} == EXPECTED_SNAPSHOTS
    for snapshot_id, g in snapshots.items():
        assert int(g.get("data-records")) == timeline.snapshot(snapshot_id).total_records
        assert tooltip(g).startswith(f"snapshot {snapshot_id}: {g.get('data-kind')}")
    assert snapshots[1].get("data-retained") == "false" and "kept only by a tag" in tooltip(snapshots[1])
    assert snapshots[4].get("data-pending-expiry") == "true" and snapshots[5].get("data-pending-expiry") == "false"
    # Each kind its own mark.
    marks = {g.get("data-kind"): g.find("*[@class='mark']") for g in snapshots.values() if g.get("data-retained") == "true"}
    shapes = {kind: (mark.tag, mark.get("d", "").count("L")) for kind, mark in marks.items()}
    assert len(set(shapes.values())) == 4

    tags = {g.get("data-tag"): g for g in groups(svg, "tag")}
    assert {n: (g.get("data-snapshot-id"), g.get("data-source"), g.get("data-snapshot-expired")) for n, g in tags.items()} == {
        HOSTILE_TAG: ("1", "manual", "true"), "1970-01-01 04": ("4", "periodic", "false")}
    assert "the tag holds the only copy" in tooltip(tags[HOSTILE_TAG])

    consumers = {g.get("data-consumer"): g.get("data-next-snapshot") for g in groups(svg, "consumer")}
    assert consumers == {"reader": "6", "caught-up": "9"}
    assert len(groups(svg, "next-snapshot")) == 1  # the slot the caught-up consumer points at

    (window,) = groups(svg, "expiry-window")
    assert window.get("data-snapshot-ids") == "4" and "dry run" in tooltip(window)
    (rollback,) = groups(svg, "rollback")
    assert (rollback.get("data-from-snapshot-id"), rollback.get("data-to-snapshot-id")) == ("8", "5")
    (gap,) = groups(svg, "gap")
    assert (gap.get("data-first-missing"), gap.get("data-last-missing"), gap.get("data-reason")) == ("2", "3", "expired")


def test_the_svg_is_self_contained(timeline):
    svg = render_svg(timeline)
    assert svg.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg"')
    for outside in ("href", "url(", "@import", "@font-face", "<script", "<image", "<foreignObject"):
        assert outside not in svg


class _Elements(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def test_hostile_names_are_escaped(table, timeline):
    assert "<script" not in render_svg(timeline) and "<b>" not in render_svg(timeline)
    page = render_html(timeline, links=[('<i>x</i>', 'javascript:"x"')])
    parser = _Elements()
    parser.feed(page)
    assert "script" not in parser.tags and "b" not in parser.tags and "i" not in parser.tags
    assert "&lt;script&gt;alert(&quot;x&quot;)&amp;" in page
    assert 'orders &lt;b&gt;&amp;&quot;bold&quot;' in page
    # Escaped, the names still read back exactly from the attributes.
    assert [g.get("data-tag") for g in groups(render_svg(timeline), "tag")][0] == HOSTILE_TAG
    assert ET.fromstring(render_svg(timeline).encode()).get("data-table-uri").endswith(HOSTILE_DIR)


# -- the CLI -------------------------------------------------------------------------------------


def test_cli_timeline_writes_svg_and_html(table, tmp_path, capsys):
    svg_file, html_file = tmp_path / "life.svg", tmp_path / "life.html"
    assert cli_main(["timeline", table.uri, "--out", str(svg_file)]) == 0
    assert f"wrote {svg_file}: 6 snapshot(s), 2 tag(s), 2 consumer(s)" in capsys.readouterr().out
    svg = svg_file.read_text()
    assert sorted(int(g.get("data-snapshot-id")) for g in groups(svg, "snapshot")) == sorted(EXPECTED_SNAPSHOTS)
    # The CLI plans the dry run at the real time, under the table's options.
    (window,) = groups(svg, "expiry-window")
    assert window.get("data-snapshot-ids") == " ".join(map(str, table.expire_snapshots(dry_run=True).expired_snapshot_ids))

    assert cli_main(["timeline", table.uri, "--out", str(html_file), "--storage-options", "{}"]) == 0
    page = html_file.read_text()
    assert page.startswith("<!DOCTYPE html>") and '<svg xmlns="http://www.w3.org/2000/svg"' in page
    assert '<?xml' not in page
    assert page.count('<g class="snapshot"') == len(EXPECTED_SNAPSHOTS)


def test_cli_timeline_refuses_another_suffix(table, tmp_path, capsys):
    assert cli_main(["timeline", table.uri, "--out", str(tmp_path / "life.png")]) == 2
    assert "--out must end in .svg or .html" in capsys.readouterr().err
    assert not (tmp_path / "life.png").exists()


def test_cli_timeline_of_a_missing_table(tmp_path, capsys):
    assert cli_main(["timeline", str(tmp_path / "none"), "--out", str(tmp_path / "x.svg")]) == 2
    assert "TableNotFoundError" in capsys.readouterr().err
