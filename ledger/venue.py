"""The market an order meets under an execution model: which book, which fee, what is left.

``Broker`` fills at the tape's price by Forecaster Arena's rule unless the cohort chose another
model; then it hands each order to a ``Venue``, which finds the book the order meets (from a
``BookSource``: a recorded snapshot, or a quote made from the tape's price), the fee rule of the
market at that instant (``FeeSource``, from ``ledger.fees``), asks the model
(``ledger.execution``) for the fill, and remembers what the agent took from each snapshot so its
next order on the same snapshot meets what is left (isolated liquidity: each agent its own; with
``shared`` the cohort's agents take from one book, in the order the broker sees them).

A fee charged in shares (Polymarket's buys before CLOB V2, 2026-04-28) is kept back from the
shares bought; the model sizes the order with no fee then, as the cash it spends is the amount
alone. A fee in dollars is paid beside the amount and counted in the sizing (amount + fee within
cash). The fill the broker records carries the fee, its currency and every leg.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from ledger.execution import (
    ExecutionModel,
    FeeUnknown,
    Fill,
    LevelKey,
    Order,
    OrderBook,
    Reason,
    Rejection,
    params_hash,
)
from ledger.fees import FeeRule, Side, UnknownFee

BookSource = Callable[[str, int, int, float, Side, float, float], OrderBook | None]
"""The book an order on (market, outcome index) meets at an instant (UTC milliseconds), given
the tape's price of that outcome at the decision, the order's side and size (dollars of a buy,
shares of a sell) and the shares taken from that book before (so a source may leave out the
levels no such order can reach); None where there is none."""

FeeSource = Callable[[str, int], FeeRule | None]
"""The fee rule of a market at an instant; None for no fee. Raises ``UnknownFee`` where the
schedule does not know it (the order is refused with that reason)."""


def no_fees(market: str, ts: int) -> FeeRule | None:
    """``--fees none``: no market pays a fee."""
    return None


def quote_books(
    market: str,
    outcome: int,
    ts_ms: int,
    price: float,
    side: Side = "buy",
    quantity: float = 0.0,
    taken: float = 0.0,
) -> OrderBook:
    """A book with no levels, only the tape's price as its mid: what ``fa`` and ``mid`` need,
    and what ``touch`` spreads ticks around when no book was recorded."""
    return OrderBook.quote(price, ts_ms=ts_ms, token=f"{market}#{outcome}")


@dataclass
class Venue:
    """One cohort's execution: the model, its books and fees, and what each agent took."""

    model: ExecutionModel
    books: BookSource = quote_books
    fees: FeeSource = no_fees
    latency_ms: int = 0
    shared: bool = False
    consumed: dict[tuple[str, str, int], dict[LevelKey, Decimal]] = field(default_factory=dict)
    think: bool = False
    """``--latency llm``: each decision's orders also wait for its model calls' recorded time
    (``decided``), so a slow model meets a later book; never the clock of the replay."""
    think_ms: int = 0
    per_agent: dict[str, int] = field(default_factory=dict)
    """``--latency FILE``: milliseconds more for each named agent's orders."""

    def decided(self, latency_ms: float | None) -> None:
        """A decision was made whose model calls took ``latency_ms`` as recorded (the
        decision's ``DecisionMade.latency_ms``; None: no model was asked): with ``think``, its
        orders arrive that much later, in whole milliseconds rounded up (an order cannot go
        before the answer is in)."""
        if self.think:
            self.think_ms = math.ceil(latency_ms) if latency_ms else 0

    @functools.cached_property
    def label(self) -> str:
        """The model and the hash of its parameters, as each fill records them (hashed once:
        the model never changes)."""
        return f"{self.model.name}:{params_hash(self.model)[:16]}"

    def buy(
        self, agent: str, market: str, outcome: int, ts: int, price: float, dollars: float,
        cash: float,
    ) -> tuple[Fill, FeeRule | None] | Rejection:  # fmt: skip
        return self._fill(agent, market, outcome, ts, price, "buy", dollars, cash)

    def sell(
        self, agent: str, market: str, outcome: int, ts: int, price: float, shares: float
    ) -> tuple[Fill, FeeRule | None] | Rejection:
        return self._fill(agent, market, outcome, ts, price, "sell", shares, None)

    def _fill(
        self, agent: str, market: str, outcome: int, ts: int, price: float, side: Side,
        quantity: float, cash: float | None,
    ) -> tuple[Fill, FeeRule | None] | Rejection:  # fmt: skip
        # the order meets the book standing when it arrives
        at = ts * 1000 + self.latency_ms + self.per_agent.get(agent, 0) + self.think_ms
        key = ("" if self.shared else agent, market, outcome)
        taken = float(sum(self.consumed.get(key, {}).values()))
        book = self.books(market, outcome, at, price, side, quantity, taken)
        if book is None:
            return Rejection(Reason.NO_LIQUIDITY, f"no book of {market} at this instant")
        try:
            rule = self.fees(market, at // 1000)
        except UnknownFee as exc:
            return Rejection(Reason.FEE_UNKNOWN, exc.reason)
        if rule is not None and not rule.rate:
            rule = None  # a rate of 0 charges nothing: no fee arithmetic per level
        model = self.model
        if rule is not None and rule.currency(side) == "usdc" and hasattr(model, "fee"):
            model = dataclasses.replace(model, fee=_dollar_fee(rule, side))  # type: ignore[type-var]
        order = (Order.buy if side == "buy" else Order.sell)(quantity, at_ms=at)
        try:
            result = model.fill(order, book, cash, self.consumed.get(key))
        except FeeUnknown as exc:
            return Rejection(Reason.FEE_UNKNOWN, str(exc))
        if isinstance(result, Rejection):
            return result
        self.consumed[key] = dict(result.consumed)
        return result, rule


def _dollar_fee(rule: FeeRule, side: Side) -> Callable[[Decimal, float], Decimal]:
    """The model's fee callable over a rule that charges dollars."""

    def fee(shares: Decimal, price: float) -> Decimal:
        return rule.taker_fee(shares, price, side).amount

    return fee


def share_fee(rule: FeeRule, fill: Fill) -> Decimal:
    """The fee in shares a rule that charges shares keeps back from a buy: each leg's own."""
    total = Decimal(0)
    for leg in fill.legs:
        total += rule.taker_fee(leg.shares, leg.price, "buy").amount
    return total
