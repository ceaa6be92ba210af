"""The timeline's legend explains every mark the picture draws (issue 28 item 6)."""

from __future__ import annotations

import re

from airflow_snaptable.core import Table
from airflow_snaptable.core.timeline.model import build_timeline
from airflow_snaptable.core.timeline.render import render_svg
from tests.core.test_timeline import HOSTILE_DIR, build_scenario_table


def test_the_legend_has_the_rollback_arc_the_consumer_marker_and_the_gap(tmp_path):
    build_scenario_table(str(tmp_path / HOSTILE_DIR))
    svg = render_svg(build_timeline(Table.open(str(tmp_path / HOSTILE_DIR))))
    legend = svg[svg.index('<g class="legend">'):]
    items = dict(re.findall(r'data-legend="([a-z]+)">(.*?)</g>', legend))
    assert set(items) == {"rollback", "consumer", "gap"}
    # Each is drawn as in the picture: the arc's dashed purple stroke, the consumer's purple triangle, the gap's strokes.
    assert 'stroke="#6a1b9a"' in items["rollback"] and 'stroke-dasharray="5 3"' in items["rollback"]
    assert 'fill="#6a1b9a"' in items["consumer"] and "Z" in items["consumer"]
    assert 'stroke="#90a4ae"' in items["gap"]
    # The picture has every one of them to explain.
    assert all(f'<g class="{kind}"' in svg for kind in ("rollback", "consumer", "gap"))
    # The legend fits inside the picture.
    height = int(re.search(r'<svg[^>]* height="(\d+)"', svg).group(1))
    assert max(int(y) for y in re.findall(r'<text x="\d+(?:\.\d+)?" y="(\d+)"', legend)) < height
