"""The realism ladder as an HTML page (``arena ladder DB --html DIR``): each agent's P/L on
every rung and what each step took, drawn as a waterfall; the dollars the book held near the
price each bet was shown; forecasters' edge beside their Brier score. Built from the shared
parts of ``arena.reports.html``, beside ``ladder.json`` (what ``--json`` prints).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from arena.backtests.ladder import (
    Ladder,
    cost_text,
    mean_pnl,
    pnl_text,
    step_costs,
    steps_note,
)
from arena.reports.charts import PALETTE
from arena.reports.html import (
    fmt,
    html_table,
    note,
    page,
    settings_table,
    unbroken,
    write_page,
)

MAX_BETS = 200
"""The most bets the page lists one by one (the JSON holds them all)."""


def write_ladder_report(directory: Path, ladder: Ladder, about: dict[str, str]) -> Path:
    """``index.html`` and ``ladder.json`` into ``directory``; the page's path. ``about``: the
    log, tape and books the ladder climbed, as the settings table shows them."""
    data = ladder.as_data() | {"about": about}
    return write_page(directory, "ladder.json", data, render_ladder_html(ladder, data))


SIGNED = ("#d62728", "#2ca02c")
"""The palette's red and green, which a P/L page reads as loss and gain (its tables colour
figures so, and a step that adds is drawn green): the second agent's +308.77 was a red bar."""


def waterfall_colours(names: list[str]) -> dict[str, str]:
    """Each agent's colour in the waterfall: the report's palette without red and green."""
    palette = [c for c in PALETTE if c not in SIGNED]
    return {name: palette[k % len(palette)] for k, name in enumerate(names)}


def render_ladder_html(ladder: Ladder, data: dict[str, Any]) -> str:
    means = mean_pnl(ladder.rows)
    colours = waterfall_colours(list(means))
    steps = steps_note(ladder.rungs)
    sections = [
        settings_table([(k, f"<code>{escape(v)}</code>") for k, v in data["about"].items()]),
        '<h2 id="rungs">P/L on each rung</h2>',
        _rungs_table(ladder, means),
        note(
            "The same decisions on every rung, each meeting more of the market than the one "
            f"before; mean over cohorts, dollars. {steps[0].upper()}{steps[1:]}."
        ),
        _waterfall(ladder, means, colours),
    ]
    sections += _depth_sections(data["depth"])
    sections += _edge_sections(data["edge"])
    return page("Realism ladder", sections)


def _money(x: float) -> str:
    cls = "pos" if x > 0 else "neg" if x < 0 else ""
    return f'<span class="{cls}">{pnl_text(x)}</span>'


def _rungs_table(ladder: Ladder, means: dict[str, list[float]]) -> str:
    steps = ladder.rungs
    header = ["agent", *(r.name for r in steps), *(f"cost\u00a0($): {r.took}" for r in steps[1:])]
    rows = [
        [escape(agent), *map(_money, pnl), *map(cost_text, step_costs(pnl))]
        for agent, pnl in means.items()
    ]
    return html_table(header, rows)


def _waterfall(ladder: Ladder, means: dict[str, list[float]], colours: dict[str, str]) -> str:
    """A waterfall per agent: its P/L on the first rung, what each step cost it (a bar from the
    P/L before the step to the P/L after, labelled with the cost as the table gives it), and
    its P/L on the last rung, on one scale shared by every agent."""
    first, last = ladder.rungs[0].name, ladder.rungs[-1].name
    heads = [_lines(first), *(["cost ($):", r.took] for r in ladder.rungs[1:]), _lines(last)]
    values = [v for mean in means.values() for v in mean]
    low, high = min(0.0, *values), max(0.0, *values)
    span = (high - low) or 1.0
    bar_w, gap, row_h, left, label_h = 100, 12, 90, 80, 44
    width = left + len(heads) * (bar_w + gap)
    height = label_h + row_h * len(means)
    parts = [f'<svg width="{width}" height="{height}" role="img" '
             f'aria-label="what each step of realism cost each agent">']  # fmt: skip
    for k, head in enumerate(heads):
        x = left + k * (bar_w + gap) + bar_w / 2
        lines = "".join(f'<tspan x="{x:.0f}" dy="{12 if n else 0}">{escape(line)}</tspan>'
                        for n, line in enumerate(head))  # fmt: skip
        parts.append(f'<text x="{x:.0f}" y="12" text-anchor="middle">{lines}</text>')
    for i, (agent, mean) in enumerate(means.items()):
        top, inner = label_h + i * row_h + 14, row_h - 30

        def y(v: float, top: float = top, inner: float = inner) -> float:
            return top + (high - v) / span * inner

        parts.append(f'<text x="4" y="{y(0.0) + 4:.0f}">{escape(agent)}</text>')
        parts.append(f'<line x1="{left}" x2="{width}" y1="{y(0.0):.1f}" y2="{y(0.0):.1f}" '
                     'stroke="#bbb"/>')  # fmt: skip
        spans = [(0.0, mean[0]), *itertools.pairwise(mean), (0.0, mean[-1])]
        costs = step_costs(mean)
        for k, (a, b) in enumerate(spans):
            step = 0 < k < len(spans) - 1
            fill = (
                ("#8c959f" if b < a else "#1a7f37" if b > a else "#d0d7de")
                if step
                else colours[agent]
            )
            x, y0, y1 = left + k * (bar_w + gap), y(max(a, b)), y(min(a, b))
            figure = cost_text(costs[k - 1]) if step else pnl_text(b)
            named = f"{ladder.rungs[k].took} cost" if step else (first if k == 0 else last)
            parts.append(
                f'<rect x="{x}" y="{y0:.1f}" width="{bar_w}" '
                f'height="{max(y1 - y0, 0.75):.1f}" fill="{fill}"><title>'
                f"{escape(agent)}, {escape(named)}: {figure}</title></rect>"
            )
            parts.append(f'<text x="{x + bar_w / 2:.0f}" y="{y0 - 3:.1f}" '
                         f'text-anchor="middle">{figure}</text>')  # fmt: skip
    parts.append("</svg>")
    caption = ("What each step cost: the first rung's P/L, each step's cost as the table gives "
               "it (a grey bar down: what it took; green up: what it added), the last rung's "
               "P/L; one scale for every agent, dollars")  # fmt: skip
    return f'<figure class="scroll">{"".join(parts)}<figcaption>{caption}</figcaption></figure>'


