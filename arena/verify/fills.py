"""``arena verify --tape TAPE``: every fill re-checked against the rules and the tape's prices.

The hash chain proves the log was not edited after it was written, and the checking fold that
its events agree with each other; neither can tell whether what was written was honest. A
plugin that patched the broker in-process, or a run on a doctored tape, writes a perfectly
chained log. This check replays nothing: it reads each ``OrderFilled`` and asks the tape
whether that price existed for that side at that instant, and the rules whether that amount
was allowed with the cash the log implies, naming the first fill that fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ledger.errors import IntegrityError
from ledger.events import CohortOpened, DecisionMade, Event, OrderFilled
from ledger.projection import CohortState, Ledger, side_index
from ledger.rules import RuleSet, rules_for
from ledger.store import EventStore
from replays.tape import Tape

TOLERANCE = 1e-9


@dataclass(frozen=True)
class FillsChecked:
    fills: int
    cohorts: int


@dataclass
class _Decision:
    """The cash an agent had when it decided, and what its buys have spent since (v2 caps the
    decision's total)."""

    cash: float
    spent: float = 0.0


def verify_fills(store: EventStore, tape: Tape) -> FillsChecked:
    """Raise IntegrityError(seq=first bad fill) unless every fill of every cohort replayed on
    ``tape`` happened at the tape's price under its cohort's rules."""
    ledger = Ledger()
    rules: dict[str, RuleSet] = {}
    decisions: dict[tuple[str, str], _Decision] = {}
    fills = 0
    for seq, _stream, _version, event in store.read_with_seq():
        if isinstance(event, CohortOpened):
            if event.tape != tape.hash:
                raise _bad(store, seq, f"opens cohort {event.cohort} on tape "
                                       f"{event.tape[:12]}, not {tape.hash[:12]}")  # fmt: skip
            rules[event.cohort] = rules_for(event.rules)
        state = ledger.cohorts.get(event.cohort)
        if isinstance(event, DecisionMade) and state is not None:
            decisions[(event.cohort, event.agent)] = _Decision(state.book(event.agent).cash)
        elif isinstance(event, OrderFilled) and state is not None:
            decision = decisions.get((event.cohort, event.agent))
            problem = _fill_problem(event, state, rules[event.cohort], tape, decision)
            if problem:
                raise _bad(store, seq, problem)
            fills += 1
        _apply(ledger, event, store, seq)
    return FillsChecked(fills=fills, cohorts=len(rules))


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


def _bad(store: EventStore, seq: int, what: str) -> IntegrityError:
    """Worded like ``arena verify``'s other errors: the file, then the event."""
    return IntegrityError(f"{store.path}: event {seq} {what}", seq)
