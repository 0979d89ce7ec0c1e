"""``arena step DB``: walk through a finished log; ``arena step --tape …``: step a live replay.

A live replay runs in a child process (``arena.step_live``) with the options of ``arena
replay`` for one cohort, into the same log ``arena replay`` would write; the view reads the log
up to where the replay stands."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from arena.commands.options import (
    CohortChoice,
    cohort_options,
    parse_agents,
    read_agents_file,
    start_options,
)
from arena.console import make_console
from arena.settings import RunSettings
from arena.step import Frame, Portfolio, fit, frames
from arena.step_live import LiveRun, LogTail
from arena.step_log import open_timeline
from arena.step_panels import event_line
from arena.timeline import Timeline
from ledger.events import CohortOpened
from ledger.store import EventStore
from strategies.loader import build_strategy


def _amount(x: float, sign: str = "") -> str:
    """Cents below a million, millions above: three portfolio columns fit 80 cells."""
    return f"{x:{sign},.2f}" if abs(x) < 1e6 else f"{x / 1e6:{sign},.2f}M"


def _money(x: float) -> str:
    return f"${_amount(x)}"


def _change(before: float, after: float) -> str:
    delta = after - before
    colour = "green" if delta > 0 else "red" if delta < 0 else "dim"
    return f"{_money(after)} [{colour}]({_amount(delta, '+')})[/]"


def _brier(p: Portfolio) -> str:
    return f"{'—' if p.brier is None else f'{p.brier:.4f}'} ({p.n_resolved})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _lines(title: str) -> Table:
    """A titled section of single lines: nothing wraps, so a frame's height is known."""
    table = Table(title=title, title_justify="left", title_style="bold", show_header=False,
                  box=None, padding=0, expand=True)  # fmt: skip
    table.add_column(no_wrap=True, overflow="ellipsis")
    return table


def _more(table: Table, shown: int, total: int) -> None:
    if total > shown:
        table.add_row(f"[dim]… {total - shown} more[/]")


def _portfolio_table(frame: Frame, last: bool) -> Table:
    before, after, later = frame.before, frame.after, frame.at_next
    assert after is not None and later is not None
    table = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold")
    table.add_column("portfolio", no_wrap=True, min_width=9)
    for name in ("before", "after its orders", "at the end" if last else "at next decision"):
        table.add_column(name, justify="right", no_wrap=True, overflow="ellipsis")
    table.add_row("cash", _money(before.cash), _change(before.cash, after.cash),
                  _change(after.cash, later.cash))  # fmt: skip
    table.add_row("positions", _money(before.positions_value),
                  _change(before.positions_value, after.positions_value),
                  _change(after.positions_value, later.positions_value))  # fmt: skip
    table.add_row("total", _money(before.total_value),
                  _change(before.total_value, after.total_value),
                  _change(after.total_value, later.total_value))  # fmt: skip
    table.add_row("Brier (n)", _brier(before), _brier(after), _brier(later))
    return table


def _outcome_table(frame: Frame, rows: int) -> Table:
    table = _lines("what happened")
    if not frame.outcomes:
        table.add_row("[dim]nothing filled, nothing settled[/]")
    for e in frame.outcomes[:rows]:
        table.add_row(event_line(e))
    _more(table, rows, len(frame.outcomes))
    return table


def _decision_table(frame: Frame, rows: int) -> Table:
    d = frame.decision
    lines: list[str] = []
    for b in d.bets:
        seen = frame.seen.get(b.market)
        price = seen.price_of(b.side) if seen is not None else None
        shown = f" ({escape(b.side)} seen at {price:.3f})" if price is not None else ""
        lines.append(f"bet {_money(b.amount)} on {escape(b.side)} of {escape(b.market)}{shown}")
    for sell in d.sells:
        target = sell.position_id or f"{sell.side} of {sell.market}"
        lines.append(f"sell {sell.percentage:g}% of {escape(target)}")
    if d.reasoning:
        lines.append(f"[italic]“{escape(' '.join(d.reasoning.split()))}”[/]")
    if d.error:
        lines.append(f"[red]error: {escape(d.error.splitlines()[0])}[/]")
    if frame.usage.calls:
        lines.append(f"[dim]this decision: {escape(frame.usage.summary())}[/]")
        lines.append(f"[dim]{escape(d.agent)} so far: {escape(frame.usage_so_far.summary())}[/]")
    table = _lines("decision")
    if not lines:
        table.add_row("[dim]no orders[/]")
    for line in lines[:rows]:
        table.add_row(line)
    _more(table, rows, len(lines))
    return table


