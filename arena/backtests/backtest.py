"""Backtesting one strategy against baselines over many cohorts of a tape.

A single cohort says little: one election week can make any strategy look clever. So a backtest
replays the strategy *and* its comparison agents in the same cohorts (same universe, same
instants, same seeds), one cohort per Sunday, and reports per-cohort results, means with 95%
intervals, and the paired difference of returns, which removes what the cohorts share. Weekly
cohorts of one tape trade the same markets, so the intervals resample markets, not cohorts
(``ledger.intervals``).

Everything reported is folded from the log (never taken from the runner's memory), and the run's
settings, tape hash and package version travel with the results, so a results file says exactly
how to reproduce itself.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from importlib.metadata import version
from pathlib import Path
from typing import Any

import msgspec

from arena.boundary.isolated import check_spec
from arena.engines.base import TapeSource
from arena.engines.driver import replay_cohorts
from arena.engines.recorded import CohortDone
from arena.errors import ArenaError
from arena.reports.equity import CohortRecord, fold_cohort
from arena.reports.model import (
    BRIER_IMPLIED,
    IntervalSettings,
    interval_info,
    iso_utc,
    universe_volume,
)
from arena.run.cohort import CohortConfig, sundays
from arena.run.pace import Watcher
from arena.run.plan import (
    CohortPlan,
    PlannedCohort,
    Skipped,
    build_schedule,
    choose_universe,
    describe_skipped,
    plan_cohorts,
)
from arena.run.settings import DEFAULT_OPTIONS, RunOptions, cohort_configs
from ledger.leaderboard import belief_scores, cohort_standings, leaderboard, paired_returns
from ledger.projection import BrierRow, CohortState
from ledger.restore import load
from ledger.store import EventStore
from replays.tape import Tape
from strategies.api import StrategyError
from strategies.loader import name_specs

STRATEGY = "strategy"
"""The name the backtested strategy trades under, whatever its spec: paths and query strings
are not valid agent names, and a fixed name cannot clash with a comparison agent's kind."""

DEFAULT_AGAINST = ("hold", "favourite", "random")

SUMMARY_ORDER = f"The {STRATEGY} first, then the agents it is compared with"
"""The order of a backtest's summary, said under it in the terminal and on the page (the page
said "ranked by return", the leaderboard's words, over rows in this order)."""

SUMMARY_LEGEND = BRIER_IMPLIED.removeprefix("ranked by return · ")
"""The two Briers' legend without the leaderboard's order: no backtest table is ranked."""


class BacktestError(ArenaError, ValueError):
    """Settings a backtest cannot run with; the message is one line for the CLI."""


@dataclass(frozen=True)
class BacktestPlan:
    """Everything that shapes a backtest's results, validated, before any cohort runs."""

    strategy: str
    against: tuple[str, ...]
    source: TapeSource
    planned: tuple[PlannedCohort, ...]
    """One per start, in order: the strategy and the comparison agents, the same settings."""
    skipped: tuple[Skipped, ...] = ()
    """Asked-for starts with nothing to decide, left out, each with its reason."""

    @property
    def cohorts(self) -> tuple[CohortConfig, ...]:
        return tuple(p.config for p in self.planned)

    @property
    def starts(self) -> tuple[datetime, ...]:
        return tuple(c.start for c in self.cohorts)

    @property
    def agents(self) -> dict[str, str]:
        """Agent name -> spec: the strategy first, then each comparison agent by its kind."""
        return dict(self.cohorts[0].agents)

    def settings(self) -> dict[str, Any]:
        """The run's settings as plain data (how it ran, such as the worker count, is left
        out: it changes nothing)."""
        shared = self.cohorts[0].model_dump(mode="json", exclude={"start", "agents"})
        return {
            "strategy": self.strategy,
            "against": list(self.against),
            "agents": self.agents,
            "tape_path": str(self.source.path),
            "starts": [iso_utc(c.start_ts) for c in self.cohorts],
            **shared,
        }


def backtest_agents(strategy: str, against: Sequence[str]) -> dict[str, str]:
    """Agent name -> spec: the strategy as ``strategy``, then each comparison agent by its
    kind, by its settings where two share a kind (``sign-B_100``), or as the user named it
    (``NAME=SPEC``; ``strategies.loader.name_specs``); two with one name are a BacktestError."""
    try:
        return {STRATEGY: strategy, **name_specs(against, taken=[STRATEGY])}
    except StrategyError as exc:
        raise BacktestError(f"--against: {exc}") from None


