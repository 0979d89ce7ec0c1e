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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import msgspec
import pydantic

from arena.cohort import (
    CohortConfig,
    Skipped,
    cadence_seconds,
    decides,
    describe_skipped,
    select_universe,
    split_starts,
    sundays,
)
from arena.equity import CohortRecord, fold_cohort
from arena.errors import ArenaError
from arena.replay import CohortDone, replay_cohorts
from arena.report import IntervalSettings, interval_info, iso_utc, universe_volume
from ledger.leaderboard import belief_scores, cohort_standings, leaderboard, paired_returns
from ledger.projection import BrierRow
from ledger.store import EventStore
from replays.tape import Tape
from strategies.loader import AgentSpec, build_strategy

STRATEGY = "strategy"
"""The name the backtested strategy trades under, whatever its spec: paths and query strings
are not valid agent names, and a fixed name cannot clash with a comparison agent's kind."""

DEFAULT_AGAINST = ("hold", "favourite", "random")


class BacktestError(ArenaError, ValueError):
    """Settings a backtest cannot run with; the message is one line for the CLI."""


@dataclass(frozen=True)
class BacktestPlan:
    """Everything that shapes a backtest's results, validated, before any cohort runs."""

    strategy: str
    against: tuple[str, ...]
    tape_path: Path
    tape_hash: str
    starts: tuple[datetime, ...]
    universe: int
    cash: float
    rules: str
    decision_cadence: str
    mark_cadence: str
    seed: int
    skipped: tuple[Skipped, ...] = ()
    """Asked-for starts with nothing to decide, left out, each with its reason."""

    @property
    def agents(self) -> dict[str, str]:
        """Agent name -> spec: the strategy first, then each comparison agent by its kind."""
        return {STRATEGY: self.strategy, **{AgentSpec.parse(s).kind: s for s in self.against}}

    def configs(self) -> list[CohortConfig]:
        return [
            CohortConfig(
                start=start,
                agents=self.agents,
                universe=self.universe,
                cash=self.cash,
                rules=self.rules,  # type: ignore[arg-type]
                decision_cadence=self.decision_cadence,
                mark_cadence=self.mark_cadence,
                seed=self.seed,
            )
            for start in self.starts
        ]

    def settings(self) -> dict[str, Any]:
        """The run's settings as plain data (the worker count is left out: it changes nothing)."""
        return {
            "strategy": self.strategy,
            "against": list(self.against),
            "agents": self.agents,
            "tape_path": str(self.tape_path),
            "starts": [iso_utc(int(s.timestamp())) for s in self.starts],
            "universe": self.universe,
            "cash": self.cash,
            "rules": self.rules,
            "decision_cadence": self.decision_cadence,
            "mark_cadence": self.mark_cadence,
            "seed": self.seed,
        }


def default_starts(tape: Tape, universe: int, decision_cadence: str = "weekly") -> list[datetime]:
    """Every Sunday of the tape on which a cohort gets a full universe (and so decides).

    "Full" is ``universe`` markets, or as many as the busiest Sunday offers if that is fewer:
    Sundays where only a handful of early or late markets trade would otherwise dominate the
    mean with cohorts that hardly test anything (on the embedded sample this keeps the 26
    Sundays 2024-05-12..2024-11-03 out of 96).
    """
    first, last = tape.span()
    candidates = sundays(datetime.fromtimestamp(first, UTC), datetime.fromtimestamp(last, UTC))
    chosen = [select_universe(tape, int(s.timestamp()), universe) for s in candidates]
    full = min(universe, max(map(len, chosen), default=0))
    return [
        s
        for s, markets in zip(candidates, chosen, strict=True)
        if markets
        and len(markets) >= full
        and decides(tape, markets, int(s.timestamp()), decision_cadence)
    ]


