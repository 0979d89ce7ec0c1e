"""The realism ladder: a run's own decisions met again by more and more of the real market.

A log records what each agent decided at each instant. Replayed with those decisions played
back as they were (``Playback``), under one execution model after another, the only thing that
changes from one rung to the next is what the order meets, so the difference in P/L is what
that step of realism took from the agent:

* ``fa``, the tape's price, whole: Forecaster Arena's rule and the log's own figures when the
  run used it;
* ``mid``, the midpoint (on a price tape, the tape's price taken as it): what the price the
  tape recorded was not;
* ``touch``, the best ask or bid: the spread (on a price tape, a synthetic spread of
  ``spread_ticks`` around the price, said so);
* ``l2``, a walk of the book: the depth (with books only);
* fees, Polymarket's schedule: the fee;
* latency, the book when the order arrives: the delay (with books and a latency only).

Every rung is a replay in memory: nothing is written, and the run's own log is only read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from arena.backtests.depth import CENTS, BetDepth, bet_depths, by_agent
from arena.backtests.edge import AgentEdge, agent_edges
from arena.engines.base import TapeSource
from arena.errors import ArenaError
from arena.run.cohort import CohortConfig
from arena.run.execution import latency_settings, schedule
from arena.run.runner import CohortRunner
from arena.run.settings import cohort_configs
from ledger.events import CohortOpened, DecisionMade, Event, OrderFilled
from ledger.leaderboard import belief_scores, cohort_standings
from ledger.stream import MemorySink
from strategies.api import Decision, Strategy, Trace, View


class LadderError(ArenaError, ValueError):
    """A log the ladder cannot replay (a cohort it has no tape or books for)."""


@dataclass(frozen=True)
class Rung:
    """One step: its name, the settings it runs with, and what going to it from the rung
    before costs (``took``)."""

    name: str
    execution: str
    fees: str
    latency_ms: int
    took: str
    latency: dict[str, Any] = field(default_factory=dict)
    """The rung's other latency settings (``latency``: llm, ``latency_by_agent``)."""


def rungs(books: bool, spread_ticks: int = 2, latency: str = "0", fees: str = "auto") -> list[Rung]:
    """The ladder for a run with or without recorded books; its fee rungs charge ``fees``
    (Polymarket's schedule, or a user's fee table file), and with books a last rung waits
    ``latency`` (as ``--latency`` takes it: MS, llm, FILE, llm+MS, llm+FILE)."""
    try:
        schedule(fees)
        delay = latency_settings(latency)
    except ValueError as exc:
        raise LadderError(str(exc)) from None
    latency_ms = delay.pop("latency_ms")
    if not books:
        touch = f"touch?spread_ticks={spread_ticks}"
        return [
            Rung("fa", "fa", "none", 0, ""),
            Rung("mid", "mid", "none", 0, "the midpoint"),
            Rung(f"touch ({spread_ticks} ticks, synthetic)", touch, "none", 0, "the spread"),
            Rung("touch + fees", touch, fees, 0, "the fee"),
        ]
    ladder = [
        Rung("fa", "fa", "none", 0, ""),
        Rung("mid", "mid", "none", 0, "the midpoint"),
        Rung("touch", "touch", "none", 0, "the spread"),
        Rung("l2", "l2", "none", 0, "the depth"),
        Rung("l2 + fees", "l2", fees, 0, "the fee"),
    ]
    if latency_ms or delay["latency"] or delay["latency_by_agent"]:
        waits = [f"{latency_ms} ms"] if latency_ms else []
        waits += ["model time"] if delay["latency"] else []
        waits += ["per agent"] if delay["latency_by_agent"] else []
        name = f"l2 + fees + {' + '.join(waits)}"
        ladder.append(Rung(name, "l2", fees, latency_ms, "the delay", delay))
    return ladder


class Playback(Strategy):
    """An agent's recorded decisions, made again at their instants, whatever it sees now."""

    description = "plays back an agent's decisions from a log"

    def __init__(self, decisions: dict[int, Decision]) -> None:
        super().__init__()
        self.decisions = decisions

    def decide(self, view: View) -> Decision:
        return self.decisions.get(view.ts, Decision.hold("no decision recorded at this instant"))


@dataclass(frozen=True)
class LadderRow:
    """One agent of one cohort: its P/L on each rung."""

    cohort: str
    agent: str
    pnl: list[float]


@dataclass(frozen=True)
class Ladder:
    """Every agent's P/L on each rung; with books, the depth near the price each bet was shown
    (``arena.backtests.depth``); for forecasters, the edge shown and the edge left after the
    last rung (``arena.backtests.edge``)."""

    rungs: list[Rung]
    rows: list[LadderRow]
    bets: list[BetDepth] = field(default_factory=list)
    edges: list[AgentEdge] = field(default_factory=list)

    def as_data(self) -> dict[str, Any]:
        names = [r.name for r in self.rungs]
        return {
            "rungs": [{"name": r.name, "execution": r.execution, "fees": r.fees,
                       "latency_ms": r.latency_ms, **r.latency, "took": r.took}
                      for r in self.rungs],
            "agents": [
                {"cohort": row.cohort, "agent": row.agent,
                 "pnl": dict(zip(names, row.pnl, strict=True)),
                 "took": {r.took: cost for r, cost in
                          zip(self.rungs[1:], step_costs(row.pnl), strict=True)}}
                for row in self.rows
            ],
            "depth": {
                "cents": list(CENTS),
                "agents": [asdict(a) for a in by_agent(self.bets)],
                "bets": [asdict(b) for b in self.bets],
            },
            "edge": [asdict(e) for e in self.edges],
        }  # fmt: skip


