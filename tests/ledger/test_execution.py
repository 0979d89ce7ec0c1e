"""The execution models (``ledger.execution``) against hand-worked books, and their invariants
over generated ones.

Golden vectors: the worked snapshot of the order-book sample (market 0x589c…8eb7 at
1790587077947 ms, UP; research notes on market mechanics §6.1, §7.6 W1), resolvedkit's walk
tests (§7.6 W2), the live V2 fee fill (§7.6 F7), and a round-number book of our own whose every
leg is worked below. Fees are the V2 rule ``C × rate × p × (1 − p)``, written here as a callable
(the real schedule lives elsewhere): exact, or rounded half up to 5 dp per level.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError
from ledger.events import OrderFilled
from ledger.execution import (
    FaModel,
    FeeUnknown,
    Fill,
    L2Model,
    LevelKey,
    MidModel,
    Order,
    OrderBook,
    Reason,
    Rejection,
    TakerFee,
    TouchModel,
    model_for,
    params_hash,
)
from ledger.execution.exact import nearest_quotient
from ledger.rules import Broker, rules_for
from tests.ledger.test_rules import Prices, bet, make_state, sell

D = Decimal
CENT = D("0.01")


def v2_fee(rate: str, *, rounded: bool = True) -> TakerFee:
    """Polymarket's V2 taker fee on one level, in dollars: shares × rate × p × (1 − p), rounded
    half up to 5 dp (or exact)."""
    r = D(rate)

    def fee(shares: Decimal, price: float) -> Decimal:
        p = D(repr(price))
        with localcontext() as ctx:
            ctx.prec = 200
            exact = shares * r * p * (1 - p)
        return exact.quantize(D("0.00001"), ROUND_HALF_UP) if rounded else exact

    return fee


def filled(result: Fill | Rejection) -> Fill:
    assert isinstance(result, Fill), f"expected a fill, got {result}"
    return result


def refused(result: Fill | Rejection) -> Rejection:
    assert isinstance(result, Rejection), f"expected a rejection, got {result}"
    return result


def legs(fill: Fill) -> list[tuple[Decimal, float, Decimal, int | None]]:
    """Each leg as (price, shares as the log would hold them, amount, level)."""
    return [(leg.price, float(leg.shares), leg.amount, leg.level) for leg in fill.legs]


# -- the worked snapshot of the order-book sample (§6.1) -------------------------------------

SAMPLE = OrderBook.of(
    ts_ms=1790587077947,
    asks=[
        ("0.49", "189.34"),
        ("0.50", "722.37"),
        ("0.51", "240"),
        ("0.52", "1082"),
        ("0.53", "723"),
        ("0.54", "4501.21"),
    ],
    bids=[("0.48", "10"), ("0.47", "140"), ("0.46", "926"), ("0.45", "1789")],
    tick="0.01",
    min_size="5",
)


def test_sample_buy_100_walks_two_levels_with_the_fee_per_level() -> None:
    fill = filled(L2Model(fee=v2_fee("0.07")).fill(Order.buy(100), SAMPLE, cash=10_000))
    # 189.34 @0.49 = $92.7766, then the last $7.2234 / 0.50 = 14.4468 shares
    assert legs(fill) == [
        (D("0.49"), 189.34, D("92.7766"), 0),
        (D("0.50"), 14.4468, D("7.2234"), 1),
    ]
    assert float(fill.shares) == 203.7868
    assert fill.amount == 100
    assert round(fill.average_price, 6) == D("0.490709")
    # 189.34 × 0.07 × 0.49 × 0.51 = 3.31212462 -> 3.31212; 14.4468 × 0.07 × 0.25 -> 0.25282
    assert [leg.fee for leg in fill.legs] == [D("3.31212"), D("0.25282")]
    assert fill.fee == D("3.56494")
    assert fill.cash_change == D("-103.56494")
    assert (fill.stop, fill.unfilled) == ("filled", 0)
    at_72 = filled(L2Model(fee=v2_fee("0.072")).fill(Order.buy(100), SAMPLE))
    assert at_72.fee == D("3.66680")  # the notes' $3.6668


def test_sample_buy_1000_walks_four_levels_to_052() -> None:
    fill = filled(L2Model(fee=v2_fee("0.07")).fill(Order.buy(1000), SAMPLE))
    # 92.7766 + 361.185 + 122.40 = 576.3616 on three whole levels, 423.6384 / 0.52 on the fourth
    assert [leg.price for leg in fill.legs] == [D("0.49"), D("0.50"), D("0.51"), D("0.52")]
    assert [leg.amount for leg in fill.legs] == [
        D("92.7766"),
        D("361.185"),
        D("122.40"),
        D("423.6384"),
    ]
    # the decimal quotient rounded once (the doubles' quotient 423.6384 / 0.52 is one ulp off)
    assert float(fill.legs[-1].shares) == float(Fraction("423.6384") / Fraction("0.52"))
    assert round(fill.shares, 4) == D("1966.3992")
    assert round(fill.average_price, 6) == D("0.508544")
    assert fill.fee == D("34.38617")


def test_sample_sell_500_walks_three_bid_levels() -> None:
    fill = filled(L2Model().fill(Order.sell(500), SAMPLE))
    assert legs(fill) == [
        (D("0.48"), 10.0, D("4.80"), 0),
        (D("0.47"), 140.0, D("65.80"), 1),
        (D("0.46"), 350.0, D("161.00"), 2),
    ]
    assert fill.amount == D("231.60")
    assert fill.cash_change == D("231.60")


def test_sample_fa_and_mid_fill_the_whole_bet_at_the_midpoint() -> None:
    assert SAMPLE.midpoint() == D("0.485")
    for model in (FaModel(), MidModel()):
        fill = filled(model.fill(Order.buy(100), SAMPLE))
        assert legs(fill) == [(D("0.485"), 100 / 0.485, D("100"), None)]
        assert round(fill.shares, 4) == D("206.1856")


def test_sample_touch_buys_at_the_best_ask_and_a_cap_stops_at_the_top_level() -> None:
    whole = filled(TouchModel().fill(Order.buy(100), SAMPLE))
    assert legs(whole) == [(D("0.49"), 100 / 0.49, D("100"), 0)]
    capped = filled(TouchModel(cap=True).fill(Order.buy(100), SAMPLE))
    assert legs(capped) == [(D("0.49"), 189.34, D("92.7766"), 0)]
    assert (capped.stop, capped.unfilled) == ("depth", D("7.2234"))
    sold = filled(TouchModel().fill(Order.sell(500), SAMPLE))
    assert legs(sold) == [(D("0.48"), 500.0, D("240.00"), 0)]


# -- resolvedkit's walk tests (§7.6 W2) ------------------------------------------------------

W2 = OrderBook.of(
    ts_ms=0,
    asks=[("0.50", "100"), ("0.52", "100"), ("0.60", "1000")],
    bids=[("0.48", "50"), ("0.45", "100")],
)


def test_w2_buy_80_takes_100_shares_then_30_dollars_at_052() -> None:
    fill = filled(L2Model().fill(Order.buy(80), W2))
    assert float(fill.shares) == 100 + 30 / 0.52


def test_w2_a_limit_of_052_with_500_dollars_fills_200_shares_depth_limited() -> None:
    fill = filled(L2Model().fill(Order.buy(500, limit="0.52"), W2))
    assert fill.shares == 200
    assert fill.amount == 102
    assert (fill.stop, fill.unfilled, fill.partial) == ("limit", 398, True)


def test_w2_sell_500_into_150_shares_of_bids_fills_150() -> None:
    fill = filled(L2Model().fill(Order.sell(500), W2))
    assert fill.shares == 150
    assert fill.amount == D("24.00") + D("45.00")
    assert (fill.stop, fill.unfilled) == ("depth", 350)


# -- the live V2 fee fill (§7.6 F7) ----------------------------------------------------------


def test_f7_buy_25_at_013_pays_the_notional_and_the_fee_in_cash() -> None:
    book = OrderBook.of(ts_ms=0, asks=[("0.13", "25")], bids=[("0.12", "100")])
    fill = filled(L2Model(fee=v2_fee("0.05", rounded=False)).fill(Order.buy("3.25"), book))
    assert fill.shares == 25
    assert fill.fee == D("0.141375")  # 25 × 0.05 × 0.13 × 0.87
    assert fill.cash_change == D("-3.391375")


# -- a round-number book of our own ----------------------------------------------------------

HAND = OrderBook.of(
    ts_ms=1_000,
    asks=[("0.40", "100"), ("0.50", "100"), ("0.60", "100")],
    bids=[("0.38", "100"), ("0.35", "100"), ("0.30", "100")],
    tick="0.01",
)


def test_hand_buy_70_walks_two_levels_each_at_its_price_with_its_fee() -> None:
    fill = filled(L2Model(fee=v2_fee("0.04")).fill(Order.buy(70), HAND, cash=1_000))
    # 100 @0.40 = $40 (fee 100 × 0.04 × 0.4 × 0.6 = 0.96), then $30 / 0.50 = 60 shares
    # (fee 60 × 0.04 × 0.25 = 0.60)
    assert legs(fill) == [(D("0.40"), 100.0, D("40.00"), 0), (D("0.50"), 60.0, D("30"), 1)]
    assert [leg.fee for leg in fill.legs] == [D("0.96"), D("0.6")]
    assert (fill.shares, fill.amount, fill.fee) == (160, 70, D("1.56"))
    assert fill.average_price == D("0.4375")
    assert fill.cash_change == D("-71.56")


def test_hand_fok_refuses_what_the_book_cannot_fill_and_fak_takes_what_it_holds() -> None:
    no = refused(L2Model(fok=True).fill(Order.buy(200), HAND))
    assert no.reason == Reason.FOK_UNFILLABLE
    assert str(no) == "FOK not fully fillable: the book holds $150.00 of the $200.00 asked"
    fak = filled(L2Model().fill(Order.buy(200), HAND))
    assert (fak.shares, fak.amount, fak.unfilled, fak.stop) == (300, 150, 50, "depth")
    fok = filled(L2Model(fok=True).fill(Order.buy(150), HAND))
    assert (fok.shares, fok.stop) == (300, "filled")
    sell = refused(L2Model(fok=True).fill(Order.sell(301), HAND))
    assert str(sell) == "FOK not fully fillable: the book holds 300 of the 301 shares asked"


def test_hand_sell_150_into_the_bids() -> None:
    fill = filled(L2Model(fee=v2_fee("0.04")).fill(Order.sell(150), HAND, cash=0))
    # 100 @0.38 + 50 @0.35; fees 100 × 0.04 × 0.38 × 0.62 = 0.9424, 50 × 0.04 × 0.35 × 0.65 = 0.455
    assert legs(fill) == [(D("0.38"), 100.0, D("38.00"), 0), (D("0.35"), 50.0, D("17.50"), 1)]
    assert fill.fee == D("1.3974")
    assert fill.cash_change == D("55.50") - D("1.3974")


def test_hand_limits_stop_the_walk_and_an_unreachable_one_is_refused() -> None:
    fill = filled(L2Model().fill(Order.buy(70, limit="0.45"), HAND))
    assert (fill.shares, fill.amount, fill.unfilled, fill.stop) == (100, 40, 30, "limit")
    no = refused(L2Model().fill(Order.buy(70, limit="0.39"), HAND))
    assert no.reason == Reason.LIMIT_UNREACHABLE
    assert str(no) == "limit not reachable: the best ask 0.4 is above the limit 0.39"
    no = refused(L2Model().fill(Order.sell(10, limit="0.39"), HAND))
    assert no.reason == Reason.LIMIT_UNREACHABLE
    sold = filled(L2Model().fill(Order.sell(250, limit="0.35"), HAND))
    assert (sold.shares, sold.stop) == (200, "limit")
    off = refused(L2Model().fill(Order.buy(70, limit="0.455"), HAND))
    assert off.reason == Reason.OFF_TICK


def test_hand_slippage_caps_the_walk_past_the_touch() -> None:
    fill = filled(L2Model(slippage=D("0.10")).fill(Order.buy(200), HAND))
    assert (fill.shares, fill.amount, fill.stop) == (200, 90, "limit")
    tighter = filled(L2Model(slippage=D("0.10")).fill(Order.buy(200, limit="0.40"), HAND))
    assert tighter.shares == 100
    sold = filled(L2Model(slippage=D("0.03")).fill(Order.sell(300), HAND))
    assert (sold.shares, sold.amount) == (200, D("73.00"))


def test_hand_own_fills_deplete_the_snapshot_until_a_newer_one_arrives() -> None:
    model = L2Model()
    first = filled(model.fill(Order.buy(70), HAND))
    key: LevelKey = (HAND.id, "ask", D("0.40"))
    assert first.consumed == {key: 100, (HAND.id, "ask", D("0.50")): 60}
    second = filled(model.fill(Order.buy(70), HAND, consumed=first.consumed))
    # 40 shares left at 0.50 for $20, then $50 / 0.60
    assert legs(second) == [
        (D("0.50"), 40.0, D("20.00"), 1),
        (D("0.60"), float(Fraction(50) / Fraction("0.6")), D("50"), 2),
    ]
    assert second.consumed[(HAND.id, "ask", D("0.50"))] == 100
    sells = filled(model.fill(Order.sell(10), HAND, consumed=second.consumed))
    assert sells.legs[0].price == D("0.38")  # the bids are untouched
    newer = HAND.of(ts_ms=2_000, asks=[("0.40", "100"), ("0.50", "100")], bids=[("0.38", "5")])
    again = filled(model.fill(Order.buy(70), newer, consumed=second.consumed))
    assert legs(again) == legs(first)
    assert all(k[0] == newer.id for k in again.consumed)  # the old snapshot's entries are gone
    used_up = filled(model.fill(Order.buy(1_000), HAND))
    no = refused(model.fill(Order.buy(1), HAND, consumed=used_up.consumed))
    assert str(no) == "no liquidity: this snapshot's asks are used up by earlier fills"


def test_hand_a_capped_touch_moves_to_the_next_level_once_the_top_is_taken() -> None:
    model = TouchModel(cap=True)
    first = filled(model.fill(Order.buy(70), HAND))
    assert legs(first) == [(D("0.40"), 100.0, D("40.00"), 0)]
    second = filled(model.fill(Order.buy(70), HAND, consumed=first.consumed))
    assert legs(second) == [(D("0.50"), 100.0, D("50.00"), 1)]


def test_hand_cash_limits_the_buy_so_amount_plus_fee_fits() -> None:
    fee = v2_fee("0.04")
    stepped = filled(L2Model(fee=fee, share_step=CENT).fill(Order.buy(70), HAND, cash=50))
    # 100 @0.40 + 0.96 fee leaves $9.04: s × 0.50 + s × 0.01 ≤ 9.04 -> s = 17.72
    # (17.72 costs 8.86 + 0.1772 = 9.0372; 17.73 would cost 9.0423)
    assert legs(stepped) == [(D("0.40"), 100.0, D("40.00"), 0), (D("0.50"), 17.72, D("8.8600"), 1)]
    assert stepped.fee == D("1.1372")
    assert stepped.cash_change == D("-49.9972")
    assert stepped.stop == "cash"
    unstepped = filled(
        L2Model(fee=v2_fee("0.04", rounded=False)).fill(Order.buy(70), HAND, cash=50)
    )
    last = unstepped.legs[-1]
    s = Fraction(last.shares)
    assert s * Fraction(51, 100) <= Fraction("9.04")  # the most shares that fit, to the double
    assert (s + Fraction(2) ** -48) * Fraction(51, 100) > Fraction("9.04")
    free = filled(L2Model().fill(Order.buy(70), HAND, cash=50))
    assert legs(free) == [(D("0.40"), 100.0, D("40.00"), 0), (D("0.50"), 20.0, D("10"), 1)]
    assert free.cash_change == -50


def test_hand_a_share_step_buys_whole_steps_and_leaves_dust() -> None:
    fill = filled(L2Model(share_step=CENT).fill(Order.buy("45.003"), HAND))
    # $5.003 at 0.50 buys 10.00 shares (10.006 rounded down), dust $0.003
    assert legs(fill) == [(D("0.40"), 100.0, D("40.00"), 0), (D("0.50"), 10.0, D("5.0000"), 1)]
    assert (fill.unfilled, fill.stop) == (D("0.003"), "filled")
    dust = refused(L2Model(share_step=CENT).fill(Order.buy("0.001"), HAND))
    assert dust.reason == Reason.BELOW_MIN_SIZE
    sold = filled(L2Model(share_step=CENT).fill(Order.sell("12.3456"), HAND))
    assert sold.shares == D("12.34")


# -- what is wrong with a book ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("bids", "asks", "reason", "message"),
    [
        (
            [("0.52", "1")],
            [("0.51", "1")],
            Reason.CROSSED,
            "crossed book: best bid 0.52 is above best ask 0.51",
        ),
        (
            [("0.5", "1")],
            [("0.5", "1")],
            Reason.LOCKED,
            "locked book: best bid and best ask are both 0.5",
        ),
        ([], [("0.5", "1")], Reason.ONE_SIDED, "one-sided book: no bids"),
        ([], [], Reason.EMPTY, "empty book: no bids and no asks"),
        (
            [("0.4", "1")],
            [("0.495", "1")],
            Reason.OFF_TICK,
            "off tick: ask 0 at 0.495 is not on the 0.01 tick",
        ),
        (
            [("0.4", "1")],
            [("0.5", "1"), ("0.49", "1")],
            Reason.UNORDERED,
            "unordered levels: ask 1 at 0.49 after 0.5 (best first, strictly ascending)",
        ),
        (
            [("0.4", "1"), ("0.4", "2")],
            [("0.5", "1")],
            Reason.UNORDERED,
            "unordered levels: bid 1 at 0.4 after 0.4 (best first, strictly descending)",
        ),
        (
            [("0.4", "0")],
            [("0.5", "1")],
            Reason.NON_POSITIVE_SIZE,
            "non-positive size: bid 0 holds 0 shares",
        ),
        (
            [("0.4", "1")],
            [("0.5", "NaN")],
            Reason.NON_POSITIVE_SIZE,
            "non-positive size: ask 0 holds NaN shares",
        ),
        (
            [("0.4", "1")],
            [("1.2", "1")],
            Reason.BAD_PRICE,
            "bad price: ask 0 at 1.2 is outside (0, 1]",
        ),
        ([("0", "1")], [("0.5", "1")], Reason.BAD_PRICE, "bad price: bid 0 at 0 is outside (0, 1]"),
    ],
)
def test_a_defective_book_is_refused_with_its_reason(
    bids: list[tuple[str, str]], asks: list[tuple[str, str]], reason: Reason, message: str
) -> None:
    book = OrderBook.of(ts_ms=0, bids=bids, asks=asks, tick="0.01")
    assert book.problems()[0] == Rejection(reason, message)
    for model in (L2Model(), TouchModel(), TouchModel(cap=True)):
        no = refused(model.fill(Order.buy(10), book))
        if reason == Reason.ONE_SIDED:
            assert no.reason == Reason.ONE_SIDED
        else:
            assert (no.reason, no.message) == (reason, message)


def test_one_sided_books_are_refused_unless_allowed_and_the_taken_side_must_exist() -> None:
    book = OrderBook.of(ts_ms=0, asks=[("0.5", "100")])
    assert refused(L2Model().fill(Order.buy(10), book)).reason == Reason.ONE_SIDED
    assert filled(L2Model(allow_one_sided=True).fill(Order.buy(10), book)).shares == 20
    no = refused(L2Model(allow_one_sided=True).fill(Order.sell(10), book))
    assert str(no) == "no liquidity: the book has no bids to sell into"
    assert refused(MidModel().fill(Order.buy(10), book)).reason == Reason.NO_PRICE


def test_a_book_of_doubles_is_read_on_its_tick_as_it_prints() -> None:
    book = OrderBook.of(ts_ms=0, bids=[(0.48, 10.0)], asks=[(0.49, 189.34), (0.57, 1.0)], tick=0.01)
    assert book.problems() == ()
    assert book.ask_px[0] == D(0.49) != D("0.49")  # the double's exact value
    off = OrderBook.of(ts_ms=0, bids=[(0.48, 10.0)], asks=[(0.495, 1.0)], tick=0.01)
    assert str(off.problems()[0]) == "off tick: ask 0 at 0.495 is not on the 0.01 tick"


def test_a_non_decimal_tick_grid_checks_every_level() -> None:
    good = OrderBook.of(ts_ms=0, bids=[("0.9950", "1")], asks=[("0.9975", "1")], tick="0.0025")
    assert good.problems() == ()
    bad = OrderBook.of(ts_ms=0, bids=[("0.994", "1")], asks=[("0.9975", "1")], tick="0.0025")
    assert str(bad.problems()[0]) == "off tick: bid 0 at 0.994 is not on the 0.0025 tick"


def test_book_ids_are_content_hashes_unless_given() -> None:
    again = OrderBook.of(
        ts_ms=HAND.ts_ms,
        asks=zip(HAND.ask_px, HAND.ask_sz, strict=True),
        bids=zip(HAND.bid_px, HAND.bid_sz, strict=True),
        tick="0.01",
    )
    assert again.id == HAND.id == HAND.content_hash()
    assert OrderBook.of(ts_ms=1_001, asks=[("0.4", "100")]).id != HAND.id
    assert OrderBook.of(ts_ms=0, asks=[("0.4", "1")], id="0xabc").id == "0xabc"


def test_the_complement_mirrors_the_book() -> None:
    no = HAND.complement()
    assert no.bid_px == (D("0.60"), D("0.50"), D("0.40"))
    assert no.ask_px == (D("0.62"), D("0.65"), D("0.70"))
    assert no.problems() == ()
    assert no.complement().ask_px == HAND.ask_px
    # buying NO at 0.62 is selling YES at 0.38 on the mirrored economics
    fill = filled(L2Model().fill(Order.buy("62"), no))
    assert fill.shares == 100


def test_bad_tick_or_minimum_size_is_an_error_when_the_book_is_built() -> None:
    with pytest.raises(LedgerError, match="tick size"):
        OrderBook.of(ts_ms=0, tick=0)
    with pytest.raises(LedgerError, match="not a number"):
        OrderBook.of(ts_ms=0, asks=[("x", "1")])


# -- the models' other refusals --------------------------------------------------------------


def test_a_stale_book_is_refused_and_a_book_from_the_future_is_an_error() -> None:
    model = L2Model(max_age_ms=5_000)
    assert isinstance(model.fill(Order.buy(10, at_ms=6_000), HAND), Fill)  # exactly 5 s old
    no = refused(model.fill(Order.buy(10, at_ms=6_001), HAND))
    assert no.reason == Reason.STALE
    assert str(no) == (
        "stale book: the snapshot is 5.001 s old when the order arrives, older than the 5 s limit"
    )
    assert refused(FaModel(max_age_ms=0).fill(Order.buy(10, at_ms=1_001), HAND)).reason == (
        Reason.STALE
    )
    with pytest.raises(LedgerError, match="newer than the order"):
        model.fill(Order.buy(10, at_ms=999), HAND)
    with pytest.raises(LedgerError, match="at_ms"):
        model.fill(Order.buy(10), HAND)


def test_orders_below_the_minimum_size_are_refused() -> None:
    model = L2Model()
    no = refused(model.fill(Order.buy(2), SAMPLE))  # 2 / 0.49 = 4.08 shares < 5
    assert str(no) == (
        "below minimum size: $2.00 buys fewer than the book's minimum of 5 shares at the best "
        "ask 0.49"
    )
    assert filled(model.fill(Order.buy("2.45"), SAMPLE)).shares == 5
    assert refused(model.fill(Order.buy(100), SAMPLE, cash=2)).reason == Reason.BELOW_MIN_SIZE
    assert refused(model.fill(Order.sell(3), SAMPLE)).reason == Reason.BELOW_MIN_SIZE
    assert filled(FaModel().fill(Order.buy(2), SAMPLE)).shares > 0  # fa knows no venue rules


def test_an_unknown_fee_refuses_the_order_and_a_negative_one_is_an_error() -> None:
    def unknown(shares: Decimal, price: float) -> Decimal:
        raise FeeUnknown("no fee facts for market 0x589c at 2026-09-28")

    no = refused(L2Model(fee=unknown).fill(Order.buy(100), SAMPLE))
    assert (no.reason, str(no)) == (
        Reason.FEE_UNKNOWN,
        "unknown fee: no fee facts for market 0x589c at 2026-09-28",
    )
    assert refused(TouchModel(fee=unknown).fill(Order.sell(10), SAMPLE)).reason == (
        Reason.FEE_UNKNOWN
    )

    def rebate(shares: Decimal, price: float) -> Decimal:
        return D("-0.01")

    with pytest.raises(LedgerError, match="not a non-negative"):
        L2Model(fee=rebate).fill(Order.buy(100), SAMPLE)


@pytest.mark.parametrize(
    "order",
    [
        Order.buy(0),
        Order.buy(-5),
        Order.buy(float("nan")),
        Order.buy(float("inf")),
        Order.sell(0),
        Order.buy(10, limit="1.5"),
        Order.buy(10, limit=0),
        Order(kind="buy"),
    ],
)
def test_an_invalid_order_is_refused_by_every_model(order: Order) -> None:
    for model in (FaModel(), MidModel(), TouchModel(), L2Model()):
        assert refused(model.fill(order, HAND)).reason == Reason.INVALID_ORDER


def test_no_cash_buys_nothing() -> None:
    no = refused(L2Model(fee=v2_fee("0.04")).fill(Order.buy(10), HAND, cash=0))
    assert no.reason == Reason.INSUFFICIENT_CASH
    assert refused(FaModel().fill(Order.buy(10), HAND, cash=9)).reason == Reason.INSUFFICIENT_CASH


# -- fa, mid and touch -----------------------------------------------------------------------


def test_fa_fills_at_the_quoted_price_and_refuses_where_there_is_none() -> None:
    point = OrderBook.quote(0.25, ts_ms=0)
    fill = filled(FaModel().fill(Order.buy(100.0), point))
    assert (float(fill.price), float(fill.shares), float(fill.amount)) == (0.25, 400.0, 100.0)
    sold = filled(FaModel().fill(Order.sell(400.0), OrderBook.quote(0.0, ts_ms=0)))
    assert sold.amount == 0  # a sale at 0 is allowed, a purchase is not
    assert refused(FaModel().fill(Order.buy(1), OrderBook.quote(0.0, ts_ms=0))).reason == (
        Reason.BAD_PRICE
    )
    assert refused(FaModel().fill(Order.buy(1), OrderBook.of(ts_ms=0))).reason == Reason.NO_PRICE


def test_mid_refuses_a_crossed_book_and_uses_a_quoted_mid_without_levels() -> None:
    crossed = OrderBook.of(ts_ms=0, bids=[("0.52", "1")], asks=[("0.51", "1")], mid="0.5")
    assert refused(MidModel().fill(Order.buy(10), crossed)).reason == Reason.CROSSED
    fill = filled(MidModel().fill(Order.buy(10), OrderBook.quote("0.4", ts_ms=0)))
    assert fill.shares == 25
    with_fee = filled(
        MidModel(fee=v2_fee("0.04")).fill(Order.buy(10), OrderBook.quote("0.4", ts_ms=0))
    )
    assert with_fee.fee == D("0.24")


def test_touch_on_a_mid_makes_up_a_spread_and_says_so() -> None:
    point = OrderBook.quote("0.485", ts_ms=0)
    assert refused(TouchModel().fill(Order.buy(10), point)).reason == Reason.EMPTY
    model = TouchModel(spread_ticks=1)
    bought = filled(model.fill(Order.buy("49"), point))
    assert (bought.price, bought.shares, bought.synthetic) == (D("0.490"), 100, True)
    sold = filled(model.fill(Order.sell(100), point))
    assert (sold.price, sold.amount, sold.synthetic) == (D("0.480"), 48, True)
    wide = filled(TouchModel(spread_ticks=4, tick=D("0.001")).fill(Order.buy(1), point))
    assert wide.price == D("0.487")
    # a made-up ask of $1 or more is no ask: nobody sells a share for what it can pay at most
    near = OrderBook.quote("0.995", ts_ms=0)
    edge = refused(TouchModel(spread_ticks=2).fill(Order.buy(1), near))
    assert edge.reason == Reason.NO_LIQUIDITY and "reach 1.005" in edge.message
    assert refused(
        TouchModel(spread_ticks=2).fill(Order.sell(1), OrderBook.quote("0.005", ts_ms=0))
    )
    top = OrderBook.quote("0.985", ts_ms=0)
    assert filled(TouchModel(spread_ticks=1).fill(Order.buy(1), top)).price == D("0.990")
    assert not filled(TouchModel(spread_ticks=1).fill(Order.buy(10), HAND)).synthetic


def test_models_by_name_and_their_parameter_hashes() -> None:
    model = model_for("l2", fok=True, slippage="0.02", share_step=0.01)
    assert model == L2Model(fok=True, slippage=D("0.02"), share_step=D("0.01"))
    assert model.params() == {
        "model": "l2",
        "max_age_ms": None,
        "share_step": "0.01",
        "fok": True,
        "slippage": "0.02",
        "allow_one_sided": False,
    }
    assert params_hash(model) == params_hash(
        model_for("l2", fok=True, slippage=D("0.02"), share_step="0.01")
    )
    assert params_hash(model) != params_hash(L2Model())
    assert params_hash(FaModel()) != params_hash(MidModel())
    assert params_hash(L2Model(fee=v2_fee("0.07"))) == params_hash(L2Model())  # the fee apart
    with pytest.raises(
        LedgerError, match=r"unknown execution model 'book' \(known: fa, mid, touch, l2\)"
    ):
        model_for("book")
    with pytest.raises(LedgerError, match="no parameter 'fok'"):
        model_for("touch", fok=True)


# -- invariants over generated books (§7.5) --------------------------------------------------

TICKS = [D("0.01"), D("0.001"), D("0.0025")]


@st.composite
def books(draw: st.DrawFn, *, deep: bool = False, floats: bool | None = None) -> OrderBook:
    """A valid two-sided book: prices on its tick from 0.01 to 0.99, strictly ordered, best
    bid below best ask; sizes with two decimals. ``deep``: each side's last level holds a
    million shares, so an order of up to $5,000 or 5,000 shares fills whole. Prices and sizes
    as decimal strings or as doubles."""
    tick = draw(st.sampled_from(TICKS))
    low, high = int(CENT / tick), int((1 - CENT) / tick)
    ask0 = draw(st.integers(low + 1, high))
    bid0 = draw(st.integers(low, ask0 - 1))
    asks = sorted({ask0, *draw(st.lists(st.integers(ask0 + 1, high + 1), max_size=5))})
    bids = sorted({bid0, *draw(st.lists(st.integers(low - 1, bid0 - 1), max_size=5))}, reverse=True)
    asks = [k for k in asks if k <= high]
    bids = [k for k in bids if k >= low]
    size = st.integers(1, 500_000).map(lambda n: D(n) / 100)
    ask_sz = [draw(size) for _ in asks]
    bid_sz = [draw(size) for _ in bids]
    if deep:
        ask_sz[-1] = bid_sz[-1] = D(1_000_000)
    as_float = draw(st.booleans()) if floats is None else floats

    def num(x: Decimal) -> Decimal | float:
        return float(x) if as_float else x

    return OrderBook.of(
        ts_ms=draw(st.integers(0, 10**13)),
        asks=[(num(k * tick), num(s)) for k, s in zip(asks, ask_sz, strict=True)],
        bids=[(num(k * tick), num(s)) for k, s in zip(bids, bid_sz, strict=True)],
        tick=tick,
    )


dollars = st.integers(1, 500_000).map(lambda cents: D(cents) / 100)  # $0.01 to $5,000
steps = st.sampled_from([None, CENT, D("0.0001")])
fees = st.sampled_from([None, "0.04", "0.07"])


def fee_of(rate: str | None) -> TakerFee | None:
    return None if rate is None else v2_fee(rate)


def l2(*, fee: str | None = None, **params: object) -> L2Model:
    model = model_for("l2", **params) if fee is None else model_for("l2", fee=v2_fee(fee), **params)
    assert isinstance(model, L2Model)
    return model


def F(x: Decimal | int) -> Fraction:
    """A decimal as an exact fraction: the tests' sums and products never round."""
    return Fraction(x)


