"""Reports as Rich tables in a terminal: the answer first.

People get the leaderboard across cohorts and one line per cohort; the per-cohort tables
(standings, open positions, stated beliefs, categories) on request. The figures come from
``arena.reports.model``; this module only lays them out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from arena.reports.model import (
    BRIER_IMPLIED,
    IntervalSettings,
    Usage,
    execution_text,
    interval_info,
    iso_utc,
    open_positions,
    scored_count,
    stated_beliefs,
    universe_size,
    universe_volume,
    usage_by_agent,
)
from ledger.leaderboard import (
    AgentStanding,
    CategoryRow,
    LeaderboardRow,
    categories,
    cohort_standings,
    leaderboard,
)
from ledger.projection import CohortState, Ledger
from ledger.usage import ModelUsage, total_usage

COHORT_COLUMNS = 6
"""Agents shown as columns of the one-line-per-cohort table; the rest are in --all/--json."""


_VISIBLE = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


def shown(text: str) -> str:
    """Text the log holds (agent and market names, categories, cohort ids, reasons, all of
    which a tape or a plugin wrote) as a table cell: control characters written out, not sent
    to the terminal (an escape sequence in a category retitled the window and cleared the
    screen), and Rich's markup escaped, so a ``[link=...]`` is text, not a link."""
    return escape(text.translate(_VISIBLE))


def _num(x: float | None, fmt: str = "{:,.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def _signed(x: float | None, suffix: str = "") -> str:
    if x is None:
        return "—"
    colour = "green" if x > 0 else "red" if x < 0 else "white"
    return f"[{colour}]{x:+,.2f}{suffix}[/]"


def _table(title: str, caption: str | None = None) -> Table:
    """The house style: light rules, so that twelve columns still fit 80 characters."""
    return Table(
        title=title, title_justify="left", caption=caption, caption_justify="left",
        header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
        collapse_padding=True,
    )  # fmt: skip


def standings_table(title: str, rows: Sequence[AgentStanding]) -> Table:
    """One row per agent; columns that are zero for everyone (open positions, rejections,
    errors) are left out, so the table fits a narrow terminal."""
    columns: list[tuple[str, Callable[[AgentStanding], str]]] = [
        ("cash", lambda s: _num(s.cash, "{:,.0f}")),
        ("pos.", lambda s: _num(s.positions_value, "{:,.0f}")),
        ("total", lambda s: _num(s.total_value, "{:,.0f}")),
        ("P/L", lambda s: _signed(s.pnl)),
        ("return", lambda s: _signed(s.return_pct, "%")),
        ("Brier (impl.)", lambda s: _num(s.brier, "{:.3f}")),
        ("BSS", lambda s: _num(s.bss, "{:+.2f}")),
        ("BSS mkt", lambda s: _num(s.bss_market, "{:+.2f}")),
        ("res.", lambda s: str(s.n_resolved)),
        ("win", lambda s: _num(s.win_rate, "{:.0%}")),
        ("bets", lambda s: str(s.n_bets)),
        ("rej.", lambda s: str(s.n_rejected)),
        ("err.", lambda s: str(s.n_errors)),
    ]
    optional = {
        "pos.": lambda s: s.positions_value != 0,
        "rej.": lambda s: s.n_rejected > 0,
        "err.": lambda s: s.n_errors > 0,
    }
    columns_shown = [(n, f) for n, f in columns if n not in optional or any(map(optional[n], rows))]
    table = _table(title, BRIER_IMPLIED)
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=18)
    for name, _ in columns_shown:
        table.add_column(name, justify="right", no_wrap=True)
    for s in rows:
        table.add_row(shown(s.agent), *(cell(s) for _, cell in columns_shown))
    return table


def positions_table(rows: Sequence[dict[str, Any]]) -> Table:
    table = _table("Open positions (marked)")
    for name in ("agent", "market", "side", "shares", "avg entry", "price", "value",
                 "unrealized"):  # fmt: skip
        left = name in ("agent", "market", "side")
        table.add_column(name, justify="left" if left else "right", no_wrap=True)
    for r in rows:
        table.add_row(
            shown(r["agent"]), shown(r["market"]), shown(r["side"]), f"{r['shares']:,.2f}",
            f"{r['avg_entry']:.3f}", f"{r['price']:.3f}", _num(r["value"]),
            _signed(r["unrealized_pnl"]),
        )  # fmt: skip
    return table


