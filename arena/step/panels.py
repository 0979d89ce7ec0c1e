"""The panels of ``arena step``'s screen as Rich renderables, one function per panel.

Each reads a ``Screen`` only, so the Textual app (``arena.step.app``) and any other front end
show the same words for the same cut; every figure says what it is (whose, valued how).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from rich.markup import escape
from rich.text import Text

from arena.step.frames import brier_text
from arena.step.view import MarketRow, MarketRows, Screen
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
from replays.samples import SAMPLE, SAMPLE_HASH

ID_WIDTH = 12
"""The widest a market id is shown in the markets panel (cut with "…" beyond)."""


def money(x: float) -> str:
    return f"${x:,.2f}"


def whole_dollars(x: float) -> str:
    return f"${x:,.0f}"


def when(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def header(view: Screen, status: str = "", moving: str = "") -> Text:
    """Two lines: where in the log (instant, week, what this stop is, how far) and, stepping a
    live replay, what the replay is doing; then the cohort with its rules and tape, or why a
    live replay stopped, or (``moving``) a far move still folding, where 80 columns show it."""
    stop = view.stop
    what = (
        "start" if view.cut == 0
        else f"after {stop.agent}'s decision" if stop and stop.kind == "decision"
        else "after a resolution" if stop and stop.kind == "resolution"
        else "end of the log" if stop and stop.kind == "end"
        else "between stops"
    )  # fmt: skip
    line1 = f"{when(view.ts)} · week {view.week} · {what} · event {view.cut:,}/{view.total:,}"
    line2 = f"cohort {view.cohort} · rules {view.rules} · tape {tape_name(view.tape)}"
    stopped = status.startswith("stopped")
    if status and not stopped:
        line1 += f" · {status}"
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(line1, style="bold")
    if moving:
        text.append("\n" + moving, style="yellow")
    else:
        text.append("\n" + (status if stopped else line2), style="red" if stopped else "")
    return text


def tape_name(tape: str) -> str:
    """A tape as the header names it: its hash's first 12 characters, as the report gives
    them, and ``sample`` for the embedded one (the name a command takes it by)."""
    if not tape:
        return "—"
    return f"{SAMPLE} {tape[:12]}" if tape == SAMPLE_HASH else tape[:12]


def prices(row: MarketRow) -> str:
    """A binary market's YES price; a multi-outcome market's every outcome by name."""
    if row.is_binary:
        return f"{row.prices[0]:.3f}"
    return " ".join(f"{name} {p:.2f}" for name, p in zip(row.outcomes, row.prices, strict=False))


def change(value: float | None) -> Text:
    if value is None:
        return Text("—", style="dim")
    style = "green" if value > 0 else "red" if value < 0 else "dim"
    return Text(f"{value:+.3f}", style=style)


def id_width(rows: MarketRows) -> int:
    """The first column's width for ``market_line``: the longest id or (indented by one) name
    of a multi-outcome market's outcome, up to ``ID_WIDTH``."""
    names = [len(rows.listed[m].outcomes[o]) + 1 for k, m in enumerate(rows.ids)
             for o in rows.outcome_lines(k)]  # fmt: skip
    return min(ID_WIDTH, max([6, *(len(m) for m in rows.ids), *names]))


WIDE = 24 + 3 + 24
"""Beyond the id: Δ, history and price (24 cells), `` · `` and 24 of the question. A panel
narrower than the id and this (half of 80 columns is 36) shows no Δ or history, so that the
question, which says what a market is, still shows."""


NARROW_ID = 7
"""The widest a market id is shown in a narrow markets panel (a 6-digit Gamma id whole)."""


def market_line(
    row: MarketRow | None,
    id_width: int,
    outcome: int | None = None,
    width: int | None = None,
    start: str = "",
) -> Text:
    """One line of the markets panel (the heading when ``row`` is None): id, change and
    history of marks, price, holding and question, the fixed-width columns first so that they
    show in a narrow panel (one long id, a slug among numbers, once pushed all but the ids out
    of sight). In a panel of ``width`` under ``id_width + WIDE`` the change and history go, and
    the question takes their room, ids are cut to ``NARROW_ID`` and the words most questions
    begin with (``start``, see ``MarketRows.common_start``) are left out as "…", the heading
    saying which. A multi-outcome market takes a line of its own (id, holding, question) and
    one per ``outcome``: its name, change, history and price."""
    narrow = width is not None and width < id_width + WIDE
    if narrow:
        id_width = min(id_width, NARROW_ID)
    if row is None:
        columns = f"{'price':>5}" if narrow else f"{'Δ':>6} {'history':<10} {'price':>5}"
        question = f"… = {start.strip()}" if narrow and start else "held · question"
        return Text(f"{'market':<{id_width}} {columns} · {question}", style="bold", no_wrap=True)
    if outcome is not None:
        name = _cut(f" {row.outcomes[outcome]}", id_width)
        text = Text(f"{name:<{id_width}} ", no_wrap=True)
        delta = change(row.changes[outcome])
        delta.pad_left(6 - len(delta))
        text.append_text(delta)
        text.append(f" {row.sparks[outcome]:<10} {row.prices[outcome]:>5.3f}")
        return text
    text = Text(f"{_cut(row.market, id_width):<{id_width}} ", no_wrap=True)
    if not row.is_binary:
        text.append(f"{len(row.outcomes)} outcomes:".ljust(5 if narrow else 23) + " · ")
    elif narrow:
        text.append(f"{prices(row):>5} · ")
    else:
        delta = change(row.change)
        delta.pad_left(6 - len(delta))
        text.append_text(delta)
        text.append(f" {row.spark:<10} {prices(row):>5} · ")
    text.append(row.held + " · " if row.held else "", style="bold")
    question = row.question
    if narrow and start and question.startswith(start):
        question = "…" + question[len(start) :]
    text.append(question, style="dim")
    return text


