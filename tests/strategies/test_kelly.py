"""``kelly``: fractional Kelly stakes, worked by hand, on binary and three-outcome markets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.run.runner import CohortRunner
from ledger.events import OrderFilled
from ledger.rules import RULES
from ledger.store import EventStore
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from strategies.api import MarketMeta, MarketsView, PositionView, View
from strategies.builtin.kelly import Kelly, kelly_fraction, outcome_beliefs
from strategies.loader import build_strategy
from tests.conftest import START, hand_config

DAY = 86_400


def view(
    prices: Sequence[Sequence[float]],
    outcomes: Sequence[tuple[str, ...]],
    *,
    cash: float = 10_000.0,
    held: Sequence[PositionView] = (),
) -> View:
    """A universe m0, m1, ... with every outcome's price, as the runner builds it."""
    n = len(prices)
    ids = tuple(f"m{i}" for i in range(n))
    meta = [
        MarketMeta(ids[i], f"q{i}?", outcomes[i], None, 1.0, None, outcomes[i] == ("Yes", "No"))
        for i in range(n)
    ]
    markets = MarketsView(
        ts=START, ids=ids, index={m: i for i, m in enumerate(ids)}, meta=meta,
        yes=np.array([p[0] for p in prices], dtype=np.float64), open_mask=np.ones(n, bool),
        volume=np.ones(n), binary=np.array([m.is_binary for m in meta]),
        prices=lambda j: tuple(prices[j]), history=lambda j, t, s: (np.zeros(0), np.zeros((0, 1))),
    )  # fmt: skip
    return View(
        ts=START, week=1, cash=cash, rules=RULES["v1"], markets=markets,
        shares=np.zeros((n, 3)), _positions=lambda: tuple(held),
    )  # fmt: skip


def kelly(tmp_path: Path, probs: dict[str, float], query: str = "") -> Kelly:
    path = tmp_path / "p.csv"
    path.write_text("market_id,pred_prob\n" + "".join(f"{m},{p}\n" for m, p in probs.items()))
    agent = build_strategy(f"kelly?forecaster=file:{path}{'&' + query if query else ''}")
    assert isinstance(agent, Kelly)
    return agent


BINARY = ("Yes", "No")
RACE = ("A", "B", "C")


def test_kelly_fraction_and_beliefs_by_hand() -> None:
    assert kelly_fraction(0.6, 0.5) == pytest.approx(0.2)  # 0.1 / 0.5
    assert kelly_fraction(0.7, 0.5) == pytest.approx(0.4)
    assert kelly_fraction(0.9, 0.2) == pytest.approx(0.875)  # 0.7 / 0.8
    # 1 − 0.4 = 0.6 shared 0.3 : 0.2 between B and C
    assert outcome_beliefs(0.4, (0.5, 0.3, 0.2)) == pytest.approx([0.4, 0.36, 0.24])
    assert outcome_beliefs(0.3, (0.5, 0.5)) == pytest.approx([0.3, 0.7])


def test_binary_stakes_are_a_quarter_of_kelly(tmp_path: Path) -> None:
    """m0: p 0.6 at 0.5, f = 0.2, 0.25 × 0.2 × $10,000 = $500 of YES. m1: p 0.3 at 0.5, so NO
    at 0.5 with 0.7, f = 0.4, $1,000 of NO, first (the larger f). m2: no edge, no bet."""
    agent = kelly(tmp_path, {"m0": 0.6, "m1": 0.3, "m2": 0.5})
    decision = agent.decide(view([(0.5, 0.5), (0.5, 0.5), (0.5, 0.5)], [BINARY] * 3))
    assert [(b.market, b.side, b.amount, round(b.belief or 0, 9)) for b in decision.bets] == [
        ("m1", "NO", 1_000.0, 0.7),
        ("m0", "YES", 500.0, 0.6),
    ]


def test_full_kelly_is_cut_to_the_rules_maximum(tmp_path: Path) -> None:
    """p 0.9 at 0.2: f = 0.875, full Kelly $8,750, cut to 25% of $10,000 = $2,500."""
    agent = kelly(tmp_path, {"m0": 0.9}, "fraction=1")
    [bet] = agent.decide(view([(0.2, 0.8)], [BINARY])).bets
    assert (bet.side, bet.amount) == ("YES", 2_500.0)
    assert (
        "cut from $8750.00 to the $2500.00 maximum"
        in agent.decide(view([(0.2, 0.8)], [BINARY])).reasoning
    )


def test_the_decision_together_stays_within_a_quarter_of_cash(tmp_path: Path) -> None:
    """Full Kelly on three markets at p 0.7, q 0.5 (f = 0.4): $4,000 each. The first is cut to
    25% of $10,000, $2,500, and nothing is left for the others, under v1 as under v2."""
    agent = kelly(tmp_path, {"m0": 0.7, "m1": 0.7, "m2": 0.7}, "fraction=1")
    decision = agent.decide(view([(0.5, 0.5)] * 3, [BINARY] * 3))
    assert [(b.market, b.amount) for b in decision.bets] == [("m0", 2_500.0)]
    assert "no room left under the decision's maximum for m1 YES" in decision.reasoning


