"""A multi-outcome market end to end: view, bets on named outcomes, marks, settlement, Brier."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from ledger.events import Marked, OrderFilled, OrderRejected, PositionSettled
from ledger.projection import Ledger
from ledger.stream import MemorySink
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from strategies.api import Bet, Decision, Sell, Strategy, View

START = 1_704_585_600  # Sunday 2024-01-07 00:00 UTC
DAY = 86_400


def election() -> Tape:
    """One three-way market; prices (Trump, Harris, Other) move once, Harris wins at +14d."""
    market = MarketInfo(
        id="pres", question="Who wins?", outcomes=("Trump", "Harris", "Other"), volume=1e6
    )
    times = np.array([START - DAY, START + 7 * DAY], dtype=np.int64)
    prices = np.array([[0.5, 0.4, 0.1], [0.45, 0.5, 0.05]])
    return Tape.from_series(
        [market], {"pres": (times, prices)}, [Resolution(market="pres", ts=START + 14 * DAY,
                                                          winner="Harris")]
    )  # fmt: skip


class ThreeWay(Strategy):
    """Week 1: $1,000 on Harris, $50 on 'harris' (wrong case: rejected) and $500 on Other.
    Week 2: sells half of Other. Records what it saw."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[float, ...] | None] = []

    def decide(self, view: View) -> Decision:
        self.seen.append(view.markets.prices("pres"))
        if view.week == 1:
            return Decision(bets=[
                Bet(market="pres", side="Harris", amount=1_000.0),
                Bet(market="pres", side="harris", amount=50.0),
                Bet(market="pres", side="Other", amount=500.0),
            ])  # fmt: skip
        if view.week == 2:
            assert view.position("pres", "Other") is not None
            return Decision(sells=[Sell(percentage=50.0, market="pres", side="Other")])
        return Decision.hold()


def test_a_three_way_market_from_bet_to_settlement() -> None:
    strategy = ThreeWay()
    config = CohortConfig(start=datetime.fromtimestamp(START, UTC), agents={"x": "hold"},
                          decision_cadence="weekly", mark_cadence="weekly")  # fmt: skip
    run = CohortRunner(election(), config, strategies={"x": strategy}).run(None)
    assert strategy.seen[:2] == [(0.5, 0.4, 0.1), (0.45, 0.5, 0.05)]
    book = run.state.books["x"]
    # Harris: 1,000 / 0.4 = 2,500 shares, pays $2,500; Other: 500 / 0.1 = 5,000 shares, half
    # sold at 0.05 = $125 for a cost basis of $250 (realized -125); the rest (2,500 shares,
    # cost 250) pays 0 (realized -250). Cash: 10,000 - 1,500 + 125 + 2,500 = 11,125.
    assert book.cash == pytest.approx(11_125.0)
    assert book.realized == pytest.approx(1_500.0 - 125.0 - 250.0)
    assert book.positions == {}
    assert (book.n_bets, book.n_rejected) == (2, 1)
    # Brier: Harris conf min(1000 / 2500, 1) = 0.4 won -> 0.36; Other conf 500 / (0.25 * 9000)
    # = 0.2222 lost -> 0.0494 (sold positions are scored too)
    rows = {r.side: r for r in book.brier_rows}
    assert rows["Harris"].brier == pytest.approx((0.4 - 1) ** 2)
    assert rows["Other"].brier == pytest.approx((500 / 2_250) ** 2)


def test_the_log_of_a_three_way_market_rebuilds_and_names_outcomes_exactly() -> None:
    sink = MemorySink()
    config = CohortConfig(start=datetime.fromtimestamp(START, UTC), agents={"x": "hold"},
                          decision_cadence="weekly", mark_cadence="weekly")  # fmt: skip
    run = CohortRunner(election(), config, strategies={"x": ThreeWay()}).run(sink)
    collected = sink.read(run.cohort)
    rejected = [e for e in collected if isinstance(e, OrderRejected)]
    assert [r.reason for r in rejected] == [
        "side 'harris' is not an outcome of market pres (Trump, Harris, Other)"
    ]
    fills = [e for e in collected if isinstance(e, OrderFilled)]
    assert [(f.kind, f.side, f.price) for f in fills] == [
        ("buy", "Harris", 0.4), ("buy", "Other", 0.1), ("sell", "Other", 0.05),
    ]  # fmt: skip
    marks = [e for e in collected if isinstance(e, Marked)]
    assert marks[0].prices == [[0.5, 0.4, 0.1]]
    settled = {e.side: e.won for e in collected if isinstance(e, PositionSettled)}
    assert settled == {"Harris": True, "Other": False}
    rebuilt = Ledger().apply_all(collected)  # type: ignore[arg-type]
    assert rebuilt.cohorts[run.cohort].snapshot() == run.state.snapshot()