def check_leg_arithmetic(fill: Fill, step: Decimal | None) -> None:
    """Every leg costs price × shares exactly, but the one that spends the order's last dollars
    without a step: its shares are those dollars over the price, to the nearest double (or the
    level's size where that double would exceed it)."""
    for i, leg in enumerate(fill.legs):
        if F(leg.amount) != F(leg.price) * F(leg.shares):
            assert step is None and fill.kind == "buy" and i == len(fill.legs) - 1
            rounded = leg.shares == nearest_quotient(leg.amount, leg.price)
            clamped = F(leg.amount) < F(leg.price) * F(leg.shares)  # the level's whole size
            assert rounded or clamped


def close_to_above(average: Fraction, floor: Decimal | Fraction) -> bool:
    """``average`` ≥ ``floor``, allowing the one rounding to a double of a last leg's shares
    (a relative 2⁻⁵³ at most, on each side)."""
    return average >= Fraction(floor) * (1 - Fraction(1, 2**51))


def doubles_book(book: OrderBook) -> bool:
    """Whether the generated book holds doubles (then its limits are given as doubles too)."""
    return any(p != D(repr(float(p))) for p in (*book.ask_px, *book.bid_px))


def limit_for(book: OrderBook, price: Decimal) -> Decimal | float:
    """A limit price as the book's own prices are given: a decimal, or the double nearest."""
    return float(price) if doubles_book(book) else price