def _seen_table(frame: Frame, rows: int, width: int, volume: str) -> Table:
    """The biggest markets the agent could see, at the prices it saw, with what it held;
    ``volume`` says which volume ranks them (the universe's, e.g. final volume).

    Column widths are set here rather than left to rich, which would squeeze a long
    multi-outcome price list before a question: prices first, the question takes what is left.
    """
    held: dict[str, str] = {}
    for m, side, shares, _, _ in frame.before.positions:
        held[m] = f"{held[m]}, " if m in held else ""
        held[m] += f"{shares:,.0f} {side}"
    markets = list(frame.seen.values())[:rows]
    labels = [seen.label() for seen in markets]
    inner = width - 4 - 3  # the panel's borders and padding, one space between four columns
    market_w = min(12, max([6, *(len(s.market) for s in markets)]))
    held_w = min(14, max([4, *(len(held.get(s.market, "")) for s in markets)]))
    prices_w = min(max([11, *map(len, labels)]), max(inner - market_w - held_w - 8, 11))
    more = len(frame.seen) - len(markets)
    table = Table(
        title=f"what it saw: {_count(len(frame.seen), 'market')}, by {volume}",
        title_justify="left", title_style="bold", box=None, padding=(0, 1, 0, 0),
        pad_edge=False, header_style="bold", caption=f"… {more} more" if more > 0 else None,
        caption_justify="left", caption_style="dim",
    )  # fmt: skip
    table.add_column("market", no_wrap=True, overflow="ellipsis", width=market_w)
    table.add_column("prices seen", no_wrap=True, overflow="ellipsis", width=prices_w)
    table.add_column("held", no_wrap=True, overflow="ellipsis", width=held_w)
    question_w = max(inner - market_w - prices_w - held_w, 1)
    table.add_column("question", no_wrap=True, overflow="ellipsis", width=question_w)
    for seen, label in zip(markets, labels, strict=True):
        table.add_row(escape(seen.market), escape(label), held.get(seen.market) or "—",
                      escape(seen.question))  # fmt: skip
    return table


