"""One decision at a time: what an agent saw, what it decided, what filled, what changed.

Frames are cut from the log alone (folded with the same projection as everything else), so
stepping through a finished run shows exactly what happened in it: each frame opens at one of
the agent's decisions and runs until its next one, collecting the orders, rejections,
settlements and refunds in between, and the decision's model calls with what they cost (this
decision's and the agent's so far in the cohort).

A frame's portfolio is shown three times: ``before`` the decision, ``after`` its own orders at
the prices of that same instant (so a buy at the market price moves cash into shares without
gain or loss, as the report would value it then), and ``at_next``, at the next decision or the
cohort's end, valued at the marks of then. Valuing ``after`` at the next instant's prices made
a buy look like an instant gain. Prices are kept per outcome, with the outcome names the
market was listed with, so a multi-outcome market is never shown as if it had a YES price.

The functions here are the toolkit-free part of ``arena step``: the frames, and ``fit``, which
decides how many rows of each section a terminal of a given height can show.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from arena.step.timeline import folding
from ledger.events import (
    DecisionMade,
    DecisionsStopped,
    Event,
    MarketListed,
    MarketResolved,
    MarketVoided,
    ModelCalled,
    OrderFilled,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
    PromptStored,
)
from ledger.leaderboard import mean_brier, paid_brier
from ledger.projection import CohortState, side_index
from ledger.usage import ModelUsage


@dataclass(frozen=True)
class Portfolio:
    """The agent's account at one moment, with both Briers of its resolved bets, as the report
    gives them: the implied-confidence one alone ranks a loser of small bets first."""

    cash: float
    positions_value: float
    total_value: float
    brier: float | None  # implied confidence: the stake's size as the probability
    brier_paid: float | None  # the price paid as the probability risked
    n_resolved: int
    positions: tuple[tuple[str, str, float, float, float], ...]  # market, side, shares, cost, value


def brier_text(value: float | None) -> str:
    """A Brier as the step views show it: four decimals, or a dash before any bet resolved."""
    return "—" if value is None else f"{value:.4f}"


@dataclass(frozen=True)
class Seen:
    """One market as the agent saw it at the decision: its latest marked price per outcome."""

    market: str
    question: str
    volume: float
    prices: dict[str, float]  # outcome name -> price, in the market's outcome order

    @property
    def is_binary(self) -> bool:
        return sorted(o.lower() for o in self.prices) == ["no", "yes"]

    def price_of(self, side: str) -> float | None:
        """The price of the outcome a bet names, matched as the broker matches it."""
        found = side_index(list(self.prices), side)
        return None if found is None else list(self.prices.values())[found[1]]

    def label(self) -> str:
        """``YES 0.500`` for a binary market; every outcome by name otherwise."""
        if self.is_binary:
            return f"YES {self.price_of('yes'):.3f}"
        return " · ".join(f"{o} {p:.2f}" for o, p in self.prices.items())


@dataclass
class Frame:
    """One decision and its consequences until the next decision."""

    index: int
    decision: DecisionMade
    seen: dict[str, Seen]  # unresolved markets with a mark, biggest volume first
    before: Portfolio
    after: Portfolio | None = None  # after its own orders, at the decision instant's prices
    at_next: Portfolio | None = None  # at the next decision (or the end), at the marks then
    outcomes: list[Event] = field(default_factory=list)
    usage: ModelUsage = field(default_factory=ModelUsage)
    usage_so_far: ModelUsage = field(default_factory=ModelUsage)

    def as_dict(self) -> dict[str, Any]:
        from msgspec import to_builtins

        return {
            "index": self.index,
            "ts": self.decision.ts,
            "week": self.decision.week,
            "decision": to_builtins(self.decision),
            "seen": {m: s.prices for m, s in self.seen.items()},
            "before": to_builtins(self.before),
            "after": to_builtins(self.after),
            "at_next": to_builtins(self.at_next),
            "outcomes": [to_builtins(e) for e in self.outcomes],
            "model_usage": self.usage.as_dict() if self.usage.calls else None,
            "model_usage_so_far": self.usage_so_far.as_dict() if self.usage_so_far.calls else None,
        }


def portfolio(
    state: CohortState, agent: str, filled: dict[tuple[str, str], float] | None = None
) -> Portfolio:
    """The account, each position valued at its marked price, or at ``filled``'s price when
    it traded at this instant (the mark may be older than the decision)."""
    filled = filled or {}
    book = state.books[agent]
    rows = tuple(
        (p.market, p.side, p.shares, p.cost,
         p.shares * filled.get((p.market, p.side), state.side_price(p)))
        for p in book.positions.values()
    )  # fmt: skip
    value = sum((r[4] for r in rows), 0.0)
    scored = book.brier_rows
    return Portfolio(
        cash=book.cash,
        positions_value=value,
        total_value=book.cash + value,
        brier=mean_brier(scored),
        brier_paid=paid_brier(scored),
        n_resolved=len(scored),
        positions=rows,
    )


def _concerns(event: Event, agent: str) -> bool:
    if isinstance(event, MarketResolved | MarketVoided | DecisionsStopped):
        return True
    own = (OrderFilled, OrderRejected, PositionSettled, PositionRefunded)
    return isinstance(event, own) and event.agent == agent


def _own(event: Event, decision: DecisionMade) -> bool:
    """An event the runner wrote for ``decision`` right after it: its transcript (model calls,
    and a system prompt's text the first time one is used), then the broker's orders. A
    resolution, a mark or another agent's decision ends the run."""
    if event.ts != decision.ts:
        return False
    return isinstance(event, PromptStored) or getattr(event, "agent", None) == decision.agent


def _seen(state: CohortState, listed: dict[str, MarketListed]) -> dict[str, Seen]:
    shown = [
        Seen(market=m, question=listed[m].question, volume=listed[m].volume,
             prices=dict(zip(listed[m].outcomes, prices, strict=False)))
        for m, prices in state.marks.items()
        if m not in state.resolutions and m in listed
    ]  # fmt: skip
    return {s.market: s for s in sorted(shown, key=lambda s: (-s.volume, s.market))}


def frames(events: Iterable[Event], cohort: str, agent: str) -> list[Frame]:
    """Every decision of ``agent`` in ``cohort`` as a frame (empty if it never decided).

    ``events`` may be a whole log: other cohorts' events are skipped, since folding them would
    reopen the cohort's books. A resolved market keeps its last mark in the projection, but the
    agent no longer saw it, so ``seen`` leaves it out. Events that do not fold are a
    LedgerError (``arena.step.timeline.folding``).
    """
    return list(iter_frames(events, cohort, agent))


def iter_frames(events: Iterable[Event], cohort: str, agent: str) -> Iterator[Frame]:
    """``frames`` one at a time, each as soon as the fold has passed it (at the agent's next
    decision, or the end): printing a million-event log's frames starts at once and holds one
    frame, where the whole list took minutes and gigabytes before the first line."""
    with folding(cohort):
        yield from _frames(events, cohort, agent)


def _frames(events: Iterable[Event], cohort: str, agent: str) -> Iterator[Frame]:
    state = CohortState(cohort)
    listed: dict[str, MarketListed] = {}
    index = 0
    current: Frame | None = None
    so_far = ModelUsage()
    filled: dict[tuple[str, str], float] | None = None  # set while the decision's own events run
    for event in events:
        if event.cohort != cohort:
            continue
        if current is not None and filled is not None and not _own(event, current.decision):
            current.after, filled = portfolio(state, agent, filled), None
        if isinstance(event, MarketListed):
            listed[event.market] = event
        if isinstance(event, ModelCalled) and event.agent == agent and current is not None:
            current.usage.add(event)
            so_far.add(event)
            current.usage_so_far = so_far.copy()
        elif isinstance(event, DecisionMade) and event.agent == agent:
            if current is not None:
                current.at_next = portfolio(state, agent, {})
                yield current
            current = Frame(index, event, _seen(state, listed), portfolio(state, agent, {}))
            current.usage_so_far = so_far.copy()
            index += 1
            filled = {}
        elif current is not None and _concerns(event, agent):
            current.outcomes.append(event)
        state.apply(event)
        if filled is not None and isinstance(event, OrderFilled):
            filled[(event.market, event.side)] = event.price
    if current is not None:
        if filled is not None:
            current.after = portfolio(state, agent, filled)
        current.at_next = portfolio(state, agent, {})
        yield current


# -- fitting a frame into a terminal -------------------------------------------------------------

# Lines a rendered frame always takes: the panel's two borders, the titles of "what it saw",
# its column header, "decision" and "what happened", and the portfolio's header and five rows.
FIXED_LINES = 12
MIN_SEEN = 3  # even a busy decision shows the three biggest markets


@dataclass(frozen=True)
class Fit:
    """How many rows of each section a frame shows; the rest is summarised as "… N more"."""

    seen: int
    decision: int
    outcomes: int


def _cap(wanted: int, room: int) -> int:
    """Rows for a section of ``wanted`` lines in ``room``: all, or room - 1 plus a "more" line."""
    return wanted if wanted <= room else max(room - 1, 0)


def decision_lines(frame: Frame) -> int:
    """Lines the decision section wants: one per bet and sell, the reasoning, the error, and
    two for model usage (this decision's, the agent's so far) when it called a model."""
    d = frame.decision
    extra = bool(d.reasoning) + bool(d.error) + 2 * bool(frame.usage.calls)
    return len(d.bets) + len(d.sells) + extra


def fit(frame: Frame, height: int) -> Fit:
    """Share ``height`` lines (the whole frame, its borders included) among the sections.

    What happened and what was decided come first (up to a third of the free lines each),
    then the markets seen take what is left, at least ``MIN_SEEN``. A section that cannot show
    everything keeps one line for "… N more", so the frame never grows past ``height``.
    """
    free = max(height - FIXED_LINES, MIN_SEEN + 2)
    share = max((free - MIN_SEEN) // 2, 1)
    wanted_decision = max(decision_lines(frame), 1)
    wanted_outcomes = max(len(frame.outcomes), 1)
    decision_room = min(wanted_decision, share)
    outcomes_room = min(wanted_outcomes, share)
    seen_room = max(free - decision_room - outcomes_room, MIN_SEEN)
    return Fit(
        seen=_cap(len(frame.seen), seen_room),
        decision=_cap(wanted_decision, decision_room),
        outcomes=_cap(wanted_outcomes, outcomes_room),
    )