def printed(price: Decimal) -> Decimal:
    return D(repr(float(price)))


@settings(max_examples=150, deadline=None)
@given(
    book=books(), amount=dollars, step=steps, rate=fees, limit_ticks=st.none() | st.integers(0, 20)
)
def test_a_buy_is_never_better_than_the_book(
    book: OrderBook,
    amount: Decimal,
    step: Decimal | None,
    rate: str | None,
    limit_ticks: int | None,
) -> None:
    ask, tick = book.ask_px[0], book.tick
    assert tick is not None
    limit = None
    if limit_ticks is not None:
        limit = limit_for(book, min(printed(ask) + limit_ticks * tick, D(1)))
    order = Order.buy(amount, limit=limit)
    result = l2(fee=rate, share_step=step).fill(order, book)
    if isinstance(result, Rejection):
        assert result.reason == Reason.BELOW_MIN_SIZE  # a step too coarse for the amount
        return
    for leg in result.legs:
        assert leg.price >= ask
        assert order.limit is None or leg.price <= order.limit
        assert leg.shares > 0 and leg.amount > 0 and leg.fee >= 0
    check_leg_arithmetic(result, step)
    if step is not None:
        assert result.exact_average() >= Fraction(ask)
    else:
        assert close_to_above(result.exact_average(), ask)
    assert result.amount <= amount
    assert result.stop in ("filled", "depth", "limit")


