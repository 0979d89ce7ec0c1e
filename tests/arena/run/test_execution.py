"""A cohort's execution model, end to end: what it records, what it costs, and that ``fa`` is
still the bytes it always was. Every figure is worked out by hand from the rule it names."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arena.run import execution
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.verify.fills import verify_fills
from ledger.errors import IntegrityError, LedgerError
from ledger.events import CohortOpened, Event, Marked, OrderFilled, PositionSettled
from ledger.execution import OrderBook
from ledger.store import EventStore
from ledger.stream import MemorySink
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from tests.conftest import WEEK, Arena, hand_config

BUY_THEN_SELL = [
    {"action": "BET", "bets": [{"market_id": "a", "side": "YES", "amount": 1000}]},
    {"action": "SELL", "sells": [{"market_id": "a", "side": "YES", "percentage": 100}]},
]


def scripted(tmp_path: Path, decisions: list[dict[str, Any]]) -> dict[str, str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(decisions))
    return {"s": f"scripted:{script}"}


def events(tape: Tape, config: CohortConfig) -> list[Event]:
    sink = MemorySink()
    run = CohortRunner(tape, config).run(sink)
    return sink.read(run.cohort)


def fills(log: list[Event]) -> list[OrderFilled]:
    return [e for e in log if isinstance(e, OrderFilled)]


def test_fa_is_the_default_and_the_same_bytes(hand_tape: Tape, tmp_path: Path) -> None:
    agents = scripted(tmp_path, BUY_THEN_SELL)
    default, explicit = hand_config(agents), hand_config(agents, execution="fa")
    assert default.cohort_id(hand_tape.hash) == explicit.cohort_id(hand_tape.hash)
    log = events(hand_tape, explicit)
    assert log == events(hand_tape, default)
    opened = log[0]
    assert isinstance(opened, CohortOpened) and "execution" not in opened.settings
    buy = fills(log)[0]
    assert (buy.price, buy.shares, buy.fee, buy.legs, buy.execution) == (
        0.5,
        2000.0,
        None,
        None,
        None,
    )
    touch = hand_config(agents, execution="touch?spread_ticks=2")
    assert touch.cohort_id(hand_tape.hash) != default.cohort_id(hand_tape.hash)
    # the id hashes the fees paid, not how they were asked for: touch's default is auto
    asked = hand_config(agents, execution="touch?spread_ticks=2", fees="auto")
    assert asked.cohort_id(hand_tape.hash) == touch.cohort_id(hand_tape.hash)
    free = hand_config(agents, execution="touch?spread_ticks=2", fees="none")
    assert free.cohort_id(hand_tape.hash) != touch.cohort_id(hand_tape.hash)


def test_touch_on_a_price_tape_pays_a_synthetic_spread(hand_tape: Tape, tmp_path: Path) -> None:
    """Market a is at 0.50 at the start and 0.75 a week later. Two ticks of 0.01 around the
    price: buy at 0.51, sell at 0.74. Fees: auto, but every category paid 0 in 2024."""
    agents = scripted(tmp_path, BUY_THEN_SELL)
    fa = fills(events(hand_tape, hand_config(agents)))
    log = events(hand_tape, hand_config(agents, execution="touch?spread_ticks=2"))
    opened = log[0]
    assert isinstance(opened, CohortOpened)
    assert opened.settings["execution"] == "touch?spread_ticks=2"
    assert opened.settings["fees"] == "auto"
    buy, sell = fills(log)
    shares = float(Fraction(1000) / Fraction("0.51"))  # 1,960.78… shares for the $1,000
    assert (buy.price, buy.shares, buy.amount, buy.synthetic) == (0.51, shares, 1000.0, True)
    assert [(leg.price, leg.shares, leg.level) for leg in buy.legs or ()] == [(0.51, shares, None)]
    assert buy.execution is not None and buy.execution.startswith("touch:")
    assert buy.fee is None and buy.requested is None
    proceeds = float(Fraction(shares) * Fraction("0.74"))
    assert (sell.price, sell.shares, sell.amount) == (0.74, shares, proceeds)
    assert sell.cost_basis == 1000.0 and sell.realized == proceeds - 1000.0
    # the same decisions at the tape's price: 2,000 shares sold for $1,500
    assert fa[1].realized == 500.0 > sell.realized


def crypto_tape() -> tuple[Tape, int]:
    """One crypto market in June 2026 (rate 0.07, fees in collateral), at 0.50 for a week."""
    t0 = int(datetime(2026, 6, 7, tzinfo=UTC).timestamp())
    market = MarketInfo(id="btc", question="btc?", outcomes=("Yes", "No"), volume=1.0,
                        category="crypto")  # fmt: skip
    series = {"btc": (np.array([t0 - 60, t0 + WEEK - 60], dtype=np.int64), np.array([0.5, 0.5]))}
    resolved = [Resolution(market="btc", ts=t0 + WEEK, winner="Yes")]
    return Tape.from_series([market], series, resolved, source="crypto"), t0


def test_a_fee_in_dollars_is_paid_beside_the_amount_and_costs_the_position(
    tmp_path: Path,
) -> None:
    """$100 at the midpoint 0.50: 200 shares; the fee C x rate x p(1 - p) = 200 x 0.07 x 0.25 =
    $3.50, paid beside the $100; the win pays $200, so the bet made 200 - 103.50 = $96.50."""
    tape, t0 = crypto_tape()
    bet = [{"action": "BET", "bets": [{"market_id": "btc", "side": "YES", "amount": 100}]}]
    config = CohortConfig(start=t0, agents=scripted(tmp_path, bet), universe=1,
                          execution="mid", fees="auto", decision_cadence="weekly")  # fmt: skip
    log = events(tape, config)
    [buy] = fills(log)
    assert (buy.price, buy.shares, buy.amount) == (0.5, 200.0, 100.0)
    assert (buy.fee, buy.fee_currency) == (3.5, "usdc")
    [settled] = [e for e in log if isinstance(e, PositionSettled)]
    assert (settled.payout, settled.cost, settled.realized) == (200.0, 103.5, 96.5)
    state = CohortRunner(tape, config).run(None).state
    assert state.books["s"].cash == 10_000 - 103.5 + 200
    without = fills(events(tape, config.model_copy(update={"fees": "none"})))
    assert without[0].fee is None and without[0].execution is not None


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--execution", "l2"), "execution 'l2' walks a recorded order book: give --books FILE"),
        (("--execution", "touch"), "needs --books FILE, or spread_ticks=K"),
        (("--execution", "nope"), "unknown execution model 'nope'"),
        (("--execution", "touch?spread_tick=2"), "model 'touch' has no parameter 'spread_tick'"),
        (("--fees", "auto"), "execution 'fa' charges no fee"),
        (("--latency", "250"), "shared liquidity and marks at the bid need books"),
        (("--liquidity", "shared"), "shared liquidity and marks at the bid need books"),
        (("--marks-at", "bid"), "shared liquidity and marks at the bid need books"),
    ],
)
def test_an_execution_that_cannot_run_is_one_line(
    arena: Arena, tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    result = arena("replay", *args, "--db", tmp_path / "x.db")
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and said in line
    assert not (tmp_path / "x.db").exists()


def test_verify_derives_every_fill_again_and_names_one_no_model_gives(
    hand_tape: Tape, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker patched in process to fill a tick cheaper writes a perfectly chained log;
    ``verify --tape`` derives each fill again under the cohort's model and catches it."""
    config = hand_config(scripted(tmp_path, BUY_THEN_SELL), execution="touch?spread_ticks=2")
    honest, patched = tmp_path / "honest.db", tmp_path / "patched.db"
    with EventStore.open(honest) as store:
        CohortRunner(hand_tape, config).run(store)
        assert verify_fills(store, hand_tape).derived == 2

    def cheaper(market: str, outcome: int, ts_ms: int, price: float, *order: Any) -> OrderBook:
        return OrderBook.quote(price - 0.01, ts_ms=ts_ms, token=f"{market}#{outcome}")

    monkeypatch.setattr(execution, "quote_books", cheaper)
    with EventStore.open(patched) as store:
        CohortRunner(hand_tape, config).run(store)
    monkeypatch.undo()
    with EventStore.open(patched) as store, pytest.raises(IntegrityError) as caught:
        verify_fills(store, hand_tape)
    assert "with price 0.5, where the touch model gives 0.51" in str(caught.value)


