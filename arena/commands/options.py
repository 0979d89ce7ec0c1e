"""Option groups shared by the commands that run cohorts (``replay``, ``backtest``, ...).

Each group is a decorator that adds its options to a command and hands the command one value
built from them, so a command declares the cohort settings once and receives them whole:

- :func:`cohort_options`: ``--tape``, the cohort settings (``--rules``, ``--cash``,
  ``--universe``, ``--decisions``, ``--marks``, ``--seed``) and the run options (``--jobs``,
  ``--timeout``, ``--isolate``, ``--on-miss``, ``--engine``, ``--address``), as one
  :class:`CohortChoice` named ``cohort``;
- :func:`agent_options`: ``--agent NAME=SPEC`` (repeatable) and ``--agents-file``, as
  ``agents`` (``{name: spec}``, the built-in line-up when neither is given);
- :func:`start_options`: ``--start`` or ``--starts FROM..TO``, as ``starts`` (a list of
  instants; when neither is given, the tape's first start with something to decide, or the
  sample's documented 2024-09-01).

Every default is read off the settings models (``arena.run.cohort.CohortConfig``,
``arena.run.settings.RunOptions``), so the CLI and a Python caller that leaves a setting out get
the same cohort id.
"""

from __future__ import annotations

import functools
import json
import os
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from arena.engines.base import TapeSource
from arena.run.cohort import CohortConfig, iso_minute, parse_instant, sundays
from arena.run.execution import latency_settings
from arena.run.first_start import first_start
from arena.run.settings import RunOptions, SettingsError, cohort_configs, run_options
from ledger.rules import RULES
from replays.samples import SAMPLE, SAMPLE_BOOKS, books_file, sample_path, tape_file

T = TypeVar("T")

DEFAULT_START = "2024-09-01"
DEFAULT_AGENTS = (
    "hold=hold", "favourite=favourite", "contrarian=contrarian", "random=random",
    "extremized=extremized", "sign=sign", "linear=linear?B=1000",
)  # fmt: skip

COHORT_SETTINGS = (
    "rules", "cash", "universe", "decision_cadence", "mark_cadence", "seed", "execution", "fees",
    "latency_ms", "liquidity", "marks_at", "listing",
)  # fmt: skip
"""The ``CohortConfig`` fields the options set, by their own names (start and agents come
from their own options, or from the command)."""


def _default(model: Any, field: str) -> Any:
    return model.model_fields[field].default


@dataclass(frozen=True)
class CohortChoice:
    """What the cohort options chose: the tape (and the order books, if any), every cohort
    setting but the start and the agents, and how the run goes."""

    tape_path: Path | None
    values: dict[str, Any]
    options: RunOptions
    books_path: Path | None = None

    @property
    def tape(self) -> Path:
        """The tape file: the one given, or the embedded 2024 election sample when none is or
        when it is ``sample``, the name ``arena tapes show`` and ``list`` give it."""
        return sample_path() if self.tape_path is None else tape_file(self.tape_path)

    @property
    def books(self) -> Path | None:
        """The books file: the one given, or the embedded BTC books with ``--tape
        sample-books``; None for a run on prices alone."""
        if self.books_path is not None:
            return books_file(self.books_path)
        return books_file(SAMPLE_BOOKS) if str(self.tape_path) == SAMPLE_BOOKS else None

    @functools.cached_property
    def source(self) -> TapeSource:
        """The tape and books, loaded once for the command."""
        return TapeSource.load(self.tape, self.books)

    @property
    def settings(self) -> dict[str, Any]:
        """Every cohort setting the options chose, the books named by their content hash."""
        books = self.source.books if self.books is not None else None
        return {**self.values, "books": books.hash if books is not None else None}

    def configs(self, starts: Sequence[datetime], agents: dict[str, str]) -> list[CohortConfig]:
        """One validated ``CohortConfig`` per start; a bad setting is one ``SettingsError``."""
        return cohort_configs(starts, agents, **self.settings)


