"""What a log says, for people (rich tables) and machines (plain dicts for ``--json``).

Reports are always computed from the log itself, never from the runner's memory, so
``arena report`` on a database gives exactly what ``arena replay`` printed when it made it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from arena.cohort import VOLUME_FINAL
from ledger.events import CohortOpened
from ledger.leaderboard import (
    AgentStanding,
    LeaderboardRow,
    belief_scores,
    cohort_standings,
    leaderboard,
)
from ledger.projection import CohortState, Ledger
from ledger.rebuild import rebuild
from ledger.store import EventStore
from ledger.usage import ModelUsage, total_usage

Usage = dict[str, dict[str, ModelUsage]]


def load_ledger(store: EventStore, cohorts: Iterable[str] | None = None) -> Ledger:
    """Fold the log (or only the given cohort streams) into projections."""
    return rebuild(store, cohorts)


def iso_utc(ts: int) -> str:
    """An instant as ``YYYY-MM-DDTHH:MM:SSZ``: the one spelling of time in reports and JSON."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def open_positions(state: CohortState) -> list[dict[str, Any]]:
    """Every open position with its marked value and unrealized P/L."""
    rows = []
    for agent, book in sorted(state.books.items()):
        for p in book.positions.values():
            price = state.side_price(p)
            rows.append({
                "agent": agent, "position_id": p.id, "market": p.market, "side": p.side,
                "shares": p.shares, "cost": p.cost, "avg_entry": p.avg_entry, "price": price,
                "value": p.shares * price, "unrealized_pnl": p.shares * price - p.cost,
            })  # fmt: skip
    return rows


def stated_beliefs(state: CohortState) -> dict[str, dict[str, object]]:
    """Proper scores of the probabilities agents stated with their bets, where they did."""
    return {
        agent: scores
        for agent, book in sorted(state.books.items())
        if (scores := belief_scores(book.brier_rows)) is not None
    }


def universe_volume(opened: CohortOpened) -> str:
    """Which volume chose (and ranks) the cohort's universe; logs from before it was recorded
    were all chosen by final volume."""
    return str(opened.settings.get("universe_by", VOLUME_FINAL))


def cohort_summary(state: CohortState) -> dict[str, Any]:
    opened = state.opened
    stopped = state.stopped
    return {
        "cohort": state.cohort,
        "start": iso_utc(opened.start) if opened else None,
        "rules": opened.rules if opened else None,
        "tape": opened.tape if opened else None,
        "markets": len(state.markets),
        "universe_by": universe_volume(opened) if opened else None,
        "closed": state.closed is not None,
        "close_reason": state.closed.reason if state.closed else None,
        "decisions_stopped": (
            {"ts": iso_utc(stopped.ts), "reason": stopped.reason, "markets": stopped.markets}
            if stopped
            else None
        ),
        "agents": [msgspec.to_builtins(s) for s in cohort_standings(state)],
        "positions": open_positions(state),
        "beliefs": stated_beliefs(state),
    }


def report_data(ledger: Ledger, usage: Usage | None = None) -> dict[str, Any]:
    """The report as plain data: per-cohort standings and the cross-cohort leaderboard; with
    ``usage`` (``ledger.usage.model_usage``), each cohort's ``model_usage`` per agent and the
    run's ``model_usage_total`` (calls, re-asks, failures, tokens, dollars, latency)."""
    states = [ledger.cohorts[name] for name in sorted(ledger.cohorts)]
    usage = usage or {}
    cohorts = [cohort_summary(state) for state in states]
    for summary in cohorts:
        agents = usage.get(summary["cohort"], {})
        summary["model_usage"] = {agent: u.as_dict() for agent, u in agents.items()}
    return {
        "cohorts": cohorts,
        "leaderboard": [msgspec.to_builtins(row) for row in leaderboard(states)],
        "model_usage_total": total_usage(usage).as_dict() if usage else None,
    }