def test_l2_walks_the_recorded_books_and_verify_derives_it(arena: Arena, tmp_path: Path) -> None:
    """The embedded BTC books (September 2026, crypto: 0.07, charged in collateral): each leg
    at its level's price, with its own fee, C x 0.07 x p(1 - p) rounded down to 5 places."""
    db = tmp_path / "btc.db"
    done = arena("replay", "--tape", "sample-books", "--start", "2026-09-28T08:50",
                 "--decisions", "1m", "--marks", "1m", "--execution", "l2",
                 "--agent", "fav=favourite", "--agent", "con=contrarian", "--db", db)  # fmt: skip
    assert done.exit_code == 0, done.output
    with EventStore.open(db, readonly=True) as store:
        made = fills(list(store.read()))
    assert made and all(f.execution and f.execution.startswith("l2:") for f in made)
    for fill in made:
        legs = fill.legs or []
        assert legs and all(leg.level is not None for leg in legs)
        for leg in legs:
            exact = (
                Fraction(leg.shares)
                * Fraction("0.07")
                * Fraction(leg.price)
                * (1 - Fraction(leg.price))
            )
            assert leg.fee == float(Fraction(int(exact * 100_000), 100_000))
        assert fill.fee == pytest.approx(sum(leg.fee or 0.0 for leg in legs), abs=1e-12)
        assert fill.amount == pytest.approx(sum(leg.price * leg.shares for leg in legs))
    checked = arena("verify", db, "--tape", "sample-books")
    assert checked.exit_code == 0, checked.output
    said = " ".join(checked.stdout.split())
    assert f"{len(made)} fill(s) derived again under their execution model, as recorded" in said


