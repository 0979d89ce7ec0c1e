"""``arena replay``: replay cohorts of a tape with agents and print the leaderboard."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import click
from rich.markup import escape

from arena.boundary.isolated import check_spec, isolation_notice
from arena.commands.options import CohortChoice, agent_options, cohort_options, start_options
from arena.console import make_console, plugins_print_to_stderr
from arena.engines.driver import replay_cohorts
from arena.progress import on_a_terminal, progress_of
from arena.reports.model import load_ledger, report_data
from arena.reports.terminal import print_report, usage_line
from arena.reports.terminal import shown as as_text
from arena.run.plan import (
    NO_INSTANT,
    NO_MARKET,
    Skipped,
    cadence_note,
    describe_skipped,
    empty_start_detail,
    plan_cohorts,
)
from ledger.anchor import format_head, head_path
from ledger.events import CohortOpened
from ledger.store import EventStore
from ledger.usage import model_usage
from replays.tape import Tape


def skipped_note(skipped: Sequence[Skipped]) -> str:
    """The line that says which asked-for starts had nothing to decide, and why (rich markup)."""
    return f"[dim]skipped {len(skipped)} start(s) with {escape(describe_skipped(skipped))}[/]"


@contextmanager
def resumable(db: Path) -> Iterator[None]:
    """A Ctrl-C ends the run with one line saying where it stopped and how to go on: the runner
    has committed every decision made, the one cut short with its calls, and the same command
    resumes from there without asking a model again (exit status 130, as for any Ctrl-C). The
    cut decision, if it asked a model, stays the HOLD it was recorded as, which a person
    comparing with a run never interrupted needs to know. Entered outside the progress display
    (``arena.progress.progress_of``), so the display is gone before the line is printed: a live
    bar printed over it, and cut it at the terminal's width."""
    try:
        yield
    except KeyboardInterrupt:
        click.echo(
            f"interrupted: {db} holds the run up to the decision Ctrl-C cut short, kept as a "
            "HOLD if it asked a model (a run never interrupted may have traded there); the "
            "same command resumes it",
            err=True,
        )
        raise SystemExit(130) from None


AGENTS_NAMED = 8
"""The most agent names the note on a log's other cohorts lists before "and N more"."""


def other_cohorts_note(store: EventStore, db: Path, ours: Sequence[str]) -> str | None:
    """The line that says the log already held cohorts other than this run's ``ours``, or None
    when it held none (a fresh log, or a resume of the same cohorts). A second replay with no
    ``--db`` went into the tour's ``arena.db`` without a word, its last line counting only its
    own events, and ``arena report`` then ranked both runs' agents side by side."""
    others = sorted(set(store.streams()) - set(ours))
    if not others:
        return None
    theirs = agents_of(store, others)
    if theirs == agents_of(store, ours):
        whose = "the same agents"
    else:
        names = sorted(theirs)
        more = f" and {len(names) - AGENTS_NAMED} more" if len(names) > AGENTS_NAMED else ""
        whose = "agents " + ", ".join(names[:AGENTS_NAMED]) + more
    held = f"{len(others)} other cohort" + ("s" if len(others) > 1 else "")
    return (
        f"{db} already held {held}, with {whose}: it now holds "
        f"{len(others) + len(ours)} cohorts, {store.last_seq():,} events, and 'arena report "
        f"{db}' ranks them all together; --db NEW.db keeps a run apart"
    )


def agents_of(store: EventStore, cohorts: Sequence[str]) -> set[str]:
    """The agents the cohorts' openings name (each cohort's first event)."""
    agents: set[str] = set()
    for cohort in cohorts:
        opened = next(store.read(cohort, batch=1), None)
        if isinstance(opened, CohortOpened):
            agents.update(opened.agents)
    return agents


