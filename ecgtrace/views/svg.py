"""Plot specs (:mod:`ecgtrace.views.plots`) drawn as inline SVG for the static report: no script, every text escaped.

The viewer draws the same specs in the browser (``viewer_app/charts.js``)
with the same geometry and the same classes; both take their colours from
``viewer_app/charts.css``, which the report inlines.
"""

from __future__ import annotations

from html import escape
from importlib.resources import files
from typing import Any

WIDTH = 760
HEIGHT = 300
MARGIN = {"left": 52, "right": 16, "top": 34, "bottom": 92}
HEAT_CELL = (78, 26)  # width, height of a heatmap cell (px)
HEAT_LEFT = 190
HEAT_TOP = 110


def chart_css() -> str:
    """The charts' stylesheet, shared with the viewer."""
    return files("ecgtrace.views").joinpath("viewer_app", "charts.css").read_text(encoding="utf-8")


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _fmt(value: float, percent: bool) -> str:
    return f"{100 * value:.1f}%" if percent else f"{value:.1f}"


def heat_class(value: float) -> str:
    """``h0`` .. ``h10``: the colour step of a share in [0, 1] (the viewer rounds the same way)."""
    return f"h{max(0, min(10, int(round(value * 10))))}"


def _frame(spec: dict[str, Any], width: int, height: int, body: list[str]) -> str:
    title = _e(spec.get("title"))
    return (f'<figure class="chart" id="chart-{_e(spec.get("id"))}"><svg xmlns="http://www.w3.org/2000/svg" class="plot" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="{title}">'
            f'<text class="title" x="{MARGIN["left"]}" y="18">{title}</text>{"".join(body)}</svg>'
            f'<figcaption>{_e(spec.get("caption"))}</figcaption></figure>')