def btc_log(arena: Arena, tmp_path: Path, *args: str) -> list[OrderFilled]:
    """Two favourites on the embedded BTC books under l2, deciding each minute."""
    db = tmp_path / f"btc{len(list(tmp_path.iterdir()))}.db"
    done = arena("replay", "--tape", "sample-books", "--start", "2026-09-28T08:50",
                 "--decisions", "1m", "--marks", "1m", "--execution", "l2", "--agent",
                 "one=favourite?stake=20000", "--agent", "two=favourite?stake=20000", *args,
                 "--db", db)  # fmt: skip
    assert done.exit_code == 0, done.output
    with EventStore.open(db, readonly=True) as store:
        return fills(list(store.read()))


def snapshot_of(fill: OrderFilled) -> tuple[int, list[float]]:
    """The instant (ms) and ask sizes of the snapshot a fill walked."""
    from replays.bookfile import load_books
    from replays.samples import sample_books_paths

    books = load_books(sample_books_paths()[1])
    assert fill.book is not None and fill.book.startswith(books.hash[:16])
    snap = books.snapshot(int(fill.book.split(":")[1]))
    return snap.ts, snap.ask_sz.tolist()


def test_an_order_meets_the_book_standing_when_it_arrives_never_a_later_one(
    arena: Arena, tmp_path: Path
) -> None:
    for latency in (0, 1500):
        made = btc_log(arena, tmp_path, "--latency", str(latency))
        assert made
        for fill in made:
            ts, _ = snapshot_of(fill)
            assert ts <= fill.ts * 1000 + latency  # no look-ahead past the arrival
        if latency:
            # the book a second and a half on is a newer snapshot than the decision's
            assert any(snapshot_of(f)[0] > f.ts * 1000 for f in made)


def test_shared_liquidity_takes_from_one_book_isolated_from_two(
    arena: Arena, tmp_path: Path
) -> None:
    """Two agents with the same rule at the same instant: isolated, each meets the whole book
    and gets the same fill; shared, the second meets what the first left, and between them
    they never take more than a level displayed."""
    isolated = btc_log(arena, tmp_path)
    first, second = isolated[0], isolated[1]
    assert (first.agent, second.agent) == ("one", "two") and first.book == second.book
    assert first.legs == second.legs
    shared = btc_log(arena, tmp_path, "--liquidity", "shared")
    one, two = shared[0], shared[1]
    assert one.book == two.book and one.legs == first.legs and two.legs != one.legs
    _, sizes = snapshot_of(one)
    taken: dict[int, float] = {}
    for leg in [*(one.legs or []), *(two.legs or [])]:
        assert leg.level is not None
        taken[leg.level] = taken.get(leg.level, 0.0) + leg.shares
    assert all(shares <= sizes[level] + 1e-9 for level, shares in taken.items())
    assert (two.price, one.price) != (first.price, first.price)  # the second paid more
    assert two.price > one.price