@settings(max_examples=150, deadline=None)
@given(book=books(), shares=dollars, rate=fees, limit_ticks=st.none() | st.integers(0, 20))
def test_a_sell_is_never_better_than_the_book(
    book: OrderBook, shares: Decimal, rate: str | None, limit_ticks: int | None
) -> None:
    bid, tick = book.bid_px[0], book.tick
    assert tick is not None
    limit = None
    if limit_ticks is not None:
        limit = limit_for(book, max(printed(bid) - limit_ticks * tick, tick))
    order = Order.sell(shares, limit=limit)
    fill = filled(l2(fee=rate).fill(order, book))
    for leg in fill.legs:
        assert leg.price <= bid
        assert order.limit is None or leg.price >= order.limit
        assert F(leg.amount) == F(leg.price) * F(leg.shares)
    assert fill.exact_average() <= Fraction(bid)
    assert F(fill.shares) + F(fill.unfilled) == F(shares)


@settings(max_examples=100, deadline=None)
@given(
    book=books(floats=False),
    orders=st.lists(
        st.tuples(st.sampled_from(["buy", "sell"]), dollars, st.sampled_from(["l2", "touch"])),
        min_size=1,
        max_size=8,
    ),
    step=steps,
)
def test_own_fills_never_take_more_than_a_level_displays(
    book: OrderBook, orders: list[tuple[str, Decimal, str]], step: Decimal | None
) -> None:
    consumed: dict[LevelKey, Decimal] = {}
    taken: dict[LevelKey, Fraction] = {}
    for kind, quantity, name in orders:
        model = L2Model(share_step=step) if name == "l2" else TouchModel(cap=True, share_step=step)
        order = Order.buy(quantity) if kind == "buy" else Order.sell(quantity)
        result = model.fill(order, book, consumed=consumed)
        if isinstance(result, Rejection):
            assert result.reason in (Reason.NO_LIQUIDITY, Reason.BELOW_MIN_SIZE)
            continue
        if kind == "sell":
            assert result.shares <= quantity
        for leg in result.legs:
            assert leg.level is not None
            key: LevelKey = (book.id, "ask" if kind == "buy" else "bid", leg.price)
            taken[key] = taken.get(key, Fraction(0)) + F(leg.shares)
        assert {k: F(v) for k, v in result.consumed.items()} == taken
        consumed = dict(result.consumed)
    displayed = {
        **{(book.id, "ask", p): s for p, s in zip(book.ask_px, book.ask_sz, strict=True)},
        **{(book.id, "bid", p): s for p, s in zip(book.bid_px, book.bid_sz, strict=True)},
    }
    for key, shares in taken.items():
        assert shares <= F(displayed[key])


