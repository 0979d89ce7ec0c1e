"""Charts as hand-written SVG: equity curves and reliability diagrams.

No plotting library: the report pages must open offline years later exactly as written, and
an SVG string is all they need. Axes label their ticks so that no two read alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

from arena.reports.equity import CohortRecord, mean_equity
from ledger.metrics import reliability
from ledger.projection import BrierRow

PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#393b79", "#b8860b", "#006d5b", "#a6005a", "#333333",
)  # fmt: skip
"""One colour per agent, each unlike the others. With eight, the ninth agent took the first's
colour: the tour's eleven agents drew random as extremized, contrarian as linear and coin as
fav, one line for two in the equity chart. No grey: the ladder's step bars are grey."""
RELIABILITY_BINS = 10
WIDTH, HEIGHT = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 20, 45


def figure(caption: str, svg: str) -> str:
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]: steps of 1, 2 or 5 times a power of ten."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [first + k * step for k in range(int((high - first) / step + 1e-9) + 1)]


def tick_labels(ticks: Sequence[float], fmt: str) -> list[str]:
    """``fmt`` applied to each tick, with as many more decimals as it takes for no two labels
    to read the same (ticks 0.5 apart under ``{:,.0f}`` would print 10,000 three times)."""
    decimals = int(match.group(1)) if (match := re.search(r"\.(\d+)f", fmt)) else 0
    labels = [fmt.format(t) for t in ticks]
    while len(set(labels)) < len(labels) and decimals < 9:
        decimals += 1
        wider = re.sub(r"\.\d+f", f".{decimals}f", fmt)
        labels = [wider.format(t) for t in ticks]
    return labels


@dataclass(frozen=True)
class _Frame:
    """Maps data coordinates into the plot area of a WIDTH × HEIGHT SVG."""

    x0: float
    x1: float
    y0: float
    y1: float
    top: float = TOP  # where the plot area begins: lower when a legend sits above it

    def x(self, v: float) -> float:
        return LEFT + (v - self.x0) / (self.x1 - self.x0) * (WIDTH - LEFT - RIGHT)

    def y(self, v: float) -> float:
        return HEIGHT - BOTTOM - (v - self.y0) / (self.y1 - self.y0) * (HEIGHT - self.top - BOTTOM)

    def polyline(self, xs: Sequence[float], ys: Sequence[float], colour: str, width: float) -> str:
        points = " ".join(f"{self.x(a):.1f},{self.y(b):.1f}" for a, b in zip(xs, ys, strict=True))
        return (
            f'<polyline points="{points}" fill="none" stroke="{colour}" '
            f'stroke-width="{width}" stroke-linejoin="round"/>'
        )

    def axes(self, x_label: str, y_label: str, y_fmt: str) -> str:
        parts = [
            f'<rect x="{LEFT}" y="{self.top}" width="{WIDTH - LEFT - RIGHT}" '
            f'height="{HEIGHT - self.top - BOTTOM}" fill="none" stroke="#999"/>'
        ]
        for t in nice_ticks(self.x0, self.x1):
            x = self.x(t)
            parts.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.top}" y2="{HEIGHT - BOTTOM}" '
                'stroke="#eee"/>'
                f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 15}" text-anchor="middle">{t:g}</text>'
            )
        y_ticks = nice_ticks(self.y0, self.y1)
        for t, label in zip(y_ticks, tick_labels(y_ticks, y_fmt), strict=True):
            y = self.y(t)
            parts.append(
                f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>'
            )
        parts.append(
            f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 8}" text-anchor="middle">'
            f"{escape(x_label)}</text>"
            f'<text transform="translate(14 {(self.top + HEIGHT - BOTTOM) / 2}) rotate(-90)" '
            f'text-anchor="middle">{escape(y_label)}</text>'
        )
        return "".join(parts)


def _svg(content: str, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}">'
        f"{content}</svg>"
    )


def padded(low: float, high: float) -> tuple[float, float]:
    """The value range of a chart with a margin; a flat line (an agent that held cash) gets
    ±1% of its value, so its axis reads 9,900 .. 10,100 rather than ticks a cent apart. A span
    within a millionth of the values is rounding, and flat too."""
    if high - low < 1e-6 * max(1.0, abs(low), abs(high)):
        pad = max(abs(low) * 0.01, 1.0)
        return low - pad, high + pad
    pad = (high - low) * 0.05
    return low - pad, high + pad