def plan_backtest(
    strategy: str,
    against: Sequence[str],
    tape: Tape,
    tape_path: Path,
    starts: Sequence[datetime] | None = None,
    *,
    universe: int = 500,
    cash: float = 10_000.0,
    rules: str = "v1",
    decision_cadence: str = "weekly",
    mark_cadence: str = "daily",
    seed: int = 0,
) -> BacktestPlan:
    """Check every spec loads and every start has markets; raise BacktestError otherwise.

    Raises StrategyError (one line) for a spec that does not load.
    """
    if universe < 1:
        raise BacktestError(f"universe must be at least 1 market, got {universe}")
    kinds: list[str] = []
    for spec in against:
        kind = AgentSpec.parse(spec).kind
        if kind == STRATEGY or kind in kinds:
            raise BacktestError(f"--against names {kind!r} twice (or as the strategy's name)")
        kinds.append(kind)
    for spec in (strategy, *against):
        build_strategy(spec)  # fail fast, before any worker starts
    try:
        cadence_seconds(decision_cadence)  # the starts are checked against it, just below
    except ValueError as exc:
        raise BacktestError(str(exc)) from None
    skipped: list[Skipped] = []
    if starts is None:  # every default start has a universe and a decision already
        chosen = default_starts(tape, universe, decision_cadence)
    else:
        chosen, skipped = split_starts(tape, starts, universe, decision_cadence)
    if not chosen and not skipped:
        raise BacktestError(f"tape {tape.hash[:12]} has no Sunday with an open, priced market")
    if not chosen:
        first, last = (iso_utc(t)[:10] for t in tape.span())
        raise BacktestError(
            f"nothing to decide: {describe_skipped(skipped, limit=3)} "
            f"(the tape runs {first}..{last})"
        )
    plan = BacktestPlan(
        strategy=strategy,
        against=tuple(against),
        tape_path=tape_path,
        tape_hash=tape.hash,
        starts=tuple(chosen),
        universe=universe,
        cash=cash,
        rules=rules,
        decision_cadence=decision_cadence,
        mark_cadence=mark_cadence,
        seed=seed,
        skipped=tuple(skipped),
    )
    try:
        plan.configs()
    except pydantic.ValidationError as exc:  # a bad cadence, cash, rules or agent name
        problem = exc.errors()[0]
        where = ".".join(str(x) for x in problem["loc"])
        raise BacktestError(f"{where}: {problem['msg']}" if where else problem["msg"]) from None
    return plan


# -- running and folding -------------------------------------------------------------------------


@dataclass
class BacktestResult:
    """A finished backtest: its plan, every cohort folded from the log, and the log's digest."""

    plan: BacktestPlan
    records: list[CohortRecord]
    digest: str
    db: Path

    @property
    def agent_names(self) -> list[str]:
        return list(self.plan.agents)

    def brier_rows(self, agent: str) -> list[BrierRow]:
        """The agent's scored buys over every cohort, in cohort order."""
        return [row for r in self.records for row in r.state.books[agent].brier_rows]


def run_backtest(
    plan: BacktestPlan,
    db: Path,
    *,
    jobs: int = 1,
    decision_timeout: float = 0.0,
    isolate: bool = False,
    on_done: Callable[[CohortDone], None] | None = None,
) -> BacktestResult:
    """Replay every cohort of the plan into ``db`` (in parallel), then fold them from the log."""
    done = replay_cohorts(
        plan.tape_path, plan.configs(), db, jobs=jobs, decision_timeout=decision_timeout,
        isolate=isolate, on_done=on_done,
    )  # fmt: skip
    cohorts = [d.cohort for d in done]
    with EventStore.open(db, readonly=True) as store:
        records = [fold_cohort(store, cohort) for cohort in cohorts]
        digest = store.digest(streams=cohorts)
    return BacktestResult(plan, records, digest, db)


# -- results as data -----------------------------------------------------------------------------


def results_data(result: BacktestResult) -> dict[str, Any]:
    """The backtest as plain data: what ``--json`` prints and ``results.json`` holds."""
    plan = result.plan
    names = result.agent_names
    cohorts = []
    for record in result.records:
        agents = {}
        for s in cohort_standings(record.state):
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
                "cohort": record.state.cohort,
                "start": iso_utc(record.start),
                "markets": len(record.state.markets),
                "universe_by": universe_volume(opened) if (opened := record.state.opened) else None,
                "decisions_stopped": stopped.reason if (stopped := record.state.stopped) else None,
                "agents": {name: agents[name] for name in names},
            }
        )
    states = [r.state for r in result.records]
    board = {row.agent: msgspec.to_builtins(row) for row in leaderboard(states)}
    summary = {name: {k: v for k, v in board[name].items() if k != "agent"} for name in names}
    paired = {
        name: paired_returns(states, STRATEGY, name)._asdict() for name in names if name != STRATEGY
    }
    beliefs = {name: b for name in names if (b := belief_scores(result.brier_rows(name)))}
    return {
        "strategy": plan.strategy,
        "against": list(plan.against),
        "tape": plan.tape_hash,
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