def step_costs(pnl: Sequence[float]) -> list[float]:
    """What each step took from P/L ``pnl`` (one figure a rung): the P/L on the rung before
    less the P/L on the rung after, so a cost is positive and a step that added is negative.
    The one sign the ladder's JSON, tables and chart all give it (the page's chart once drew
    the spread's 41.17 as -41.17)."""
    return [before - after for before, after in itertools.pairwise(pnl)]


def pnl_text(x: float) -> str:
    """A rung's P/L as every rendering of the ladder writes it."""
    return f"{x:+,.2f}"


def cost_text(x: float) -> str:
    """A step's cost (``step_costs``) as every rendering of the ladder writes it: unsigned
    when it took, "-" where it added."""
    return f"{x:,.2f}"


def steps_note(ladder: Sequence[Rung]) -> str:
    """What the cost columns are, naming the steps of ``ladder``: the rungs this ladder climbed,
    not every rung a ladder can have."""
    steps = "; → ".join(f"{rung.name}: {rung.took}" for rung in ladder[1:])
    return (
        "cost ($) is the P/L a step took from the rung before (negative: it added): "
        f"{ladder[0].name} → {steps}"
    )


def mean_pnl(rows: Iterable[LadderRow]) -> dict[str, list[float]]:
    """Each agent's P/L on each rung, the mean over its cohorts, agents by name."""
    by_agent: dict[str, list[list[float]]] = {}
    for row in rows:
        by_agent.setdefault(row.agent, []).append(row.pnl)
    return {
        agent: [sum(values) / len(runs) for values in zip(*runs, strict=True)]
        for agent, runs in sorted(by_agent.items())
    }


def climb(events: Iterable[Event], source: TapeSource, ladder: list[Rung]) -> Ladder:
    """Every cohort of ``events`` (a log read in order) replayed on each rung of ``ladder``
    with its agents' recorded decisions."""
    events = list(events)
    opened: dict[str, CohortOpened] = {}
    decided: dict[str, dict[str, dict[int, Decision]]] = {}
    for event in events:
        if isinstance(event, CohortOpened):
            opened[event.cohort] = event
            decided[event.cohort] = {agent: {} for agent in event.agents}
        elif isinstance(event, DecisionMade) and event.cohort in decided:
            decided[event.cohort][event.agent][event.ts] = Decision(
                bets=list(event.bets),
                sells=list(event.sells),
                trace=Trace(latency_ms=event.latency_ms),  # the model's time, as recorded
            )
    rows, edges = [], []
    for cohort, opening in opened.items():
        if opening.tape != source.tape.hash:
            raise LadderError(
                f"cohort {cohort} ran on tape {opening.tape[:12]}, not {source.tape.hash[:12]}"
            )
        pnl: dict[str, list[float]] = {agent: [] for agent in opening.agents}
        fills: list[dict[str, list[OrderFilled]]] = []
        brier: dict[str, float | None] = {}
        for rung in ladder:
            config = _config(opening, rung, source)
            plays: dict[str, Strategy] = {a: Playback(decided[cohort][a]) for a in opening.agents}
            books = source.books if config.books is not None else None
            sink = MemorySink()
            run = CohortRunner(source.tape, config, strategies=plays, books=books).run(sink)
            for standing in cohort_standings(run.state):
                pnl[standing.agent].append(standing.pnl)
                if standing.agent not in brier:  # the stated beliefs' Brier, on the first rung
                    scores = belief_scores(run.state.books[standing.agent].brier_rows)
                    brier[standing.agent] = None if scores is None else float(scores["brier"])  # type: ignore[arg-type]
            made: dict[str, list[OrderFilled]] = {}
            for event in sink.read(run.cohort):
                if isinstance(event, OrderFilled):
                    made.setdefault(event.agent, []).append(event)
            fills.append(made)
        rows += [LadderRow(cohort, agent, values) for agent, values in pnl.items()]
        edges += agent_edges(cohort, fills[0], fills[-1], brier)
    bets = bet_depths(events, source.tape, source.books) if source.books is not None else []
    return Ladder(ladder, rows, bets, edges)


def _config(opening: CohortOpened, rung: Rung, source: TapeSource) -> CohortConfig:
    """The cohort as it opened, on ``rung``; settings it cannot take (a latency file naming
    an agent it does not have) are one ``SettingsError``."""
    if source.books is None and rung.execution == "l2":
        raise LadderError(f"rung {rung.name} needs order books (--books)")
    booked = source.books is not None and rung.execution != "fa"  # mid: the book's midpoint
    # how the run met the books, where this rung meets them too (an fa rung meets none)
    met = {k: opening.settings[k] for k in ("liquidity", "marks_at") if k in opening.settings}
    [config] = cohort_configs(
        [datetime.fromtimestamp(opening.start, UTC)],
        {a: opening.agent_specs.get(a, "hold") for a in opening.agents},
        universe=int(opening.settings.get("universe_size", len(opening.universe) or 1)),
        cash=opening.cash,
        rules=opening.rules,
        decision_cadence=opening.decision_cadence,
        mark_cadence=opening.mark_cadence,
        seed=opening.seed,
        execution=rung.execution,
        fees=rung.fees,
        books=source.books.hash if booked and source.books is not None else None,
        latency_ms=rung.latency_ms,
        listing=opening.settings.get("listing", "start"),  # markets that joined as they listed
        **(met if booked else {}),
        **rung.latency,
    )
    return config