def sunday_configs(tape: Tape, agents: dict[str, str], **settings: Any) -> list[CohortConfig]:
    """One cohort of ``agents`` on every Sunday the tape spans."""
    first, last = tape.span()
    candidates = sundays(datetime.fromtimestamp(first, UTC), datetime.fromtimestamp(last, UTC))
    return cohort_configs(candidates, agents, **settings)


def default_plans(tape: Tape, configs: Sequence[CohortConfig]) -> list[PlannedCohort]:
    """The cohorts among ``configs`` (one per Sunday) that get a full universe (and so decide),
    planned.

    "Full" is the cohorts' universe size, or as many markets as the busiest Sunday offers if
    that is fewer: Sundays where only a handful of early or late markets trade would otherwise
    dominate the mean with cohorts that hardly test anything (on the embedded sample this keeps
    the 26 Sundays 2024-05-12..2024-11-03 out of 96).
    """
    chosen = [choose_universe(tape, c.start_ts, c.universe) for c in configs]
    size = configs[0].universe if configs else 0
    full = min(size, max((len(markets) for markets, _ in chosen), default=0))
    planned = []
    for config, (markets, by) in zip(configs, chosen, strict=True):
        if markets and len(markets) >= full:
            schedule = build_schedule(tape, markets, config)
            if schedule.decisions:
                planned.append(PlannedCohort(config, CohortPlan(tuple(markets), by, schedule)))
    return planned


def plan_backtest(
    strategy: str,
    against: Sequence[str],
    source: TapeSource,
    starts: Sequence[datetime] | None = None,
    *,
    isolate: bool = False,
    **settings: Any,
) -> BacktestPlan:
    """Check every spec loads (with ``isolate`` in a confined worker, never here), the
    settings (``CohortConfig``'s fields but the start and the agents) validate and some start
    has something to decide; plan every cohort, once.

    Raises StrategyError for a spec that does not load, SettingsError for a bad setting,
    BacktestError when nothing can be run; each one line.
    """
    tape = source.tape
    agents = backtest_agents(strategy, against)
    for spec in agents.values():
        check_spec(spec, isolate)  # fail fast, before any worker starts
    first = datetime.fromtimestamp(tape.span()[0], UTC)
    cohort_configs([first], agents, **settings)  # the settings, checked once
    skipped: list[Skipped] = []
    if starts is None:  # every default start has a universe and a decision already
        planned = default_plans(tape, sunday_configs(tape, agents, **settings))
    else:
        planned, skipped = plan_cohorts(tape, cohort_configs(starts, agents, **settings))
    if not planned and not skipped:
        raise BacktestError(f"tape {tape.hash[:12]} has no Sunday with an open, priced market")
    if not planned:
        first_day, last_day = (iso_utc(t)[:10] for t in tape.span())
        raise BacktestError(
            f"nothing to decide: {describe_skipped(skipped, limit=3)} "
            f"(the tape runs {first_day}..{last_day})"
        )
    return BacktestPlan(
        strategy=strategy,
        against=tuple(against),
        source=source,
        planned=tuple(planned),
        skipped=tuple(skipped),
    )


# -- where the log goes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BacktestLog:
    """Where a backtest writes its event log, and whether it stays: a log of 26 cohorts is
    some 13 MB, so one nobody asked for is not left in the system's temporary folder."""

    path: Path
    kept: bool

    @property
    def note(self) -> str:
        """What the output says about the log."""
        if self.kept:
            return f"log kept in {self.path}"
        return "log removed after the run (--db FILE or --report DIR keeps it)"

    def remove(self) -> None:
        """Delete a log that is not kept, with its folder (WAL files and head beside it)."""
        if not self.kept:
            shutil.rmtree(self.path.parent, ignore_errors=True)


def backtest_log(db: Path | None, report_dir: Path | None) -> BacktestLog:
    """The log a backtest writes: ``db`` where given; else ``backtest.db`` in the report's
    folder, beside the page it was drawn from; else a temporary file, removed after the run
    (``BacktestLog.remove``). A report folder that cannot be made is a BacktestError."""
    if db is not None:
        return BacktestLog(db, kept=True)
    if report_dir is not None:
        try:
            report_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BacktestError(f"{report_dir}: cannot write the report: {exc}") from None
        return BacktestLog(report_dir / "backtest.db", kept=True)
    return BacktestLog(Path(tempfile.mkdtemp(prefix="arena-backtest-")) / "backtest.db", False)