def _on_miss(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--on-miss`` sets ``ARENA_LLM_ON_MISS``, which the model connection reads in every
    worker (see ``strategies.llm.connection``)."""
    if value is not None:
        os.environ["ARENA_LLM_ON_MISS"] = value


_COHORT_OPTIONS = (
    click.option("--tape", "tape_path", type=click.Path(dir_okay=False, path_type=Path),
                 help=f"Tape file, or '{SAMPLE}' (the default): the embedded 2024 election "
                 "sample."),
    click.option("--rules", type=click.Choice(list(RULES)),
                 default=_default(CohortConfig, "rules"), show_default=True,
                 help="Betting rules: v1 caps each bet, v2 a decision's total (all or none)."),
    click.option("--cash", type=float, default=_default(CohortConfig, "cash"), show_default=True,
                 help="Starting cash of every agent (at most $10^12)."),
    click.option("--universe", type=int, default=_default(CohortConfig, "universe"),
                 show_default=True, help="Top N markets by volume open at the start."),
    click.option("--listing", type=click.Choice(["start", "rolling"]),
                 default=_default(CohortConfig, "listing"), show_default=True,
                 help="start: the universe is the top N open at the start; rolling: markets "
                      "that list in the cohort's first week join as they list (at most N live "
                      "at once), seen by agents only from then."),
    click.option("--decisions", "decision_cadence",
                 default=_default(CohortConfig, "decision_cadence"), show_default=True,
                 help="Decision cadence: weekly, daily, hourly, tick, or e.g. 6h."),
    click.option("--marks", "mark_cadence", default=_default(CohortConfig, "mark_cadence"),
                 show_default=True,
                 help="Mark cadence (snapshots, equity curves): weekly, daily, hourly, tick, 6h…"),
    click.option("--seed", type=int, default=_default(CohortConfig, "seed"), show_default=True,
                 help="Seed of every agent's random generator."),
    click.option("--execution", default=_default(CohortConfig, "execution"), show_default=True,
                 help="What an order meets: fa (the tape's price, whole: Forecaster Arena's "
                      "rule), mid (its v2 midpoint), touch?spread_ticks=K (best bid/ask, a "
                      "synthetic spread of K ticks on a price tape; cap=true: the top level's "
                      "size at most)."),
    click.option("--books", "books_path", type=click.Path(dir_okay=False, path_type=Path),
                 help=f"Order books the orders meet (a .books file, or '{SAMPLE_BOOKS}'); "
                      f"--tape {SAMPLE_BOOKS} brings its own."),
    click.option("--latency", "latency_ms", metavar="MS|llm|FILE|llm+MS|llm+FILE",
                 default=str(_default(CohortConfig, "latency_ms")), show_default=True,
                 help="Milliseconds from a decision to its orders meeting the book (needs "
                      "books; 250, 250ms or 1.5s): the book standing when the order arrives, "
                      "never a later one; "
                      "llm adds each decision's recorded model time; FILE (.toml/.json) "
                      "gives milliseconds per agent."),
    click.option("--marks-at", "marks_at",
                 type=click.Choice(["price", "mid", "bid", "liquidation"]),
                 default=_default(CohortConfig, "marks_at"), show_default=True,
                 help="What a mark values a position at: the tape's price, or (with books) "
                      "the book's mid, the best bid, or liquidation: what each agent's "
                      "holding would fetch sold now down the bid book."),
    click.option("--liquidity", type=click.Choice(["isolated", "shared"]),
                 default=_default(CohortConfig, "liquidity"), show_default=True,
                 help="With books: isolated, every agent meets the whole book; shared, the "
                      "cohort's agents take from one book in the order they decide."),
    click.option("--fees", metavar="auto|none|FILE",
                 help="Taker fees: auto (Polymarket's schedule by date and category), none, or "
                      "a fee table file (.toml/.json, the shape of ledger/fee_schedule.toml). "
                      "Default: none for fa and mid, auto for touch and l2."),
    click.option("--jobs", type=int, default=_default(RunOptions, "jobs"),
                 help="Worker processes (default: CPU cores)."),
    click.option("--timeout", "decision_timeout", type=float,
                 default=_default(RunOptions, "decision_timeout"), show_default=True,
                 help="Seconds a strategy may take per decision before it is recorded as an "
                      "error and HOLD (0: no limit; at most a week)."),
    click.option("--commit-every", type=float, default=_default(RunOptions, "commit_every"),
                 show_default=True,
                 help="Seconds a run's events may wait before they reach the log (0: every "
                      "decision); a killed run resumes from there without asking again."),
    click.option("--on-miss", type=click.Choice(["error", "hold"]), expose_value=False,
                 callback=_on_miss,
                 help="A model question missing from a replay's cassette: stop the run with "
                      "an error (default), or HOLD as before. Sets ARENA_LLM_ON_MISS."),
    click.option("--isolate", is_flag=True, default=_default(RunOptions, "isolate"),
                 help="Run each agent's code in a worker process of its own (for plugins you "
                      "do not trust; the same log for honest ones, slower per decision)."),
    click.option("--engine", type=click.Choice(["local", "ray"]),
                 default=_default(RunOptions, "engine"), show_default=True,
                 help="Where cohorts run: this machine's cores, or a Ray cluster (the extra "
                      "arena[ray]). The log, its digest and head are the same either way."),
    click.option("--address",
                 help="With --engine ray: the cluster to join (auto: the one 'ray start' left "
                      "here); without it a local Ray instance is started for the run."),
)  # fmt: skip


def _group(
    options: Sequence[Callable[[Any], Any]], name: str, build: Callable[[dict[str, Any]], object]
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A decorator adding ``options`` to a command and passing it ``name=build(values)``,
    where ``values`` are those options' own values (taken out of the command's arguments)."""

    def decorate(command: Callable[..., T]) -> Callable[..., T]:
        before = {p.name for p in _params(command)}

        @functools.wraps(command)
        def run(**kwargs: Any) -> T:
            values = {key: kwargs.pop(key) for key in list(kwargs) if key in mine}
            return command(**kwargs, **{name: build(values)})

        for option in reversed(options):
            run = option(run)
        mine = {p.name for p in _params(run)} - before
        return run

    return decorate


def _params(command: Callable[..., Any]) -> list[click.Parameter]:
    return list(getattr(command, "__click_params__", []))


def _cohort_choice(values: dict[str, Any]) -> CohortChoice:
    """The cohort options' values as a ``CohortChoice`` (run options out of range are one
    ``SettingsError``; the cohort settings are checked with the agents and the starts)."""
    options = run_options(**{f: values.pop(f) for f in RunOptions.model_fields})
    try:
        values |= latency_settings(values.pop("latency_ms"))
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    return CohortChoice(values.pop("tape_path"), values, options, values.pop("books_path"))


def cohort_options(command: Callable[..., T]) -> Callable[..., T]:
    """Add the tape, the cohort settings and the run options; the command gets ``cohort``,
    a :class:`CohortChoice`."""
    return _group(_COHORT_OPTIONS, "cohort", _cohort_choice)(command)


def read_agents_file(path: Path) -> dict[str, str]:
    """``{name: spec}`` from a TOML or JSON file (optionally under an ``agents`` key).

    An ``[llm]`` table beside the agents holds the model connection (``base_url``,
    ``api_key_env``, ``timeout``, ``cassette``, ...; see ``strategies.llm.connection``): it is
    copied into the ``ARENA_LLM_*`` variables the environment does not already set, so the
    environment wins, for the ``llm`` agent and the ``llm`` forecaster alike."""
    from strategies.llm.connection import environment_defaults

    if path.suffix not in (".toml", ".json"):
        raise click.BadParameter(f"{path}: use a .toml or .json file", param_hint="--agents-file")
    try:
        raw = path.read_bytes()
        data = (
            tomllib.loads(raw.decode())
            if path.suffix == ".toml"
            else json.loads(raw, object_pairs_hook=_unique_keys)
        )
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


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique (TOML refuses a repeated key itself; JSON would keep
    the last, and an agent given twice would silently be the second)."""
    table: dict[str, Any] = {}
    for key, value in pairs:
        if key in table:
            raise ValueError(f"{key!r} given twice")
        table[key] = value
    return table


def parse_agents(specs: Sequence[str], from_file: dict[str, str] | None = None) -> dict[str, str]:
    """``NAME=SPEC`` pairs, in order (after any from a file; the built-in line-up when there
    are neither); a malformed or repeated name is a usage error."""
    agents: dict[str, str] = dict(from_file or {})
    for item in specs or (() if from_file is not None else DEFAULT_AGENTS):
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
    if not agents:  # an empty agents file once ran the built-in line-up instead
        raise click.BadParameter("the file names no agent", param_hint="--agents-file")
    return agents


_AGENT_OPTIONS = (
    click.option("--agent", "agent", multiple=True, metavar="NAME=SPEC",
                 help="An agent (repeatable), e.g. fav=favourite, alice=scripted:d.json."),
    click.option("--agents-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                 help="TOML or JSON table of NAME = SPEC, for many agents."),
)  # fmt: skip


def agent_options(command: Callable[..., T]) -> Callable[..., T]:
    """Add ``--agent`` and ``--agents-file``; the command gets ``agents``, ``{name: spec}``."""

    def agents(values: dict[str, Any]) -> dict[str, str]:
        path = values["agents_file"]
        return parse_agents(values["agent"], read_agents_file(path) if path else None)

    return _group(_AGENT_OPTIONS, "agents", agents)(command)


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
            begin, end = parse_instant(first), parse_instant(last)
            if end < begin:  # a reversed range, not one without a Sunday
                raise click.BadParameter(
                    f"{starts} ends before it starts; did you mean {last}..{first}?",
                    param_hint="--starts",
                )
            found = sundays(begin, end)
            if not found:
                raise click.BadParameter(f"no Sunday in {starts}", param_hint="--starts")
            return found
        return [parse_instant(start or DEFAULT_START)]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--starts" if starts else "--start") from None


_START_OPTIONS = (
    click.option("--start", help=f"Cohort start, ISO-8601 (default: the tape's first start with "
                 f"something to decide; {DEFAULT_START}, a Sunday, on the sample)."),
    click.option("--starts", help="Every Sunday 00:00 UTC in FROM..TO, one cohort each."),
)  # fmt: skip


def default_start(cohort: CohortChoice) -> datetime:
    """The start when none is given: the embedded sample's documented one (its README figures
    are of that cohort), else the tape's first start with something to decide
    (``arena.run.first_start``); a tape with none is a one-line error naming its range."""
    if cohort.tape.resolve() == sample_path().resolve():
        return parse_instant(DEFAULT_START)
    tape = cohort.source.tape
    probe = cohort.configs([datetime.fromtimestamp(tape.span()[0], UTC)], {"probe": "hold"})[0]
    found = first_start(tape, probe)
    if found is None:
        first, last = (iso_minute(t) for t in tape.span())
        raise click.ClickException(
            f"no instant of tape {tape.hash[:12]} ({first} to {last}) has an open, priced "
            "market it covers and a decision to make"
        )
    return datetime.fromtimestamp(found, UTC)


def start_options(command: Callable[..., T]) -> Callable[..., T]:
    """Add ``--start`` and ``--starts``; the command gets ``starts``, a list of instants (with
    neither, :func:`default_start` of the tape ``cohort_options``, applied above, chose)."""

    @functools.wraps(command)
    def defaulted(*, starts: list[datetime] | None, **kwargs: Any) -> T:
        if starts is None:
            cohort = kwargs.get("cohort")
            chosen = default_start(cohort) if isinstance(cohort, CohortChoice) else None
            starts = [chosen or parse_instant(DEFAULT_START)]
        return command(starts=starts, **kwargs)

    def given(values: dict[str, Any]) -> list[datetime] | None:
        return (
            parse_starts(values["start"], values["starts"])
            if values["start"] or values["starts"]
            else None
        )

    return _group(_START_OPTIONS, "starts", given)(defaulted)
