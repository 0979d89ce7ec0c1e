"""The panels of ``arena step``'s screen as Rich renderables, one function per panel.

Each reads a ``View`` only, so the Textual app (``arena.step_app``) and any other front end
show the same words for the same cut; every figure says what it is (whose, valued how).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from rich.markup import escape
from rich.text import Text

from arena.step_view import MarketRow, MarketRows, View
from ledger.events import (
    DecisionsStopped,
    Event,
    MarketResolved,
    MarketVoided,
    ModelCalled,
    OrderFilled,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
)

WIDTH_ROWS = 60


def money(x: float) -> str:
    return f"${x:,.2f}"


def when(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def header(view: View, status: str = "") -> Text:
    """Two lines: where in the log (instant, week, what this stop is, how far) and, stepping a
    live replay, what the replay is doing; then the cohort with its rules and tape, or why a
    live replay stopped."""
    stop = view.stop
    what = (
        "start" if view.cut == 0
        else f"after {stop.agent}'s decision" if stop and stop.kind == "decision"
        else "after a resolution" if stop and stop.kind == "resolution"
        else "end of the log" if stop and stop.kind == "end"
        else "between stops"
    )  # fmt: skip
    line1 = f"{when(view.ts)} · week {view.week} · {what} · event {view.cut:,}/{view.total:,}"
    line2 = f"cohort {view.cohort} · rules {view.rules} · tape {view.tape or '—'}"
    stopped = status.startswith("stopped")
    if status and not stopped:
        line1 += f" · {status}"
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(line1, style="bold")
    text.append("\n" + (status if stopped else line2), style="red" if stopped else "")
    return text


def prices(row: MarketRow) -> str:
    """A binary market's YES price; a multi-outcome market's every outcome by name."""
    if len(row.outcomes) == 2 and row.outcomes[0].lower() == "yes":
        return f"{row.prices[0]:.3f}"
    return " ".join(f"{name} {p:.2f}" for name, p in zip(row.outcomes, row.prices, strict=False))


def change(value: float | None) -> Text:
    if value is None:
        return Text("—", style="dim")
    style = "green" if value > 0 else "red" if value < 0 else "dim"
    return Text(f"{value:+.3f}", style=style)


def market_widths(rows: MarketRows) -> tuple[int, int]:
    """The id and price columns' widths for ``market_line``: ids over every row, prices over
    the first ``WIDTH_ROWS`` (rows are made when read, and a redraw should make only those it
    shows)."""
    return (
        max([6, *(len(m) for m in rows.ids)]),
        max([5, *(len(prices(r)) for r in rows[:WIDTH_ROWS])]),
    )


def market_line(row: MarketRow | None, widths: tuple[int, int]) -> Text:
    """One line of the markets panel (the heading when ``row`` is None): id, price(s), change,
    history of marks, holding, question; ``widths`` are the id's and the prices' columns."""
    market, price = widths
    if row is None:
        return Text(
            f"{'market':<{market}} {'price':>{price}} {'Δ':>6} {'history':<10} held · question",
            style="bold",
            no_wrap=True,
        )
    text = Text(f"{row.market:<{market}} {prices(row):>{price}} ", no_wrap=True)
    delta = change(row.change)
    delta.pad_left(6 - len(delta))
    text.append_text(delta)
    text.append(f" {row.spark:<10} ")
    text.append(row.held + " · " if row.held else "", style="bold")
    text.append(row.question, style="dim")
    return text


def event_line(e: Event) -> str:
    """One line of markup per event, for the app's panels and the printed frames alike; names
    and reasons come from plugins and tapes, so they are escaped."""
    if isinstance(e, OrderFilled):
        verb = "bought" if e.kind == "buy" else "sold"
        extra = (
            f", conf {e.confidence:.2f}" if e.confidence is not None
            else f", realized {e.realized:+,.2f}" if e.realized is not None else ""
        )  # fmt: skip
        return (
            f"[green]✓ {verb}[/] {e.shares:,.2f} {escape(e.side)} of {escape(e.market)} "
            f"at {e.price:.3f} for {money(e.amount)}{extra}"
        )
    if isinstance(e, OrderRejected):
        where = f"{escape(e.side)} on {escape(e.market)}"
        return f"[red]✗ rejected[/] {e.kind} {where}: {escape(e.reason)}"
    if isinstance(e, PositionSettled):
        mark = "[green]won[/]" if e.won else "[red]lost[/]"
        return (
            f"{mark} {escape(e.side)} on {escape(e.market)}: paid {money(e.payout)} "
            f"(P/L {e.realized:+,.2f})"
        )
    if isinstance(e, PositionRefunded):
        return f"refunded {money(e.refund)} on voided {escape(e.market)}"
    if isinstance(e, MarketResolved):
        return f"[dim]{escape(e.market)} resolved {escape(str(e.winner))}[/]"
    if isinstance(e, MarketVoided):
        return f"[dim]{escape(e.market)} voided[/]"
    if isinstance(e, DecisionsStopped):
        return f"[yellow]no more decisions:[/] {escape(e.reason)}"
    return type(e).__name__


def decision(view: View) -> Text:
    """The agent's latest decision before the cut: action, orders asked, each order's fill or
    rejection, the reasoning, what followed until the cut, and its model calls' cost."""
    d = view.decision
    if d is None:
        return Text.from_markup(f"[dim]{escape(view.agent)} has not decided yet[/]")
    lines = [f"[bold]{d.action}[/] · week {d.week} · {when(d.ts)}"]
    for b in d.bets:
        belief = f", belief {b.belief:.2f}" if b.belief is not None else ""
        lines.append(f"bet {money(b.amount)} on {escape(b.side)} of {escape(b.market)}{belief}")
    for s in d.sells:
        target = s.position_id or f"{s.side} of {s.market}"
        lines.append(f"sell {s.percentage:g}% of {escape(target)}")
    lines.extend(event_line(e) for e in view.orders)
    if d.reasoning:
        lines.append(f"[italic]“{escape(d.reasoning)}”[/]")
    if d.error:
        lines.append(f"[red]error: {escape(d.error.splitlines()[0])}[/]")
    if view.usage.calls:
        lines.append(f"[dim]model: {escape(view.usage.summary())}[/]")
    if view.since:
        lines.append("[bold]since[/]")
        lines.extend(event_line(e) for e in view.since)
    return Text.from_markup("\n".join(lines))


