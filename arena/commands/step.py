"""``arena step DB``: walk through a finished log; ``arena step --tape …``: step a live replay.

A live replay runs in a child process (``arena.step.live``) with the options of ``arena
replay`` for one cohort, into the same log ``arena replay`` would write; the view reads the log
up to where the replay stands. In a terminal the view is the app (``arena.step.app``);
otherwise every frame is printed (``arena.step.printed``). This module parses the options and
picks which."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import click

from arena.commands.options import (
    CohortChoice,
    cohort_options,
    parse_agents,
    read_agents_file,
    start_options,
)
from arena.run.settings import RunSettings
from arena.step.frames import Frame, iter_frames
from arena.step.live import LiveRun, LogTail
from arena.step.log import open_timeline
from arena.step.panels import damaged
from arena.step.printed import counted, print_frames, print_json, print_standings
from arena.step.timeline import LogTimeline
from ledger.errors import IntegrityError, LedgerError
from ledger.restore import check_log, check_stream, load
from ledger.store import EventStore

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
                    check_stream(store, timeline.cohort)  # a broken chain before any frame
                    _prove(store, timeline)  # and an end the chain disproves
                _show(timeline, named[0] if named else None, no_input, as_json, db)
            except LedgerError as exc:  # in the scan, the links, or the first screen's pages
                raise click.ClickException(damaged(exc, "nothing shown", f" {db}")) from None
        return
    if cohort_id is not None:
        raise click.UsageError("--cohort picks a cohort of DB; a live replay has one")
    if len(starts) != 1:
        raise click.UsageError("a live replay is one cohort: give --start, not --starts")
    agents = parse_agents(agent, read_agents_file(agents_file) if agents_file else None)
    from arena.boundary.isolated import check_spec, isolation_notice  # a live replay's only

    for spec in agents.values():  # fail fast, before the replay's process starts
        check_spec(spec, cohort.options.isolate)  # under --isolate, never built here
    if (notice := isolation_notice(cohort.options.isolate)) is not None:
        click.echo(notice, err=True)
    [config] = cohort.configs(starts, agents)
    interactive = not (no_input or as_json) and _keys_available()
    if interactive:
        _tui_app()  # the extra's absence is an error before the replay starts
    settings = RunSettings(cohort=config, options=cohort.options)
    log = live_db or Path("arena.db")
    output = log.with_name(log.name + ".step-output.txt") if interactive else None
    live = LiveRun(cohort.tape, settings, log, output, cohort.books)
    try:
        tail = LogTail(live.db, live.cohort)
        timeline = LogTimeline(tail.read(live.advance("open").version), live.cohort)
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


def _read_log(store: EventStore, cohort: str | None) -> LogTimeline:
    """The cohort (the log's first unless named) as a timeline that reads the log as it is
    stepped through: the first screen waits for the proof that the log ends where the chain
    ends and for one scan, not for every event (see ``arena.step.log``). What it reads is
    checked on the way; a log that fails is a LedgerError naming where, which the CLI's edge
    prints as one line."""
    check_log(store)  # a cohort missing from a damaged index is not "no such cohort"
    streams = store.streams()
    if not streams:
        raise click.ClickException(f"{store.path} holds no cohorts")
    cohort = cohort or streams[0]
    if cohort not in streams:
        raise click.ClickException(f"{store.path} has no cohort {cohort}")
    return open_timeline(store, cohort)


def _prove(store: EventStore, timeline: LogTimeline) -> None:
    """Before the first frame, what ``arena report`` proves of the cohort (``ledger.restore``):
    the log ends at its recorded head, the indexes agree with the tables, and the cohort ends
    in the state its close recorded, with nothing after the close; IntegrityError if not. A
    cohort whose events do not fold at all is left to the frames, which print as far as they
    fold and then say where they stopped."""
    try:
        loaded = load(store, [timeline.cohort])
    except IntegrityError:
        raise
    except LedgerError:
        return
    note = loaded.note()
    if note:
        timeline.notes.append(note)


def _show(
    timeline: LogTimeline, agent: str | None, no_input: bool, as_json: bool, db: Path | None = None
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
            print_json(cut())
        else:
            print_frames(cut(), total, agent, opened, f"{agent} made no decision in {cohort}")
            print_standings(timeline)
        for note in dict.fromkeys(timeline.notes):  # said as arena report says it
            click.echo(f"note: {note}", err=True)
    except LedgerError as exc:
        shown = f"the {counted(printed, 'frame')} before it printed" if printed else "nothing shown"
        where = f" {db}" if db is not None else ""
        raise click.ClickException(damaged(exc, shown, where)) from None


def _keys_available() -> bool:
    """Keys can be read only from a terminal, and the view drawn only on one; piped or
    redirected, every frame is printed."""
    return sys.stdin.isatty() and sys.stdout.isatty()
