"""A cohort's log as a line one can stand anywhere on: the state of the log cut at event N.

``arena step`` shows the view at a cut, never anything the runner kept to itself: the state at
cut N is the fold of the cohort's first N events, the same fold ``arena report`` runs, so what
the view shows at N is what a report of the log cut at N says. Moving forward folds only the
events between the two cuts; moving back copies the nearest checkpoint at or before the target
(``CohortState.copy``, taken every ``CHECKPOINT_EVERY`` events while folding forward) and folds
the rest, so stepping back costs a copy and at most that many events.

The *stops* are the cuts a person steps between: after each decision together with its orders
and model calls, after each resolution with its settlements, and the end of the log.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from ledger.events import (
    DecisionMade,
    Event,
    Marked,
    MarketListed,
    MarketResolved,
    MarketVoided,
    ModelCalled,
    OrderFilled,
    OrderPlaced,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
    PromptStored,
)
from ledger.projection import HANDLERS, CohortState

CHECKPOINT_EVERY = 5_000
"""Events between checkpoints: stepping back folds at most this many (measured by ``arena
bench step``)."""

_DECISION_TAIL = (OrderPlaced, OrderFilled, OrderRejected, ModelCalled, PromptStored)
_RESOLUTION_TAIL = (PositionSettled, PositionRefunded)


@dataclass(frozen=True)
class Stop:
    """A cut a person steps to: ``kind`` is decision, resolution or end; ``at`` the index of the
    event it is about (the decision or the resolution; for the end, the last event)."""

    cut: int
    kind: str
    at: int
    agent: str = ""
    week: int = 0


@dataclass
class MarkHistory:
    """One market's marks in log order: the event index of each, and its outcome prices."""

    index: list[int]
    prices: list[list[float]]

    def upto(self, cut: int) -> int:
        """How many of the marks lie before ``cut`` (so ``prices[:upto(cut)]`` were seen)."""
        return bisect_left(self.index, cut)