def portfolio(view: View) -> tuple[int, Callable[[int], Text]]:
    """Cash, positions at the cut's marked prices, total and Brier over resolved bets, then
    one line per position: how many lines, and line ``k`` made when asked (an agent may hold
    hundreds of positions, and a screen shows a few)."""
    p = view.portfolio
    brier = "—" if p.brier is None else f"{p.brier:.4f}"
    head = [
        Text(f"{'cash':<19}{money(p.cash):>15}"),
        Text(f"{'positions (marked)':<19}{money(p.positions_value):>15}"),
        Text(f"{'total':<19}{money(p.total_value):>15}", style="bold"),
        Text(f"{'Brier (n resolved)':<19}{f'{brier} ({p.n_resolved})':>15}"),
    ]

    def line(k: int) -> Text:
        if k < len(head):
            return head[k]
        market, side, shares, cost, value = p.positions[k - len(head)]
        text = Text(f"{shares:,.0f} {side} {market}: {money(value)}", no_wrap=True)
        text.append(f" (cost {money(cost)})", style="dim")
        return text

    return len(head) + len(p.positions), line


def leaderboard(view: View) -> tuple[Text, list[Text]]:
    """Every agent at the cut, richest first, as ``arena report``'s standings say: total value
    (cash plus positions at the cut's marks), return on the starting cash, Brier over the
    resolved bets so far with their count. The agent in view is marked ▶."""
    names = ("agent", "total", "return", "Brier (n)")
    cells = [
        (
            ("▶ " if s.agent == view.agent else "") + s.agent,
            money(s.total_value),
            f"{s.return_pct:+.2f}%",
            ("—" if s.brier is None else f"{s.brier:.4f}") + f" ({s.n_resolved})",
        )
        for s in view.standings
    ]
    widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names)]

    def line(row: tuple[str, ...], style: str) -> Text:
        first = f"{row[0]:<{widths[0]}}"
        rest = " ".join(f"{c:>{w}}" for c, w in zip(row[1:], widths[1:], strict=True))
        return Text(f"{first} {rest}", style=style, no_wrap=True)

    mine = ("▶ " + view.agent,)
    return line(names, "bold"), [line(c, "bold" if c[:1] == mine else "") for c in cells]


def _call_lines(call: ModelCalled, prompts: dict[str, str]) -> list[str]:
    c = call.call
    head = f"[bold]call {call.n}[/] {escape(c.model)} · {escape(c.question)}"
    if c.reask:
        head += f" · re-ask {c.reask}"
    tokens = f"{c.tokens_in or 0:,} in / {c.tokens_out or 0:,} out tokens"
    cost = f"${c.cost:.4f}" if c.cost is not None else "cost unknown"
    lines = [head, f"[dim]{tokens} · {cost} · status {c.status}[/]"]
    if c.system:
        lines.append(f"[cyan]system[/] {escape(prompts.get(c.system, c.system))}")
    for m in c.messages:
        lines.append(f"[cyan]{escape(m.get('role', ''))}[/] {escape(m.get('content', ''))}")
    if c.answer is not None:
        lines.append(f"[magenta]answer[/] {escape(c.answer)}")
    if c.error:
        lines.append(f"[red]error[/] {escape(c.error)}")
    return lines


def transcript(view: View) -> Text:
    """The decision's prompt and raw answer, and every model call (re-asks included) with its
    tokens and dollars, as ``ModelCalled`` logged them."""
    d = view.decision
    lines: list[str] = []
    if d is not None and d.prompt:
        lines += ["[bold]prompt[/]", escape(d.prompt)]
    if d is not None and d.raw_response:
        lines += ["[bold]raw answer[/]", escape(d.raw_response)]
    for call in view.calls:
        lines += _call_lines(call, view.prompts)
    if view.usage.calls:
        lines.append(f"[bold]this decision[/] {escape(view.usage.summary())}")
    if not lines:
        lines.append(f"[dim]{escape(view.agent)}'s decision asked no model[/]")
    return Text.from_markup("\n".join(lines))
