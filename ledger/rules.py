"""The broker that applies Forecaster Arena's betting rules, and settlement (the versioned
rule sets are ``ledger.ruleset``'s, re-exported here).

The broker and settlement decide; the state records. Each reads a cohort's live state and
hands every event it makes to ``CohortState.record``, which applies it and queues it for the
store, before deciding the next: under ``v1`` every bet is judged against the cash left by the
bet before it (methodology §1.7). Nothing here touches storage; the runner saves the queue.

Where the originals were wrong we do the correct thing (methodology §1.15): a zero price is rejected
rather than filled at 0.5, a side sold out completely opens a fresh position on the next bet, and
selling on a closed market is refused in both versions (the v1 code allowed it; its docs did not).
Within one decision, sells execute before bets so that a strategy can rotate out of a position
and into another in one step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TypedDict

import msgspec

from ledger.events import (
    BetIntent,
    Event,
    FillLeg,
    MarketResolved,
    MarketVoided,
    OrderFilled,
    OrderPlaced,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
    SellIntent,
)
from ledger.execution import Fill, Rejection
from ledger.fees import FeeRule
from ledger.projection import CohortState, Position, side_won
from ledger.ruleset import RULES as RULES
from ledger.ruleset import RuleSet as RuleSet
from ledger.ruleset import rules_for as rules_for
from ledger.venue import Venue, share_fee

Quote = Callable[[str], Sequence[float] | None]
"""The outcome prices of a market at the decision instant (in outcome order), or None."""


def _money(x: float) -> str:
    """Dollars to the cent, rounded toward zero so a limit never reads larger than it is."""
    return f"${math.trunc(x * 100) / 100:,.2f}"


def _loggable(x: float) -> float | None:
    """``x``, or None if it is NaN or infinite: JSON cannot carry those as numbers; the
    rejection reason still quotes the original value."""
    return x if math.isfinite(x) else None


class _VenueFields(TypedDict):
    """The fields of ``OrderFilled`` only a fill at a venue sets (see ``OrderFilled``)."""

    fee: float | None
    fee_currency: str | None
    legs: list[FillLeg] | None
    requested: float | None
    execution: str | None
    book: str | None
    synthetic: bool | None


class Broker:
    """Turns one agent's orders into placed/filled/rejected events under a rule set.

    Orders fill whole at the tape's price (Forecaster Arena's rule) unless a ``venue`` is
    given: then each order meets the book, the fee and the model the venue holds
    (``ledger.venue``), and may fill in part, in legs, or be refused with the model's reason."""

    def __init__(self, state: CohortState, rules: RuleSet, venue: Venue | None = None) -> None:
        self.state = state
        self.rules = rules
        self.venue = venue

    def execute(
        self,
        agent: str,
        ts: int,
        bets: Sequence[BetIntent],
        sells: Sequence[SellIntent],
        quote: Quote,
    ) -> list[Event]:
        """Execute a decision's sells, then its bets, recording each event on the state; the
        events recorded, in order (they also wait in the state's queue for the store)."""
        first = len(self.state.pending)
        for sell in sells:
            self._sell(agent, ts, sell, quote)
        if bets:
            if self.rules.atomic_bets:
                self._bet_batch(agent, ts, bets, quote)
            else:
                for bet in bets:
                    self._bet(agent, ts, bet, quote)
        return self.state.pending[first:]

    # -- helpers -----------------------------------------------------------------------------

    def _tradable(self, market: str, ts: int) -> str | None:
        """Why ``market`` cannot be traded at ``ts``, or None when it can."""
        info = self.state.markets.get(market)
        if info is None:
            return f"unknown market {market!r} (not in this cohort's universe)"
        if market in self.state.resolutions:
            return f"market {market} is already resolved"
        if info.close_ts is not None and ts >= info.close_ts:
            return f"market {market} is closed"
        return None

    def _side_price(self, market: str, index: int, quote: Quote) -> float | None:
        prices = quote(market)
        if prices is None or index >= len(prices):
            return None
        return float(prices[index])

    # -- bets --------------------------------------------------------------------------------

    def _check_bet(
        self, ts: int, bet: BetIntent, cash: float, quote: Quote
    ) -> tuple[str, float] | str:
        """The canonical side and the price of a valid bet, or the reason it is invalid."""
        reason = self._tradable(bet.market, ts)
        if reason:
            return reason
        resolved = self.state.side_of(bet.market, bet.side)
        if resolved is None:
            options = ", ".join(self.state.markets[bet.market].outcomes)
            return f"side {bet.side!r} is not an outcome of market {bet.market} ({options})"
        side, index = resolved
        amount = bet.amount
        if not math.isfinite(amount) or amount <= 0:
            return f"amount {amount!r} must be a positive number of dollars"
        rules = self.rules
        ceiling = rules.allowance(cash)  # v2's batch total is checked by _bet_batch
        if ceiling < rules.min_bet:
            return (
                f"cash {_money(cash)} allows at most {_money(ceiling)}, "
                f"below the {_money(rules.min_bet)} minimum bet"
            )
        if amount < rules.min_bet:
            return f"bet {_money(amount)} is below the {_money(rules.min_bet)} minimum"
        if rules.cap == "per_bet" and amount > ceiling + 1e-9:
            return (
                f"bet {_money(amount)} exceeds the maximum {_money(ceiling)} "
                f"({rules.max_fraction:.0%} of cash {_money(cash)})"
            )
        price = self._side_price(bet.market, index, quote)
        if price is None or not math.isfinite(price):
            return f"no price for {side} on market {bet.market} at this instant"
        if not 0.0 < price <= 1.0:
            return f"price {price:g} of {side} on market {bet.market} is outside (0, 1]"
        return side, price

    def _place(self, agent: str, ts: int, bet: BetIntent, ahead: int = 0) -> OrderPlaced:
        """Place (record) a buy order. An order counts once it is decided, so a v2 batch, which
        places every leg before deciding any, numbers its legs ``ahead`` of the first."""
        placed = OrderPlaced(
            cohort=self.state.cohort,
            ts=ts,
            agent=agent,
            order_id=self.state.next_order_id(ahead),
            kind="buy",
            market=bet.market,
            side=bet.side,
            amount=_loggable(bet.amount),
        )
        self.state.record(placed)
        return placed

    def _reject(self, placed: OrderPlaced, reason: str) -> None:
        self.state.record(
            OrderRejected(
                cohort=placed.cohort,
                ts=placed.ts,
                agent=placed.agent,
                order_id=placed.order_id,
                kind=placed.kind,
                market=placed.market,
                side=placed.side,
                reason=reason,
                amount=placed.amount,
                percentage=placed.percentage,
            )
        )

    def _fill_buy(self, placed: OrderPlaced, bet: BetIntent, side: str, price: float) -> None:
        """Forecaster Arena's rule: the whole bet at the side's price."""
        cash = self.state.book(placed.agent).cash
        amount = bet.amount
        self.state.record(self._bought(placed, bet, side, cash, price, amount / price, amount))

    def _bought(
        self,
        placed: OrderPlaced,
        bet: BetIntent,
        side: str,
        cash: float,
        price: float,
        shares: float,
        amount: float,
    ) -> OrderFilled:
        """A buy's fill as the log records it, into the agent's position on that side (a new
        one if it holds none), with the bet's implied confidence against ``cash``."""
        book = self.state.book(placed.agent)
        limit = self.rules.max_fraction * cash
        position = book.positions.get((placed.market, side))
        position_id = (
            position.id
            if position
            else self.state.new_position_id(placed.agent, placed.market, side)
        )
        belief = bet.belief
        return OrderFilled(
            cohort=placed.cohort,
            ts=placed.ts,
            agent=placed.agent,
            order_id=placed.order_id,
            kind="buy",
            market=placed.market,
            side=side,
            position_id=position_id,
            price=price,
            shares=shares,
            amount=amount,
            cash_before=cash,
            confidence=min(amount / limit, 1.0) if limit > 0 else 0.0,
            belief=belief if belief is None or math.isfinite(belief) else None,
        )

    def _bet(self, agent: str, ts: int, bet: BetIntent, quote: Quote) -> None:
        placed = self._place(agent, ts, bet)
        cash = self.state.book(agent).cash
        checked = self._check_bet(ts, bet, cash, quote)
        if isinstance(checked, str):
            self._reject(placed, checked)
            return
        if bet.amount > cash + 1e-9:
            self._reject(placed, f"bet {_money(bet.amount)} exceeds cash {_money(cash)}")
            return
        side, price = checked
        if self.venue is None:
            self._fill_buy(placed, bet, side, price)
            return
        result = self._at_venue(placed, bet, side, price, cash)
        if isinstance(result, Rejection):
            self._reject(placed, result.message)
        else:
            self._record_buy(placed, bet, side, cash, *result)

    def _at_venue(
        self, placed: OrderPlaced, bet: BetIntent, side: str, price: float, cash: float
    ) -> tuple[Fill, FeeRule | None] | Rejection:
        assert self.venue is not None
        outcome = self.state.side_of(placed.market, side)
        index = outcome[1] if outcome else 0
        return self.venue.buy(
            placed.agent, placed.market, index, placed.ts, price, bet.amount, cash
        )

    def _record_buy(
        self,
        placed: OrderPlaced,
        bet: BetIntent,
        side: str,
        cash: float,
        fill: Fill,
        rule: FeeRule | None,
    ) -> None:
        """A buy the venue filled, recorded with its legs and fee: a fee in dollars beside the
        amount, a fee in shares kept back from the shares bought."""
        in_shares = rule is not None and rule.currency("buy") == "shares"
        fee = share_fee(rule, fill) if rule is not None and in_shares else fill.fee
        shares = fill.shares - fee if in_shares else fill.shares
        filled = self._bought(
            placed, bet, side, cash, float(fill.price), float(shares), float(fill.amount)
        )
        fields = self._venue_fields(fill, fee, "shares" if in_shares else "usdc")
        self.state.record(msgspec.structs.replace(filled, **fields))

    def _venue_fields(self, fill: Fill, fee: Decimal, currency: str) -> _VenueFields:
        """What a fill under an execution model records beside today's fields."""
        assert self.venue is not None
        fee_value = float(fee)
        return {
            "fee": fee_value if fee_value else None,
            "fee_currency": currency if fee_value else None,
            "legs": [
                FillLeg(
                    price=float(leg.price),
                    shares=float(leg.shares),
                    level=leg.level,
                    fee=float(leg.fee) or None,
                )
                for leg in fill.legs
            ],
            "requested": float(fill.requested) if fill.partial else None,
            "execution": self.venue.label,
            "book": fill.book_id or None,
            "synthetic": True if fill.synthetic else None,
        }

    def _bet_batch(self, agent: str, ts: int, bets: Sequence[BetIntent], quote: Quote) -> None:
        """v2: the bets of one decision fill together or not at all."""
        placed = [self._place(agent, ts, bet, i) for i, bet in enumerate(bets)]
        cash = self.state.book(agent).cash
        checks = [self._check_bet(ts, bet, cash, quote) for bet in bets]
        failure = next(
            (f"leg {i + 1}: {c}" for i, c in enumerate(checks) if isinstance(c, str)), None
        )
        total = sum(bet.amount for bet in bets)
        ceiling = self.rules.allowance(cash)
        if failure is None and total > ceiling + 1e-9:
            failure = (
                f"bets total {_money(total)} exceeds the maximum {_money(ceiling)} "
                f"({self.rules.max_fraction:.0%} of cash {_money(cash)} at the decision)"
            )
        if failure is not None:
            for order in placed:
                self._reject(order, f"bet batch failed, no trades executed: {failure}")
            return
        if self.venue is None:
            for order, bet, checked in zip(placed, bets, checks, strict=True):
                assert not isinstance(checked, str)
                self._fill_buy(order, bet, checked[0], checked[1])
            return
        self._venue_batch(placed, bets, checks, cash)

    def _venue_batch(
        self,
        placed: Sequence[OrderPlaced],
        bets: Sequence[BetIntent],
        checks: Sequence[tuple[str, float] | str],
        cash: float,
    ) -> None:
        """v2 at a venue: every leg meets the book first (each after the legs before it, with
        the cash they left); if any is refused none is filled and the book is as it was."""
        assert self.venue is not None
        taken = {key: dict(levels) for key, levels in self.venue.consumed.items()}
        fills: list[tuple[Fill, FeeRule | None]] = []
        left = cash
        for k, (order, bet, checked) in enumerate(zip(placed, bets, checks, strict=True)):
            assert not isinstance(checked, str)
            result = self._at_venue(order, bet, checked[0], checked[1], left)
            if isinstance(result, Rejection):
                self.venue.consumed = taken
                for each in placed:
                    self._reject(
                        each, f"bet batch failed, no trades executed: leg {k + 1}: {result}"
                    )
                return
            fills.append(result)
            left += float(result[0].cash_change)
        for order, bet, checked, (fill, rule) in zip(placed, bets, checks, fills, strict=True):
            assert not isinstance(checked, str)
            self._record_buy(order, bet, checked[0], self.state.book(order.agent).cash, fill, rule)

    # -- sells -------------------------------------------------------------------------------

    def _find_position(self, agent: str, sell: SellIntent) -> Position | str:
        book = self.state.book(agent)
        if sell.position_id is not None:
            for position in book.positions.values():
                if position.id == sell.position_id:
                    return position
            return f"no open position {sell.position_id!r}"
        if sell.market is None or sell.side is None:
            return "a sell needs a position_id, or a market_id and a side"
        known = sell.market in self.state.markets
        resolved = self.state.side_of(sell.market, sell.side) if known else None
        side = resolved[0] if resolved else sell.side
        held = book.positions.get((sell.market, side))
        if held is None:
            return f"no open {sell.side} position on market {sell.market}"
        return held

    def _sell(self, agent: str, ts: int, sell: SellIntent, quote: Quote) -> None:
        found = self._find_position(agent, sell)
        market = found.market if isinstance(found, Position) else (sell.market or "")
        side = found.side if isinstance(found, Position) else (sell.side or "")
        placed = OrderPlaced(
            cohort=self.state.cohort,
            ts=ts,
            agent=agent,
            order_id=self.state.next_order_id(),
            kind="sell",
            market=market,
            side=side,
            percentage=_loggable(sell.percentage),
            position_id=found.id if isinstance(found, Position) else sell.position_id,
        )
        self.state.record(placed)
        pct = sell.percentage
        if isinstance(found, str):
            self._reject(placed, found)
            return
        if not (math.isfinite(pct) and 1.0 <= pct <= 100.0):
            self._reject(placed, f"percentage {pct!r} must be between 1 and 100")
            return
        reason = self._tradable(market, ts)
        if reason:
            self._reject(placed, reason)
            return
        price = self._side_price(market, found.outcome, quote)
        if price is None or not (math.isfinite(price) and 0.0 <= price <= 1.0):
            self._reject(placed, f"no valid price for {side} on market {market}")
            return
        whole = pct >= 100.0
        shares = found.shares if whole else found.shares * pct / 100.0
        if self.venue is not None:
            self._sell_at_venue(placed, found, price, shares)
            return
        cost_basis = found.cost if whole else found.cost * pct / 100.0
        proceeds = shares * price
        self.state.record(
            self._sold(placed, found, price, shares, proceeds, cost_basis, proceeds - cost_basis)
        )

    def _sold(
        self,
        placed: OrderPlaced,
        found: Position,
        price: float,
        shares: float,
        proceeds: float,
        cost_basis: float,
        realized: float,
    ) -> OrderFilled:
        """A sell's fill as the log records it, out of the position ``found``."""
        return OrderFilled(
            cohort=placed.cohort,
            ts=placed.ts,
            agent=placed.agent,
            order_id=placed.order_id,
            kind="sell",
            market=found.market,
            side=found.side,
            position_id=found.id,
            price=price,
            shares=shares,
            amount=proceeds,
            cash_before=self.state.book(placed.agent).cash,
            cost_basis=cost_basis,
            realized=realized,
        )

    def _sell_at_venue(
        self, placed: OrderPlaced, found: Position, price: float, shares: float
    ) -> None:
        """A sell at the venue: the shares the book takes (perhaps fewer than asked), their
        share of the cost, and the proceeds less the fee."""
        assert self.venue is not None
        result = self.venue.sell(
            placed.agent, placed.market, found.outcome, placed.ts, price, shares
        )
        if isinstance(result, Rejection):
            self._reject(placed, result.message)
            return
        fill, _ = result
        sold = float(fill.shares)
        proceeds = float(fill.amount)
        fee = float(fill.fee)
        cost_basis = found.cost if sold >= found.shares else found.cost * sold / found.shares
        filled = self._sold(placed, found, float(fill.price), sold, proceeds, cost_basis,
                            proceeds - fee - cost_basis)  # fmt: skip
        self.state.record(
            msgspec.structs.replace(filled, **self._venue_fields(fill, fill.fee, "usdc"))
        )


