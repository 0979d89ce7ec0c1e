"""Folding the log into state: cash, positions, realized P/L and the Brier rows of each agent.

The same ``apply`` runs live and when a log is rebuilt from disk, so the two cannot drift apart
except through the log itself. Live, nothing calls it directly: the broker, settlement and the
runner hand each event they make to ``CohortState.record``, which applies it and queues it, and
the runner's ``ledger.stream.StreamWriter`` drains the queue (``collect``) into the store, as an
event-sourced aggregate's pending events are saved. ``snapshot`` gives a plain-data picture of
the state so a test or ``arena verify`` can compare live and rebuilt exactly.

Rules of valuation (methodology §1.8, §1.10, §1.11):

* a position is valued at the latest marked price of its side; before the first mark, at the
  price of its last fill (HEAD's entry-price fallback, never the 0.5 of the v1 code);
* implied confidence is recorded on each buy; at resolution every buy on the market (sold
  positions included) becomes one Brier row ``(confidence - won)²``; a voided market scores none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from ledger.collector import collector_paused
from ledger.events import (
    EVENT_TYPES,
    CohortClosed,
    CohortOpened,
    DecisionMade,
    DecisionsStopped,
    Event,
    Marked,
    MarketListed,
    MarketResolved,
    MarketVoided,
    OrderFilled,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
)


def side_index(outcomes: Sequence[str], side: str) -> tuple[str, int] | None:
    """The canonical spelling and outcome index of ``side``, or None if it is not an outcome.

    Binary sides are YES/NO in any case (stored upper-case, as Forecaster Arena does); a
    multi-outcome side must name the outcome exactly, because outcome names are case-sensitive
    keys for pricing (methodology §1.15 item 9).
    """
    lowered = [o.lower() for o in outcomes]
    if len(outcomes) == 2 and sorted(lowered) == ["no", "yes"]:
        wanted = side.strip().lower()
        if wanted in ("yes", "no"):
            return wanted.upper(), lowered.index(wanted)
        return None
    if side in outcomes:
        return side, outcomes.index(side)
    return None


def side_won(side: str, winner: str) -> bool:
    """Settlement compares sides case-insensitively (methodology §1.9: "Yes" wins a YES bet)."""
    return side.upper() == winner.upper()


class Position(msgspec.Struct, gc=False):
    """An open position on one side of one market."""

    id: str
    market: str
    side: str
    outcome: int
    shares: float
    cost: float
    last_price: float
    opened_ts: int

    @property
    def avg_entry(self) -> float:
        return self.cost / self.shares if self.shares else 0.0


class BrierRow(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One scored buy (methodology §1.9): the confidence in the traded side against the result.

    ``array_like``: a snapshot holds one per scored buy (hundreds of thousands in a long run),
    so it is written as a JSON array in field order, a third of the bytes of an object."""

    order_id: str
    market: str
    side: str
    confidence: float
    won: int
    price: float
    belief: float | None

    @property
    def brier(self) -> float:
        return (self.confidence - self.won) ** 2


def implied_briers(rows: Sequence[BrierRow]) -> list[float]:
    """Each row's ``brier``, the very same floats (Python's ``**``, not numpy's square, which
    may round otherwise), without a property call per row: reports sum hundreds of
    thousands."""
    return [(r.confidence - r.won) ** 2 for r in rows]


