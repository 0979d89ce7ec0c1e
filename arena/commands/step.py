"""``arena step DB``: walk through a finished log; ``arena step --tape …``: step a live replay.

A live replay runs in a child process (``arena.step.live``) with the options of ``arena
replay`` for one cohort, into the same log ``arena replay`` would write; the view reads the log
up to where the replay stands."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from arena.commands.options import (
    CohortChoice,
    cohort_options,
    parse_agents,
    read_agents_file,
    start_options,
)
from arena.console import make_console
from arena.run.settings import RunSettings
from arena.step.frames import Frame, Portfolio, fit, iter_frames
from arena.step.live import LiveRun, LogTail
from arena.step.log import open_timeline
from arena.step.panels import damaged, event_line, tape_name
from arena.step.timeline import Timeline
from ledger.errors import LedgerError
from ledger.events import CohortOpened, Event
from ledger.leaderboard import cohort_standings
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


def _cell(markup: str | Text, width: int, right: bool = False) -> Text:
    """``markup`` as exactly ``width`` cells of one line: cut with an ellipsis, or padded (on
    the left when ``right``). A line break in a plugin's or a tape's text becomes a space."""
    text = Text.from_markup(markup) if isinstance(markup, str) else markup
    if "\n" in text.plain:
        text = Text(" ").join(text.split("\n"))
    if right and text.cell_len < width:
        text.pad_left(width - text.cell_len)
    text.truncate(width, overflow="ellipsis", pad=True)
    return text


def _row(*cells: tuple[str | Text, int] | tuple[str | Text, int, bool]) -> Text:
    """Cells of fixed widths, one space apart."""
    return Text(" ").join(_cell(*cell) for cell in cells)


def _section(title: str, lines: list[str], rows: int) -> list[Text]:
    """A titled section of ``rows`` of ``lines`` (markup), and "… N more" for the rest."""
    out = [Text(title, style="bold"), *(Text.from_markup(line) for line in lines[:rows])]
    if len(lines) > rows:
        out.append(Text(f"… {len(lines) - rows} more", style="dim"))
    return out


def _portfolio_lines(frame: Frame, last: bool) -> list[Text]:
    before, after, later = frame.before, frame.after, frame.at_next
    assert after is not None and later is not None
    rows = [
        ["portfolio", "before", "after its orders", "at the end" if last else "at next decision"],
        ["cash", _money(before.cash), _change(before.cash, after.cash),
         _change(after.cash, later.cash)],
        ["positions", _money(before.positions_value),
         _change(before.positions_value, after.positions_value),
         _change(after.positions_value, later.positions_value)],
        ["total", _money(before.total_value), _change(before.total_value, after.total_value),
         _change(after.total_value, later.total_value)],
        ["Brier (n)", _brier(before), _brier(after), _brier(later)],
    ]  # fmt: skip
    texts = [[Text.from_markup(c) for c in row] for row in rows]
    widths = [max(row[k].cell_len for row in texts) for k in range(4)]
    lines = [
        Text("  ").join([
            _cell(row[0], widths[0]),
            *(_cell(c, w, right=True) for c, w in zip(row[1:], widths[1:], strict=True)),
        ])
        for row in texts
    ]  # fmt: skip
    lines[0].stylize("bold")
    return lines


def _decision_lines(frame: Frame) -> list[str]:
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
    return lines or ["[dim]no orders[/]"]


def _seen_lines(frame: Frame, rows: int, inner: int, volume: str) -> list[Text]:
    """The biggest markets the agent could see, at the prices it saw, with what it held;
    ``volume`` says which volume ranks them (the universe's, e.g. final volume). Prices come
    first and the question takes what is left, so a long multi-outcome price list is never
    squeezed out by a question."""
    held: dict[str, str] = {}
    for m, side, shares, _, _ in frame.before.positions:
        held[m] = f"{held[m]}, " if m in held else ""
        held[m] += f"{shares:,.0f} {side}"
    markets = list(frame.seen.values())[:rows]
    labels = [seen.label() for seen in markets]
    space = inner - 3  # one space between four columns
    market_w = min(12, max([6, *(len(s.market) for s in markets)]))
    held_w = min(14, max([4, *(len(held.get(s.market, "")) for s in markets)]))
    prices_w = min(max([11, *map(len, labels)]), max(space - market_w - held_w - 8, 11))
    question_w = max(space - market_w - prices_w - held_w, 1)
    widths = (market_w, prices_w, held_w, question_w)
    more = len(frame.seen) - len(markets)
    header = _row(*zip(("market", "prices seen", "held", "question"), widths, strict=True))
    header.stylize("bold")
    lines = [Text(f"what it saw: {_count(len(frame.seen), 'market')}, by {volume}", style="bold"),
             header]  # fmt: skip
    for seen, label in zip(markets, labels, strict=True):
        cells = (seen.market, label, held.get(seen.market) or "—", seen.question)
        lines.append(_row(*((Text(c), w) for c, w in zip(cells, widths, strict=True))))
    if more > 0:
        lines.append(Text(f"… {more} more", style="dim"))
    return lines


def render(
    frame: Frame, total: int, agent: str, height: int, width: int, volume: str = "volume"
) -> Text:
    """One frame as a boxed text at most ``height`` lines tall and ``width`` cells wide (see
    ``arena.step.frames.fit``). Laid out here, line by line, rather than by rich's tables and
    panels, which took 10 ms a frame: a million-event log's 28,550 frames printed in 5 minutes."""
    d = frame.decision
    when = datetime.fromtimestamp(d.ts, UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = fit(frame, height)
    inner = max(width - 4, 1)
    happened = [event_line(e) for e in frame.outcomes] or [
        "[dim]nothing filled, nothing settled[/]"
    ]
    body = [
        *_seen_lines(frame, rows.seen, inner, volume),
        *_section("decision", _decision_lines(frame), rows.decision),
        *_section("what happened", happened, rows.outcomes),
        *_portfolio_lines(frame, last=frame.index == total - 1),
    ]  # fmt: skip
    title = Text.assemble(
        f"{agent} · decision {frame.index + 1}/{total} · ", (d.action, "bold"),
        f" · week {d.week} · {when}",
    )  # fmt: skip
    title.truncate(max(width - 6, 1), overflow="ellipsis")
    dashes = "─" * max(width - 5 - title.cell_len, 0)
    lines = [Text.assemble("╭─ ", title, f" {dashes}╮")]
    lines += [Text.assemble("│ ", _cell(line, inner), " │") for line in body]
    lines.append(Text(f"╰{'─' * max(width - 2, 0)}╯"))
    text = Text("\n").join(lines)
    text.no_wrap = True
    return text


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
            try:
                timeline = _read_log(store, cohort_id)
                if no_input or as_json or not _keys_available():
                    store.check_links(timeline.cohort)  # a broken chain before any frame
                _show(timeline, named[0] if named else None, no_input, as_json, db)
            except LedgerError as exc:  # in the scan, the links, or the first screen's pages
                raise click.ClickException(damaged(exc, "nothing shown", f" {db}")) from None
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
        from arena.step.app import StepApp
    except ImportError:
        raise click.ClickException(
            "the interactive view needs the tui extra: pip install 'arena[tui]' "
            "(or pass --no-input to print every frame)"
        ) from None
    return StepApp


def _read_log(store: EventStore, cohort: str | None) -> Timeline:
    """The cohort (the log's first unless named) as a timeline that reads the log as it is
    stepped through: the first screen waits for one scan, not for every event (see
    ``arena.step.log``). What it reads is checked on the way; a log that fails is a
    LedgerError naming where, which the CLI's edge prints as one line."""
    streams = store.streams()
    if not streams:
        raise click.ClickException(f"{store.path} holds no cohorts")
    cohort = cohort or streams[0]
    if cohort not in streams:
        raise click.ClickException(f"{store.path} has no cohort {cohort}")
    return open_timeline(store, cohort)


def _show(
    timeline: Timeline, agent: str | None, no_input: bool, as_json: bool, db: Path | None = None
) -> None:
    """The log's view: the app in a terminal, else every frame printed as the fold reaches it
    (``db``: the finished log, named in what a damaged one is told)."""
    cohort, events = timeline.cohort, timeline.events
    opened = events[0] if events else None
    names = list(getattr(opened, "agents", []))
    agent = agent or (names[0] if names else "")
    if agent not in names:
        raise click.ClickException(f"cohort {cohort} has no agent {agent!r} ({', '.join(names)})")
    if not no_input and not as_json and _keys_available():
        _tui_app()(timeline, names, agent).run()
        return
    total = len(timeline.decisions.get(agent, []))
    printed = 0

    def cut() -> Iterator[Frame]:
        nonlocal printed
        for frame in iter_frames(events, cohort, agent):  # every event read and checked
            yield frame
            printed += 1

    try:
        if as_json:
            _print_json(cut())
        else:
            _print_frames(cut(), total, agent, opened, f"{agent} made no decision in {cohort}")
            _print_standings(timeline)
    except LedgerError as exc:
        shown = f"the {_count(printed, 'frame')} before it printed" if printed else "nothing shown"
        where = f" {db}" if db is not None else ""
        raise click.ClickException(damaged(exc, shown, where)) from None


def _print_json(cut: Iterable[Frame]) -> None:
    """A JSON array of the frames, each written when made."""
    opening = "["
    for frame in cut:
        body = json.dumps(frame.as_dict(), indent=2).replace("\n", "\n  ")
        click.echo(f"{opening}\n  {body}", nl=False)
        opening = ","
    click.echo("[]" if opening == "[" else "\n]")


def _print_frames(
    cut: Iterable[Frame], total: int, agent: str, opened: Event | None, nothing: str
) -> None:
    """Each frame as text sized to the terminal (plain when piped), printed when made."""
    from arena.reports.model import universe_volume  # the printed frames' alone: not for the app

    volume = universe_volume(opened) if isinstance(opened, CohortOpened) else "volume"
    console = make_console()
    if isinstance(opened, CohortOpened):
        _echo(console, Text(
            f"cohort {opened.cohort} · rules {opened.rules} · tape {tape_name(opened.tape)} · "
            f"{agent}: {_count(total, 'decision')}", style="bold",
        ))  # fmt: skip
    if total == 0:
        console.print(nothing)
        return
    for frame in cut:
        _echo(console, render(frame, total, agent, console.height, console.width, volume))


def _print_standings(timeline: Timeline) -> None:
    """Every agent at the end of the log, the table ``arena report`` gives for the cohort
    (the frames follow one agent; this is how they all stood when it ended)."""
    from arena.reports.model import standings_table  # the printed frames' alone: not for the app

    state = timeline.state_at(len(timeline.events))
    if state.books:
        console = make_console()
        title = f"every agent at the end of the log (event {len(timeline.events):,})"
        console.print(standings_table(title, cohort_standings(state)))


def _echo(console: Console, text: Text) -> None:
    """Styled on a terminal, plain text when piped."""
    if console.is_terminal:
        console.print(text)
    else:
        click.echo(text.plain)


def _keys_available() -> bool:
    """Keys can be read only from a terminal, and the view drawn only on one; piped or
    redirected, every frame is printed."""
    return sys.stdin.isatty() and sys.stdout.isatty()