def nothing_to_decide(tape: Tape, skipped: Sequence[Skipped]) -> str:
    """The one-line error when no asked-for start has anything to decide."""
    if len(skipped) == 1 and skipped[0].reason != NO_INSTANT:
        return empty_start_detail(tape, int(skipped[0].start.timestamp()))
    if all(s.reason == NO_MARKET for s in skipped):
        when = ", ".join(f"{s.start:%Y-%m-%d %H:%M}" for s in skipped[:3])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        return f"no market of tape {tape.hash[:12]} is open with a price at {when} UTC{more}"
    return f"nothing to decide on tape {tape.hash[:12]}: {describe_skipped(skipped, limit=3)}"


@click.command()
@cohort_options
@start_options
@agent_options
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("arena.db"),
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def replay(
    cohort: CohortChoice, starts: list[datetime], agents: dict[str, str], db: Path, as_json: bool
) -> None:
    """Replay cohorts of a tape with trading agents into an event log.

    \b
    Examples:
      arena replay
      arena replay --starts 2024-05-12..2024-11-03 --agent fav=favourite --agent h=hold
      arena replay --tape my.tape --start 2024-09-01 --agent me=./mine.py:Mine --json
      arena replay --starts 2024-05-12..2024-11-03 --engine ray --address auto
    """
    console = make_console(stderr=as_json)
    shown = on_a_terminal(as_json=as_json)
    with plugins_print_to_stderr():
        for spec in agents.values():  # fail fast, before any worker starts
            check_spec(spec, cohort.options.isolate)  # under --isolate, never built here
        if (notice := isolation_notice(cohort.options.isolate)) is not None:
            click.echo(notice, err=True)
        source = cohort.source
        tape = source.tape
        planned, skipped = plan_cohorts(tape, cohort.configs(starts, agents))
        if not planned:
            raise click.ClickException(nothing_to_decide(tape, skipped))
        decisions = sum(p.plan.schedule.decisions * len(p.config.agents) for p in planned)
        with (
            resumable(db),
            progress_of("replaying", len(planned), shown=shown, decisions=decisions) as work,
        ):
            done = replay_cohorts(
                source, planned, db, cohort.options, on_done=work.advance, on_decision=work.watcher
            )
    with EventStore.open(db, readonly=True) as store:
        cohorts = [d.cohort for d in done]
        ledger = load_ledger(store, cohorts)
        usage = model_usage(store, cohorts)
        digest = store.digest(streams=cohorts)
        head = format_head(*store.head())
        others = other_cohorts_note(store, db, cohorts)
    if as_json:
        if others is not None:
            console.print(f"[yellow]{as_text(others)}[/]")  # on stderr, beside the JSON
        skipped_starts = [f"{s.start:%Y-%m-%dT%H:%M:%SZ}" for s in skipped]
        why = {f"{s.start:%Y-%m-%dT%H:%M:%SZ}": s.reason for s in skipped}
        click.echo(json.dumps({"digest": digest, "head": head, "db": str(db), "tape": tape.hash,
                               "skipped_starts": skipped_starts, "skipped_why": why,
                               **report_data(ledger, usage)}, indent=2))  # fmt: skip
        return
    if skipped:
        console.print(skipped_note(skipped))
    if (note := cadence_note(tape, planned)) is not None:
        console.print(f"[yellow]{escape(note)}[/]")
    print_report(console, ledger, usage=usage)
    appended = sum(d.appended for d in done)
    console.print(
        f"[dim]{len(done)} cohort(s), {sum(d.events for d in done):,} events "
        f"({appended:,} new) in {db} · tape {tape.hash[:12]}[/]"
    )
    if others is not None:
        console.print(f"[yellow]{as_text(others)}[/]")
    if usage:
        console.print(usage_line(usage), soft_wrap=True)
    console.print(f"digest [bold]{digest}[/]")
    console.print(
        f"head   [bold]{head}[/] [dim](recorded in {head_path(db)}; "
        f"'arena verify {db} --head {head}' proves nothing was cut or added)[/]"
    )
