"""Charts as inline SVG, drawn here so the report needs no script library and no network.

Every text that reaches a chart (labels, titles) is escaped; the result is safe markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

__all__ = ["Bar", "Stack", "hbar_chart", "stacked_columns", "vbar_chart"]

#: Colours of the stacked series (colour-blind friendly, Okabe-Ito).
SERIES = {"failures": "#0072b2", "unknown": "#e69f00", "no failure": "#009e73", "errors": "#d55e00"}


@dataclass(frozen=True)
class Bar:
    """One bar: what it is called, its value, the tooltip and (optionally) the label it filters on."""

    name: str
    value: float
    tooltip: str = ""
    key: str | None = None


@dataclass(frozen=True)
class Stack:
    """One column of a stacked chart: its name and one value per series (in :data:`SERIES` order)."""

    name: str
    values: tuple[int, ...]


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _svg_open(kind: str, width: int, height: int) -> str:
    """The opening tag of a chart of ``kind`` (``hbar``, ``vbar``, ``stacked``)."""
    return (
        f'<svg class="chart {kind}" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        'xmlns="http://www.w3.org/2000/svg">'
    )


def hbar_chart(bars: Sequence[Bar], *, width: int = 640, row: int = 22, label_width: int = 260) -> Markup:
    """Horizontal bars, one per row, the value printed after each bar."""
    if not bars:
        return Markup("")
    top = max(b.value for b in bars) or 1.0
    plot = width - label_width - 60
    height = row * len(bars) + 4
    parts = [_svg_open("hbar", width, height)]
    for i, b in enumerate(bars):
        y = i * row + 2
        w = max(plot * b.value / top, 1.0)
        key = f' data-label="{escape(b.key)}"' if b.key is not None else ""
        name = b.name if len(b.name) <= 40 else b.name[:39] + "…"
        parts.append(
            f'<g class="bar"{key}><title>{escape(b.tooltip or b.name)}</title>'
            f'<text x="{label_width - 6}" y="{y + row * 0.68:.1f}" text-anchor="end">{escape(name)}</text>'
            f'<rect x="{label_width}" y="{y + 2}" width="{w:.1f}" height="{row - 6}" rx="2"></rect>'
            f'<text class="value" x="{label_width + w + 4:.1f}" y="{y + row * 0.68:.1f}">{escape(_num(b.value))}</text>'
            "</g>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def vbar_chart(bars: Sequence[Bar], *, width: int = 640, height: int = 180) -> Markup:
    """Vertical bars (a histogram): names under the bars, values above them."""
    if not bars:
        return Markup("")
    top = max(b.value for b in bars) or 1.0
    n = len(bars)
    step = (width - 20) / n
    plot = height - 40
    parts = [_svg_open("vbar", width, height)]
    for i, b in enumerate(bars):
        x = 10 + i * step
        h = plot * b.value / top
        y = 18 + plot - h
        parts.append(
            f'<g class="bar"><title>{escape(b.tooltip or b.name)}</title>'
            f'<rect x="{x + 2:.1f}" y="{y:.1f}" width="{step - 4:.1f}" height="{h:.1f}" rx="2"></rect>'
            f'<text class="value" x="{x + step / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle">{escape(_num(b.value))}</text>'
            f'<text x="{x + step / 2:.1f}" y="{height - 6}" text-anchor="middle">{escape(b.name)}</text></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def stacked_columns(columns: Sequence[Stack], *, width: int = 760, height: int = 200) -> Markup:
    """Stacked columns over time, one colour per :data:`SERIES` entry, with a legend."""
    if not columns:
        return Markup("")
    names = list(SERIES)
    top = max(sum(c.values) for c in columns) or 1
    n = len(columns)
    step = (width - 20) / n
    plot = height - 56
    parts = [_svg_open("stacked", width, height)]
    for i, name in enumerate(names):
        parts.append(
            f'<rect x="{10 + i * 120}" y="2" width="10" height="10" fill="{SERIES[name]}"></rect>'
            f'<text x="{24 + i * 120}" y="11">{escape(name)}</text>'
        )
    every = max(1, n // 8)
    for i, c in enumerate(columns):
        x = 10 + i * step
        y = float(20 + plot)
        tip = f"{c.name}: " + ", ".join(f"{v} {k}" for k, v in zip(names, c.values, strict=False))
        parts.append(f"<g><title>{escape(tip)}</title>")
        for name, v in zip(names, c.values, strict=False):
            h = plot * v / top
            y -= h
            if v:
                parts.append(
                    f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(step - 2, 1):.1f}" height="{h:.1f}" '
                    f'fill="{SERIES[name]}"></rect>'
                )
        parts.append("</g>")
        if i % every == 0:
            parts.append(f'<text x="{x:.1f}" y="{height - 8}">{escape(c.name)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
