"""``arena step DB``: walk through one agent's decisions in a terminal view."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
from rich import box
from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from arena.console import make_console
from arena.report import universe_volume
from arena.step import Frame, Portfolio, frames
from ledger.errors import IntegrityError, LedgerError
from ledger.events import (
    CohortOpened,
    DecisionsStopped,
    MarketListed,
    MarketResolved,
    MarketVoided,
    OrderFilled,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
)
from ledger.store import EventStore


def _money(x: float) -> str:
    return f"${x:,.2f}"


def _change(before: float, after: float) -> str:
    delta = after - before
    colour = "green" if delta > 0 else "red" if delta < 0 else "dim"
    return f"{_money(after)} [{colour}]({delta:+,.2f})[/]"


def _brier(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _portfolio_table(before: Portfolio, after: Portfolio) -> Table:
    table = Table(title="portfolio", title_justify="left", show_header=True, header_style="bold")
    for name in ("", "before", "after"):
        table.add_column(name, justify="left" if not name else "right")
    table.add_row("cash", _money(before.cash), _change(before.cash, after.cash))
    table.add_row("positions", _money(before.positions_value),
                  _change(before.positions_value, after.positions_value))  # fmt: skip
    table.add_row("total", _money(before.total_value),
                  _change(before.total_value, after.total_value))  # fmt: skip
    table.add_row("Brier (resolved bets)", f"{_brier(before.brier)} ({before.n_resolved})",
                  f"{_brier(after.brier)} ({after.n_resolved})")  # fmt: skip
    return table


def _outcome_lines(frame: Frame) -> Table:
    table = Table(title="what happened", title_justify="left", show_header=False, box=None)
    table.add_column()
    if not frame.outcomes:
        table.add_row("[dim]nothing filled, nothing settled[/]")
    for e in frame.outcomes:
        if isinstance(e, OrderFilled):
            verb = "bought" if e.kind == "buy" else "sold"
            extra = (
                f" conf {e.confidence:.2f}" if e.confidence is not None
                else f" realized {e.realized:+,.2f}" if e.realized is not None else ""
            )  # fmt: skip
            table.add_row(
                f"[green]✓ {verb}[/] {e.shares:,.2f} {e.side} of {e.market} at {e.price:.3f} "
                f"for {_money(e.amount)}{extra}"
            )
        elif isinstance(e, OrderRejected):
            table.add_row(f"[red]✗ rejected[/] {e.kind} {e.side} on {e.market}: {e.reason}")
        elif isinstance(e, PositionSettled):
            mark = "[green]won[/]" if e.won else "[red]lost[/]"
            table.add_row(f"  {mark} {e.side} on {e.market}: paid {_money(e.payout)} "
                          f"(P/L {e.realized:+,.2f})")  # fmt: skip
        elif isinstance(e, PositionRefunded):
            table.add_row(f"  refunded {_money(e.refund)} on voided {e.market}")
        elif isinstance(e, MarketResolved):
            table.add_row(f"[dim]  market {e.market} resolved {e.winner}[/]")
        elif isinstance(e, MarketVoided):
            table.add_row(f"[dim]  market {e.market} voided[/]")
        elif isinstance(e, DecisionsStopped):
            table.add_row(f"[yellow]no more decisions:[/] {escape(e.reason)}")
    return table


SEEN_ROWS = 8


def _seen_table(frame: Frame, listed: dict[str, MarketListed], volume: str) -> Table:
    """The biggest markets the agent could see, at the prices it saw, with what it held;
    ``volume`` says which volume ranks them (the universe's, e.g. final volume)."""
    table = Table(
        title=f"what it saw (top {SEEN_ROWS} by {volume})", title_justify="left",
        box=box.SIMPLE_HEAD, pad_edge=False, header_style="bold",
    )  # fmt: skip
    table.add_column("market", no_wrap=True)
    table.add_column("question", overflow="ellipsis", no_wrap=True, max_width=48)
    table.add_column("YES", justify="right")
    table.add_column("held", justify="right", no_wrap=True)
    held = {(m, side): shares for m, side, shares, _, _ in frame.before.positions}
    biggest = sorted(frame.seen, key=lambda m: (-listed[m].volume, m) if m in listed else (0, m))
    for market in biggest[:SEEN_ROWS]:
        holding = ", ".join(
            f"{shares:,.0f} {side}" for (m, side), shares in held.items() if m == market
        )
        question = listed[market].question if market in listed else ""
        table.add_row(market, question, f"{frame.seen[market]:.3f}", holding or "—")
    return table


def _render(
    frame: Frame, total: int, agent: str, listed: dict[str, MarketListed], volume: str
) -> Panel:
    d = frame.decision
    when = datetime.fromtimestamp(d.ts, UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = Table.grid(padding=(0, 2))
    head.add_row(f"[bold]{d.action}[/]", f"week {d.week}", when)
    orders = Table(title="decision", title_justify="left", show_header=False, box=None)
    orders.add_column()
    for b in d.bets:
        seen = frame.seen.get(b.market)
        price = f" (YES seen at {seen:.3f})" if seen is not None else ""
        orders.add_row(f"bet {_money(b.amount)} on {b.side} of {b.market}{price}")
    for s in d.sells:
        target = s.position_id or f"{s.side} of {s.market}"
        orders.add_row(f"sell {s.percentage:g}% of {target}")
    if d.reasoning:
        orders.add_row(f"[italic]“{d.reasoning}”[/]")
    if d.error:
        orders.add_row(f"[red]error: {d.error.splitlines()[0]}[/]")
    if frame.usage.calls:
        orders.add_row(f"[dim]this decision: {frame.usage.summary()}[/]")
        orders.add_row(f"[dim]{agent} so far: {frame.usage_so_far.summary()}[/]")
    assert frame.after is not None
    body = Group(
        head, _seen_table(frame, listed, volume), orders, _outcome_lines(frame),
        _portfolio_table(frame.before, frame.after),
    )  # fmt: skip
    return Panel(body, title=f"{agent} · decision {frame.index + 1}/{total}", title_align="left")


@click.command()
@click.argument("db", type=click.Path(path_type=Path))  # the store says what is wrong
@click.option("--cohort", help="Cohort id (default: the first in the log).")
@click.option("--agent", help="Agent name (default: the cohort's first agent).")
@click.option("--no-input", is_flag=True, help="Print every frame without waiting for keys.")
@click.option("--json", "as_json", is_flag=True, help="Print the frames as JSON.")
def step(db: Path, cohort: str | None, agent: str | None, no_input: bool, as_json: bool) -> None:
    """Step through one agent's decisions: what it saw, decided, filled, and how it scored.

    Keys: n/enter next, p previous, g first, G last, q quit.

    \b
    Example:
      arena step arena.db --agent favourite
    """
    try:
        with EventStore.open(db, readonly=True) as store:
            streams = store.streams()
            if not streams:
                raise click.ClickException(f"{db} holds no cohorts")
            cohort = cohort or streams[0]
            if cohort not in streams:
                raise click.ClickException(f"{db} has no cohort {cohort}")
            store.check_links(cohort)  # frames need every event, so every link is checked
            events = list(store.read(stream=cohort))
    except IntegrityError as exc:
        raise click.ClickException(f"{exc}; nothing shown (run 'arena verify {db}')") from None
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from None
    opened = events[0]
    names = list(getattr(opened, "agents", []))
    agent = agent or (names[0] if names else "")
    if agent not in names:
        raise click.ClickException(f"cohort {cohort} has no agent {agent!r} ({', '.join(names)})")
    try:
        cut = frames(events, cohort, agent)
    except (KeyError, ValueError, TypeError) as exc:  # a log whose links hold but whose facts
        raise click.ClickException(  # do not (written so by a buggy or hostile writer)
            f"{db}: cohort {cohort} does not fold ({exc}); run 'arena verify {db}'"
        ) from None
    listed = {e.market: e for e in events if isinstance(e, MarketListed)}
    volume = universe_volume(opened) if isinstance(opened, CohortOpened) else "volume"
    if as_json:
        click.echo(json.dumps([f.as_dict() for f in cut], indent=2))
        return
    console = make_console()
    if not cut:
        console.print(f"{agent} made no decision in {cohort}")
        return
    if no_input or not _keys_available():
        for frame in cut:
            console.print(_render(frame, len(cut), agent, listed, volume))
        return
    k: int | None = 0
    while k is not None:
        console.clear()
        console.print(_render(cut[k], len(cut), agent, listed, volume))
        console.print("[dim]n/enter next · p previous · g first · G last · q quit[/]")
        k = move(click.getchar(), k, len(cut) - 1)


def _keys_available() -> bool:
    """Keys can be read only from a terminal; piped or redirected, every frame is printed."""
    return sys.stdin.isatty()


def move(key: str, k: int, last: int) -> int | None:
    """The frame a key moves to from frame ``k`` of ``0..last``; None quits (q, Esc, Ctrl-C).
    Any other key stays put, so a stray key press never ends a session."""
    if key in ("q", "\x1b", "\x03"):
        return None
    if key in ("n", "\r", "\n", " "):
        return min(k + 1, last)
    return {"p": max(k - 1, 0), "g": 0, "G": last}.get(key, k)