def test_a_held_stake_counts_and_a_small_one_is_skipped(tmp_path: Path) -> None:
    """$500 wanted, $400 held: $100 more. With $480 held, $20 is under the $50 minimum."""
    agent = kelly(tmp_path, {"m0": 0.6})
    held = PositionView("a/m0/YES/1", "m0", "YES", 800.0, 400.0, 0.5)
    [bet] = agent.decide(view([(0.5, 0.5)], [BINARY], held=[held])).bets
    assert bet.amount == 100.0
    almost = PositionView("a/m0/YES/1", "m0", "YES", 960.0, 480.0, 0.5)
    decision = agent.decide(view([(0.5, 0.5)], [BINARY], held=[almost]))
    assert decision.action == "HOLD"
    assert "below the $50.00 minimum: m0 YES $20.00" in decision.reasoning


def test_a_three_outcome_market_backs_the_outcome_kelly_prefers(tmp_path: Path) -> None:
    """Prices A 0.5, B 0.3, C 0.2. P(A) = 0.6: f_A = 0.2, $500 on A. P(A) = 0.4: B gets 0.36
    and C 0.24, f_B = 0.06 / 0.7 = 0.0857…, f_C = 0.04 / 0.8 = 0.05: B, 0.25 × 0.0857… ×
    $10,000 = $214.2857…, $214.28 in whole cents."""
    [bet] = kelly(tmp_path, {"m0": 0.6}).decide(view([(0.5, 0.3, 0.2)], [RACE])).bets
    assert (bet.side, bet.amount, bet.belief) == ("A", 500.0, 0.6)
    [bet] = kelly(tmp_path, {"m0": 0.4}).decide(view([(0.5, 0.3, 0.2)], [RACE])).bets
    assert (bet.side, bet.amount) == ("B", 214.28)
    assert bet.belief == pytest.approx(0.36)


def test_min_edge_is_a_hurdle(tmp_path: Path) -> None:
    agent = kelly(tmp_path, {"m0": 0.6}, "min_edge=0.1")  # edge 0.1 is not above 0.1
    assert agent.decide(view([(0.5, 0.5)], [BINARY])).action == "HOLD"


def test_the_market_forecaster_never_bets(tmp_path: Path) -> None:
    agent = build_strategy("kelly?forecaster=market")
    assert agent.decide(view([(0.5, 0.3, 0.2), (0.7, 0.3)], [RACE, BINARY])).action == "HOLD"


class Fixed:
    """A forecaster giving ``p`` for every market."""

    def __init__(self, p: float) -> None:
        self.p = p

    def forecast(self, view: View) -> np.ndarray:
        return np.full(len(view.markets), self.p)


@given(
    p=st.floats(0.01, 0.99),
    markets=st.lists(
        st.lists(st.floats(0.01, 0.98), min_size=2, max_size=5), min_size=1, max_size=6
    ),
    fraction=st.floats(0.01, 1.0),
    cash=st.floats(0.0, 1e6),
)
def test_bets_never_break_the_rules(
    p: float, markets: list[list[float]], fraction: float, cash: float
) -> None:
    """Whatever the forecast and prices: at most one outcome per market, each bet at least the
    minimum, all of them within 25% of cash, each on an outcome rated above its price."""
    agent = Kelly(forecaster="market", fraction=fraction)
    agent.forecaster = Fixed(p)
    labels = [tuple(f"o{k}" for k in range(len(prices))) for prices in markets]
    v = view(markets, labels, cash=cash)
    bets = agent.decide(v).bets
    assert len({b.market for b in bets}) == len(bets)
    assert sum(b.amount for b in bets) <= 0.25 * cash + 1e-9
    for bet in bets:
        i = int(bet.market[1:])
        k = labels[i].index(bet.side)
        assert bet.amount >= v.min_bet
        assert bet.belief == pytest.approx(outcome_beliefs(p, markets[i])[k])
        assert (bet.belief or 0) > markets[i][k]


def test_a_replay_fills_and_settles_a_three_outcome_market(tmp_path: Path) -> None:
    """One race A/B/C at 0.5/0.3/0.2 all along, P(A) = 0.6, A wins at +10 days. Week 1: $500
    on A at 0.5, 1,000 shares. Week 2: Kelly's stake on $9,500 is $475, under the $500 held,
    so no bet. A wins: 1,000 × $1. Cash 10,000 − 500 + 1,000 = $10,500."""
    race = MarketInfo(id="race", question="who?", outcomes=RACE, volume=1.0)
    times = np.array([START - DAY, START + 8 * DAY], dtype=np.int64)
    tape = Tape.from_series(
        [race], {"race": (times, np.array([[0.5, 0.3, 0.2]] * 2))},
        [Resolution(market="race", ts=START + 10 * DAY, winner="A")], source="race",
    )  # fmt: skip
    path = tmp_path / "p.csv"
    path.write_text("market_id,pred_prob\nrace,0.6\n")
    config = hand_config({"k": f"kelly?forecaster=file:{path}"}, universe=1)
    with EventStore.open(tmp_path / "run.db") as store:
        run = CohortRunner(tape, config).run(store)
        fills = [e for e in store.read(stream=run.cohort) if isinstance(e, OrderFilled)]
    assert [(f.side, f.amount, f.shares) for f in fills] == [("A", 500.0, 1_000.0)]
    assert run.state.books["k"].cash == pytest.approx(10_500.0)
