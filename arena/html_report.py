"""The backtest as one self-contained HTML page: tables, equity curves and reliability diagrams.

The charts are SVG written here by hand, and the page links nothing (no scripts, fonts or
stylesheets from elsewhere), so a report opens offline years later exactly as it was written
and can be mailed or archived as a single file next to its ``results.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from arena.backtest import STRATEGY, BacktestResult, mean_equity
from ledger.metrics import reliability
from ledger.projection import BrierRow

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
RELIABILITY_BINS = 10
WIDTH, HEIGHT = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 20, 45

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.pos { color: #1a7f37; } .neg { color: #cf222e; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; } figcaption { font-size: 0.9em; color: #555; }
code { background: #f4f4f4; padding: 0 0.2em; }
svg text { font-size: 11px; fill: #444; }
"""


def write_report(directory: Path, result: BacktestResult, data: dict[str, Any]) -> Path:
    """Write ``index.html`` and ``results.json`` into ``directory``; return the page's path."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "results.json").write_text(json.dumps(data, indent=2) + "\n")
    page = directory / "index.html"
    page.write_text(render_html(result, data))
    return page


def render_html(result: BacktestResult, data: dict[str, Any]) -> str:
    names = result.agent_names
    colours = {name: PALETTE[k % len(PALETTE)] for k, name in enumerate(names)}
    title = f"Backtest of {data['strategy']}"
    sections = [
        f"<h1>{escape(title)}</h1>",
        _settings_table(data),
        "<h2>Summary over cohorts</h2>",
        _summary_table(data),
        "<h2>Per cohort</h2>",
        _cohort_table(data),
    ]
    if data["beliefs"]:
        sections += ["<h2>Stated beliefs</h2>", _beliefs_table(data["beliefs"])]
    sections += [
        "<h2>Equity</h2>",
        "<p>Total value (cash + positions at the latest marks) by days since each cohort's "
        "start; thin lines are single cohorts, the thick line their mean.</p>",
        '<div class="charts">',
        _figure(
            "Mean over cohorts, every agent",
            _equity_chart(
                [(name, *mean_equity(result.records, name)) for name in names], colours, ()
            ),
        ),
        *(_figure(name, _agent_equity(result, name, colours[name])) for name in names),
        "</div>",
        "<h2>Reliability</h2>",
        f"<p>Forecast against observed frequency in {RELIABILITY_BINS} bins (area ∝ bets): "
        "● implied confidence (amount / 25% of cash), ■ stated belief.</p>",
        '<div class="charts">',
        *(
            _figure(name, _reliability_chart(result.brier_rows(name), colours[name]))
            for name in names
        ),
        "</div>",
    ]
    body = "\n".join(sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n"
        "</body></html>\n"
    )


# -- tables -------------------------------------------------------------------------------------


def _fmt(x: float | None, fmt: str = "{:.4f}") -> str:
    return "—" if x is None else fmt.format(x)


def _pct(x: float | None) -> str:
    if x is None:
        return "—"
    cls = "pos" if x > 0 else "neg" if x < 0 else ""
    return f'<span class="{cls}">{x:+.2f}%</span>'


def _interval(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"[{low:+.2f}, {high:+.2f}]%"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _settings_table(data: dict[str, Any]) -> str:
    settings = data["settings"]
    starts = settings["starts"]
    rows = [
        ["strategy", f"<code>{escape(data['strategy'])}</code> (trades as {STRATEGY})"],
        ["against", escape(", ".join(data["against"]))],
        ["cohorts", f"{len(starts)}: {escape(starts[0][:10])} .. {escape(starts[-1][:10])}"],
        ["tape", f"<code>{escape(data['tape'])}</code> ({escape(settings['tape_path'])})"],
        ["package version", escape(data["package_version"])],
        ["log digest", f"<code>{escape(data['digest'])}</code>"],
    ]
    for key in ("universe", "cash", "rules", "decision_cadence", "mark_cadence", "seed"):
        rows.append([escape(key), escape(str(settings[key]))])
    cohorts = data["cohorts"]
    for by in sorted({c["universe_by"] for c in cohorts}):
        n = sum(c["universe_by"] == by for c in cohorts)
        rows.append(["universe chosen by", escape(f"{by} ({n} of {len(cohorts)} cohorts)")])
    stops = [c for c in cohorts if c["decisions_stopped"]]
    if stops:
        first = stops[0]["decisions_stopped"]
        rows.append(["decisions stopped early", escape(
            f"{len(stops)} of {len(cohorts)} cohorts, e.g. {stops[0]['start'][:10]}: {first}"
        )])  # fmt: skip
    return _table(["setting", "value"], rows)


def _summary_table(data: dict[str, Any]) -> str:
    rows = []
    for name, s in data["summary"].items():
        pair = data["paired"].get(name)
        rows.append(
            [
                escape(name),
                str(s["cohorts"]),
                _pct(s["return_mean"]),
                _interval(s["return_ci_low"], s["return_ci_high"]),
                _fmt(s["brier_mean"]),
                _fmt(s["brier"]),
                _fmt(s["win_rate"], "{:.1%}"),
                _pct(pair["mean"]) if pair else "",
                _interval(pair["ci_low"], pair["ci_high"]) if pair else "",
                ("✓" if pair["significant"] else "·") if pair else "",
            ]
        )
    header = ["agent", "cohorts", "mean return", "95% CI", "Brier (mean)", "Brier (pooled)",
              "win rate", f"{STRATEGY} − agent", "95% CI", "sig."]  # fmt: skip
    return _table(header, rows)


def _cohort_table(data: dict[str, Any]) -> str:
    names = list(data["settings"]["agents"])
    header = ["start", "cohort", "markets"]
    for name in names:
        header += [f"{name} return", "Brier", "win rate"]
    rows = []
    for cohort in data["cohorts"]:
        row = [escape(cohort["start"][:10]), escape(cohort["cohort"]), str(cohort["markets"])]
        for name in names:
            a = cohort["agents"][name]
            row += [_pct(a["return_pct"]), _fmt(a["brier"], "{:.3f}"),
                    _fmt(a["win_rate"], "{:.0%}")]  # fmt: skip
        rows.append(row)
    return _table(header, rows)


def _beliefs_table(beliefs: dict[str, Any]) -> str:
    rows = []
    for name, b in beliefs.items():
        m = b["murphy"]
        scores = [b["brier"], b["log_loss"], b["ece"], m["reliability"], m["resolution"],
                  m["uncertainty"], b["implied_brier"]]  # fmt: skip
        rows.append([escape(name), str(b["n"]), *map(_fmt, scores)])
    header = ["agent", "bets", "Brier", "log loss", "ECE", "REL", "RES", "UNC", "implied Brier"]
    return _table(header, rows)


# -- charts -------------------------------------------------------------------------------------


def _figure(caption: str, svg: str) -> str:
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


@dataclass(frozen=True)
class _Frame:
    """Maps data coordinates into the plot area of a WIDTH × HEIGHT SVG."""

    x0: float
    x1: float
    y0: float
    y1: float

    def x(self, v: float) -> float:
        return LEFT + (v - self.x0) / (self.x1 - self.x0) * (WIDTH - LEFT - RIGHT)

    def y(self, v: float) -> float:
        return HEIGHT - BOTTOM - (v - self.y0) / (self.y1 - self.y0) * (HEIGHT - TOP - BOTTOM)

    def polyline(self, xs: Sequence[float], ys: Sequence[float], colour: str, width: float) -> str:
        points = " ".join(f"{self.x(a):.1f},{self.y(b):.1f}" for a, b in zip(xs, ys, strict=True))
        return (
            f'<polyline points="{points}" fill="none" stroke="{colour}" '
            f'stroke-width="{width}" stroke-linejoin="round"/>'
        )

    def axes(self, x_label: str, y_label: str, y_fmt: str) -> str:
        parts = [
            f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
            f'height="{HEIGHT - TOP - BOTTOM}" fill="none" stroke="#999"/>'
        ]
        for t in nice_ticks(self.x0, self.x1):
            x = self.x(t)
            parts.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="#eee"/>'
                f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 15}" text-anchor="middle">{t:g}</text>'
            )
        for t in nice_ticks(self.y0, self.y1):
            y = self.y(t)
            parts.append(
                f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                f"{escape(y_fmt.format(t))}</text>"
            )
        parts.append(
            f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 8}" text-anchor="middle">'
            f"{escape(x_label)}</text>"
            f'<text transform="translate(14 {(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" '
            f'text-anchor="middle">{escape(y_label)}</text>'
        )
        return "".join(parts)


def _svg(content: str, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}">'
        f"{content}</svg>"
    )


def _padded(low: float, high: float) -> tuple[float, float]:
    if high - low < 1e-9:
        return low - 1.0, high + 1.0
    pad = (high - low) * 0.05
    return low - pad, high + pad


def _equity_chart(
    means: Sequence[tuple[str, np.ndarray, np.ndarray]],
    colours: dict[str, str],
    thin: Sequence[tuple[str, np.ndarray, np.ndarray]],
) -> str:
    """Thick lines for ``means`` and thin ones for ``thin``: (agent, offsets in s, values)."""
    series = [*means, *thin]
    days = [offsets / 86_400 for _, offsets, _ in series]
    values = [v for _, _, v in series]
    x1 = max(float(d.max()) for d in days)
    low, high = _padded(min(float(v.min()) for v in values), max(float(v.max()) for v in values))
    frame = _Frame(0.0, x1 if x1 > 0 else 1.0, low, high)
    lines = [
        frame.polyline(list(d), list(v), colours[name], 0.7)
        for (name, _, v), d in zip(thin, days[len(means) :], strict=True)
    ]
    lines += [
        frame.polyline(list(d), list(v), colours[name], 2.2)
        for (name, _, v), d in zip(means, days[: len(means)], strict=True)
    ]
    legend = (
        f'<rect x="{LEFT + 4}" y="{TOP + 3}" width="120" height="{14 * len(means) + 6}" '
        'fill="white" fill-opacity="0.8"/>'
    )
    legend += "".join(
        f'<text x="{LEFT + 8}" y="{TOP + 14 * (k + 1)}" fill="{colours[name]}" '
        f'style="fill:{colours[name]}">— {escape(name)}</text>'
        for k, (name, _, _) in enumerate(means)
    )
    axes = frame.axes("days since cohort start", "total value ($)", "{:,.0f}")
    return _svg(axes + "".join(lines) + legend, "equity curve")


def _agent_equity(result: BacktestResult, name: str, colour: str) -> str:
    cohorts = [
        (name, np.asarray(r.offsets, dtype=np.int64), np.asarray(r.values[name]))
        for r in result.records
    ]
    thin_colours = {name: colour}
    return _equity_chart([(name, *mean_equity(result.records, name))], thin_colours, cohorts)


def _reliability_chart(rows: Sequence[BrierRow], colour: str) -> str:
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