def settle(state: CohortState, market: str, ts: int, winner: str) -> list[Event]:
    """Resolve ``market``: every open position pays $1 a share if its side won, else $0.

    The market is marked resolved first and the payouts follow in the same appended batch, so a
    crash can never strand positions the way the v1 code's two-step update could (methodology §1.9).
    """

    def settled(agent: str, position: Position) -> PositionSettled:
        won = side_won(position.side, winner)
        payout = position.shares if won else 0.0
        return PositionSettled(
            cohort=state.cohort,
            ts=ts,
            agent=agent,
            market=market,
            side=position.side,
            position_id=position.id,
            shares=position.shares,
            payout=payout,
            cost=position.cost,
            realized=payout - position.cost,
            won=won,
        )

    resolved = MarketResolved(cohort=state.cohort, ts=ts, market=market, winner=winner)
    return _close_market(state, resolved, settled)


def void(state: CohortState, market: str, ts: int) -> list[Event]:
    """Cancel ``market``: each open position gets back its remaining cost basis; no Brier rows."""

    def refunded(agent: str, position: Position) -> PositionRefunded:
        return PositionRefunded(
            cohort=state.cohort,
            ts=ts,
            agent=agent,
            market=market,
            side=position.side,
            position_id=position.id,
            shares=position.shares,
            refund=position.cost,
        )

    voided = MarketVoided(cohort=state.cohort, ts=ts, market=market)
    return _close_market(state, voided, refunded)


def _close_market(
    state: CohortState,
    closing: MarketResolved | MarketVoided,
    close: Callable[[str, Position], Event],
) -> list[Event]:
    """``closing``, then ``close(agent, position)`` for every position open on its market,
    all decided from the state before any is recorded, then recorded in that order (agents in
    their order, each one's positions in its book's); the events, as ``Broker.execute`` returns
    its own. Each book's index by market (``Book.by_market``) hands over that market's positions
    alone, so a resolution costs what it settles, not what every agent holds."""
    events: list[Event] = [closing]
    for agent, book in state.books.items():
        held = book.by_market.get(closing.market)
        if held:
            events += [close(agent, p) for p in held.values()]
    for event in events:
        state.record(event)
    return events