@settings(max_examples=150, deadline=None)
@given(book=books(), a=dollars, b=dollars, step=steps)
def test_a_bigger_buy_never_gets_a_better_average_price(
    book: OrderBook, a: Decimal, b: Decimal, step: Decimal | None
) -> None:
    small, big = sorted((a, b))
    model = L2Model(share_step=step, allow_one_sided=True)
    first, second = model.fill(Order.buy(small), book), model.fill(Order.buy(big), book)
    assume(isinstance(first, Fill) and isinstance(second, Fill))
    assert isinstance(first, Fill) and isinstance(second, Fill)
    assert second.shares >= first.shares
    if step is not None:  # whole steps at exact prices: exact
        assert second.exact_average() >= first.exact_average()
    else:  # each last leg's shares carry one rounding to a double
        assert close_to_above(second.exact_average(), first.exact_average())


@settings(max_examples=100, deadline=None)
@given(book=books(), amount=dollars, ticks=st.integers(0, 30), more=st.integers(1, 30))
def test_a_higher_limit_never_fills_less(
    book: OrderBook, amount: Decimal, ticks: int, more: int
) -> None:
    tick = book.tick
    assert tick is not None
    ask = printed(book.ask_px[0])
    low, high = ask + ticks * tick, ask + (ticks + more) * tick
    assume(high <= 1)
    first = filled(L2Model().fill(Order.buy(amount, limit=limit_for(book, low)), book))
    second = filled(L2Model().fill(Order.buy(amount, limit=limit_for(book, high)), book))
    assert second.shares >= first.shares