def beliefs_table(beliefs: dict[str, dict[str, Any]]) -> Table:
    table = _table(
        "Stated beliefs (P of the bet's side), scored",
        "Brier (stated): the probability the agent gave for its bet's side; ECE and the "
        "Murphy terms of the same; Brier (impl.) of the same bets beside it",
    )
    for name in ("agent", "n", "Brier (stated)", "log loss", "ECE", "reliability",
                 "resolution", "Brier (impl.)"):  # fmt: skip
        table.add_column(name, justify="left" if name == "agent" else "right", no_wrap=True)
    for agent, b in beliefs.items():
        m = b["murphy"]
        table.add_row(
            shown(agent), scored_count(b), f"{b['brier']:.4f}", f"{b['log_loss']:.4f}",
            f"{b['ece']:.4f}", f"{m['reliability']:.4f}", f"{m['resolution']:.4f}",
            f"{b['implied_brier']:.4f}",
        )  # fmt: skip
    return table


def categories_table(title: str, rows: Sequence[CategoryRow]) -> Table:
    table = _table(
        title,
        "return: the category's P/L in points of starting cash, mean over cohorts (an agent's "
        "rows add up to its mean return); Brier (impl.) pooled over the category's resolved bets",
    )
    for name in ("agent", "category", "markets", "bets", "P/L", "return", "Brier (impl.)"):
        table.add_column(name, justify="left" if name in ("agent", "category") else "right",
                         no_wrap=True, overflow="ellipsis", max_width=28)  # fmt: skip
    for r in rows:
        table.add_row(
            shown(r.agent), shown(r.category), str(r.markets), str(r.n_bets), _signed(r.pnl),
            _signed(r.return_pp, " pp"), _num(r.brier, "{:.3f}"),
        )  # fmt: skip
    return table


def leaderboard_table(rows: Sequence[LeaderboardRow], interval: dict[str, Any]) -> Table:
    """Across cohorts: summed P/L, mean return per cohort with its 95% interval (its method in
    the caption), pooled implied Brier with both skill scores, and win rate."""
    cohorts = max((r.cohorts for r in rows), default=0)
    table = _table(
        f"Leaderboard across {cohorts} cohort(s), by total P/L",
        f"mean return: mean of the cohorts' returns · {interval['text']}\n{BRIER_IMPLIED}",
    )
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=18)
    for name in ("cohorts", "bets", "total P/L", "mean return", "95% interval",
                 "Brier (impl.)", "BSS", "BSS mkt", "win"):  # fmt: skip
        table.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        ci = (
            f"{r.return_ci_low:+.2f} .. {r.return_ci_high:+.2f}%"
            if r.return_ci_low is not None and r.return_ci_high is not None
            else "—"
        )
        table.add_row(
            shown(r.agent), str(r.cohorts), str(r.n_bets), _signed(r.total_pnl),
            _signed(r.return_mean, "%"), ci, _num(r.brier, "{:.3f}"), _num(r.bss, "{:+.2f}"),
            _num(r.bss_market, "{:+.2f}"), _num(r.win_rate, "{:.0%}"),
        )  # fmt: skip
    return table


def usage_table(title: str, rows: dict[str, ModelUsage]) -> Table:
    """Model calls per agent: attempts, re-asks, failures, tokens, dollars, latency."""
    table = _table(title)
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=18)
    for name in ("calls", "re-asks", "failed", "rejected", "tokens in", "tokens out", "USD",
                 "median s", "p95 s"):  # fmt: skip
        table.add_column(name, justify="right", no_wrap=True)
    for agent, u in rows.items():
        d = u.as_dict()
        table.add_row(
            shown(agent), str(u.calls), str(u.reasks), str(u.failures), str(u.rejected),
            f"{u.tokens_in:,}", f"{u.tokens_out:,}", _num(u.cost, "{:,.4f}"),
            _num(_seconds(d["latency_median_ms"]), "{:.2f}"),
            _num(_seconds(d["latency_p95_ms"]), "{:.2f}"),
        )  # fmt: skip
    return table


