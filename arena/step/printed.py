"""``arena step``'s printed output: each frame of an agent as a boxed text sized to the
terminal (plain when piped), or as JSON, and every agent's standing at the end of the log.

What is printed when there are no keys to read (piped, redirected, or ``--no-input``): the
frames of ``arena.step.frames``, laid out line by line here, each printed as the fold makes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime

import click
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from arena.console import make_console
from arena.step.frames import Frame, Portfolio, brier_text, fit
from arena.step.panels import event_line, tape_name
from arena.step.timeline import LogTimeline
from ledger.events import CohortOpened, Event
from ledger.leaderboard import cohort_standings


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
    return f"{brier_text(p.brier)} ({p.n_resolved})"


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


_PICTURES = {
    **{c: chr(0x2400 + c) for c in range(0x20) if c != 0x0A},  # ␛ for ESC, ␇ for BEL, ...
    0x7F: "\u2421",
    **dict.fromkeys(range(0x80, 0xA0), "\ufffd"),
}
"""Control characters as one visible character each (Unicode's control pictures), so a text
keeps its length and the styles on it their places, and a width is counted on what shows."""


def visible(text: Text) -> Text:
    """``text`` with every control character but the line break shown, not obeyed: a tape's
    question, outcome or id, or a plugin's reasoning, can hold escape sequences, which reached
    the terminal through the frames (a piped ``arena step`` writes the plain text)."""
    plain = text.plain
    pictured = plain.translate(_PICTURES)
    if pictured == plain:
        return text
    text = text.copy()
    text.plain = pictured
    return text


def _cell(markup: str | Text, width: int, right: bool = False) -> Text:
    """``markup`` as exactly ``width`` cells of one line: cut with an ellipsis, or padded (on
    the left when ``right``). A line break in a plugin's or a tape's text becomes a space;
    control characters are shown (``visible``)."""
    text = visible(Text.from_markup(markup) if isinstance(markup, str) else markup)
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
        ["Brier (impl.)", _brier(before), _brier(after), _brier(later)],
        ["Brier (paid)", *(brier_text(p.brier_paid) for p in (before, after, later))],
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
    lines = [Text(f"what it saw: {counted(len(frame.seen), 'market')}, by {volume}", style="bold"),
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
    title = visible(Text.assemble(
        f"{agent} · decision {frame.index + 1}/{total} · ", (d.action, "bold"),
        f" · week {d.week} · {when}",
    ))  # fmt: skip
    title.truncate(max(width - 6, 1), overflow="ellipsis")
    dashes = "─" * max(width - 5 - title.cell_len, 0)
    lines = [Text.assemble("╭─ ", title, f" {dashes}╮")]
    lines += [Text.assemble("│ ", _cell(line, inner), " │") for line in body]
    lines.append(Text(f"╰{'─' * max(width - 2, 0)}╯"))
    text = Text("\n").join(lines)
    text.no_wrap = True
    return text


def print_json(cut: Iterable[Frame]) -> None:
    """A JSON array of the frames, each written when made."""
    opening = "["
    for frame in cut:
        body = json.dumps(frame.as_dict(), indent=2).replace("\n", "\n  ")
        click.echo(f"{opening}\n  {body}", nl=False)
        opening = ","
    click.echo("[]" if opening == "[" else "\n]")


def print_frames(
    cut: Iterable[Frame], total: int, agent: str, opened: Event | None, nothing: str
) -> None:
    """Each frame as text sized to the terminal (plain when piped), printed when made."""
    from arena.reports.model import universe_volume

    volume = universe_volume(opened) if isinstance(opened, CohortOpened) else "volume"
    console = make_console()
    if isinstance(opened, CohortOpened):
        _echo(console, Text(
            f"cohort {opened.cohort} · rules {opened.rules} · tape {tape_name(opened.tape)} · "
            f"{agent}: {counted(total, 'decision')}", style="bold",
        ))  # fmt: skip
    if total == 0:
        console.print(nothing)
        return
    for frame in cut:
        _echo(console, render(frame, total, agent, console.height, console.width, volume))


def print_standings(timeline: LogTimeline) -> None:
    """Every agent at the end of the log, the table ``arena report`` gives for the cohort
    (the frames follow one agent; this is how they all stood when it ended)."""
    from arena.reports.terminal import standings_table

    state = timeline.state_at(len(timeline.events))
    if state.books:
        console = make_console()
        title = f"every agent at the end of the log (event {len(timeline.events):,})"
        console.print(standings_table(title, cohort_standings(state)))


def _echo(console: Console, text: Text) -> None:
    """Styled on a terminal, plain text when piped; control characters shown, never sent."""
    text = visible(text)
    if console.is_terminal:
        console.print(text)
    else:
        click.echo(text.plain)
