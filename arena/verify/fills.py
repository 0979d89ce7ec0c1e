"""``arena verify --tape TAPE``: every fill re-checked against the rules and the tape's prices.

The hash chain proves the log was not edited after it was written, and the checking fold that
its events agree with each other; neither can tell whether what was written was honest. A
plugin that patched the broker in-process, or a run on a doctored tape, writes a perfectly
chained log. This check replays nothing: it reads each ``OrderFilled`` and asks the tape
whether that price existed for that side at that instant, and the rules whether that amount
was allowed with the cash the log implies, naming the first fill that fails.

A cohort run under an execution model (``CohortOpened.settings["execution"]``) has each fill
derived again: the order as placed meets the venue the cohort ran with (the same model, fees
and book, and what the agent had already taken from it), and the price, shares, amount, fee
and every leg must come out as recorded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from arena.run.execution import recorded_fees, recorded_latencies, venue
from arena.verify.marks import mark_problem
from ledger.errors import IntegrityError
from ledger.events import CohortOpened, DecisionMade, Event, Marked, OrderFilled, OrderPlaced
from ledger.execution import Fill, Rejection
from ledger.fees import FeeRule
from ledger.projection import CohortState, Ledger, side_index
from ledger.rules import RuleSet, rules_for
from ledger.store import EventStore
from ledger.venue import Venue, share_fee
from replays.books import Books
from replays.tape import Tape

TOLERANCE = 1e-9


@dataclass(frozen=True)
class FillsChecked:
    fills: int
    cohorts: int
    derived: int = 0
    """Of ``fills``, those derived again under an execution model."""

    @property
    def how(self) -> str:
        """How they were checked, in words for the summary line."""
        if not self.derived:
            return "at the tape's prices, within the rules"
        if self.derived == self.fills:
            return "derived again under their execution model, as recorded"
        return (f"checked: {self.fills - self.derived:,} at the tape's prices, within the "
                f"rules, {self.derived:,} derived again under their execution model")  # fmt: skip


@dataclass
class _Decision:
    """The cash an agent had when it decided, and what its buys have spent since (v2 caps the
    decision's total)."""

    cash: float
    spent: float = 0.0


def verify_fills(store: EventStore, tape: Tape, books: Books | None = None) -> FillsChecked:
    """Raise IntegrityError(seq=first bad fill) unless every fill of every cohort replayed on
    ``tape`` happened at the tape's price under its cohort's rules, or, under an execution
    model, is what the model gives the order on ``tape`` and the cohort's ``books``."""
    ledger = Ledger()
    rules: dict[str, RuleSet] = {}
    venues: dict[str, Venue] = {}
    placed: dict[tuple[str, str], OrderPlaced] = {}
    decisions: dict[tuple[str, str], _Decision] = {}
    fills = derived = 0
    for seq, _stream, _version, event in store.read_with_seq():
        if isinstance(event, CohortOpened):
            if event.tape != tape.hash:
                raise _bad(store, seq, f"opens cohort {event.cohort} on tape "
                                       f"{event.tape[:12]}, not {tape.hash[:12]}")  # fmt: skip
            rules[event.cohort] = rules_for(event.rules)
            made = _venue_of(event, tape, books)
            if isinstance(made, str):
                raise _bad(store, seq, made)
            if made is not None:
                venues[event.cohort] = made
        state = ledger.cohorts.get(event.cohort)
        if isinstance(event, OrderPlaced):
            placed[(event.cohort, event.order_id)] = event
        elif isinstance(event, DecisionMade) and state is not None:
            decisions[(event.cohort, event.agent)] = _Decision(state.book(event.agent).cash)
            if event.cohort in venues:  # --latency llm: the think time the log records
                venues[event.cohort].decided(event.latency_ms)
        elif isinstance(event, Marked) and state is not None and books is not None:
            problem = mark_problem(event, state, tape, books)  # marks from the books, again
            if problem:
                raise _bad(store, seq, problem)
        elif isinstance(event, OrderFilled) and state is not None:
            at = venues.get(event.cohort)
            order = placed.get((event.cohort, event.order_id))
            if at is not None:
                derived += 1
                problem = _venue_problem(event, order, state, at, tape)
            else:
                decision = decisions.get((event.cohort, event.agent))
                problem = _fill_problem(event, state, rules[event.cohort], tape, decision)
            if problem:
                raise _bad(store, seq, problem)
            fills += 1
        _apply(ledger, event, store, seq)
    return FillsChecked(fills=fills, cohorts=len(rules), derived=derived)


def _venue_of(opened: CohortOpened, tape: Tape, books: Books | None) -> Venue | str | None:
    """The venue a cohort's orders met, as its opening records it; None for Forecaster Arena's
    rule; a reason when the books it walked are not the ones given."""
    settings = opened.settings
    spec = settings.get("execution")
    if not isinstance(spec, str):
        return None
    wanted = settings.get("books")
    if isinstance(wanted, str) and (books is None or books.hash != wanted):
        given = "none" if books is None else books.hash[:12]
        return (f"opens cohort {opened.cohort} on order books {wanted[:12]}, but the books "
                f"given are {given} (--books)")  # fmt: skip
    latency = settings.get("latency_ms")
    return venue(
        tape,
        spec,
        recorded_fees(settings),
        books if isinstance(wanted, str) else None,
        latency if isinstance(latency, int) else 0,
        settings.get("liquidity") == "shared",
        think=settings.get("latency") == "llm",
        per_agent=recorded_latencies(settings),
    )


def _apply(ledger: Ledger, event: Event, store: EventStore, seq: int) -> None:
    try:
        ledger.apply(event)
    except (KeyError, ValueError, TypeError) as exc:
        raise _bad(store, seq, f"does not fit the events before it: {exc}") from None


def _fill_problem(
    fill: OrderFilled, state: CohortState, rules: RuleSet, tape: Tape, decision: _Decision | None
) -> str | None:
    """Why ``fill`` could not have happened honestly, or None."""
    m = tape.index.get(fill.market)
    if m is None:
        return f"fills on market {fill.market}, which the tape does not have"
    resolution = tape.resolutions.get(fill.market)
    if resolution is not None and resolution.ts <= fill.ts:
        return f"fills on market {fill.market} at {fill.ts}, after it resolved at {resolution.ts}"
    listed = state.markets.get(fill.market)
    if listed is not None and listed.close_ts is not None and fill.ts >= listed.close_ts:
        return f"fills on market {fill.market} at {fill.ts}, after it closed"
    found = side_index(tape.markets[m].outcomes, fill.side)
    prices = tape.price_at(fill.market, fill.ts)
    if found is None or prices is None:
        return f"fills {fill.side} of market {fill.market} where the tape has no price for it"
    price = prices[found[1]]
    if not math.isclose(fill.price, price, rel_tol=0.0, abs_tol=1e-12):
        return (f"fills {fill.side} of market {fill.market} at {fill.price!r}, but the tape's "
                f"price at {fill.ts} is {price!r}")  # fmt: skip
    if fill.kind == "sell":
        if not math.isclose(fill.amount, fill.shares * price, rel_tol=TOLERANCE):
            return f"sells {fill.shares!r} shares at {price!r} for {fill.amount!r}"
        return None
    return _buy_problem(fill, price, rules, decision)


def _buy_problem(
    fill: OrderFilled, price: float, rules: RuleSet, decision: _Decision | None
) -> str | None:
    if not math.isclose(fill.shares, fill.amount / price, rel_tol=TOLERANCE):
        return f"buys {fill.shares!r} shares for {fill.amount!r} at {price!r}"
    if fill.amount < rules.min_bet - TOLERANCE:
        return f"buys for {fill.amount!r}, below the {rules.min_bet:g} minimum bet"
    if fill.amount > fill.cash_before + TOLERANCE:
        return f"buys for {fill.amount!r} with cash {fill.cash_before!r}"
    if rules.cap == "per_bet":
        ceiling = rules.max_fraction * fill.cash_before
        if fill.amount > ceiling + TOLERANCE:
            return (
                f"buys for {fill.amount!r}, above the {ceiling!r} the {rules.version} rules allow"
            )
        return None
    if decision is None:
        return "buys without a decision before it"
    decision.spent += fill.amount
    ceiling = rules.max_fraction * decision.cash
    if decision.spent > ceiling + TOLERANCE:
        return (f"brings its decision's buys to {decision.spent!r}, above the {ceiling!r} the "
                f"{rules.version} rules allow")  # fmt: skip
    return None


def _venue_problem(
    fill: OrderFilled, order: OrderPlaced | None, state: CohortState, at: Venue, tape: Tape
) -> str | None:
    """Why ``fill`` is not what its order gets at the cohort's venue, or None."""
    found = side_index(tape.markets[tape.index[fill.market]].outcomes, fill.side)
    prices = tape.price_at(fill.market, fill.ts)
    if order is None or found is None or prices is None:
        return f"fills {fill.side} of market {fill.market} with no order or tape price for it"
    outcome, price = found[1], prices[found[1]]
    if fill.kind == "buy":
        result = at.buy(
            fill.agent, fill.market, outcome, fill.ts, price, order.amount or 0.0, fill.cash_before
        )
    else:
        held = state.book(fill.agent).positions.get((fill.market, fill.side))
        if held is None:
            return f"sells {fill.side} of market {fill.market}, which it does not hold"
        pct = order.percentage or 100.0
        shares = held.shares if pct >= 100.0 else held.shares * pct / 100.0
        result = at.sell(fill.agent, fill.market, outcome, fill.ts, price, shares)
    if isinstance(result, Rejection):
        return f"fills an order the {at.model.name} model refuses: {result.message}"
    expected = _recorded(fill.kind, *result)
    got = (fill.price, fill.shares, fill.amount, fill.fee or 0.0,
           [(leg.price, leg.shares, leg.level) for leg in fill.legs or ()])  # fmt: skip
    names = ("price", "shares", "amount", "fee", "legs")
    for name, want, have in zip(names, expected, got, strict=True):
        if want != have:
            return (f"fills {fill.side} of market {fill.market} with {name} {have!r}, where "
                    f"the {at.model.name} model gives {want!r}")  # fmt: skip
    return None


def _recorded(kind: str, fill: Fill, rule: FeeRule | None) -> tuple[object, ...]:
    """The price, shares, amount, fee and legs the broker records for ``fill``."""
    in_shares = kind == "buy" and rule is not None and rule.currency("buy") == "shares"
    fee = share_fee(rule, fill) if rule is not None and in_shares else fill.fee
    shares = fill.shares - fee if in_shares else fill.shares
    legs = [(float(leg.price), float(leg.shares), leg.level) for leg in fill.legs]
    return float(fill.price), float(shares), float(fill.amount), float(fee), legs


def _bad(store: EventStore, seq: int, what: str) -> IntegrityError:
    """Worded like ``arena verify``'s other errors: the file, then the event."""
    return IntegrityError(f"{store.path}: event {seq} {what}", seq)
