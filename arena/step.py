"""One decision at a time: what an agent saw, what it decided, what filled, what changed.

Frames are cut from the log alone (folded with the same projection as everything else), so
stepping through a finished run shows exactly what happened in it: each frame opens at one of
the agent's decisions and runs until its next one, collecting the orders, rejections,
settlements and refunds in between, and the decision's model calls with what they cost (this
decision's and the agent's so far in the cohort).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ledger.events import (
    DecisionMade,
    DecisionsStopped,
    Event,
    MarketResolved,
    MarketVoided,
    ModelCalled,
    OrderFilled,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
)
from ledger.projection import CohortState
from ledger.usage import ModelUsage


@dataclass(frozen=True)
class Portfolio:
    """The agent's account at one moment."""

    cash: float
    positions_value: float
    total_value: float
    brier: float | None
    n_resolved: int
    positions: tuple[tuple[str, str, float, float, float], ...]  # market, side, shares, cost, value


@dataclass
class Frame:
    """One decision and its consequences until the next decision."""

    index: int
    decision: DecisionMade
    seen: dict[str, float]  # latest marked YES (first-outcome) price, per unresolved market
    before: Portfolio
    after: Portfolio | None = None
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
            "before": to_builtins(self.before),
            "after": to_builtins(self.after),
            "outcomes": [to_builtins(e) for e in self.outcomes],
            "model_usage": self.usage.as_dict() if self.usage.calls else None,
            "model_usage_so_far": self.usage_so_far.as_dict() if self.usage_so_far.calls else None,
        }


def _portfolio(state: CohortState, agent: str) -> Portfolio:
    book = state.books[agent]
    rows = tuple(
        (p.market, p.side, p.shares, p.cost, p.shares * state.side_price(p))
        for p in book.positions.values()
    )
    value = sum((r[4] for r in rows), 0.0)
    scored = book.brier_rows
    return Portfolio(
        cash=book.cash,
        positions_value=value,
        total_value=book.cash + value,
        brier=sum(r.brier for r in scored) / len(scored) if scored else None,
        n_resolved=len(scored),
        positions=rows,
    )


def _concerns(event: Event, agent: str) -> bool:
    if isinstance(event, MarketResolved | MarketVoided | DecisionsStopped):
        return True
    own = (OrderFilled, OrderRejected, PositionSettled, PositionRefunded)
    return isinstance(event, own) and event.agent == agent


def frames(events: Iterable[Event], cohort: str, agent: str) -> list[Frame]:
    """Every decision of ``agent`` in ``cohort`` as a frame (empty if it never decided).

    ``events`` may be a whole log: other cohorts' events are skipped, since folding them would
    reopen the cohort's books. A resolved market keeps its last mark in the projection, but the
    agent no longer saw it, so ``seen`` leaves it out.
    """
    state = CohortState(cohort)
    out: list[Frame] = []
    current: Frame | None = None
    so_far = ModelUsage()
    for event in events:
        if event.cohort != cohort:
            continue
        if isinstance(event, ModelCalled) and event.agent == agent and current is not None:
            current.usage.add(event)
            so_far.add(event)
            current.usage_so_far = so_far.copy()
        elif isinstance(event, DecisionMade) and event.agent == agent:
            if current is not None:
                current.after = _portfolio(state, agent)
            seen = {m: prices[0] for m, prices in state.marks.items() if m not in state.resolutions}
            current = Frame(len(out), event, seen, _portfolio(state, agent))
            current.usage_so_far = so_far.copy()
            out.append(current)
        elif current is not None and _concerns(event, agent):
            current.outcomes.append(event)
        state.apply(event)
    if current is not None:
        current.after = _portfolio(state, agent)
    return out