@settings(max_examples=150, deadline=None)
@given(
    book=books(),
    amount=dollars,
    cash=dollars,
    step=steps,
    rate=fees,
    name=st.sampled_from(["l2", "touch", "mid"]),
)
def test_cash_never_goes_negative(
    book: OrderBook,
    amount: Decimal,
    cash: Decimal,
    step: Decimal | None,
    rate: str | None,
    name: str,
) -> None:
    params: dict[str, object] = {"share_step": step}
    if rate is not None:
        params["fee"] = v2_fee(rate)
    result = model_for(name, **params).fill(Order.buy(amount), book, cash=cash)
    if isinstance(result, Rejection):
        assert result.reason in (Reason.INSUFFICIENT_CASH, Reason.BELOW_MIN_SIZE)
        return
    assert F(result.amount) + F(result.fee) <= F(cash)
    assert F(cash) + F(result.cash_change) >= 0
    assert result.amount <= amount
    if result.stop == "cash" and step is None and rate is None:
        assert result.amount == cash  # without a fee the cash is spent to the cent


doubles = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False)
prices = st.floats(min_value=1e-4, max_value=1.0, exclude_min=False)


@settings(max_examples=300, deadline=None)
@given(price=prices, amount=doubles, shares=doubles)
def test_l2_on_a_flat_book_is_exactly_the_fa_rule(
    price: float, amount: float, shares: float
) -> None:
    flat = OrderBook.flat_at(price, ts_ms=0)
    assert flat.problems() == ()
    point = OrderBook.quote(price, ts_ms=0)
    for order in (Order.buy(amount), Order.sell(shares)):
        fa = filled(FaModel().fill(order, point))
        for model in (L2Model(), TouchModel(), TouchModel(cap=True), MidModel()):
            other = filled(model.fill(order, flat, cash=None))
            assert [(g.price, g.shares, g.amount, g.fee) for g in other.legs] == [
                (g.price, g.shares, g.amount, g.fee) for g in fa.legs
            ]
    bought = filled(L2Model().fill(Order.buy(amount), flat))
    assert (float(bought.shares), float(bought.amount)) == (amount / price, amount)
    sold = filled(L2Model().fill(Order.sell(shares), flat))
    assert (float(sold.shares), float(sold.amount)) == (shares, shares * price)


