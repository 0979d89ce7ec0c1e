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

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from arena.engines.base import TapeSource
from arena.errors import ArenaError
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from ledger.events import CohortOpened, DecisionMade, Event
from ledger.leaderboard import cohort_standings
from strategies.api import Decision, Strategy, View


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


def rungs(books: bool, spread_ticks: int = 2, latency_ms: int = 0) -> list[Rung]:
    """The ladder for a run with or without recorded books."""
    if not books:
        touch = f"touch?spread_ticks={spread_ticks}"
        return [
            Rung("fa", "fa", "none", 0, ""),
            Rung("mid", "mid", "none", 0, "the midpoint"),
            Rung(f"touch ({spread_ticks} ticks, synthetic)", touch, "none", 0, "the spread"),
            Rung("touch + fees", touch, "auto", 0, "the fee"),
        ]
    ladder = [
        Rung("fa", "fa", "none", 0, ""),
        Rung("mid", "mid", "none", 0, "the midpoint"),
        Rung("touch", "touch", "none", 0, "the spread"),
        Rung("l2", "l2", "none", 0, "the depth"),
        Rung("l2 + fees", "l2", "auto", 0, "the fee"),
    ]
    if latency_ms:
        ladder.append(Rung(f"l2 + fees + {latency_ms} ms", "l2", "auto", latency_ms, "the delay"))
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
    rungs: list[Rung]
    rows: list[LadderRow]

    def as_data(self) -> dict[str, Any]:
        names = [r.name for r in self.rungs]
        return {
            "rungs": [{"name": r.name, "execution": r.execution, "fees": r.fees,
                       "latency_ms": r.latency_ms, "took": r.took} for r in self.rungs],
            "agents": [
                {"cohort": row.cohort, "agent": row.agent,
                 "pnl": dict(zip(names, row.pnl, strict=True)),
                 "took": {r.took: row.pnl[k - 1] - row.pnl[k]
                          for k, r in enumerate(self.rungs) if k}}
                for row in self.rows
            ],
        }  # fmt: skip


def climb(events: Iterable[Event], source: TapeSource, ladder: list[Rung]) -> Ladder:
    """Every cohort of ``events`` (a log read in order) replayed on each rung of ``ladder``
    with its agents' recorded decisions."""
    opened: dict[str, CohortOpened] = {}
    decided: dict[str, dict[str, dict[int, Decision]]] = {}
    for event in events:
        if isinstance(event, CohortOpened):
            opened[event.cohort] = event
            decided[event.cohort] = {agent: {} for agent in event.agents}
        elif isinstance(event, DecisionMade) and event.cohort in decided:
            decided[event.cohort][event.agent][event.ts] = Decision(
                bets=list(event.bets), sells=list(event.sells)
            )
    rows = []
    for cohort, opening in opened.items():
        if opening.tape != source.tape.hash:
            raise LadderError(
                f"cohort {cohort} ran on tape {opening.tape[:12]}, not {source.tape.hash[:12]}"
            )
        pnl: dict[str, list[float]] = {agent: [] for agent in opening.agents}
        for rung in ladder:
            config = _config(opening, rung, source)
            plays: dict[str, Strategy] = {a: Playback(decided[cohort][a]) for a in opening.agents}
            books = source.books if config.books is not None else None
            state = CohortRunner(source.tape, config, strategies=plays, books=books).run().state
            for standing in cohort_standings(state):
                pnl[standing.agent].append(standing.pnl)
        rows += [LadderRow(cohort, agent, values) for agent, values in pnl.items()]
    return Ladder(ladder, rows)


def _config(opening: CohortOpened, rung: Rung, source: TapeSource) -> CohortConfig:
    """The cohort as it opened, on ``rung``."""
    if source.books is None and rung.execution == "l2":
        raise LadderError(f"rung {rung.name} needs order books (--books)")
    booked = source.books is not None and rung.execution != "fa"  # mid: the book's midpoint
    return CohortConfig(
        start=datetime.fromtimestamp(opening.start, UTC),
        agents={a: opening.agent_specs.get(a, "hold") for a in opening.agents},
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
    )
