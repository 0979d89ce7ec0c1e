"""Forecaster Arena's betting mechanics (methodology §1.7, §1.9, §1.10) against hand arithmetic.

Prices are chosen to be exact in binary floating point (0.25, 0.5, 0.125, ...) wherever the
arithmetic allows, so most expectations are exact; the rest use ``pytest.approx``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from ledger.errors import LedgerError
from ledger.events import (
    BetIntent,
    CohortOpened,
    Event,
    MarketListed,
    MarketResolved,
    MarketVoided,
    OrderFilled,
    OrderPlaced,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
    SellIntent,
    decode,
    encode,
)
from ledger.projection import CohortState
from ledger.rules import Broker, rules_for, settle, void

CLOSE_TS = 1_000


def make_state(cash: float = 10_000.0, rules: str = "v1") -> CohortState:
    state = CohortState("c1")
    state.apply(
        CohortOpened(
            cohort="c1",
            ts=0,
            start=0,
            rules=rules,
            cash=cash,
            agents=["alice", "bob"],
            decision_cadence="weekly",
            mark_cadence="daily",
        )
    )
    for market, outcomes, close_ts in (
        ("bin", ["Yes", "No"], None),
        ("multi", ["Trump", "Harris", "Other"], None),
        ("closing", ["Yes", "No"], CLOSE_TS),
    ):
        state.apply(
            MarketListed(
                cohort="c1",
                ts=0,
                market=market,
                question=f"{market}?",
                outcomes=outcomes,
                close_ts=close_ts,
                volume=0.0,
            )
        )
    return state


class Prices:
    """A quote function whose prices a test can move; binary NO is derived as 1 - YES."""

    def __init__(self) -> None:
        self.prices: dict[str, tuple[float, ...]] = {
            "multi": (0.5, 0.25, 0.25),
        }
        self.set_yes("bin", 0.25)
        self.set_yes("closing", 0.5)

    def set_yes(self, market: str, yes: float) -> None:
        self.prices[market] = (yes, 1.0 - yes)

    def __call__(self, market: str) -> Sequence[float] | None:
        return self.prices.get(market)


def bet(market: str, side: str, amount: float) -> BetIntent:
    return BetIntent(market=market, side=side, amount=amount)


def sell(market: str, side: str, pct: float) -> SellIntent:
    return SellIntent(market=market, side=side, percentage=pct)


def outcomes(events: list[Event]) -> list[Event]:
    """The fills and rejections, without the OrderPlaced events in front of them."""
    return [e for e in events if isinstance(e, (OrderFilled, OrderRejected))]


def run(
    state: CohortState,
    prices: Prices,
    bets: Sequence[BetIntent] = (),
    sells: Sequence[SellIntent] = (),
    *,
    rules: str = "v1",
    agent: str = "alice",
    ts: int = 10,
) -> list[Event]:
    return outcomes(Broker(state, rules_for(rules)).execute(agent, ts, bets, sells, prices))


def filled(event: Event) -> OrderFilled:
    assert isinstance(event, OrderFilled), event
    return event


def rejected(event: Event) -> OrderRejected:
    assert isinstance(event, OrderRejected), event
    return event


@pytest.fixture
def state() -> CohortState:
    return make_state()


@pytest.fixture
def prices() -> Prices:
    return Prices()


# -- limits -----------------------------------------------------------------------------------


def test_minimum_bet_is_fifty_dollars(state: CohortState, prices: Prices) -> None:
    low, ok = run(state, prices, [bet("bin", "YES", 49.99), bet("bin", "YES", 50.0)])
    assert "below the $50.00 minimum" in rejected(low).reason
    assert filled(ok).amount == 50.0
    assert state.books["alice"].cash == 9_950.0
    assert state.books["alice"].n_rejected == 1


def test_v1_caps_each_bet_at_a_quarter_of_the_running_cash(
    state: CohortState, prices: Prices
) -> None:
    first, second = run(state, prices, [bet("bin", "YES", 2_500), bet("bin", "YES", 2_500)])
    # first: 2500 <= 0.25 * 10000 = 2500, confidence 2500 / 2500 = 1.0
    assert filled(first).confidence == 1.0
    # second: cash is now 7500, max 0.25 * 7500 = 1875 < 2500
    assert "exceeds the maximum $1,875.00" in rejected(second).reason
    assert state.books["alice"].cash == 7_500.0


def test_v1_later_bets_in_a_decision_get_higher_confidence(
    state: CohortState, prices: Prices
) -> None:
    first, second = run(state, prices, [bet("bin", "YES", 1_000), bet("bin", "NO", 1_000)])
    # 1000 / (0.25 * 10000) = 0.4; then 1000 / (0.25 * 9000) = 1000 / 2250 = 0.444...
    assert filled(first).confidence == pytest.approx(0.4)
    assert filled(second).confidence == pytest.approx(1_000 / 2_250)
    assert filled(second).cash_before == 9_000.0


def test_v2_caps_the_decision_total_at_a_quarter_of_its_starting_cash(prices: Prices) -> None:
    state = make_state(rules="v2")
    legs = run(state, prices, [bet("bin", "YES", 1_500), bet("bin", "NO", 1_500)], rules="v2")
    # 1500 + 1500 = 3000 > 0.25 * 10000 = 2500: all or nothing, so nothing
    assert len(legs) == 2
    reasons = {rejected(e).reason for e in legs}
    assert len(reasons) == 1
    (reason,) = reasons
    assert reason.startswith("bet batch failed, no trades executed")
    assert "bets total $3,000.00 exceeds the maximum $2,500.00" in reason
    assert state.books["alice"].cash == 10_000.0
    assert state.books["alice"].positions == {}


def test_v2_fills_a_batch_within_the_cap(prices: Prices) -> None:
    state = make_state(rules="v2")
    first, second = run(
        state, prices, [bet("bin", "YES", 1_250), bet("bin", "NO", 1_250)], rules="v2"
    )
    # 1250 + 1250 = 2500 <= 2500; each leg's confidence is against the cash just before it:
    # 1250 / 2500 = 0.5, then 1250 / (0.25 * 8750) = 1250 / 2187.5 = 0.5714...
    assert filled(first).confidence == 0.5
    assert filled(second).confidence == pytest.approx(1_250 / 2_187.5)
    assert state.books["alice"].cash == 7_500.0


def test_v2_one_bad_leg_rejects_every_leg(prices: Prices) -> None:
    state = make_state(rules="v2")
    legs = run(state, prices, [bet("bin", "YES", 100), bet("bin", "MAYBE", 100)], rules="v2")
    reasons = [rejected(e).reason for e in legs]
    assert reasons[0] == reasons[1]
    assert "leg 2: side 'MAYBE' is not an outcome" in reasons[0]
    assert state.books["alice"].cash == 10_000.0


def test_v1_lets_the_good_legs_fill_around_a_bad_one(state: CohortState, prices: Prices) -> None:
    good, bad = run(state, prices, [bet("bin", "YES", 100), bet("bin", "MAYBE", 100)])
    assert filled(good).amount == 100
    assert "not an outcome" in rejected(bad).reason


@pytest.mark.parametrize("rules", ["v1", "v2"])
def test_an_agent_under_two_hundred_dollars_cannot_bet(rules: str, prices: Prices) -> None:
    state = make_state(cash=190.0, rules=rules)
    (only,) = run(state, prices, [bet("bin", "YES", 50)], rules=rules)
    # 0.25 * 190 = 47.50 < 50: no bet size is both >= the minimum and <= the maximum
    # (v2 prefixes the batch failure and the leg number)
    assert rejected(only).reason.endswith(
        "cash $190.00 allows at most $47.50, below the $50.00 minimum bet"
    )


def test_exactly_two_hundred_dollars_still_allows_the_minimum_bet(prices: Prices) -> None:
    state = make_state(cash=200.0)
    (only,) = run(state, prices, [bet("bin", "YES", 50)])
    # 50 / (0.25 * 200) = 1.0
    assert filled(only).confidence == 1.0


def test_unknown_rules_version_is_an_error() -> None:
    with pytest.raises(LedgerError, match="unknown rules version 'v3'"):
        rules_for("v3")


# -- prices and shares ------------------------------------------------------------------------


def test_shares_are_amount_over_the_side_price(state: CohortState, prices: Prices) -> None:
    yes, no = run(state, prices, [bet("bin", "yes", 1_000), bet("bin", "No", 600)])
    # YES at 0.25: 1000 / 0.25 = 4000 shares; sides are stored upper-case
    assert (filled(yes).side, filled(yes).price, filled(yes).shares) == ("YES", 0.25, 4_000.0)
    # NO at 1 - 0.25 = 0.75: 600 / 0.75 = 800 shares
    assert (filled(no).side, filled(no).price, filled(no).shares) == ("NO", 0.75, 800.0)


def test_multi_outcome_bets_need_the_exact_outcome_name(state: CohortState, prices: Prices) -> None:
    wrong_case, right = run(
        state, prices, [bet("multi", "harris", 500), bet("multi", "Harris", 500)]
    )
    assert rejected(wrong_case).reason == (
        "side 'harris' is not an outcome of market multi (Trump, Harris, Other)"
    )
    # Harris at 0.25: 500 / 0.25 = 2000 shares
    assert (filled(right).side, filled(right).shares) == ("Harris", 2_000.0)


def test_multi_outcome_settlement_ignores_case(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("multi", "Harris", 500), bet("multi", "Trump", 500)])
    events = settle(state, "multi", 20, "HARRIS")
    payouts = {
        e.side: (e.payout, e.realized, e.won) for e in events if isinstance(e, PositionSettled)
    }
    # Harris: 2000 shares x $1 = 2000, realized 2000 - 500 = 1500; Trump (1000 shares): $0, -500
    assert payouts == {"Harris": (2_000.0, 1_500.0, True), "Trump": (0.0, -500.0, False)}
    # cash: 10000 - 500 - 500 + 2000 = 11000
    assert state.books["alice"].cash == 11_000.0
    assert [r.won for r in state.books["alice"].brier_rows] == [1, 0]


@pytest.mark.parametrize("yes", [0.0, -0.1, 1.5])
def test_no_buy_at_a_price_outside_zero_to_one(
    state: CohortState, prices: Prices, yes: float
) -> None:
    prices.prices["bin"] = (yes, 0.5)
    (only,) = run(state, prices, [bet("bin", "YES", 100)])
    assert "is outside (0, 1]" in rejected(only).reason


def test_a_buy_at_price_one_fills(state: CohortState, prices: Prices) -> None:
    prices.prices["bin"] = (1.0, 0.0)
    (only,) = run(state, prices, [bet("bin", "YES", 100)])
    assert filled(only).shares == 100.0


def test_no_buy_without_a_price(state: CohortState, prices: Prices) -> None:
    del prices.prices["bin"]
    (only,) = run(state, prices, [bet("bin", "YES", 100)])
    assert rejected(only).reason == "no price for YES on market bin at this instant"


# -- positions --------------------------------------------------------------------------------


def test_a_second_bet_averages_into_the_open_position(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "YES", 1_000)])  # 1000 / 0.25 = 4000 shares
    prices.set_yes("bin", 0.5)
    (add,) = run(state, prices, [bet("bin", "YES", 500)])  # 500 / 0.5 = 1000 shares
    position = state.books["alice"].positions[("bin", "YES")]
    assert filled(add).position_id == position.id == "alice/bin/YES/1"
    # shares 4000 + 1000 = 5000; cost 1000 + 500 = 1500; average entry 1500 / 5000 = 0.3
    assert (position.shares, position.cost) == (5_000.0, 1_500.0)
    assert position.avg_entry == pytest.approx(0.3)


def test_yes_and_no_are_held_together(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "YES", 1_000), bet("bin", "NO", 600)])
    positions = state.books["alice"].positions
    assert sorted(positions) == [("bin", "NO"), ("bin", "YES")]
    assert positions[("bin", "NO")].shares == 800.0


def test_partial_then_full_sell_at_the_current_side_price(
    state: CohortState, prices: Prices
) -> None:
    run(state, prices, [bet("bin", "YES", 1_000)])  # 4000 shares, cost 1000, cash 9000
    prices.set_yes("bin", 0.5)
    (part,) = run(state, prices, sells=[sell("bin", "YES", 25)])
    # 25% of 4000 = 1000 shares x 0.5 = 500 proceeds; cost basis 25% of 1000 = 250; P/L +250
    part = filled(part)
    assert (part.shares, part.amount, part.cost_basis, part.realized) == (
        1_000.0,
        500.0,
        250.0,
        250.0,
    )
    position = state.books["alice"].positions[("bin", "YES")]
    # 3000 shares, cost 750, average entry unchanged at 750 / 3000 = 0.25
    assert (position.shares, position.cost, position.avg_entry) == (3_000.0, 750.0, 0.25)
    prices.set_yes("bin", 0.125)
    (rest,) = run(state, prices, sells=[sell("bin", "YES", 100)])
    # 3000 x 0.125 = 375 proceeds against 750 cost: P/L -375
    rest = filled(rest)
    assert (rest.amount, rest.cost_basis, rest.realized) == (375.0, 750.0, -375.0)
    book = state.books["alice"]
    assert book.positions == {}
    # realized 250 - 375 = -125; cash 9000 + 500 + 375 = 9875
    assert (book.realized, book.cash) == (-125.0, 9_875.0)
    assert book.n_sells == 2


def test_the_no_side_sells_at_one_minus_yes(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "NO", 750)])  # NO at 0.75: 1000 shares
    prices.set_yes("bin", 0.5)
    (done,) = run(state, prices, sells=[sell("bin", "no", 50)])
    # 500 shares x (1 - 0.5) = 250 proceeds; cost basis 375; P/L -125
    assert (filled(done).amount, filled(done).realized) == (250.0, -125.0)


@pytest.mark.parametrize("pct", [0.5, 101.0, float("nan")])
def test_sell_percentage_must_be_between_one_and_a_hundred(
    state: CohortState, prices: Prices, pct: float
) -> None:
    run(state, prices, [bet("bin", "YES", 1_000)])
    (only,) = run(state, prices, sells=[sell("bin", "YES", pct)])
    assert "must be between 1 and 100" in rejected(only).reason
    assert state.books["alice"].positions[("bin", "YES")].shares == 4_000.0


def test_one_percent_is_the_smallest_sell(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "YES", 1_000)])
    (only,) = run(state, prices, sells=[sell("bin", "YES", 1)])
    # 1% of 4000 = 40 shares x 0.25 = 10
    assert (filled(only).shares, filled(only).amount) == (40.0, 10.0)


def test_sell_by_position_id_and_unknown_positions(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "YES", 1_000)])
    by_id, missing, nothing_held = run(
        state,
        prices,
        sells=[
            SellIntent(position_id="alice/bin/YES/1", percentage=50),
            SellIntent(position_id="alice/bin/YES/9", percentage=50),
            sell("bin", "NO", 50),
        ],
    )
    assert filled(by_id).shares == 2_000.0
    assert rejected(missing).reason == "no open position 'alice/bin/YES/9'"
    assert rejected(nothing_held).reason == "no open NO position on market bin"


def test_a_bet_after_a_full_exit_opens_a_new_position(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "YES", 1_000)])
    run(state, prices, sells=[sell("bin", "YES", 100)])
    (again,) = run(state, prices, [bet("bin", "YES", 200)])
    # a fresh position: 200 / 0.25 = 800 shares and cost 200, nothing carried over
    assert filled(again).position_id == "alice/bin/YES/2"
    position = state.books["alice"].positions[("bin", "YES")]
    assert (position.id, position.shares, position.cost) == ("alice/bin/YES/2", 800.0, 200.0)


def test_sells_run_before_bets_in_one_decision(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "YES", 2_500)])  # cash 7500
    out = run(state, prices, [bet("bin", "NO", 2_000)], [sell("bin", "YES", 100)])
    # the sell returns 10000 shares x 0.25 = 2500 first: cash 10000, so 2000 <= 2500 fills
    assert [type(e) for e in out] == [OrderFilled, OrderFilled]
    assert filled(out[1]).cash_before == 10_000.0


# -- tradability ------------------------------------------------------------------------------


def test_a_market_trades_until_its_close(state: CohortState, prices: Prices) -> None:
    (before,) = run(state, prices, [bet("closing", "YES", 100)], ts=CLOSE_TS - 1)
    filled(before)
    at_close = run(
        state, prices, [bet("closing", "YES", 100)], [sell("closing", "YES", 50)], ts=CLOSE_TS
    )
    assert [rejected(e).reason for e in at_close] == ["market closing is closed"] * 2


def test_no_trading_on_a_resolved_market(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "YES", 100)])
    settle(state, "bin", 20, "No")
    (only,) = run(state, prices, [bet("bin", "YES", 100)], ts=30)
    assert rejected(only).reason == "market bin is already resolved"


def test_unknown_market_and_side(state: CohortState, prices: Prices) -> None:
    market, side, amount = run(
        state,
        prices,
        [bet("nope", "YES", 100), bet("bin", "MAYBE", 100), bet("bin", "YES", float("inf"))],
    )
    assert rejected(market).reason == "unknown market 'nope' (not in this cohort's universe)"
    assert rejected(side).reason == "side 'MAYBE' is not an outcome of market bin (Yes, No)"
    assert "must be a positive number of dollars" in rejected(amount).reason


def test_every_order_is_placed_then_filled_or_rejected(state: CohortState, prices: Prices) -> None:
    events = Broker(state, rules_for("v1")).execute(
        "alice",
        10,
        [bet("bin", "YES", 10), bet("bin", "YES", 100)],
        [sell("multi", "Trump", 50)],
        prices,
    )
    kinds = [(type(e).__name__, getattr(e, "order_id", None)) for e in events]
    assert kinds == [
        ("OrderPlaced", "o1"),
        ("OrderRejected", "o1"),
        ("OrderPlaced", "o2"),
        ("OrderRejected", "o2"),
        ("OrderPlaced", "o3"),
        ("OrderFilled", "o3"),
    ]
    placed = [e for e in events if isinstance(e, OrderPlaced)]
    assert [p.kind for p in placed] == ["sell", "buy", "buy"]
    for e in events:
        if isinstance(e, OrderRejected):
            assert e.reason and e.reason[0].isalpha() and "\n" not in e.reason
    assert state.n_orders == 3


def order_ids(events: list[Event]) -> list[tuple[str, str, str]]:
    """Each order event as (event type, order id, market)."""
    return [
        (type(e).__name__, e.order_id, e.market)
        for e in events
        if isinstance(e, (OrderPlaced, OrderFilled, OrderRejected))
    ]


def test_v2_filled_batch_gives_each_leg_its_own_consecutive_order_id(prices: Prices) -> None:
    state = make_state(rules="v2")
    broker = Broker(state, rules_for("v2"))
    legs = [bet("bin", "YES", 500), bet("multi", "Trump", 500), bet("bin", "NO", 500)]
    events = broker.execute("alice", 10, legs, [], prices)
    # all legs placed, then all filled (1500 <= 2500); each leg's id is taken after the last
    assert order_ids(events) == [
        ("OrderPlaced", "o1", "bin"),
        ("OrderPlaced", "o2", "multi"),
        ("OrderPlaced", "o3", "bin"),
        ("OrderFilled", "o1", "bin"),
        ("OrderFilled", "o2", "multi"),
        ("OrderFilled", "o3", "bin"),
    ]
    placed = {e.order_id: (e.market, e.side) for e in events if isinstance(e, OrderPlaced)}
    fills = [filled(e) for e in outcomes(events)]
    assert all(placed[f.order_id] == (f.market, f.side) for f in fills)
    assert state.n_orders == 3
    # the next decision (a sell first, then a batch) carries on from o4
    again = [bet("bin", "YES", 100), bet("multi", "Harris", 100)]
    more = broker.execute("alice", 20, again, [sell("bin", "NO", 50)], prices)
    assert [i for _, i, _ in order_ids(more)] == ["o4", "o4", "o5", "o6", "o5", "o6"]
    assert state.n_orders == 6


def test_v2_rejected_batch_gives_each_leg_its_own_consecutive_order_id(prices: Prices) -> None:
    state = make_state(rules="v2")
    events = Broker(state, rules_for("v2")).execute(
        "alice", 10, [bet("bin", "YES", 1_500), bet("multi", "Trump", 1_500)], [], prices
    )
    # 1500 + 1500 = 3000 > 2500: every leg rejected, each under its own id
    assert order_ids(events) == [
        ("OrderPlaced", "o1", "bin"),
        ("OrderPlaced", "o2", "multi"),
        ("OrderRejected", "o1", "bin"),
        ("OrderRejected", "o2", "multi"),
    ]
    assert all(rejected(e).reason.startswith("bet batch failed") for e in outcomes(events))
    assert (state.n_orders, state.books["alice"].n_rejected) == (2, 2)


def test_v1_decision_keeps_consecutive_order_ids(state: CohortState, prices: Prices) -> None:
    legs = [bet("bin", "YES", 500), bet("multi", "Trump", 500), bet("bin", "NO", 10)]
    events = Broker(state, rules_for("v1")).execute("alice", 10, legs, [], prices)
    assert order_ids(events) == [
        ("OrderPlaced", "o1", "bin"),
        ("OrderFilled", "o1", "bin"),
        ("OrderPlaced", "o2", "multi"),
        ("OrderFilled", "o2", "multi"),
        ("OrderPlaced", "o3", "bin"),
        ("OrderRejected", "o3", "bin"),
    ]
    assert state.n_orders == 3


# -- settlement, voids and Brier --------------------------------------------------------------


def test_settlement_pays_one_dollar_or_nothing(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "YES", 1_000), bet("bin", "NO", 600)])  # cash 8400
    events = settle(state, "bin", 20, "Yes")
    assert isinstance(events[0], MarketResolved)
    by_side = {e.side: e for e in events if isinstance(e, PositionSettled)}
    # YES: 4000 shares x $1 = 4000, realized 4000 - 1000 = 3000; NO: 800 x $0, realized -600
    assert (by_side["YES"].payout, by_side["YES"].realized) == (4_000.0, 3_000.0)
    assert (by_side["NO"].payout, by_side["NO"].realized) == (0.0, -600.0)
    book = state.books["alice"]
    # cash 8400 + 4000 = 12400 = 10000 + realized (3000 - 600)
    assert (book.cash, book.realized, book.positions) == (12_400.0, 2_400.0, {})


def test_a_void_refunds_the_remaining_cost_basis_and_scores_nothing(
    state: CohortState, prices: Prices
) -> None:
    run(state, prices, [bet("bin", "YES", 1_000)])  # 4000 shares, cost 1000, cash 9000
    prices.set_yes("bin", 0.5)
    run(state, prices, sells=[sell("bin", "YES", 50)])  # 2000 x 0.5 = 1000 back, basis 500
    events = void(state, "bin", 20)
    assert isinstance(events[0], MarketVoided)
    (refund,) = [e for e in events if isinstance(e, PositionRefunded)]
    # the refund is the cost left after the sell (1000 - 500 = 500), not the original 1000
    assert (refund.shares, refund.refund) == (2_000.0, 500.0)
    book = state.books["alice"]
    # cash 9000 + 1000 + 500 = 10500; P/L = 1000 + 500 - 1000 = 500 = realized on the sell
    assert (book.cash, book.realized) == (10_500.0, 500.0)
    assert book.brier_rows == [] and book.buys == {}
    assert state.resolutions == {"bin": None}


def test_brier_scores_stake_sizing(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "YES", 500)])
    settle(state, "bin", 20, "Yes")
    (row,) = state.books["alice"].brier_rows
    # $500 of a $2,500 maximum: confidence 0.2; it won: (0.2 - 1)^2 = 0.64
    assert (row.confidence, row.won, row.price) == (0.2, 1, 0.25)
    assert row.brier == pytest.approx(0.64)


def test_every_buy_is_scored_including_sold_and_add_on_buys(
    state: CohortState, prices: Prices
) -> None:
    run(state, prices, [bet("bin", "YES", 1_000)])  # confidence 1000 / 2500 = 0.4
    run(state, prices, [bet("bin", "YES", 450)])  # cash 9000: 450 / 2250 = 0.2
    run(state, prices, sells=[sell("bin", "YES", 100)])
    run(state, prices, [bet("bin", "NO", 500)])  # cash 10000 again: 500 / 2500 = 0.2
    run(state, prices, [bet("bin", "YES", 500)], agent="bob")  # 0.2, the other agent
    settle(state, "bin", 20, "No")
    rows = state.books["alice"].brier_rows
    # YES buys lost: (0.4 - 0)^2 = 0.16, (0.2 - 0)^2 = 0.04; the NO buy won: (0.2 - 1)^2 = 0.64
    assert [(r.side, r.won) for r in rows] == [("YES", 0), ("YES", 0), ("NO", 1)]
    assert [r.brier for r in rows] == pytest.approx([0.16, 0.04, 0.64])
    assert [r.brier for r in state.books["bob"].brier_rows] == pytest.approx([0.04])


def test_unresolved_buys_are_not_scored(state: CohortState, prices: Prices) -> None:
    run(state, prices, [bet("bin", "YES", 500), bet("multi", "Trump", 500)])
    settle(state, "multi", 20, "Trump")
    book = state.books["alice"]
    assert [r.market for r in book.brier_rows] == ["multi"]
    assert list(book.buys) == ["bin"]


def test_two_legs_of_one_v2_batch_score_as_two_brier_rows(prices: Prices) -> None:
    state = make_state(rules="v2")
    # two legs on the same market and side: one position, but two buys and two orders
    run(state, prices, [bet("bin", "YES", 500), bet("bin", "YES", 1_000)], rules="v2")
    assert state.books["alice"].positions[("bin", "YES")].shares == 6_000.0
    pending = state.snapshot()["books"]["alice"]["pending_buys"]
    assert [order_id for order_id, _ in pending] == ["o1", "o2"]
    settle(state, "bin", 20, "Yes")
    rows = state.books["alice"].brier_rows
    # 500 / 2500 = 0.2, then 1000 / (0.25 * 9500) = 1000 / 2375; both won
    assert [(r.order_id, r.market, r.side, r.won) for r in rows] == [
        ("o1", "bin", "YES", 1),
        ("o2", "bin", "YES", 1),
    ]
    assert [r.confidence for r in rows] == pytest.approx([0.2, 1_000 / 2_375])
    snapshot_rows = state.snapshot()["books"]["alice"]["brier_rows"]
    assert [order_id for order_id, _, _ in snapshot_rows] == ["o1", "o2"]


def test_non_finite_numbers_are_rejected_and_still_round_trip(
    state: CohortState, prices: Prices
) -> None:
    """JSON has no NaN or infinity (msgspec writes null), so the events carry None instead and
    the reason quotes what was asked; a NaN belief on a valid bet is dropped."""
    run(state, prices, [bet("bin", "YES", 1_000)])
    events = Broker(state, rules_for("v1")).execute(
        "alice",
        10,
        [
            bet("bin", "YES", float("inf")),
            BetIntent(market="bin", side="NO", amount=100, belief=math.nan),
        ],
        [sell("bin", "YES", float("nan"))],
        prices,
    )
    assert [decode(encode(e)) for e in events] == events
    nan_sell, inf_bet, good = outcomes(events)
    assert rejected(nan_sell).reason == "percentage nan must be between 1 and 100"
    assert rejected(inf_bet).reason == "amount inf must be a positive number of dollars"
    assert (rejected(inf_bet).amount, rejected(nan_sell).percentage) == (None, None)
    assert filled(good).belief is None