def equity_chart(
    means: Sequence[tuple[str, np.ndarray, np.ndarray]],
    colours: dict[str, str],
    thin: Sequence[tuple[str, np.ndarray, np.ndarray]],
) -> str:
    """Thick lines for ``means`` and thin ones for ``thin``: (agent, offsets in s, values)."""
    series = [*means, *thin]
    days = [offsets / 86_400 for _, offsets, _ in series]
    values = [v for _, _, v in series]
    x1 = max(float(d.max()) for d in days)
    low, high = padded(min(float(v.min()) for v in values), max(float(v.max()) for v in values))
    legend, rows = legend_rows([name for name, _, _ in means], colours)
    frame = _Frame(0.0, x1 if x1 > 0 else 1.0, low, high, TOP + LEGEND_ROW * rows)
    lines = [
        frame.polyline(list(d), list(v), colours[name], 0.7)
        for (name, _, v), d in zip(thin, days[len(means) :], strict=True)
    ]
    lines += [
        frame.polyline(list(d), list(v), colours[name], 2.2)
        for (name, _, v), d in zip(means, days[: len(means)], strict=True)
    ]
    axes = frame.axes("days since cohort start", "total value ($)", "{:,.0f}")
    return _svg(axes + "".join(lines) + legend, "equity curve")


LEGEND_ROW = 14
"""Height of a row of the legend above a chart's plot area."""

LEGEND_CHAR = 7.0
"""Width allowed per character of a legend entry at the charts' 11 px font (an overestimate,
so entries never overlap)."""


def legend_rows(names: Sequence[str], colours: dict[str, str]) -> tuple[str, int]:
    """The legend as SVG text laid out in rows above the plot area (``TOP`` onwards, left to
    right, a new row when the next entry would pass the plot's right edge), and how many rows
    it takes. Above the plot, not on it: a box over the curves hid their first weeks."""
    parts, row, x = [], 0, float(LEFT)
    for name in names:
        width = LEGEND_CHAR * (len(name) + 2)
        if x > LEFT and x + width > WIDTH - RIGHT:
            row, x = row + 1, float(LEFT)
        parts.append(
            f'<text x="{x:.0f}" y="{TOP + LEGEND_ROW * row + 8}" fill="{colours[name]}" '
            f'style="fill:{colours[name]}">— {escape(name)}</text>'
        )
        x += width + 12
    return "".join(parts), row + 1 if names else 0


def agent_equity(records: Sequence[CohortRecord], name: str, colour: str) -> str:
    """One agent: a thin line per cohort it traded in, the thick line their mean."""
    cohorts = [
        (name, np.asarray(r.offsets, dtype=np.int64), np.asarray(r.values[name]))
        for r in records
        if name in r.values
    ]
    return equity_chart([(name, *mean_equity(records, name))], {name: colour}, cohorts)


def reliability_chart(rows: Sequence[BrierRow], colour: str) -> str:
    frame = _Frame(0.0, 1.0, 0.0, 1.0)
    parts = [
        frame.axes("forecast probability", "observed frequency", "{:.1f}"),
        f'<line x1="{frame.x(0):.1f}" y1="{frame.y(0):.1f}" x2="{frame.x(1):.1f}" '
        f'y2="{frame.y(1):.1f}" stroke="#999" stroke-dasharray="4 3"/>',
    ]
    won = [float(r.won) for r in rows]
    if not rows:
        parts.append(
            f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">no resolved bets</text>'
        )
        return _svg("".join(parts), "reliability diagram")
    parts.append(_bin_marks(frame, [r.confidence for r in rows], won, colour, square=False))
    beliefs = [(r.belief, float(r.won)) for r in rows if r.belief is not None]
    if beliefs:
        p, y = zip(*beliefs, strict=True)
        parts.append(_bin_marks(frame, list(p), list(y), colour, square=True))
    return _svg("".join(parts), "reliability diagram")


def _bin_marks(
    frame: _Frame, p: Sequence[float], y: Sequence[float], colour: str, *, square: bool
) -> str:
    """One mark per non-empty bin, joined by a line, its area proportional to its bets."""
    stats = reliability(p, y, RELIABILITY_BINS, right_closed=False)
    keep = stats.nonempty
    xs = [float(v) for v in stats.mean_forecast[keep]]
    ys = [float(v) for v in stats.observed[keep]]
    counts = stats.count[keep]
    radii = 3.0 + 9.0 * np.sqrt(counts / counts.max())
    marks = [frame.polyline(xs, ys, colour, 1.0)]
    for x, yv, r, n in zip(xs, ys, radii, counts, strict=True):
        cx, cy = frame.x(x), frame.y(yv)
        tip = f"<title>{n} bet(s): forecast {x:.3f}, observed {yv:.3f}</title>"
        if square:
            marks.append(
                f'<rect x="{cx - r:.1f}" y="{cy - r:.1f}" width="{2 * r:.1f}" '
                f'height="{2 * r:.1f}" fill="{colour}" fill-opacity="0.35" '
                f'stroke="{colour}">{tip}</rect>'
            )
        else:
            marks.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" fill="{colour}" '
                f'fill-opacity="0.6" stroke="{colour}">{tip}</circle>'
            )
    return "".join(marks)