def markets_title(rows: MarketRows, shown: int, search: str = "") -> str:
    """The markets panel's title: how many rows the search left of how many, or, when there
    are none, why (a live replay's first screen said "markets 0/0", which read as an empty
    universe)."""
    if rows:
        found = f" · '{search}'" if search else ""
        return f"markets {shown}/{len(rows)}{found}"
    listed = len(rows.listed)
    if not listed:
        return "markets: none listed yet"
    return f"markets: {listed:,} listed, " + ("none priced yet" if not rows.priced else "none open")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _execution_note(e: OrderFilled) -> str:
    """What an execution model added to a fill: its fee, its levels, that it was partial or
    priced off a made-up spread (nothing for a fill by Forecaster Arena's rule)."""
    notes = []
    if e.fee:
        unit = " shares" if e.fee_currency == "shares" else ""
        notes.append(f"fee {e.fee:,.2f}{unit}" if unit else f"fee {money(e.fee)}")
    if e.legs and len(e.legs) > 1:
        notes.append(f"{len(e.legs)} levels")
    if e.requested is not None:
        notes.append(f"partial, of {e.requested:,.2f} asked")
    if e.synthetic:
        notes.append("synthetic spread")
    return f" ({', '.join(notes)})" if notes else ""


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
            f"at {e.price:.3f} for {money(e.amount)}{_execution_note(e)}{extra}"
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


def decision(view: Screen) -> Text:
    """The agent's latest decision before the cut: action, orders asked, each order's fill or
    rejection, the reasoning, what followed until the cut, and its model calls' cost."""
    d = view.decision
    if d is None:
        return Text.from_markup(f"[dim]{escape(view.agent)} has not decided yet[/]")
    lines = [f"[bold]{d.action}[/] · week {d.week} · {when(d.ts)}"]
    # the broker executes the sells, then the bets, each in order and each to one fill or
    # rejection: the k-th sell's outcome is the k-th sell order's, and so for bets
    done = {kind: [e for e in view.orders if e.kind == kind] for kind in ("sell", "buy")}
    for s in d.sells:
        target = s.position_id or f"{s.side} of {s.market}"
        lines.append(f"sell {s.percentage:g}% of {escape(target)}")
        lines.extend(f"  {event_line(e)}" for e in done["sell"][:1])
        done["sell"] = done["sell"][1:]
    for b in d.bets:
        belief = f", belief {b.belief:.2f}" if b.belief is not None else ""
        lines.append(f"bet {money(b.amount)} on {escape(b.side)} of {escape(b.market)}{belief}")
        lines.extend(f"  {event_line(e)}" for e in done["buy"][:1])
        done["buy"] = done["buy"][1:]
    lines.extend(event_line(e) for e in done["sell"] + done["buy"])  # none, from this broker
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


PORTFOLIO_WIDTH = 37
"""The portfolio panel's cells at 80 columns: half the screen less its border and the
scrollbar's column."""

POSITION_ID_MIN = 4
"""The fewest cells a position's market id is cut to ("0x5…"), however narrow the panel."""


def portfolio(view: Screen, width: int = PORTFOLIO_WIDTH) -> tuple[int, Callable[[int], Text]]:
    """Cash, positions at the cut's marked prices, total, both Briers over resolved bets (the
    implied with their count, the paid beside it, labelled as the report labels them), then
    one line per position: how many lines, and line ``k`` made when asked (an agent may hold
    hundreds of positions, and a screen shows a few).

    A position's line fits ``width`` cells: in cents with its market's id whole, else in whole
    dollars, cutting the id's end if it must (at 80 columns "335 YES 255148: $221.32 (cost
    $269.59)" lost its closing parenthesis, and a condition id of 66 characters hid both
    amounts)."""
    p = view.portfolio
    head = [
        Text(f"{'cash':<19}{money(p.cash):>15}"),
        Text(f"{'positions (marked)':<19}{money(p.positions_value):>15}"),
        Text(f"{'total':<19}{money(p.total_value):>15}", style="bold"),
        Text(f"{'Brier (impl.)':<19}{f'{brier_text(p.brier)} ({p.n_resolved})':>15}"),
        Text(f"{'Brier (paid)':<19}{brier_text(p.brier_paid):>15}"),
    ]

    def line(k: int) -> Text:
        if k < len(head):
            return head[k]
        market, side, shares, cost, value = p.positions[k - len(head)]
        for amount in (money, whole_dollars):
            worth, paid = f": {amount(value)}", f" (cost {amount(cost)})"
            room = width - len(f"{shares:,.0f} {side} {worth}{paid}")
            if len(market) <= room:
                break
        worth = f"{shares:,.0f} {side} {_cut(market, max(room, POSITION_ID_MIN))}{worth}"
        text = Text(worth, no_wrap=True)
        text.append(paid, style="dim")
        return text

    return len(head) + len(p.positions), line