def _y_axis(ymax: float, percent: bool, plot_h: float) -> list[str]:
    out = []
    for i in range(5):
        v = ymax * i / 4
        y = MARGIN["top"] + plot_h - plot_h * i / 4
        label = f"{100 * v:.0f}%" if percent else f"{v:g}"
        out.append(f'<line class="grid" x1="{MARGIN["left"]}" x2="{WIDTH - MARGIN["right"]}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{MARGIN["left"] - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    return out


def _x_label(x: float, y: float, label: str, *, up: bool = False) -> str:
    """A slanted axis label: hanging below the axis (bars), or rising above the columns (``up``, heatmaps)."""
    if up:
        return f'<text class="tick" transform="translate({x:.1f},{y:.1f}) rotate(-40)" text-anchor="start">{_e(label)}</text>'
    return f'<text class="tick" transform="translate({x:.1f},{y:.1f}) rotate(-35)" text-anchor="end">{_e(label)}</text>'


def nice_top(count: int) -> int:
    """The y-axis top of a histogram: a multiple of 4 at or above ``count`` (whole-number ticks)."""
    return max(4, -(-count // 4) * 4)


def bars_svg(spec: dict[str, Any]) -> str:
    """Bars with 95% intervals; each reference level (chance, prior) a dashed line across its bar."""
    bars, percent = spec["bars"], bool(spec.get("percent"))
    ymax = float(spec.get("ymax") or max([b["hi"] for b in bars] + [1.0]))
    plot_w = WIDTH - MARGIN["left"] - MARGIN["right"]
    plot_h = HEIGHT - MARGIN["top"] - MARGIN["bottom"]
    slot = plot_w / max(1, len(bars))

    def y(v: float) -> float:
        return MARGIN["top"] + plot_h * (1 - max(0.0, min(v, ymax)) / ymax)

    body = _y_axis(ymax, percent, plot_h)
    for i, bar in enumerate(bars):
        x0 = MARGIN["left"] + i * slot + slot * 0.18
        w = slot * 0.64
        counts = f" ({bar['k']}/{bar['n']})" if "k" in bar else f" (n={bar['n']})"
        tip = f"{bar['label']}: {_fmt(bar['value'], percent)} [{_fmt(bar['lo'], percent)}, {_fmt(bar['hi'], percent)}]{counts}"
        body.append(f'<g class="bar-group"><title>{_e(tip)}</title>'
                    f'<rect class="bar" x="{x0:.1f}" y="{y(bar["value"]):.1f}" width="{w:.1f}" height="{y(0) - y(bar["value"]):.1f}"/>'
                    f'<line class="ci" x1="{x0 + w / 2:.1f}" x2="{x0 + w / 2:.1f}" y1="{y(bar["lo"]):.1f}" y2="{y(bar["hi"]):.1f}"/>'
                    f'<line class="ci" x1="{x0 + w * 0.35:.1f}" x2="{x0 + w * 0.65:.1f}" y1="{y(bar["lo"]):.1f}" y2="{y(bar["lo"]):.1f}"/>'
                    f'<line class="ci" x1="{x0 + w * 0.35:.1f}" x2="{x0 + w * 0.65:.1f}" y1="{y(bar["hi"]):.1f}" y2="{y(bar["hi"]):.1f}"/>'
                    f'<text class="value" x="{x0 + w / 2:.1f}" y="{y(bar["hi"]) - 4:.1f}" text-anchor="middle">{_fmt(bar["value"], percent)}</text></g>')
        for ref in spec.get("refs") or []:
            level = ref["values"][i]
            if level is not None:
                body.append(f'<line class="ref ref-{_e(ref["name"])}" x1="{x0 - slot * 0.1:.1f}" x2="{x0 + w + slot * 0.1:.1f}" '
                            f'y1="{y(level):.1f}" y2="{y(level):.1f}"><title>{_e(ref["name"])} {_fmt(level, percent)}</title></line>')
        body.append(_x_label(x0 + w / 2, y(0) + 12, bar["label"]))
    body.append(_legend([r["name"] for r in spec.get("refs") or []]))
    return _frame(spec, WIDTH, HEIGHT, body)


def _legend(names: list[str]) -> str:
    parts = []
    x = WIDTH - MARGIN["right"] - 120 * len(names)
    for name in names:
        parts.append(f'<line class="ref ref-{_e(name)}" x1="{x}" x2="{x + 26}" y1="14" y2="14"/>'
                     f'<text class="tick" x="{x + 32}" y="18">{_e(name)}</text>')
        x += 120
    return "".join(parts)


def histogram_svg(spec: dict[str, Any]) -> str:
    bins = spec["bins"]
    top = nice_top(max([b["count"] for b in bins] + [1]))
    plot_w = WIDTH - MARGIN["left"] - MARGIN["right"]
    plot_h = HEIGHT - MARGIN["top"] - MARGIN["bottom"]
    slot = plot_w / max(1, len(bins))
    body = _y_axis(float(top), False, plot_h)
    for i, b in enumerate(bins):
        h = plot_h * b["count"] / top
        x0 = MARGIN["left"] + i * slot + 2
        y0 = MARGIN["top"] + plot_h - h
        body.append(f'<g class="bar-group"><title>{_e(b["label"])}: {b["count"]}</title>'
                    f'<rect class="bar hist" x="{x0:.1f}" y="{y0:.1f}" width="{slot - 4:.1f}" height="{h:.1f}"/>'
                    f'<text class="value" x="{x0 + slot / 2 - 2:.1f}" y="{y0 - 4:.1f}" text-anchor="middle">{b["count"]}</text></g>')
        body.append(_x_label(x0 + slot / 2, MARGIN["top"] + plot_h + 12, b["label"]))
    body.append(f'<text class="tick" x="{WIDTH - MARGIN["right"]}" y="{HEIGHT - 6}" text-anchor="end">{_e(spec.get("xlabel"))}</text>')
    return _frame(spec, WIDTH, HEIGHT, body)


def heatmap_svg(spec: dict[str, Any]) -> str:
    cw, ch = HEAT_CELL
    rows, cols = spec["rows"], spec["cols"]
    width = HEAT_LEFT + cw * len(cols) + MARGIN["right"] + 90  # room for the last slanted column label
    height = HEAT_TOP + ch * len(rows) + 12
    body = [_x_label(HEAT_LEFT + cw * (j + 0.3), HEAT_TOP - 6, c, up=True) for j, c in enumerate(cols)]
    for i, r in enumerate(rows):
        y0 = HEAT_TOP + i * ch
        body.append(f'<text class="tick" x="{HEAT_LEFT - 6}" y="{y0 + ch * 0.65:.1f}" text-anchor="end">{_e(r)}</text>')
        for j, cell in enumerate(spec["cells"][i]):
            x0 = HEAT_LEFT + j * cw
            if cell is None:
                body.append(f'<rect class="cell empty" x="{x0}" y="{y0}" width="{cw}" height="{ch}"/>')
                continue
            tip = f"{r} / {cols[j]}: {100 * cell['value']:.1f}% ({cell['k']}/{cell['n']})"
            body.append(f'<g class="cell-group"><title>{_e(tip)}</title>'
                        f'<rect class="cell {heat_class(cell["value"])}" x="{x0}" y="{y0}" width="{cw}" height="{ch}"/>'
                        f'<text class="cell-text {heat_class(cell["value"])}" x="{x0 + cw / 2}" y="{y0 + ch * 0.65:.1f}" '
                        f'text-anchor="middle">{100 * cell["value"]:.0f}%</text></g>')
    return _frame(spec, width, height, body)


def plot_svg(spec: dict[str, Any]) -> str:
    """One spec as an escaped ``<figure>`` holding an inline ``<svg>``."""
    return {"bars": bars_svg, "histogram": histogram_svg, "heatmap": heatmap_svg}[spec["type"]](spec)
