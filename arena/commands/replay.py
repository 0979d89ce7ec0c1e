"""``arena replay``: replay cohorts of a tape with agents and print the leaderboard."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import click
import pydantic
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from arena.cohort import (
    NO_INSTANT,
    NO_MARKET,
    CohortConfig,
    Skipped,
    describe_skipped,
    empty_start_detail,
    parse_instant,
    split_starts,
    sundays,
)
from arena.commands.options import cohort_options
from arena.console import make_console
from arena.replay import replay_cohorts
from arena.report import load_ledger, print_report, report_data, usage_line
from ledger.anchor import format_head, head_path
from ledger.errors import LedgerError
from ledger.store import EventStore
from ledger.usage import model_usage
from replays.errors import TapeError
from replays.samples import sample_path
from replays.tape import Tape
from replays.tapefile import load_tape
from strategies.api import StrategyError
from strategies.llm.connection import environment_defaults
from strategies.loader import build_strategy, validation_summary

DEFAULT_START = "2024-09-01"
DEFAULT_AGENTS = (
    "hold=hold", "favourite=favourite", "contrarian=contrarian", "random=random",
    "extremized=extremized", "sign=sign", "linear=linear?B=1000",
)  # fmt: skip


def read_agents_file(path: Path) -> dict[str, str]:
    """``{name: spec}`` from a TOML or JSON file (optionally under an ``agents`` key).

    An ``[llm]`` table beside the agents holds the model connection (``base_url``,
    ``api_key_env``, ``timeout``, ``cassette``, ...; see ``strategies.llm.connection``): it is
    copied into the ``ARENA_LLM_*`` variables the environment does not already set, so the
    environment wins, for the ``llm`` agent and the ``llm`` forecaster alike."""
    if path.suffix not in (".toml", ".json"):
        raise click.BadParameter(f"{path}: use a .toml or .json file", param_hint="--agents-file")
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode()) if path.suffix == ".toml" else json.loads(raw)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--agents-file") from None
    if isinstance(data, dict) and isinstance(data.get("llm"), dict):
        try:
            for name, value in environment_defaults(data.pop("llm")).items():
                os.environ.setdefault(name, value)
        except ValueError as exc:
            raise click.BadParameter(f"{path}: {exc}", param_hint="--agents-file") from None
    table = data.get("agents", data) if isinstance(data, dict) else None
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in table.items()
    ):
        raise click.BadParameter(
            f'{path}: expected a table of NAME = "SPEC" strings', param_hint="--agents-file"
        )
    return dict(table)


def parse_agents(specs: tuple[str, ...], from_file: dict[str, str] | None = None) -> dict[str, str]:
    """``NAME=SPEC`` pairs, in order (after any from a file); a malformed or repeated name is a
    usage error."""
    agents: dict[str, str] = dict(from_file or {})
    for item in specs or (() if from_file else DEFAULT_AGENTS):
        name, sep, spec = item.partition("=")
        if not sep or not name or not spec:
            raise click.BadParameter(f"{item!r} is not NAME=SPEC", param_hint="--agent")
        if "?" in name:  # a spec with settings and no name: its first '=' is not the name's
            raise click.BadParameter(
                f"{item!r} is not NAME=SPEC; name the agent, e.g. a={item}", param_hint="--agent"
            )
        if name in agents:
            raise click.BadParameter(f"agent {name!r} given twice", param_hint="--agent")
        agents[name] = spec
    return agents


def skipped_note(skipped: Sequence[Skipped]) -> str:
    """The line that says which asked-for starts had nothing to decide, and why (rich markup)."""
    return f"[dim]skipped {len(skipped)} start(s) with {escape(describe_skipped(skipped))}[/]"


def nothing_to_decide(tape: Tape, skipped: Sequence[Skipped]) -> str:
    """The one-line error when no asked-for start has anything to decide."""
    if len(skipped) == 1 and skipped[0].reason != NO_INSTANT:
        return empty_start_detail(tape, int(skipped[0].start.timestamp()))
    if all(s.reason == NO_MARKET for s in skipped):
        when = ", ".join(f"{s.start:%Y-%m-%d %H:%M}" for s in skipped[:3])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        return f"no market of tape {tape.hash[:12]} is open with a price at {when} UTC{more}"
    return f"nothing to decide on tape {tape.hash[:12]}: {describe_skipped(skipped, limit=3)}"


def parse_starts(start: str | None, starts: str | None) -> list[datetime]:
    """``--start`` as given, or every Sunday 00:00 UTC in ``--starts``; a bad date is a usage
    error that names the option it came from."""
    if start and starts:
        raise click.UsageError("give --start or --starts, not both")
    try:
        if starts:
            first, sep, last = starts.partition("..")
            if not sep:
                raise click.BadParameter("use FROM..TO", param_hint="--starts")
            found = sundays(parse_instant(first), parse_instant(last))
            if not found:
                raise click.BadParameter(f"no Sunday in {starts}", param_hint="--starts")
            return found
        return [parse_instant(start or DEFAULT_START)]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--starts" if starts else "--start") from None


@click.command()
@cohort_options
@click.option("--start", help="Cohort start, ISO-8601 (default 2024-09-01, a Sunday).")
@click.option("--starts", help="Every Sunday 00:00 UTC in FROM..TO, one cohort each.")
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="NAME=SPEC",
    help="An agent (repeatable), e.g. fav=favourite, alice=scripted:d.json.",
)
@click.option(
    "--agents-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML or JSON table of NAME = SPEC, for many agents.",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("arena.db"),
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def replay(
    tape_path: Path | None,
    start: str | None,
    starts: str | None,
    agents: tuple[str, ...],
    agents_file: Path | None,
    rules: str,
    cash: float,
    universe: int,
    decision_cadence: str,
    mark_cadence: str,
    seed: int,
    db: Path,
    jobs: int,
    decision_timeout: float,
    isolate: bool,
    as_json: bool,
) -> None:
    """Replay cohorts of a tape with trading agents into an event log.

    \b
    Examples:
      arena replay
      arena replay --starts 2024-05-12..2024-11-03 --agent fav=favourite --agent h=hold
      arena replay --tape my.tape --start 2024-09-01 --agent me=./mine.py:Mine --json
    """
    console = make_console(stderr=as_json)
    agent_specs = parse_agents(agents, read_agents_file(agents_file) if agents_file else None)
    try:
        for spec in agent_specs.values():
            build_strategy(spec)  # fail fast, before any worker starts
        configs = [
            CohortConfig(
                start=when,
                agents=agent_specs,
                universe=universe,
                cash=cash,
                rules=rules,  # type: ignore[arg-type]
                decision_cadence=decision_cadence,
                mark_cadence=mark_cadence,
                seed=seed,
            )
            for when in parse_starts(start, starts)
        ]
    except pydantic.ValidationError as exc:
        raise click.ClickException(validation_summary(exc)) from None
    except (StrategyError, ValueError) as exc:
        raise click.ClickException(str(exc).splitlines()[0]) from None
    path = tape_path or sample_path()
    try:
        tape = load_tape(path)
    except TapeError as exc:
        raise click.ClickException(str(exc)) from None
    kept, skipped = split_starts(tape, [c.start for c in configs], universe, decision_cadence)
    if not kept:
        raise click.ClickException(nothing_to_decide(tape, skipped))
    configs = [c for c in configs if c.start in kept]
    workers = jobs or min(len(configs), os.cpu_count() or 1)
    progress = Progress(
        TextColumn("[bold]replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True, disable=as_json or len(configs) == 1,
    )  # fmt: skip
    try:
        with progress:
            task = progress.add_task("cohorts", total=len(configs))
            done = replay_cohorts(
                path, configs, db, jobs=workers, decision_timeout=decision_timeout,
                isolate=isolate, on_done=lambda _: progress.advance(task),
            )  # fmt: skip
        with EventStore.open(db, readonly=True) as store:
            cohorts = [d.cohort for d in done]
            ledger = load_ledger(store, cohorts)
            usage = model_usage(store, cohorts)
            digest = store.digest(streams=cohorts)
            head = format_head(*store.head())
    except (LedgerError, TapeError, StrategyError) as exc:
        raise click.ClickException(str(exc).splitlines()[0]) from None
    if as_json:
        skipped_starts = [f"{s.start:%Y-%m-%dT%H:%M:%SZ}" for s in skipped]
        why = {f"{s.start:%Y-%m-%dT%H:%M:%SZ}": s.reason for s in skipped}
        click.echo(json.dumps({"digest": digest, "head": head, "db": str(db), "tape": tape.hash,
                               "skipped_starts": skipped_starts, "skipped_why": why,
                               **report_data(ledger, usage)}, indent=2))  # fmt: skip
        return
    if skipped:
        console.print(skipped_note(skipped))
    print_report(console, ledger, usage=usage)
    appended = sum(d.appended for d in done)
    console.print(
        f"[dim]{len(done)} cohort(s), {sum(d.events for d in done):,} events "
        f"({appended:,} new) in {db} · tape {tape.hash[:12]}[/]"
    )
    if usage:
        console.print(usage_line(usage), soft_wrap=True)
    console.print(f"digest [bold]{digest}[/]")
    console.print(
        f"head   [bold]{head}[/] [dim](recorded in {head_path(db)}; "
        f"'arena verify {db} --head {head}' proves nothing was cut or added)[/]"
    )