def cohort_lines_table(states: Sequence[CohortState], agents: Sequence[str]) -> Table:
    """One line per cohort: when, how many markets, whether it closed, each agent's return."""
    first = list(agents[:COHORT_COLUMNS])
    more = len(agents) - len(first)
    caption = "return of each agent in each cohort; the cohort's tables: --cohort ID or --all"
    if more:
        caption += f"; {more} more agent(s) in --all and --json"
    table = _table(f"{len(states)} cohorts", caption)
    for name in ("start", "cohort", "markets", "status"):
        table.add_column(name, no_wrap=True, justify="right" if name == "markets" else "left")
    for agent in first:
        table.add_column(
            shown(agent), justify="right", no_wrap=True, overflow="ellipsis", max_width=12
        )
    for state in states:
        returns = {s.agent: s.return_pct for s in cohort_standings(state)}
        start = iso_utc(state.opened.start)[:10] if state.opened else "?"
        status = "closed" if state.closed else "open"
        table.add_row(
            start, shown(state.cohort), str(universe_size(state)), status,
            *(_signed(returns.get(a), "%") for a in first),
        )  # fmt: skip
    return table


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def usage_line(usage: Usage) -> str:
    """The run's model usage in one line, for the end of ``arena replay``."""
    return f"run total: {total_usage(usage).summary()}"


def print_cohort(console: Console, state: CohortState, usage: Usage) -> None:
    """The tables of one cohort: standings, open positions, stated beliefs, model calls,
    categories."""
    opened = state.opened
    start = iso_utc(opened.start)[:10] if opened else "?"
    status = state.closed.reason if state.closed else "still open"
    if state.closed is None and state.stopped is not None:
        status += f"; no more decisions: {state.stopped.reason}"
    chosen = f" chosen by {universe_volume(opened)}" if opened else ""
    title = (
        f"Cohort {shown(state.cohort)} — start {start}, {universe_size(state)} markets"
        f"{shown(chosen)}; {shown(status)}; {shown(execution_text(state))}"
    )
    console.print(standings_table(title, cohort_standings(state)))
    positions = open_positions(state)
    if positions:
        console.print(positions_table(positions))
    beliefs = stated_beliefs(state)
    if beliefs:
        console.print(beliefs_table(beliefs))
    if usage.get(state.cohort):
        console.print(usage_table("Model calls (latency per attempt)", usage[state.cohort]))
    rows = categories([state])
    if len({r.category for r in rows}) > 1:
        console.print(categories_table(f"By category, cohort {shown(state.cohort)}", rows))


def print_report(
    console: Console,
    ledger: Ledger,
    *,
    detail: bool | None = None,
    intervals: IntervalSettings | None = None,
    usage: Usage | None = None,
) -> None:
    """The answer first: the leaderboard (and what model calls cost, if any), then one line
    per cohort; with ``detail`` (the default for a single cohort) the results per category and
    every cohort's own tables."""
    states = [ledger.cohorts[name] for name in sorted(ledger.cohorts)]
    settings = intervals or IntervalSettings()
    usage = usage or {}
    if detail is None:
        detail = len(states) == 1
    if len(states) > 1:
        board = leaderboard(
            states, interval=settings.choice, draws=settings.draws, seed=settings.seed
        )
        console.print(leaderboard_table(board, interval_info(states, settings)))
        ways = sorted({execution_text(state) for state in states})
        console.print(f"[dim]{shown('; '.join(ways))}[/]")
        if usage:
            console.print(usage_table("Model calls over every cohort", usage_by_agent(usage)))
        if not detail:
            console.print(cohort_lines_table(states, [r.agent for r in board]))
        else:
            console.print(categories_table("By category, every cohort", categories(states)))
    if detail:
        for state in states:
            print_cohort(console, state, usage)