def test_the_levels_left_out_of_a_book_are_ones_no_order_reaches() -> None:
    """The book source cuts each snapshot after the levels an order can reach; every fill on
    the cut book is the fill on the whole one, for buys and sells of every size, with earlier
    consumption, on the first snapshots of every token of the embedded books."""
    from ledger.execution import L2Model, Order
    from replays.bookfile import load_books
    from replays.samples import sample_books_paths
    from replays.tapefile import load_tape

    tape_path, books_path = sample_books_paths()
    tape, books = load_tape(tape_path), load_books(books_path)
    source = execution.recorded_books(tape, books)
    model = L2Model(allow_one_sided=True)
    compared = 0
    for info in tape.markets:
        for outcome, label in enumerate(info.outcomes):
            k = books.token(info.id, label)
            first, _ = books.span(k) or (0, 0)
            for step in range(0, 300_000, 60_000):
                snap = books.book_at(k, first + step)
                if snap is None:
                    continue
                whole = OrderBook.of(
                    ts_ms=snap.ts, tick=snap.tick, id=f"{books.hash[:16]}:{snap.row}",
                    bids=list(zip(snap.bid_px.tolist(), snap.bid_sz.tolist(), strict=True)),
                    asks=list(zip(snap.ask_px.tolist(), snap.ask_sz.tolist(), strict=True)),
                )  # fmt: skip
                for side, size in (("buy", 50.0), ("buy", 5_000.0), ("sell", 300.0)):
                    order = Order.buy(size) if side == "buy" else Order.sell(size)
                    full = model.fill(order, whole)
                    consumed = getattr(full, "consumed", None)
                    cut = source(info.id, outcome, snap.ts, 0.5, side, size, 0.0)  # type: ignore[arg-type]
                    assert cut is not None
                    assert model.fill(order, cut) == full
                    if consumed:  # a second order on what the first left
                        again = source(info.id, outcome, snap.ts, 0.5, side, size,  # type: ignore[arg-type]
                                       float(sum(consumed.values())))  # fmt: skip
                        assert again is not None
                        assert model.fill(order, again, None, consumed) == model.fill(
                            order, whole, None, consumed
                        )
                    compared += 1
    assert compared > 200


def test_every_report_says_how_its_cohorts_filled(arena: Arena, tmp_path: Path) -> None:
    fa, touch = tmp_path / "fa.db", tmp_path / "touch.db"
    assert arena("replay", "--agent", "f=favourite", "--db", fa).exit_code == 0
    run = ("replay", "--agent", "f=favourite", "--execution", "touch?spread_ticks=2")
    assert arena(*run, "--db", touch).exit_code == 0
    said = " ".join(arena("report", fa).stdout.split())
    assert "fills: fa (the tape's price, whole, no fee)" in said
    said = " ".join(arena("report", touch).stdout.split())
    assert "fills: touch?spread_ticks=2, fees auto, no books, synthetic spread" in said
    [cohort] = arena.json("report", touch)["cohorts"]
    assert cohort["settings"]["execution"] == "touch?spread_ticks=2"


def test_marks_at_the_bid_value_a_position_at_what_it_would_fetch_now(tmp_path: Path) -> None:
    """Each mark's prices are each outcome's best bid in the book standing then (the books'
    latest snapshot at or before the mark), where the tape's marks are its prices."""
    from replays.bookfile import load_books
    from replays.samples import sample_books_paths
    from replays.tapefile import load_tape

    tape_path, books_path = sample_books_paths()
    tape, books = load_tape(tape_path), load_books(books_path)
    start = datetime(2026, 9, 28, 8, 50, tzinfo=UTC)
    base = CohortConfig(start=start, agents={"f": "favourite"}, decision_cadence="1m",
                        mark_cadence="1m", books=books.hash)  # fmt: skip
    at_bid = base.model_copy(update={"marks_at": "bid"})
    sink = MemorySink()
    CohortRunner(tape, at_bid, books=books).run(sink)
    plain = MemorySink()
    CohortRunner(tape, base, books=books).run(plain)
    bid_marks = [e for e in sink.read(next(iter(sink.streams))) if isinstance(e, Marked)]
    tape_marks = [e for e in plain.read(next(iter(plain.streams))) if isinstance(e, Marked)]
    assert len(bid_marks) == len(tape_marks) > 5
    below = 0
    for mark, tape_mark in zip(bid_marks, tape_marks, strict=True):
        for market, prices, tape_prices in zip(
            mark.markets, mark.prices, tape_mark.prices, strict=True
        ):
            info = tape.markets[tape.index[market]]
            for outcome, price, tape_price in zip(info.outcomes, prices, tape_prices, strict=True):
                snap = books.book_at(books.token(market, outcome), mark.ts * 1000)
                assert snap is not None and price == float(snap.bid_px[0])
                below += price < tape_price
    assert below > 0  # a bid sits under the price a tape records


