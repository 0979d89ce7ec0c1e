"""What a log says, for people (rich tables) and machines (plain dicts for ``--json``).

Reports are always computed from the log itself, never from the runner's memory, so
``arena report`` on a database gives exactly what ``arena replay`` printed when it made it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from ledger.leaderboard import AgentStanding, LeaderboardRow, cohort_standings, leaderboard
from ledger.projection import CohortState, Ledger
from ledger.rebuild import rebuild
from ledger.store import EventStore


def load_ledger(store: EventStore, cohorts: Iterable[str] | None = None) -> Ledger:
    """Fold the log (or only the given cohort streams) into projections."""
    if cohorts is None:
        return rebuild(store)
    ledger = Ledger()
    for cohort in cohorts:
        ledger.apply_all(store.read(stream=cohort))
    return ledger


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cohort_summary(state: CohortState) -> dict[str, Any]:
    opened = state.opened
    return {
        "cohort": state.cohort,
        "start": _iso(opened.start) if opened else None,
        "rules": opened.rules if opened else None,
        "tape": opened.tape if opened else None,
        "markets": len(state.markets),
        "closed": state.closed is not None,
        "close_reason": state.closed.reason if state.closed else None,
        "agents": [msgspec.to_builtins(s) for s in cohort_standings(state)],
    }


def report_data(ledger: Ledger) -> dict[str, Any]:
    """The report as plain data: per-cohort standings and the cross-cohort leaderboard."""
    states = [ledger.cohorts[name] for name in sorted(ledger.cohorts)]
    return {
        "cohorts": [cohort_summary(state) for state in states],
        "leaderboard": [msgspec.to_builtins(row) for row in leaderboard(states)],
    }


def _num(x: float | None, fmt: str = "{:,.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def _signed(x: float, suffix: str = "") -> str:
    colour = "green" if x > 0 else "red" if x < 0 else "white"
    return f"[{colour}]{x:+,.2f}{suffix}[/]"


def standings_table(title: str, rows: Sequence[AgentStanding]) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    for name, justify in [
        ("agent", "left"),
        ("cash", "right"),
        ("positions", "right"),
        ("total", "right"),
        ("P/L", "right"),
        ("return", "right"),
        ("Brier", "right"),
        ("resolved", "right"),
        ("win rate", "right"),
        ("bets", "right"),
        ("rejected", "right"),
        ("errors", "right"),
    ]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in rows:
        table.add_row(
            s.agent,
            _num(s.cash),
            _num(s.positions_value),
            _num(s.total_value),
            _signed(s.pnl),
            _signed(s.return_pct, "%"),
            _num(s.brier, "{:.4f}"),
            str(s.n_resolved),
            _num(s.win_rate, "{:.1%}"),
            str(s.n_bets),
            str(s.n_rejected),
            str(s.n_errors),
        )
    return table


def leaderboard_table(rows: Sequence[LeaderboardRow]) -> Table:
    table = Table(
        title="Leaderboard across cohorts (mean return with 95% interval)",
        title_justify="left",
        header_style="bold",
    )
    for name in ["agent", "cohorts", "total P/L", "P/L %", "mean return", "95% CI", "Brier",
                 "win rate"]:  # fmt: skip
        table.add_column(name, justify="left" if name == "agent" else "right")
    for r in rows:
        interval = (
            f"[{r.return_ci_low:+.2f}, {r.return_ci_high:+.2f}]%"
            if r.return_ci_low is not None and r.return_ci_high is not None
            else "—"
        )
        table.add_row(
            r.agent,
            str(r.cohorts),
            _signed(r.total_pnl),
            _signed(r.pnl_pct, "%"),
            _signed(r.return_mean, "%"),
            interval,
            _num(r.brier, "{:.4f}"),
            _num(r.win_rate, "{:.1%}"),
        )
    return table


def print_report(console: Console, ledger: Ledger, *, per_cohort: bool = True) -> None:
    states = [ledger.cohorts[name] for name in sorted(ledger.cohorts)]
    if per_cohort:
        for state in states:
            opened = state.opened
            start = _iso(opened.start)[:10] if opened else "?"
            status = state.closed.reason if state.closed else "still open"
            title = f"Cohort {state.cohort} — start {start}, {len(state.markets)} markets, {status}"
            console.print(standings_table(title, cohort_standings(state)))
    if len(states) > 1 or not per_cohort:
        console.print(leaderboard_table(leaderboard(states)))