class PendingBuy(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """A buy waiting for its market to resolve: what its Brier row will need, and no more, so
    a snapshot of a long open cohort holds a short array per buy, not the whole fill."""

    order_id: str
    market: str
    side: str
    confidence: float | None
    price: float
    belief: float | None


class Book(msgspec.Struct):
    """One agent's account in one cohort."""

    agent: str
    cash: float
    initial_cash: float
    positions: dict[tuple[str, str], Position] = msgspec.field(default_factory=dict)
    realized: float = 0.0
    buys: dict[str, list[PendingBuy]] = msgspec.field(default_factory=dict)
    brier_rows: list[BrierRow] = msgspec.field(default_factory=list)
    n_bets: int = 0
    n_sells: int = 0
    n_rejected: int = 0
    n_decisions: int = 0
    n_errors: int = 0
    flows: dict[str, float] = msgspec.field(default_factory=dict)
    """Per market, the cash it has paid this agent: sells, payouts and refunds less buys.
    With the open positions' marked value it splits the agent's P/L by market, which is what
    intervals that resample markets (``ledger.intervals``) and the per-category report need.
    Derived from the same events as the rest, so ``snapshot`` (and the state digest every
    closed cohort records) leaves it out and logs written before it still verify."""
    bets_by_market: dict[str, int] = msgspec.field(default_factory=dict)
    by_market: dict[str, dict[str, Position]] = msgspec.field(default_factory=dict)
    """The open positions again, by market then side, each market's in ``positions``' order:
    what settlement reads, so a resolution visits only its own market's positions, not every
    open one (at 50,000 markets that scan was most of a run). The handlers that open and close
    positions keep both (``hold``, ``drop``); a book made whole (a restore, a copy) derives it
    from ``positions`` in ``__post_init__``. Derived, so no image holds it."""

    def __post_init__(self) -> None:
        by_market: dict[str, dict[str, Position]] = {}
        for (market, side), position in self.positions.items():
            by_market.setdefault(market, {})[side] = position
        self.by_market = by_market

    def hold(self, position: Position) -> None:
        """Open ``position`` (its market and side hold none)."""
        self.positions[(position.market, position.side)] = position
        self.by_market.setdefault(position.market, {})[position.side] = position

    def drop(self, market: str, side: str) -> None:
        """Close the position on ``side`` of ``market``."""
        del self.positions[(market, side)]
        sides = self.by_market[market]
        del sides[side]
        if not sides:
            del self.by_market[market]


class CohortState:
    """Everything the log says about one cohort, kept current by ``apply``."""

    def __init__(self, cohort: str) -> None:
        self.cohort = cohort
        self.opened: CohortOpened | None = None
        self.closed: CohortClosed | None = None
        self.stopped: DecisionsStopped | None = None
        self.books: dict[str, Book] = {}
        self.markets: dict[str, MarketListed] = {}
        self.marks: dict[str, list[float]] = {}
        self.held: dict[str, dict[str, list[float]]] = {}  # Marked.held, the latest
        self.resolutions: dict[str, str | None] = {}
        self.n_orders = 0
        self.n_positions: dict[tuple[str, str, str], int] = {}
        self._sides: dict[tuple[str, str], tuple[str, int] | None] = {}
        self.pending: list[Event] = []
        """Events recorded and not yet collected, in the order they were made."""

    def record(self, event: Event) -> None:
        """Apply ``event`` and queue it for the store: the one way a live state changes."""
        self.apply(event)
        self.pending.append(event)

    def collect(self) -> list[Event]:
        """The events recorded since the last collect, oldest first; the queue is emptied."""
        events, self.pending = self.pending, []
        return events

    def side_of(self, market: str, side: str) -> tuple[str, int] | None:
        """``side_index`` for a listed market, memoised: the broker asks on every order."""
        key = (market, side)
        try:
            return self._sides[key]
        except KeyError:
            found = side_index(self.markets[market].outcomes, side)
            self._sides[key] = found
            return found

    # -- identifiers the broker hands out (derived from the log, so a rebuild agrees) ---------

    def next_order_id(self, ahead: int = 0) -> str:
        """The id of the next order, or of the one ``ahead`` orders after it when a batch
        places several before deciding any (an order counts once it is filled or rejected)."""
        return f"o{self.n_orders + 1 + ahead}"

    def new_position_id(self, agent: str, market: str, side: str) -> str:
        n = self.n_positions.get((agent, market, side), 0) + 1
        return f"{agent}/{market}/{side}/{n}"

    def book(self, agent: str) -> Book:
        try:
            return self.books[agent]
        except KeyError:
            raise KeyError(f"agent {agent!r} is not in cohort {self.cohort}") from None

    # -- the fold ----------------------------------------------------------------------------

    def apply(self, event: Event | DecisionFacts) -> None:
        """Fold one event; a type without a handler changes nothing (see ``IGNORED_BY_FOLD``)."""
        handler = HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _opened(self, e: CohortOpened) -> None:
        self.opened = e
        self.books = {a: Book(agent=a, cash=e.cash, initial_cash=e.cash) for a in e.agents}

    def _closed(self, e: CohortClosed) -> None:
        self.closed = e

    def _stopped(self, e: DecisionsStopped) -> None:
        self.stopped = e

    def _listed(self, e: MarketListed) -> None:
        self.markets[e.market] = e

    def _marked(self, e: Marked) -> None:
        marks = self.marks
        for market, prices in zip(e.markets, e.prices, strict=True):
            marks[market] = prices
        if e.held is not None:
            self.held = e.held

    def _decided(self, e: DecisionMade | DecisionFacts) -> None:
        book = self.books[e.agent]
        book.n_decisions += 1
        if e.error is not None:
            book.n_errors += 1

    def _rejected(self, e: OrderRejected) -> None:
        self.n_orders += 1
        self.books[e.agent].n_rejected += 1

    def _filled(self, e: OrderFilled) -> None:
        self.n_orders += 1
        book = self.books[e.agent]
        key = (e.market, e.side)
        flows = book.flows
        market = e.market
        if e.kind == "buy":
            # a fee paid in dollars is part of what the position cost (only execution models
            # other than fa charge one; an fa fill's arithmetic is what it always was)
            paid = e.amount + e.fee if e.fee and e.fee_currency == "usdc" else e.amount
            book.cash -= paid
            book.n_bets += 1
            flows[market] = flows.get(market, 0.0) - paid
            book.bets_by_market[market] = book.bets_by_market.get(market, 0) + 1
            position = book.positions.get(key)
            if position is None:
                outcome = self.side_of(e.market, e.side)
                position = Position(
                    e.position_id, e.market, e.side, outcome[1] if outcome else 0,
                    0.0, 0.0, e.price, e.ts,
                )  # fmt: skip
                book.hold(position)
                counter = (e.agent, e.market, e.side)
                self.n_positions[counter] = self.n_positions.get(counter, 0) + 1
            position.shares += e.shares
            position.cost += paid
            position.last_price = e.price
            book.buys.setdefault(e.market, []).append(
                PendingBuy(e.order_id, e.market, e.side, e.confidence, e.price, e.belief)
            )
            return
        received = e.amount - e.fee if e.fee and e.fee_currency == "usdc" else e.amount
        book.cash += received
        book.n_sells += 1
        flows[market] = flows.get(market, 0.0) + received
        book.realized += e.realized or 0.0
        position = book.positions[key]
        position.last_price = e.price
        if e.shares >= position.shares:
            book.drop(market, e.side)
        else:
            position.shares -= e.shares
            position.cost -= e.cost_basis or 0.0

    def _resolved(self, e: MarketResolved) -> None:
        self.resolutions[e.market] = e.winner
        winner = e.winner.upper()  # side_won, hoisted: a resolution may score thousands of buys
        for book in self.books.values():
            buys = book.buys.pop(e.market, None)
            if buys:
                book.brier_rows += [
                    BrierRow(
                        buy.order_id,
                        buy.market,
                        buy.side,
                        buy.confidence or 0.0,
                        int(buy.side.upper() == winner),
                        buy.price,
                        buy.belief,
                    )
                    for buy in buys
                ]

    def _voided(self, e: MarketVoided) -> None:
        self.resolutions[e.market] = None
        for book in self.books.values():
            book.buys.pop(e.market, None)

    def _settled(self, e: PositionSettled) -> None:
        book = self.books[e.agent]
        book.cash += e.payout
        book.flows[e.market] = book.flows.get(e.market, 0.0) + e.payout
        book.realized += e.realized
        book.drop(e.market, e.side)

    def _refunded(self, e: PositionRefunded) -> None:
        book = self.books[e.agent]
        book.cash += e.refund
        book.flows[e.market] = book.flows.get(e.market, 0.0) + e.refund
        book.drop(e.market, e.side)

    # -- valuation ---------------------------------------------------------------------------

    def side_price(self, position: Position, agent: str | None = None) -> float:
        """The latest marked price of the position's side (its last fill price if unmarked);
        with ``agent``, what its own holding fetches if marks are by liquidation."""
        held = self.held.get(agent, {}) if agent is not None and self.held else {}
        marks = held.get(position.market) or self.marks.get(position.market)
        if marks is not None and position.outcome < len(marks):
            return marks[position.outcome]
        return position.last_price

    def positions_value(self, agent: str) -> float:
        return sum(
            p.shares * self.side_price(p, agent) for p in self.books[agent].positions.values()
        )

    def market_pnl(self, agent: str) -> dict[str, float]:
        """The agent's P/L split by market: the cash each paid (``Book.flows``) plus what its
        open positions there are marked at. The values add up to the agent's P/L."""
        book = self.books[agent]
        pnl = dict(book.flows)
        for p in book.positions.values():
            pnl[p.market] = pnl.get(p.market, 0.0) + p.shares * self.side_price(p, agent)
        return pnl

    def copy(self) -> CohortState:
        """A state equal to this one that the fold may advance without changing this one: the
        containers the fold changes in place (and positions, whose fields it changes) are
        copied; the frozen records in them (listings, marks, pending buys, Brier rows) are
        shared. Far cheaper than an image round trip on a big state (``arena step`` keeps its
        checkpoints this way). The copy's queue of recorded events starts empty."""
        other = CohortState(self.cohort)
        other.opened, other.closed, other.stopped = self.opened, self.closed, self.stopped
        other.markets = dict(self.markets)
        other.marks = dict(self.marks)
        other.held = self.held  # replaced whole by a mark, never changed in place
        other.resolutions = dict(self.resolutions)
        other.n_orders = self.n_orders
        other.n_positions = dict(self.n_positions)
        other._sides = dict(self._sides)
        other.books = {
            agent: msgspec.structs.replace(
                book,
                positions={k: msgspec.structs.replace(p) for k, p in book.positions.items()},
                buys={market: list(buys) for market, buys in book.buys.items()},
                brier_rows=list(book.brier_rows),
                flows=dict(book.flows),
                bets_by_market=dict(book.bets_by_market),
            )
            for agent, book in self.books.items()
        }
        return other

    def digest(self) -> str:
        """sha256 of ``snapshot()``: floats enter by their exact repr, so equal means equal."""
        with collector_paused():  # a tuple per Brier row, none in a cycle
            return hashlib.sha256(msgspec.json.encode(self.snapshot())).hexdigest()

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain data, for exact comparisons between live and rebuilt."""
        return {
            "cohort": self.cohort,
            "n_orders": self.n_orders,
            "resolutions": dict(sorted(self.resolutions.items())),
            "marks": dict(sorted(self.marks.items())),
            **({"held": self.held} if self.held else {}),  # liquidation marks only
            "books": {
                agent: {
                    "cash": b.cash,
                    "realized": b.realized,
                    "positions": sorted(
                        (p.id, p.shares, p.cost, p.last_price) for p in b.positions.values()
                    ),
                    "pending_buys": sorted(
                        (x.order_id, x.confidence or 0.0) for xs in b.buys.values() for x in xs
                    ),
                    "brier_rows": [(r.order_id, r.confidence, r.won) for r in b.brier_rows],
                    "counts": (b.n_bets, b.n_sells, b.n_rejected, b.n_decisions, b.n_errors),
                }
                for agent, b in sorted(self.books.items())
            },
        }


HANDLERS: dict[type[msgspec.Struct], Any] = {
    CohortOpened: CohortState._opened,
    CohortClosed: CohortState._closed,
    DecisionsStopped: CohortState._stopped,
    MarketListed: CohortState._listed,
    Marked: CohortState._marked,
    DecisionMade: CohortState._decided,
    OrderRejected: CohortState._rejected,
    OrderFilled: CohortState._filled,
    MarketResolved: CohortState._resolved,
    MarketVoided: CohortState._voided,
    PositionSettled: CohortState._settled,
    PositionRefunded: CohortState._refunded,
}
"""The fold, by event type: the functions ``CohortState.apply`` calls, public so a rebuild's
loop can call them without the frame of ``apply`` (measured: 10-20 % of a fold)."""

IGNORED_BY_FOLD = frozenset(name for name, cls in EVENT_TYPES.items() if cls not in HANDLERS)
"""Event types whose fold changes nothing, so a rebuild need not read them: ``OrderPlaced`` (an
order changes the state when it is decided, filled or rejected), and any type that only
records something (a transcript, say) and is given no handler here."""


class DecisionFacts(msgspec.Struct, frozen=True, tag="DecisionMade", tag_field="type", gc=False):
    """What the fold reads of a ``DecisionMade``: whose it was and whether it failed."""

    cohort: str
    agent: str
    error: str | None = None


FoldEvent = (
    CohortOpened
    | CohortClosed
    | DecisionsStopped
    | MarketListed
    | Marked
    | DecisionFacts
    | OrderFilled
    | OrderRejected
    | MarketResolved
    | MarketVoided
    | PositionSettled
    | PositionRefunded
)
"""The log as a rebuild decodes it: decisions, which the fold only counts, decode to their
facts and skip the rest of their JSON (prompts and reasoning can be most of a log)."""

HANDLERS[DecisionFacts] = CohortState._decided


class Ledger:
    """The projections of a whole log: one ``CohortState`` per cohort stream."""

    def __init__(self) -> None:
        self.cohorts: dict[str, CohortState] = {}

    def apply(self, event: Event | DecisionFacts) -> None:
        state = self.cohorts.get(event.cohort)
        if state is None:
            state = self.cohorts[event.cohort] = CohortState(event.cohort)
        state.apply(event)

    def apply_all(self, events: Iterable[Event]) -> Ledger:
        for event in events:
            self.apply(event)
        return self

    def snapshot(self) -> dict[str, Any]:
        return {name: state.snapshot() for name, state in sorted(self.cohorts.items())}