def leaderboard(view: Screen, width: int = 80) -> tuple[Text, list[Text]]:
    """Every agent at the cut, richest first, as ``arena report``'s standings say: total value
    (cash plus positions at the cut's marks), return on the starting cash, Brier over the
    resolved bets so far with their count, and, where the panel has room for it, the Brier of
    the prices paid beside it (a loser of small bets tops the first; docs/reports.md). The
    agent in view is marked ▶. In ``width`` cells: cents and four decimals with the paid Brier,
    or without it; then whole dollars, three decimals and a narrower mark (as the report's
    table shows them), with it or without; then names cut.

    A column is as wide as the widest of its values and of ``_widest``'s, so the layout chosen
    at the start holds while the totals move: with one agent, the paid Brier fitted by a cell
    at $9,998.33 and not at $10,000.00, where its heading showed "pai" over no values."""
    start = max((s.initial_cash for s in view.standings), default=0.0)

    def cells(precise: bool, paid: bool) -> list[tuple[str, ...]]:
        mark, blank = ("▶ ", "  ") if precise else ("▶", " ")
        return [
            ((mark if s.agent == view.agent else blank) + s.agent,
             *_figures(s.total_value, s.return_pct, s.brier, s.n_resolved, s.brier_paid,
                       precise, paid))
            for s in view.standings
        ]  # fmt: skip

    layouts = [(True, True), (True, False), (False, True), (False, False)]
    for precise, paid in layouts:
        # the report's two Briers by its labels: implied (with its count) and paid
        names = ("agent", "total", "return", "impl. (n)") + (("paid",) if paid else ())
        rows = cells(precise, paid)
        widest = ("", *_widest(start, precise, paid))
        w = [max(len(c[i]) for c in [names, widest, *rows]) for i in range(len(names))]
        if sum(w) + len(w) - 1 <= width:
            break
    else:  # the names give way, down to a few letters
        w[0] = max(width - sum(w[1:]) - len(w) + 1, NAME_MIN)

    def line(row: tuple[str, ...], style: str) -> Text:
        name = row[0] if len(row[0]) <= w[0] else row[0][: w[0] - 1] + "…"
        rest = " ".join(f"{c:>{n}}" for c, n in zip(row[1:], w[1:], strict=True))
        return Text(f"{name:<{w[0]}} {rest}", style=style, no_wrap=True)

    return line(names, "bold"), [line(c, "bold" if c[0][0] == "▶" else "") for c in rows]


NAME_MIN = 6
"""The fewest cells the leaderboard cuts an agent's name to: its mark, a few letters and "…"."""


def _figures(
    total: float, ret: float, brier: float | None, n: int, paid_brier: float | None,
    precise: bool, paid: bool,
) -> tuple[str, ...]:  # fmt: skip
    """An agent's total, return, implied Brier with its count and (``paid``) paid Brier, as
    the leaderboard shows them: cents and four decimals when ``precise``, else whole dollars
    and three."""
    digits = 4 if precise else 3
    figures = (
        money(total) if precise else whole_dollars(total),
        f"{ret:+.2f}%",
        ("—" if brier is None else f"{brier:.{digits}f}") + f" ({n})",
    )
    return figures + (("—" if paid_brier is None else f"{paid_brier:.{digits}f}",) if paid else ())


def _widest(start: float, precise: bool, paid: bool) -> tuple[str, ...]:
    """The widest figures an agent that started with ``start`` shows while it neither doubles
    nor loses it all and has fewer than 100 resolved bets: what the leaderboard's columns make
    room for from the start (past them, a column widens as its values need)."""
    return _figures(2 * start - 0.01, -99.99, 0.0, 99, 0.0, precise, paid)


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


def transcript(view: Screen) -> Text:
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


def damaged(exc: Exception, consequence: str, where: str = "") -> str:
    """A damaged log's one line: what is wrong and where (the store names the event's seq),
    what came of it, and what to run (``arena verify`` checks the whole log and says all that
    is wrong with it; ``where`` names the log)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = text.removesuffix("; run 'arena verify'").removesuffix("; run 'arena verify' on its log")
    return f"{text}; {consequence} (run 'arena verify{where}')"