class Timeline:
    """One cohort's events, its stops, its mark history, and its state at any cut."""

    def __init__(self, events: Sequence[Event], cohort: str) -> None:
        self.events: list[Event] = list(events)
        self.cohort = cohort
        self.stops: list[Stop] = []
        self._cuts: list[int] = []
        self.marks: dict[str, MarkHistory] = {}
        self.decisions: dict[str, list[int]] = {}  # agent -> indices of its DecisionMade
        self.prompts: dict[str, str] = {}
        self.decision_end: dict[int, int] = {}  # a decision's index -> its stop's cut
        self.by_volume: list[str] = []  # every listed market, biggest volume first (ties by id)
        self._volume: dict[str, float] = {}
        self._index(0)
        self._checkpoints: dict[int, CohortState] = {}
        self._state = CohortState(cohort)
        self._cut = 0

    def extend(self, events: Sequence[Event]) -> None:
        """Events appended to the log since (a live replay's next step): index them and move
        the end stop. A step ends after a decision's or a resolution's whole tail, so no tail
        is split between two calls."""
        start = len(self.events)
        self.events.extend(events)
        self._index(start)

    def _index(self, start: int) -> None:
        events = self.events
        n = len(events)
        if self.stops and self.stops[-1].kind == "end":
            self.stops.pop()
        added: list[Stop] = []
        for i in range(start, n):
            e = events[i]
            if isinstance(e, Marked):
                for market, prices in zip(e.markets, e.prices, strict=True):
                    h = self.marks.get(market)
                    if h is None:
                        h = self.marks[market] = MarkHistory([], [])
                    h.index.append(i)
                    h.prices.append(prices)
            elif isinstance(e, DecisionMade):
                self.decisions.setdefault(e.agent, []).append(i)
                j = i + 1
                while j < n and _follows_decision(events[j], e.agent):
                    j += 1
                added.append(Stop(j, "decision", i, e.agent, e.week))
                self.decision_end[i] = j
            elif isinstance(e, MarketResolved | MarketVoided):
                j = i + 1
                while j < n and isinstance(events[j], _RESOLUTION_TAIL):
                    j += 1
                added.append(Stop(j, "resolution", i))
            elif isinstance(e, PromptStored):
                self.prompts[e.digest] = e.text
            elif isinstance(e, MarketListed):
                self._volume[e.market] = e.volume
        if len(self._volume) != len(self.by_volume):
            self.by_volume = sorted(self._volume, key=lambda m: (-self._volume[m], m))
        added.append(Stop(n, "end", n - 1))
        added.sort(key=lambda s: (s.cut, s.at))
        self.stops.extend(added)
        self._cuts = [s.cut for s in self.stops]

    # -- the state at a cut -------------------------------------------------------------------

    def state_at(self, cut: int) -> CohortState:
        """The fold of the first ``cut`` events. The returned state is the timeline's own and
        changes on the next call: read it, do not keep it."""
        cut = max(0, min(cut, len(self.events)))
        base = max((c for c in self._checkpoints if c <= cut), default=0)
        if cut < self._cut or base > self._cut:
            self._state = self._checkpoints[base].copy() if base else CohortState(self.cohort)
            self._cut = base
        self._fold_to(cut)
        return self._state

    def _fold_to(self, cut: int) -> None:
        state, events = self._state, self.events
        for i in range(self._cut, cut):
            e = events[i]
            if e.cohort == self.cohort:
                handler = HANDLERS.get(type(e))
                if handler is not None:
                    handler(state, e)
            if (i + 1) % CHECKPOINT_EVERY == 0 and i + 1 not in self._checkpoints:
                self._checkpoints[i + 1] = state.copy()
        self._cut = cut

    # -- moving between stops ----------------------------------------------------------------

    def stop_at(self, cut: int) -> Stop | None:
        """The stop whose cut is ``cut`` (the first, when several share it)."""
        k = bisect_left(self._cuts, cut)
        return self.stops[k] if k < len(self.stops) and self._cuts[k] == cut else None

    def following(self, cut: int, kind: str | None = None, agent: str | None = None) -> Stop | None:
        """The first stop after ``cut`` of that kind (and agent) in the events read so far."""
        for s in self.stops[bisect_right(self._cuts, cut) :]:
            if (kind is None or s.kind == kind) and (agent is None or s.agent == agent):
                return s
        return None

    def next_stop(self, cut: int, kind: str | None = None, agent: str | None = None) -> int:
        """The cut of the first stop after ``cut`` of that kind (and agent); the end if none."""
        found = self.following(cut, kind, agent)
        return found.cut if found is not None else len(self.events)

    def previous_stop(self, cut: int) -> int:
        """The cut of the last stop before ``cut``; 0 (nothing folded) if none."""
        k = bisect_left(self._cuts, cut)
        return self._cuts[k - 1] if k > 0 else 0

    def first_stop(self) -> int:
        return self._cuts[0] if self._cuts else 0

    def week_stop(self, week: int, agent: str | None = None) -> int | None:
        """The cut after the first decision of ``week`` (``agent``'s when it decided then)."""
        found = [s for s in self.stops if s.kind == "decision" and s.week == week]
        mine = [s for s in found if s.agent == agent]
        chosen = mine or found
        return chosen[0].cut if chosen else None

    def last_decision(self, agent: str, cut: int) -> int | None:
        """The index of ``agent``'s latest decision before ``cut``."""
        mine = self.decisions.get(agent, [])
        k = bisect_left(mine, cut)
        return mine[k - 1] if k > 0 else None


def _follows_decision(event: Event, agent: str) -> bool:
    """An event that belongs to the decision just made: its orders, fills, rejections and the
    model calls (with the prompts they first use) the decision logged after itself."""
    if isinstance(event, PromptStored):
        return True
    return isinstance(event, _DECISION_TAIL) and getattr(event, "agent", None) == agent