def _num(x: float | None, fmt: str = "{:,.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def _signed(x: float, suffix: str = "") -> str:
    colour = "green" if x > 0 else "red" if x < 0 else "white"
    return f"[{colour}]{x:+,.2f}{suffix}[/]"


def _table(title: str) -> Table:
    """The house style: light rules, so that twelve columns still fit 80 characters."""
    return Table(
        title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD,
        pad_edge=False, padding=(0, 1), collapse_padding=True,
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
        ("Brier", lambda s: _num(s.brier, "{:.3f}")),
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
    shown = [(n, f) for n, f in columns if n not in optional or any(map(optional[n], rows))]
    table = _table(title)
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=18)
    for name, _ in shown:
        table.add_column(name, justify="right", no_wrap=True)
    for s in rows:
        table.add_row(s.agent, *(cell(s) for _, cell in shown))
    return table


def positions_table(rows: Sequence[dict[str, Any]]) -> Table:
    table = _table("Open positions (marked)")
    for name in ("agent", "market", "side", "shares", "avg entry", "price", "value",
                 "unrealized"):  # fmt: skip
        left = name in ("agent", "market", "side")
        table.add_column(name, justify="left" if left else "right", no_wrap=True)
    for r in rows:
        table.add_row(
            r["agent"], r["market"], r["side"], f"{r['shares']:,.2f}", f"{r['avg_entry']:.3f}",
            f"{r['price']:.3f}", _num(r["value"]), _signed(r["unrealized_pnl"]),
        )  # fmt: skip
    return table


def beliefs_table(beliefs: dict[str, dict[str, Any]]) -> Table:
    table = _table("Stated probabilities, scored (implied-confidence Brier beside)")
    for name in ("agent", "n", "Brier", "log loss", "ECE", "reliability", "resolution",
                 "implied Brier"):  # fmt: skip
        table.add_column(name, justify="left" if name == "agent" else "right", no_wrap=True)
    for agent, b in beliefs.items():
        m = b["murphy"]
        table.add_row(
            agent, str(b["n"]), f"{b['brier']:.4f}", f"{b['log_loss']:.4f}", f"{b['ece']:.4f}",
            f"{m['reliability']:.4f}", f"{m['resolution']:.4f}", f"{b['implied_brier']:.4f}",
        )  # fmt: skip
    return table


def leaderboard_table(rows: Sequence[LeaderboardRow]) -> Table:
    """Across cohorts: summed P/L, mean return per cohort with its 95% interval, pooled
    (trade-weighted) Brier and win rate."""
    table = _table("Leaderboard across cohorts (mean return with 95% interval)")
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=18)
    for name in ("cohorts", "total P/L", "mean return", "95% interval", "Brier", "win"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        interval = (
            f"{r.return_ci_low:+.2f} .. {r.return_ci_high:+.2f}%"
            if r.return_ci_low is not None and r.return_ci_high is not None
            else "—"
        )
        table.add_row(
            r.agent,
            str(r.cohorts),
            _signed(r.total_pnl),
            _signed(r.return_mean, "%"),
            interval,
            _num(r.brier, "{:.3f}"),
            _num(r.win_rate, "{:.0%}"),
        )
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
            agent, str(u.calls), str(u.reasks), str(u.failures), str(u.rejected),
            f"{u.tokens_in:,}", f"{u.tokens_out:,}", _num(u.cost, "{:,.4f}"),
            _num(_seconds(d["latency_median_ms"]), "{:.2f}"),
            _num(_seconds(d["latency_p95_ms"]), "{:.2f}"),
        )  # fmt: skip
    return table


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def usage_line(usage: Usage) -> str:
    """The run's model usage in one line, for the end of ``arena replay``."""
    return f"run total: {total_usage(usage).summary()}"


def print_report(
    console: Console, ledger: Ledger, *, per_cohort: bool = True, usage: Usage | None = None
) -> None:
    states = [ledger.cohorts[name] for name in sorted(ledger.cohorts)]
    usage = usage or {}
    if per_cohort:
        for state in states:
            opened = state.opened
            start = iso_utc(opened.start)[:10] if opened else "?"
            status = state.closed.reason if state.closed else "still open"
            if state.closed is None and state.stopped is not None:
                status += f"; no more decisions: {state.stopped.reason}"
            chosen = f" chosen by {universe_volume(opened)}" if opened else ""
            title = (
                f"Cohort {state.cohort} — start {start}, {len(state.markets)} markets"
                f"{chosen}; {escape(status)}"
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
    if len(states) > 1 or not per_cohort:
        console.print(leaderboard_table(leaderboard(states)))