def render(
    frame: Frame, total: int, agent: str, height: int, width: int, volume: str = "volume"
) -> Panel:
    """One frame as a panel at most ``height`` lines tall and ``width`` cells wide (see
    ``arena.step.fit``)."""
    d = frame.decision
    when = datetime.fromtimestamp(d.ts, UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = fit(frame, height)
    body = Group(
        _seen_table(frame, rows.seen, width, volume),
        _decision_table(frame, rows.decision),
        _outcome_table(frame, rows.outcomes),
        _portfolio_table(frame, last=frame.index == total - 1),
    )
    title = (
        f"{escape(agent)} · decision {frame.index + 1}/{total} · [bold]{d.action}[/] · "
        f"week {d.week} · {when}"
    )
    return Panel(body, title=title, title_align="left", padding=(0, 1))


# The options that make a live replay (by parameter name); with a DB argument they mean nothing.
LIVE_OPTIONS = (
    "tape_path", "start", "starts", "agents_file", "live_db", "rules", "cash", "universe",
    "decision_cadence", "mark_cadence", "seed", "jobs", "decision_timeout", "isolate", "on_miss",
)  # fmt: skip


@click.command()
@click.argument("db", required=False, type=click.Path(path_type=Path))  # the store judges it
@cohort_options
@start_options
@click.option(
    "--agent",
    "agent",
    multiple=True,
    metavar="NAME=SPEC | NAME",
    help="Live: an agent (repeatable), as for arena replay. With DB: the agent shown first.",
)
@click.option(
    "--agents-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Live: TOML or JSON table of NAME = SPEC.",
)
@click.option(
    "--db",
    "live_db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Live: the log the replay appends to (default arena.db), as arena replay's --db.",
)
@click.option("--cohort", "cohort_id", help="With DB: the cohort (default: the first in it).")
@click.option("--no-input", is_flag=True, help="Print every frame without waiting for keys.")
@click.option("--json", "as_json", is_flag=True, help="Print the frames as JSON.")
def step(
    db: Path | None,
    cohort: CohortChoice,
    starts: list[datetime],
    agent: tuple[str, ...],
    agents_file: Path | None,
    live_db: Path | None,
    cohort_id: str | None,
    no_input: bool,
    as_json: bool,
) -> None:
    """Step through a run one decision at a time: a finished log, or a replay as it runs.

    With DB, walk the finished log. Without it, replay one cohort (the options of arena
    replay; the sample tape and the default agents unless told) and step it while it runs:
    agents decide only when a key asks for the next decision, and every event goes into
    --db exactly as arena replay writes it, so quitting leaves a log arena replay resumes.

    In a terminal (with the tui extra) a full-screen view of the log cut at one stop: n next
    decision of this agent, d next decision, r next resolution, e the end, p back, w week,
    a switch agent, t prompt and answer, / search, ? help, q quit. Piped, or with --no-input,
    every decision of the agent is printed as a frame (a live replay is run to its end first).

    \b
    Examples:
      arena step arena.db --agent favourite
      arena step --tape my.tape --start 2024-09-01 --agent me=./mine.py:Mine --agent h=hold
    """
    named = [a for a in agent if "=" not in a]
    if db is not None:
        given = [f"--{p.replace('_', '-')}" for p in LIVE_OPTIONS if _given(p)]
        if given or len(named) != len(agent) or len(agent) > 1:
            raise click.UsageError(
                "DB walks a finished log; --tape, --start, --agent NAME=SPEC and the other "
                f"replay options ({', '.join(given) or '--agent'}) step a live replay: "
                "give one or the other"
            )
        with EventStore.open(db, readonly=True) as store:
            _show(_read_log(store, cohort_id), named[0] if named else None, no_input, as_json)
        return
    if cohort_id is not None:
        raise click.UsageError("--cohort picks a cohort of DB; a live replay has one")
    if len(starts) != 1:
        raise click.UsageError("a live replay is one cohort: give --start, not --starts")
    agents = parse_agents(agent, read_agents_file(agents_file) if agents_file else None)
    for spec in agents.values():
        build_strategy(spec)  # fail fast, before the replay's process starts
    [config] = cohort.configs(starts, agents)
    interactive = not (no_input or as_json) and _keys_available()
    if interactive:
        _tui_app()  # the extra's absence is an error before the replay starts
    settings = RunSettings(cohort=config, options=cohort.options)
    log = live_db or Path("arena.db")
    output = log.with_name(log.name + ".step-output.txt") if interactive else None
    live = LiveRun(cohort.tape, settings, log, output)
    try:
        tail = LogTail(live.db, live.cohort)
        timeline = Timeline(tail.read(live.advance("open").version), live.cohort)
        if interactive:
            _tui_app()(timeline, live.agents, live.agents[0], (live, tail)).run()
            return
        timeline.extend(tail.read(live.advance("close").version))
    finally:
        live.stop()
    _show(timeline, None, no_input=True, as_json=as_json)


def _given(name: str) -> bool:
    source = click.get_current_context().get_parameter_source(name)
    return source is not None and source != click.core.ParameterSource.DEFAULT


def _tui_app() -> type:
    try:
        from arena.step_app import StepApp
    except ImportError:
        raise click.ClickException(
            "the interactive view needs the tui extra: pip install 'arena[tui]' "
            "(or pass --no-input to print every frame)"
        ) from None
    return StepApp


def _read_log(store: EventStore, cohort: str | None) -> Timeline:
    """The cohort (the log's first unless named) as a timeline that reads the log as it is
    stepped through: the first screen waits for one scan, not for every event (see
    ``arena.step_log``). What it reads is checked on the way; a log that fails is a
    LedgerError naming where, which the CLI's edge prints as one line."""
    streams = store.streams()
    if not streams:
        raise click.ClickException(f"{store.path} holds no cohorts")
    cohort = cohort or streams[0]
    if cohort not in streams:
        raise click.ClickException(f"{store.path} has no cohort {cohort}")
    return open_timeline(store, cohort)


def _show(timeline: Timeline, agent: str | None, no_input: bool, as_json: bool) -> None:
    """The log's view: the app in a terminal, else every frame printed."""
    cohort, events = timeline.cohort, timeline.events
    opened = events[0] if events else None
    names = list(getattr(opened, "agents", []))
    agent = agent or (names[0] if names else "")
    if agent not in names:
        raise click.ClickException(f"cohort {cohort} has no agent {agent!r} ({', '.join(names)})")
    if not no_input and not as_json and _keys_available():
        _tui_app()(timeline, names, agent).run()
        return
    cut = frames(events, cohort, agent)  # every frame: every event is read (and checked)
    if as_json:
        click.echo(json.dumps([f.as_dict() for f in cut], indent=2))
        return
    from arena.report import universe_volume  # the printed frames' alone: not for the app

    volume = universe_volume(opened) if isinstance(opened, CohortOpened) else "volume"
    console = make_console()
    if not cut:
        console.print(f"{agent} made no decision in {cohort}")
        return
    for frame in cut:
        console.print(render(frame, len(cut), agent, console.height, console.width, volume))


def _keys_available() -> bool:
    """Keys can be read only from a terminal, and the view drawn only on one; piped or
    redirected, every frame is printed."""
    return sys.stdin.isatty() and sys.stdout.isatty()
