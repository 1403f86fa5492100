"""The Grafana dashboard as a picture, from the JSON model Grafana is provisioned with
(bundle.monitoring.dashboards.dashboard()): its rows and panels where the grid puts them, each panel
with the metrics its queries read (parsed with a PromQL parser, docsgen/monitoring.py). A layout,
not a screenshot: no data is drawn."""

from __future__ import annotations

import html
import re

from docsgen.svg import Canvas

COLUMN_PX, ROW_PX = 30, 12  # one unit of Grafana's 24-column grid, one unit of its height
BACKGROUND, PANEL, BORDER, TEXT, DIM = "#181b1f", "#22252b", "#34373d", "#d8d9da", "#9fa3ab"


def picture(model: dict | None = None) -> str:
    from docsgen.monitoring import metric_names

    if model is None:
        from bundle.monitoring.dashboards import dashboard

        model = dashboard()
    panels = model["panels"]
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) * ROW_PX + 44
    canvas = Canvas(24 * COLUMN_PX + 8, height, f"The Grafana dashboard's layout: {model['title']}", "dashboard")
    canvas.rect(0, 0, canvas.width, height, stroke=BACKGROUND, fill=BACKGROUND, radius=4)
    canvas.text(10, 24, model["title"], size=14, weight="bold", anchor="start", fill=TEXT)
    for panel in panels:
        grid = panel["gridPos"]
        x, y = 4 + grid["x"] * COLUMN_PX, 36 + grid["y"] * ROW_PX
        w, h = grid["w"] * COLUMN_PX - 4, grid["h"] * ROW_PX - 4
        if panel["type"] == "row":
            canvas.text(x + 4, y + 10, panel["title"], size=12, weight="bold", anchor="start", fill=TEXT)
            continue
        canvas.rect(x, y, w, h, stroke=BORDER, fill=PANEL, radius=3)
        titles = wrap(panel["title"], w - 16, 12, r"(?<= )")
        for i, line in enumerate(titles):
            canvas.text(x + 8, y + 17 + i * 15, line, size=12, weight="bold", anchor="start", fill=TEXT)
        names = sorted({n for t in panel.get("targets", []) for n in metric_names(t["expr"])})
        lines = [line for name in names for line in wrap(name, w - 16, 10, r"(?<=[_:])", mono=True)]
        room = (h - 10 - 36 - 15 * (len(titles) - 1)) // 14 + 1  # lines above the panel's bottom rule
        if len(lines) > room:
            lines = lines[:room - 1] + [f"and {len(lines) - room + 1} more lines of metric names"]
        for i, line in enumerate(lines):
            canvas.parts.append(f'<text x="{x + 8}" y="{y + 36 + 15 * (len(titles) - 1) + i * 14}" font-size="10" '
                                f'fill="{DIM}" font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace">'
                                f'{html.escape(line)}</text>')
        canvas.parts.append(f'<polyline points="{x + 8},{y + h - 10} {x + w - 8},{y + h - 10}" '
                            f'stroke="{BORDER}" stroke-width="1"/>')
    return canvas.svg()


def wrap(text: str, width_px: float, size: int, breaks: str, *, mono: bool = False) -> list[str]:
    """`text` in lines that fit `width_px`, broken only where `breaks` (a zero-width pattern) allows:
    after a space in a title, after "_" or ":" in a metric name (a continued name is indented). Never
    cut: a label ending in "..." hides the very part that tells two metrics apart."""
    per_char = size * (0.6 if mono else 0.62)  # bold titles run wider
    budget = max(1, int(width_px / per_char))
    lines, current = [], ""
    for part in re.split(breaks, text):
        limit = budget - (2 if lines and mono else 0)
        if current and len(current) + len(part) > limit:
            lines.append(current)
            current = part
        else:
            current += part
    lines.append(current)
    return [line.rstrip() if i == 0 or not mono else "  " + line.rstrip() for i, line in enumerate(lines)]
