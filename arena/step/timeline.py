"""A cohort's log as a line one can stand anywhere on: the state of the log cut at event N.

``arena step`` shows the view at a cut, never anything the runner kept to itself: the state at
cut N is the fold of the cohort's first N events, the same fold ``arena report`` runs, so what
the view shows at N is what a report of the log cut at N says. Moving forward folds only the
events between the two cuts; moving back starts from the nearest *base* at or before the
target and folds the rest. The bases are the log's own snapshots (restored only when first
needed, and checked as ``arena report`` checks them) and the checkpoints this timeline keeps,
every ``CHECKPOINT_EVERY`` events, whenever a fold passes one. ``warm`` lays the checkpoints
down a slice at a time while nobody is waiting (the app calls it when idle), so that stepping
back anywhere costs a copy and at most that many events.

The events may be a list (a live replay's, read so far) or a sequence that reads a finished
log from SQLite a page at a time (``arena.step.log``); nothing here reads more of it than a
fold or a view needs.

The *stops* are the cuts a person steps between: after each decision together with what
follows it up to the next fact (its orders, fills, rejections, model calls and the prompts
they first use), after each resolution with its settlements and refunds, and the end of the
log. The index of stops, decisions and mark history is made from the *facts* alone (every
event but those that follow a decision or a resolution), which a finished log's reader
gets from one scan of SQLite without decoding the fills.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import msgspec

from ledger.errors import LedgerError
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
from ledger.projection import HANDLERS, CohortState, FoldEvent
from ledger.rebuild import cycle_collector_paused
from ledger.snapshot import SnapshotError

CHECKPOINT_EVERY = 5_000
"""Events between checkpoints: stepping back folds at most this many (measured by ``arena
bench step``)."""

FOLD_CHUNK = 1_000
"""Events in a finished log's page, and in a slice of ``warm`` (a few milliseconds: a key
pressed meanwhile waits for no more)."""

TAIL_TYPES = (
    OrderPlaced, OrderFilled, OrderRejected, ModelCalled, PromptStored, PositionSettled,
    PositionRefunded,
)  # fmt: skip
"""What follows a decision or a resolution as part of it; every other event is a *fact*
that ends it. ``PromptStored`` is a tail event that the index still reads (for its text)."""


class Decided(msgspec.Struct, frozen=True, tag_field="type", tag="DecisionMade"):
    """What the index needs of a decision: whose it is and its week. A finished log's scan
    decodes a ``DecisionMade`` payload as this, skipping the rest (its bets, its reasoning);
    a view decodes the decision itself when it shows it."""

    agent: str
    week: int


Fact = tuple[int, Event | Decided]
"""An event's index in the cohort's events, and the event (a decision may be a ``Decided``)."""


def facts_of(events: Sequence[Event], start: int = 0) -> Iterable[Fact]:
    """The facts among ``events[start:]``, and the prompts (see ``TAIL_TYPES``)."""
    for i in range(start, len(events)):
        e = events[i]
        if not isinstance(e, TAIL_TYPES) or isinstance(e, PromptStored):
            yield i, e


class Stop(NamedTuple):
    """A cut a person steps to: ``kind`` is decision, resolution or end; ``at`` the index of the
    event it is about (the decision or the resolution; for the end, the last event). A tuple:
    a million-event log has a few hundred thousand, made while the first screen waits."""

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


@contextmanager
def folding(cohort: str, where: str = "") -> Iterator[None]:
    """A fold of a log whose links hold but whose facts do not (a fill for an agent never
    opened, written so by a buggy or hostile writer) ends as the one-line LedgerError the
    CLI's edge prints, not a traceback."""
    try:
        yield
    except (KeyError, ValueError, TypeError) as exc:
        raise LedgerError(
            f"cohort {cohort} does not fold{where} ({exc}); run 'arena verify' on its log"
        ) from None


FoldSource = Callable[[int, int], Sequence[Event | FoldEvent]]
"""Events ``low`` to ``high`` (exclusive) of a cohort, as a fold reads them."""

Restore = Callable[[], CohortState]
"""A base not yet read: a log snapshot's state, restored (and checked) when first needed;
SnapshotError when it cannot be used."""


@dataclass
class _Fold:
    """A state and the cut it is the fold of."""

    state: CohortState
    cut: int