def _lines(name: str, width: int = 16) -> list[str]:
    """A rung's name in lines of about ``width`` characters, broken after its ``+``s (the
    chart's columns are narrow; a name as long as "l2 + fees + 1500 ms + model time" runs
    into the next)."""
    lines = [""]
    for k, part in enumerate(name.split(" + ")):
        piece = part if k == 0 else f"+ {part}"
        if lines[-1] and len(lines[-1]) + 1 + len(piece) > width:
            lines.append(piece)
        else:
            lines[-1] = f"{lines[-1]} {piece}".strip()
    return lines


def _depth_sections(depth: dict[str, Any]) -> list[str]:
    out = ['<h2 id="depth">Depth near the price shown</h2>']
    if not depth["bets"]:
        return [*out, note("No order books: the tape has one price per instant and no depth, "
                           "so what a bet could have had near it is not known.")]  # fmt: skip
    cents = [f"{c * 100:.0f}¢" for c in depth["cents"]]
    rows = [
        [escape(a["agent"]), str(a["bets"]), *(f"${v:,.2f}" for v in a["median"]),
         *(f"{v:.1%}" for v in a["share"])]
        for a in depth["agents"]
    ]  # fmt: skip
    header = ["agent", "bets with a book", *(f"median $ within {c}" for c in cents),
              *(f"of $ asked, fillable within {c}" for c in cents)]  # fmt: skip
    out += [
        html_table(header, rows),
        note(
            "For every bet, the dollars the asks of the book standing at its decision offered "
            "at no more than 1¢ and 5¢ over the price the agent was shown (the tape's). "
            "'Of $ asked': how much of what the agent bet those levels could fill."
        ),
        '<h3 id="bets">Each bet</h3>',
        _bets_table(depth["bets"][:MAX_BETS], cents),
    ]
    if len(depth["bets"]) > MAX_BETS:
        out.append(note(f"The first {MAX_BETS} of {len(depth['bets'])} bets; ladder.json "
                        "holds every one."))  # fmt: skip
    return out


def _bets_table(bets: Sequence[dict[str, Any]], cents: list[str]) -> str:
    rows = []
    for b in bets:
        when = datetime.fromtimestamp(b["ts"], UTC).strftime("%Y-%m-%d %H:%M")
        market = b["market"] if len(b["market"]) <= 14 else b["market"][:12] + "…"
        held = b["within"] or [None] * len(cents)
        rows.append([unbroken(when), escape(b["agent"]), f"<code>{escape(market)}</code>",
                     escape(b["side"]), f"${b['asked']:,.2f}", f"{b['shown']:.3f}",
                     *("—" if v is None else f"${v:,.2f}" for v in held)])  # fmt: skip
    header = ["decided (UTC)", "agent", "market", "side", "asked", "shown",
              *(f"$ within {c}" for c in cents)]  # fmt: skip
    return html_table(header, rows, left=4)


def _edge_sections(edges: Sequence[dict[str, Any]]) -> list[str]:
    out = ['<h2 id="edge">Forecasters: the edge that survives execution</h2>']
    if not edges:
        return [*out, note("No agent stated a belief with its bets.")]
    rows = [
        [escape(e["agent"]), escape(e["cohort"]), str(e["bets"]), fmt(e["brier"]),
         _points(e["shown"]), _points(e["executed"]), f"{e['kept']:.1%}"]
        for e in edges
    ]  # fmt: skip
    header = ["agent", "cohort", "bets with a belief", "Brier (stated)", "edge at the price "
              "shown", "edge after execution", "dollars still spent"]  # fmt: skip
    return [
        *out,
        html_table(header, rows, left=2),
        note(
            "Edge: the belief a bet stated for its side less what a share cost, in probability "
            "points, weighted by dollars: at the tape's price (the fa rung), and on the last "
            "rung (the book's prices plus a fee in dollars, per share kept). A good Brier with "
            "no edge left after execution is a forecast a trader could not have used."
        ),
    ]


def _points(x: float | None) -> str:
    if x is None:
        return "—"
    cls = "pos" if x > 0 else "neg" if x < 0 else ""
    return f'<span class="{cls}">{x * 100:+.2f} pt</span>'