@settings(max_examples=100, deadline=None)
@given(
    price=st.floats(min_value=0.01, max_value=0.99),
    amount=st.floats(min_value=50, max_value=2_500),
    pct=st.floats(1, 100),
)
def test_fa_is_the_brokers_arithmetic_bit_for_bit(price: float, amount: float, pct: float) -> None:
    state, prices = make_state(), Prices()
    prices.set_yes("bin", price)
    broker = Broker(state, rules_for("v1"))
    bought = [
        e
        for e in broker.execute("alice", 10, [bet("bin", "YES", amount)], [], prices)
        if isinstance(e, OrderFilled)
    ]
    assert bought, "the broker refused the bet"
    fa = filled(FaModel().fill(Order.buy(bought[0].amount), OrderBook.quote(price, ts_ms=0)))
    assert (float(fa.price), float(fa.shares), float(fa.amount)) == (
        bought[0].price,
        bought[0].shares,
        bought[0].amount,
    )
    sold = [
        e
        for e in broker.execute("alice", 11, [], [sell("bin", "YES", pct)], prices)
        if isinstance(e, OrderFilled)
    ]
    fa_sell = filled(FaModel().fill(Order.sell(sold[0].shares), OrderBook.quote(price, ts_ms=0)))
    assert (float(fa_sell.shares), float(fa_sell.amount)) == (sold[0].shares, sold[0].amount)