@dataclass
class LogTimeline:
    """One cohort's events, its stops, its mark history, and its state at any cut.

    ``facts`` are the events' facts (``facts_of(events)`` unless a reader scanned them from
    the log), ``snapshots`` the log's snapshots by the cut they were taken at, ``fold_events``
    the events from one index to another as the fold reads them (a finished log's reader
    leaves out what the fold passes by; by default the events themselves)."""

    events: Sequence[Event]
    cohort: str
    facts: Iterable[Fact] | None = None
    snapshots: dict[int, Restore] = field(default_factory=dict)
    fold_events: FoldSource | None = None
    stops: list[Stop] = field(default_factory=list, init=False)
    marks: dict[str, MarkHistory] = field(default_factory=dict, init=False)
    decisions: dict[str, list[int]] = field(default_factory=dict, init=False)
    """agent -> indices of its decisions"""
    prompts: dict[str, str] = field(default_factory=dict, init=False)
    decision_end: dict[int, int] = field(default_factory=dict, init=False)
    """a decision's index -> its stop's cut"""
    by_volume: list[str] = field(default_factory=list, init=False)
    """every listed market, biggest volume first (ties by id)"""
    notes: list[str] = field(default_factory=list, init=False)
    """why a log snapshot was passed over (the state was folded from the log instead)"""

    def __post_init__(self) -> None:
        self._cuts: list[int] = []
        self._volume: dict[str, float] = {}
        self._open: tuple[int, str, Decided | None] | None = None  # the last stop, not ended
        self._index(facts_of(self.events) if self.facts is None else self.facts)
        self.facts = None
        self._checkpoints: dict[int, CohortState] = {}
        self._fold = _Fold(CohortState(self.cohort), 0)
        self._warming: tuple[_Fold, int] | None = None  # a warm-up fold and where it stops
        self._warmed: _Fold | None = None  # the last warm-up fold, ended on a checkpoint

    def extend(self, events: Sequence[Event]) -> None:
        """Events appended to the log since (a live replay's next step): index them and move
        the end stop. A step ends after a decision's or a resolution's whole tail, so no tail
        is split between two calls."""
        assert isinstance(self.events, list), "only a live replay's timeline grows"
        start = len(self.events)
        self.events.extend(events)
        self._index(facts_of(self.events, start))

    def _index(self, facts: Iterable[Fact]) -> None:
        n = len(self.events)
        if self.stops and self.stops[-1].kind == "end":
            self.stops.pop()
        added: list[Stop] = []
        for i, e in facts:
            if isinstance(e, PromptStored):
                self.prompts[e.digest] = e.text
                continue
            self._end_open(i, added)
            if isinstance(e, Marked):
                for market, prices in zip(e.markets, e.prices, strict=True):
                    h = self.marks.get(market)
                    if h is None:
                        h = self.marks[market] = MarkHistory([], [])
                    h.index.append(i)
                    h.prices.append(prices)
            elif isinstance(e, Decided | DecisionMade):
                decided = e if isinstance(e, Decided) else Decided(e.agent, e.week)
                self.decisions.setdefault(decided.agent, []).append(i)
                self._open = (i, "decision", decided)
            elif isinstance(e, MarketResolved | MarketVoided):
                self._open = (i, "resolution", None)
            elif isinstance(e, MarketListed):
                self._volume[e.market] = e.volume
        self._end_open(n, added)
        if len(self._volume) != len(self.by_volume):
            self.by_volume = sorted(self._volume, key=lambda m: (-self._volume[m], m))
        added.append(Stop(n, "end", n - 1))
        self.stops.extend(added)
        self._cuts = [s.cut for s in self.stops]

    def _end_open(self, cut: int, added: list[Stop]) -> None:
        """The stop of the last decision or resolution, which the fact at ``cut`` (or the end
        of the events read so far: a live replay's step ends after a whole tail) ends."""
        if self._open is None:
            return
        at, kind, decided = self._open
        if decided is not None:
            added.append(Stop(cut, kind, at, decided.agent, decided.week))
            self.decision_end[at] = cut
        else:
            added.append(Stop(cut, kind, at))
        self._open = None

    # -- the state at a cut -------------------------------------------------------------------

    def state_at(self, cut: int) -> CohortState:
        """The fold of the first ``cut`` events. The returned state is the timeline's own and
        changes on the next call: read it, do not keep it. LedgerError if the log's events do
        not fold (or, read from SQLite, do not hold together)."""
        self.fold_towards(cut)
        return self._fold.state

    def fold_towards(self, cut: int, budget: int | None = None) -> bool:
        """Move the fold a view reads towards ``cut``, by at most ``budget`` events (all the
        way without one); True once ``state_at(cut)`` has nothing left to fold. A screen that
        must not freeze on a far jump folds there a slice at a time between keys."""
        cut = max(0, min(cut, len(self.events)))
        base = self._base(cut)
        if cut < self._fold.cut or base > self._fold.cut:
            self._fold = self._fold_from(base)
        self._fold_to(self._fold, cut if budget is None else min(cut, self._fold.cut + budget))
        return self._fold.cut == cut

    def distance(self, cut: int) -> int:
        """How many events ``state_at(cut)`` would fold: from the fold a view last read, when
        it lies at or before ``cut`` and after every base, else from the nearest base (a log
        snapshot not yet restored counts as a base: restoring it is one read)."""
        cut = max(0, min(cut, len(self.events)))
        base = max(
            max((c for c in self._checkpoints if c <= cut), default=0),
            max((c for c in self.snapshots if c <= cut), default=0),
        )
        return cut - max(base, self._fold.cut) if self._fold.cut <= cut else cut - base

    def _base(self, cut: int) -> int:
        """The cut of the newest base at or before ``cut``: a checkpoint, a log snapshot
        (restored now and kept as a checkpoint), or 0, the empty state."""
        while True:
            kept = max((c for c in self._checkpoints if c <= cut), default=0)
            newest = max((c for c in self.snapshots if c <= cut), default=0)
            if newest <= kept:
                return kept
            restore = self.snapshots.pop(newest)
            try:
                with cycle_collector_paused(keep=True):
                    self._checkpoints[newest] = restore()
            except SnapshotError as exc:
                self.notes.append(f"the snapshot after event {newest} is unusable: {exc}")

    def _fold_from(self, base: int) -> _Fold:
        state = self._checkpoints[base].copy() if base else CohortState(self.cohort)
        return _Fold(state, base)

    def _fold_to(self, fold: _Fold, cut: int) -> None:
        """Fold ``fold`` on to ``cut``, keeping a checkpoint at every ``CHECKPOINT_EVERY``."""
        state, cohort = fold.state, self.cohort
        read = self.fold_events or self._events_between
        with cycle_collector_paused(keep=True):
            while fold.cut < cut:
                stop = min(cut, (fold.cut // CHECKPOINT_EVERY + 1) * CHECKPOINT_EVERY)
                with folding(cohort, f" before its event {stop}"):
                    for e in read(fold.cut, stop):
                        if e.cohort == cohort:
                            handler = HANDLERS.get(type(e))
                            if handler is not None:
                                handler(state, e)
                fold.cut = stop
                if stop % CHECKPOINT_EVERY == 0 and stop not in self._checkpoints:
                    self._checkpoints[stop] = state.copy()

    def _events_between(self, low: int, high: int) -> Sequence[Event]:
        return self.events[low:high]

    def warm(self, budget: int = FOLD_CHUNK) -> bool:
        """Fold up to ``budget`` events towards a missing checkpoint, on a fold of its own (the
        state a view reads is not moved); False once every checkpoint is laid down.

        The log's snapshots are restored first, one a call, the newest first: the end of a
        closed log is one key away ("run to the end") and its closing snapshot is the state
        there, and each restored one bounds the fold of a far jump. Then the checkpoints below
        the cut last shown, the nearest stretch first (from the newest base below the highest
        missing one up to it): stepping back is what a person does next. Then the rest of
        the log, forwards."""
        if self._warming is None and self.snapshots:
            self._base(max(self.snapshots))
            return True
        if self._warming is None:
            missing = [
                c for c in range(CHECKPOINT_EVERY, len(self.events) + 1, CHECKPOINT_EVERY)
                if c not in self._checkpoints
            ]  # fmt: skip
            if not missing:
                return False
            below = [c for c in missing if c <= self._fold.cut]
            target = below[-1] if below else missing[0]
            base, done = self._base(target), self._warmed
            fold = done if done is not None and done.cut == base else self._fold_from(base)
            self._warming, self._warmed = (fold, target), None
        fold, target = self._warming
        self._fold_to(fold, min(target, fold.cut + budget))
        if fold.cut >= target:  # its state is not a checkpoint's: the next stretch goes on with it
            self._warming, self._warmed = None, fold
        return True

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