def test_a_v2_batch_at_a_venue_fills_together_or_not_at_all(
    hand_tape: Tape, tmp_path: Path
) -> None:
    """v2: a decision's bets fill together or none does. With a synthetic spread of 120 ticks
    (0.60 either side), YES of b (0.20 at the start) is asked at 0.80 and fills; YES of a
    (0.50) would be asked at 1.10, which is no ask, so a batch holding both fills neither."""
    both = [{"action": "BET", "bets": [
        {"market_id": "b", "side": "YES", "amount": 100},
        {"market_id": "a", "side": "YES", "amount": 100},
    ]}]  # fmt: skip
    config = hand_config(scripted(tmp_path, both), rules="v2", execution="touch?spread_ticks=120")
    log = events(hand_tape, config)
    assert fills(log) == []
    rejected = [e for e in log if type(e).__name__ == "OrderRejected"]
    assert [r.reason for r in rejected] == [
        "bet batch failed, no trades executed: leg 2: no synthetic ask: 120 ticks around mid "
        "0.5 reach 1.1"
    ] * 2
    one = [{"action": "BET", "bets": [{"market_id": "b", "side": "YES", "amount": 100}]}]
    config = hand_config(scripted(tmp_path, one), rules="v2", execution="touch?spread_ticks=120")
    [fill] = fills(events(hand_tape, config))
    assert (fill.price, fill.shares, fill.amount) == (0.8, 125.0, 100.0)


def test_a_partial_fill_records_what_was_asked(arena: Arena, tmp_path: Path) -> None:
    """touch capped at the top level: a $2,500 bet takes what the best ask holds, and the fill
    says the $2,500 was asked."""
    db = tmp_path / "btc.db"
    done = arena("replay", "--tape", "sample-books", "--start", "2026-09-28T08:50",
                 "--decisions", "1m", "--marks", "1m", "--execution", "touch?cap=true",
                 "--agent", "big=favourite?stake=40000&markets=1", "--db", db)  # fmt: skip
    assert done.exit_code == 0, done.output
    with EventStore.open(db, readonly=True) as store:
        [first, *_] = fills(list(store.read()))
    assert first.requested == 2500.0 and first.amount < 2500.0
    assert len(first.legs or []) == 1 and (first.legs or [])[0].level == 0
    checked = arena("verify", db, "--tape", "sample-books")
    assert checked.exit_code == 0, checked.output


def test_books_that_are_not_the_cohort_s_are_refused(arena: Arena, tmp_path: Path) -> None:
    from replays.bookfile import load_books
    from replays.samples import sample_books_paths
    from replays.tapefile import load_tape

    tape_path, books_path = sample_books_paths()
    tape, books = load_tape(tape_path), load_books(books_path)
    start = datetime(2026, 9, 28, 8, 50, tzinfo=UTC)
    config = CohortConfig(start=start, agents={"f": "favourite"}, decision_cadence="1m",
                          execution="l2", books="ab" * 32)  # fmt: skip
    with pytest.raises(LedgerError, match=r"meets the books abababababab, given 5d5081eab9ef"):
        CohortRunner(tape, config, books=books)
    db = tmp_path / "btc.db"
    done = arena("replay", "--tape", "sample-books", "--start", "2026-09-28T08:50",
                 "--decisions", "1m", "--execution", "l2", "--agent", "f=favourite",
                 "--db", db)  # fmt: skip
    assert done.exit_code == 0, done.output
    refused = arena("verify", db, "--tape", tape_path)  # the tape, but not its books
    assert refused.exit_code == 1
    [line] = refused.stderr.strip().splitlines()
    assert "on order books 5d5081eab9ef, but the books given are none (--books)" in line