def pnl(fill: Fill, value: Decimal) -> Fraction:
    """P/L of a BUY held to a share value of ``value`` (1 or 0 at resolution, or a mark)."""
    return F(fill.shares) * F(value) + F(fill.cash_change)


@settings(max_examples=150, deadline=None)
@given(book=books(deep=True), amount=dollars, rate=st.sampled_from(["0.04", "0.07"]))
def test_pnl_orders_fa_over_touch_over_l2_over_l2_with_fees(
    book: OrderBook, amount: Decimal, rate: str
) -> None:
    order = Order.buy(amount)
    ladder = [
        filled(FaModel().fill(order, book)),
        filled(TouchModel().fill(order, book)),
        filled(L2Model().fill(order, book)),
        filled(L2Model(fee=v2_fee(rate)).fill(order, book)),
    ]
    assert all(f.stop == "filled" and f.amount == amount for f in ladder)
    mid = book.midpoint()
    assert mid is not None
    for value in (D(1), D(0), mid):
        pnls = [pnl(f, value) for f in ladder]
        assert pnls == sorted(pnls, reverse=True), (value, pnls)


@settings(max_examples=100, deadline=None)
@given(book=books(deep=True), shares=dollars, rate=st.sampled_from(["0.04", "0.07"]))
def test_sale_proceeds_order_fa_over_touch_over_l2_over_l2_with_fees(
    book: OrderBook, shares: Decimal, rate: str
) -> None:
    order = Order.sell(shares)
    ladder = [
        filled(FaModel().fill(order, book)),
        filled(TouchModel().fill(order, book)),
        filled(L2Model().fill(order, book)),
        filled(L2Model(fee=v2_fee(rate)).fill(order, book)),
    ]
    cash = [f.cash_change for f in ladder]
    assert cash == sorted(cash, reverse=True)


@settings(max_examples=100, deadline=None)
@given(book=books(), amount=dollars)
def test_fok_is_all_or_nothing_and_fak_never_fills_more_than_asked(
    book: OrderBook, amount: Decimal
) -> None:
    fak = L2Model().fill(Order.buy(amount), book)
    fok = L2Model(fok=True).fill(Order.buy(amount), book)
    if isinstance(fak, Rejection):
        assert isinstance(fok, Rejection)
        return
    assert F(fak.amount) + F(fak.unfilled) == F(amount)
    if fak.stop == "filled":
        assert isinstance(fok, Fill) and fok.legs == fak.legs
    else:
        assert refused(fok).reason == Reason.FOK_UNFILLABLE