# -- running and folding -------------------------------------------------------------------------


@dataclass
class BacktestResult:
    """A finished backtest: its plan, every cohort's state read from the log (each restored
    from its closing snapshot, checked, like a report's), and the log's digest. ``note`` says
    when a snapshot could not be used and the log was folded instead."""

    plan: BacktestPlan
    states: list[CohortState]
    digest: str
    db: Path
    note: str | None = None

    @property
    def agent_names(self) -> list[str]:
        return list(self.plan.agents)

    def brier_rows(self, agent: str) -> list[BrierRow]:
        """The agent's scored buys over every cohort, in cohort order."""
        return [row for state in self.states for row in state.books[agent].brier_rows]

    @cached_property
    def records(self) -> list[CohortRecord]:
        """Every cohort folded mark by mark for its equity curves: only the HTML page draws
        them, so only it pays for a fold of every event."""
        with EventStore.open(self.db, readonly=True) as store:
            return [fold_cohort(store, state.cohort) for state in self.states]


def run_backtest(
    plan: BacktestPlan,
    db: Path,
    options: RunOptions = DEFAULT_OPTIONS,
    *,
    on_done: Callable[[CohortDone], None] | None = None,
    on_decision: Watcher | None = None,
) -> BacktestResult:
    """Replay every cohort of the plan into ``db`` as ``options`` say, then read them back as
    a report does (``ledger.restore.load``: each closing snapshot, checked, and any tail)."""
    done = replay_cohorts(
        plan.source, plan.planned, db, options, on_done=on_done, on_decision=on_decision
    )
    cohorts = [d.cohort for d in done]
    with EventStore.open(db, readonly=True) as store:
        loaded = load(store, cohorts)
        digest = store.digest(streams=cohorts)
    states = [loaded.ledger.cohorts[cohort] for cohort in cohorts]
    return BacktestResult(plan, states, digest, db, loaded.note())


# -- results as data -----------------------------------------------------------------------------


def results_data(result: BacktestResult) -> dict[str, Any]:
    """The backtest as plain data: what ``--json`` prints and ``results.json`` holds."""
    plan = result.plan
    names = result.agent_names
    cohorts = []
    for state in result.states:
        agents = {}
        for s in cohort_standings(state):
            agents[s.agent] = {
                "return_pct": s.return_pct,
                "brier": s.brier,
                "bss": s.bss,
                "bss_market": s.bss_market,
                "win_rate": s.win_rate,
                "pnl": s.pnl,
                "total_value": s.total_value,
                "n_bets": s.n_bets,
                "n_resolved": s.n_resolved,
                "n_rejected": s.n_rejected,
                "n_errors": s.n_errors,
            }
        cohorts.append(
            {
                "cohort": state.cohort,
                "start": iso_utc(state.opened.start) if state.opened else None,
                "markets": len(state.markets),
                "universe_by": universe_volume(opened) if (opened := state.opened) else None,
                "decisions_stopped": stopped.reason if (stopped := state.stopped) else None,
                "agents": {name: agents[name] for name in names},
            }
        )
    states = result.states
    board = {row.agent: msgspec.to_builtins(row) for row in leaderboard(states)}
    summary = {name: {k: v for k, v in board[name].items() if k != "agent"} for name in names}
    paired = {
        name: paired_returns(states, STRATEGY, name)._asdict() for name in names if name != STRATEGY
    }
    beliefs = {name: b for name in names if (b := belief_scores(result.brier_rows(name)))}
    return {
        "strategy": plan.strategy,
        "against": list(plan.against),
        "tape": plan.source.tape.hash,
        "package_version": version("arena"),
        "settings": plan.settings(),
        "skipped_starts": [iso_utc(int(s.start.timestamp())) for s in plan.skipped],
        "skipped_why": {iso_utc(int(s.start.timestamp())): s.reason for s in plan.skipped},
        "cohorts": cohorts,
        "interval": interval_info(states, IntervalSettings()),
        "summary": summary,
        "paired": paired,
        "beliefs": beliefs or None,
        "digest": result.digest,
        "db": str(result.db),
    }
