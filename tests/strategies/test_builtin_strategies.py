"""The built-in trading agents decide what the formulas say, on views built by hand."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from ledger.events import DecisionMade, OrderRejected
from ledger.rules import RULES
from ledger.store import EventStore
from replays.markets import MarketInfo
from replays.samples import sample_path
from replays.tape import Tape
from replays.tapefile import load_tape
from strategies.api import (
    Bet,
    Decision,
    History,
    MarketMeta,
    MarketsView,
    PositionView,
    Sell,
    Strategy,
    StrategyError,
    View,
)
from strategies.builtin.edge import Linear, Sign
from strategies.builtin.extremized import Extremized
from strategies.builtin.price_side import Contrarian
from strategies.forecaster_registry import build_forecaster
from strategies.forecasters import (
    ExtremizedForecaster,
    FileForecaster,
    MarketForecaster,
)
from strategies.loader import BUILTINS, build_strategy
from strategies.market_diffusion.forecaster import DiffusionForecaster

T = 1_725_148_800  # 2024-09-01 00:00 UTC
DAY = 86_400


def make_view(
    yes: Sequence[float],
    *,
    cash: float = 10_000.0,
    held: Sequence[PositionView] = (),
    open_mask: Sequence[bool] | None = None,
    outcomes: Sequence[tuple[str, ...]] | None = None,
    history: History | None = None,
    cap_per_decision: bool = False,
) -> View:
    """A universe m0, m1, ... with the given YES prices, as the runner would build it."""
    n = len(yes)
    ids = tuple(f"m{i}" for i in range(n))
    prices = np.array(yes, dtype=np.float64)
    labels = outcomes or [("Yes", "No")] * n
    meta = [
        MarketMeta(ids[i], f"question {i}?", labels[i], None, 1.0, None, labels[i] == ("Yes", "No"))
        for i in range(n)
    ]

    def flat_history(j: int, t: int, since: int | None) -> tuple[np.ndarray, np.ndarray]:
        return np.array([T], dtype=np.int64), np.array([[prices[j]]])

    markets = MarketsView(
        ts=T,
        ids=ids,
        index={m: i for i, m in enumerate(ids)},
        meta=meta,
        yes=prices,
        open_mask=np.array(open_mask if open_mask is not None else [True] * n),
        volume=np.ones(n),
        binary=np.array([m.is_binary for m in meta]),
        prices=lambda j: (float(prices[j]), 1.0 - float(prices[j])),
        history=history or flat_history,
    )
    return View(
        ts=T,
        week=1,
        cash=cash,
        rules=RULES["v2" if cap_per_decision else "v1"],
        markets=markets,
        shares=np.zeros((n, 2)),
        _positions=lambda: tuple(held),
    )


def predictions(tmp_path: Path, probs: dict[str, float | str], name: str = "p.csv") -> Path:
    path = tmp_path / name
    rows = "".join(f"{m},{p}\n" for m, p in probs.items())
    path.write_text("market_id,pred_prob\n" + rows)
    return path


def trader(kind: str, path: Path, query: str = "") -> Strategy:
    return build_strategy(f"{kind}?forecaster=file:{path}{'&' + query if query else ''}")


def rows(bets: Sequence[Bet]) -> list[tuple[str, str, float, float | None]]:
    """Bets as tuples, beliefs rounded to 9 places (0.5 + 0.3 * 1.25 is not exactly 0.875)."""
    return [
        (b.market, b.side, b.amount, None if b.belief is None else round(b.belief, 9)) for b in bets
    ]


def held_yes(market: str, cost: float, price: float) -> PositionView:
    return PositionView(
        id=f"a/{market}/YES/1",
        market=market,
        side="YES",
        shares=cost / 0.5,
        cost=cost,
        price=price,
    )


# -- sign and linear -----------------------------------------------------------------------


def test_sign_stakes_B_on_the_favoured_side(tmp_path: Path) -> None:
    # p = 0.7 > q = 0.55 -> b = 500 * sign(0.15) = +500: $500 of YES, belief p = 0.7.
    # p = 0.3 < q = 0.4  -> b = -500: $500 of NO, belief 1 - 0.3 = 0.7.
    agent = trader("sign", predictions(tmp_path, {"m0": 0.7, "m1": 0.3}), "B=500")
    decision = agent.decide(make_view([0.55, 0.4]))
    assert decision.sells == []
    assert rows(decision.bets) == [("m0", "YES", 500.0, 0.7), ("m1", "NO", 500.0, 0.7)]


def test_linear_sizes_by_the_edge_and_skips_below_the_minimum(tmp_path: Path) -> None:
    # m0: b = 1000 * (0.6 - 0.5) = $100 YES.   m1: b = 1000 * (0.52 - 0.5) = $20 < $50: skipped.
    agent = trader("linear", predictions(tmp_path, {"m0": 0.6, "m1": 0.52}), "B=1000")
    decision = agent.decide(make_view([0.5, 0.5]))
    assert decision.bets == [Bet(market="m0", side="YES", amount=100.0, belief=0.6)]
    assert "below the $50.00 minimum: m1 YES $20.00" in decision.reasoning


def test_linear_bets_no_on_a_negative_edge(tmp_path: Path) -> None:
    # b = clip(1000 * (0.1 - 0.9), -1000, 1000) = -800 -> $800 of NO, belief 1 - 0.1 = 0.9.
    agent = trader("linear", predictions(tmp_path, {"m0": 0.1}), "B=1000")
    assert agent.decide(make_view([0.9])).bets == [
        Bet(market="m0", side="NO", amount=800.0, belief=0.9)
    ]


def test_reversal_sells_all_then_bets_the_other_side(tmp_path: Path) -> None:
    # Holding YES on m0; now p = 0.4 < q = 0.55 favours NO: sell 100% of YES, then b = -500.
    agent = trader("sign", predictions(tmp_path, {"m0": 0.4}), "B=500")
    view = make_view([0.55], held=[held_yes("m0", 500.0, 0.55)])
    decision = agent.decide(view)
    assert decision.sells == [Sell(percentage=100.0, position_id="a/m0/YES/1")]
    assert decision.bets == [Bet(market="m0", side="NO", amount=500.0, belief=0.6)]
    assert decision.action == "MIXED"
    assert "sold all YES on m0" in decision.reasoning


def test_a_held_side_counts_toward_the_target(tmp_path: Path) -> None:
    # sign: holding $500 YES with b = +500 -> nothing to add.
    # linear B=1000, p - q = 0.1 -> target $100; held cost $40 -> top up $60;
    # held cost $60 -> shortfall $40 < $50 -> skipped.
    path = predictions(tmp_path, {"m0": 0.6})
    assert not trader("sign", path).decide(make_view([0.5], held=[held_yes("m0", 500, 0.5)])).bets
    linear = trader("linear", path, "B=1000")
    topped = linear.decide(make_view([0.5], held=[held_yes("m0", 40.0, 0.5)]))
    assert topped.bets == [Bet(market="m0", side="YES", amount=60.0, belief=0.6)]
    skipped = linear.decide(make_view([0.5], held=[held_yes("m0", 60.0, 0.5)]))
    assert skipped.bets == [] and "m0 YES $40.00" in skipped.reasoning


def test_bets_are_cut_to_the_maximum_against_running_cash(tmp_path: Path) -> None:
    # cash 10,000: first bet max 0.25 * 10,000 = 2,500 (asked 5,000: cut);
    # v1 checks the next against running cash: 0.25 * (10,000 - 2,500) = 1,875.
    # The larger edge (m1: |0.9 - 0.6| = 0.3) gets the budget first.
    agent = trader("sign", predictions(tmp_path, {"m0": 0.7, "m1": 0.9}), "B=5000")
    decision = agent.decide(make_view([0.6, 0.6]))
    assert [(b.market, b.amount) for b in decision.bets] == [("m1", 2500.0), ("m0", 1875.0)]
    assert "cut from $5000.00 to the $2500.00 maximum" in decision.reasoning
    assert "cut from $5000.00 to the $1875.00 maximum" in decision.reasoning


def test_rules_v2_caps_the_decision_total(tmp_path: Path) -> None:
    # v2: all bets of a decision together <= 0.25 * 10,000 = 2,500: 2,000 then 500.
    agent = trader("sign", predictions(tmp_path, {"m0": 0.7, "m1": 0.9}), "B=2000")
    decision = agent.decide(make_view([0.6, 0.6], cap_per_decision=True))
    assert [(b.market, b.amount) for b in decision.bets] == [("m1", 2000.0), ("m0", 500.0)]


def test_transaction_cost_and_min_edge_are_hurdles(tmp_path: Path) -> None:
    # c = 0.1: m0 edge 0.08 - 0.1 < 0 -> no trade; m1 edge 0.15 - 0.1 = 0.05 > 0 -> trade.
    # min_edge 0.06 on top: 0.05 is not enough either.
    path = predictions(tmp_path, {"m0": 0.58, "m1": 0.65})
    costly = trader("sign", path, "c=0.1").decide(make_view([0.5, 0.5]))
    assert [b.market for b in costly.bets] == ["m1"]
    assert not trader("sign", path, "c=0.1&min_edge=0.06").decide(make_view([0.5, 0.5])).bets


def test_market_forecaster_never_trades() -> None:
    # p := q, so b = B * sign(0) = 0 everywhere.
    decision = build_strategy("sign?forecaster=market").decide(make_view([0.2, 0.5, 0.93]))
    assert decision.action == "HOLD"


def test_untradable_markets_are_left_alone(tmp_path: Path) -> None:
    # closed m0, a price of 1.0 on m1 (no NO to buy), multi-outcome m2, no forecast for m3.
    path = predictions(tmp_path, {"m0": 0.9, "m1": 0.2, "m2": 0.9})
    view = make_view(
        [0.5, 1.0, 0.5, 0.5],
        open_mask=[False, True, True, True],
        outcomes=[("Yes", "No"), ("Yes", "No"), ("A", "B", "C"), ("Yes", "No")],
    )
    assert trader("sign", path).decide(view).action == "HOLD"


def test_no_bets_when_cash_cannot_cover_the_minimum(tmp_path: Path) -> None:
    # 0.25 * 150 = 37.5 < 50: the sign rule's $500 has nowhere to go.
    decision = trader("sign", predictions(tmp_path, {"m0": 0.9})).decide(make_view([0.5], cash=150))
    assert decision.bets == [] and "no room" in decision.reasoning


@settings(max_examples=60, deadline=None)
@given(
    yes=st.lists(st.floats(0.01, 0.99), min_size=1, max_size=8),
    noise=st.lists(st.floats(-0.5, 0.5), min_size=8, max_size=8),
    cash=st.floats(0.0, 20_000.0),
    B=st.floats(1.0, 6_000.0),
    linear=st.booleans(),
)
def test_bets_always_pass_the_v1_broker_checks(
    yes: list[float], noise: list[float], cash: float, B: float, linear: bool
) -> None:
    # Whatever the forecasts, every bet is >= $50 and <= 25% of the cash left before it.
    view = make_view(yes, cash=cash)
    p = np.clip(np.array(yes) + np.array(noise[: len(yes)]), 0.0, 1.0)
    agent = (Linear if linear else Sign)(B=B)
    agent.forecaster = _Fixed(p)
    running = cash
    for bet in agent.decide(view).bets:
        assert 50.0 <= bet.amount <= 0.25 * running + 1e-9
        assert bet.amount <= B + 1e-9
        running -= bet.amount


class _Fixed:
    def __init__(self, p: np.ndarray) -> None:
        self.p = p

    def forecast(self, view: View) -> np.ndarray:
        return self.p


# -- extremized ----------------------------------------------------------------------------


def test_extremized_with_a_fixed_spread() -> None:
    # s = 0 <= 0.05 -> f = 1 + 0.5 = 1.5; q = 0.7 -> p = 0.5 + 0.2 * 1.5 = 0.8.
    # |0.8 - 0.7| = 0.1 > 0.05 -> sign rule: $500 YES with belief 0.8.
    # q = 0.52 -> p = 0.53, edge 0.03 < 0.05: no trade.
    decision = Extremized(spread=0.0).decide(make_view([0.7, 0.52]))
    assert rows(decision.bets) == [("m0", "YES", 500.0, 0.8)]


def test_extremized_measures_the_spread_from_history() -> None:
    # m0 history in the week: 0.6, 0.8 (now) -> population std 0.1 -> f = 1.5 - 5*(0.1-0.05) = 1.25
    #   p = 0.5 + 0.3 * 1.25 = 0.875, edge +0.075 -> YES, belief 0.875.
    # m1 history 0.5, 0.9 -> std 0.2 -> f = 0.75: p = 0.5 + 0.4 * 0.75 = 0.8, edge -0.1 -> NO,
    #   belief 0.2. A point older than the 7-day window (0.1) is left out of both.
    points = {0: [0.1, 0.6, 0.8], 1: [0.1, 0.5, 0.9]}

    def history(j: int, t: int, since: int | None) -> tuple[np.ndarray, np.ndarray]:
        times = np.array([T - 30 * DAY, T - 3 * DAY, T], dtype=np.int64)
        kept = times >= (since if since is not None else times[0])  # as the replay's Past cuts
        return times[kept], np.array(points[j]).reshape(-1, 1)[kept]

    decision = Extremized().decide(make_view([0.8, 0.9], history=history))
    # The larger edge (m1) is bet first.
    assert rows(decision.bets) == [("m1", "NO", 500.0, 0.2), ("m0", "YES", 500.0, 0.875)]


def test_extremized_forecaster_needs_two_points() -> None:
    # The default view has one point per market: no spread, so no forecast at all.
    assert np.isnan(ExtremizedForecaster().forecast(make_view([0.7]))).all()


class SpreadProbe(Strategy):
    """At each decision of a replay, the forecaster's spreads (which read only the window's
    points) beside the std of the whole history's points in the window, worked out here."""

    def __init__(self, window: int) -> None:
        super().__init__()
        self.forecaster = ExtremizedForecaster(window=window)
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []

    def decide(self, view: View) -> Decision:
        markets = view.markets
        want = np.full(len(markets), np.nan)
        for i in np.flatnonzero(markets.open & np.isfinite(markets.yes)):
            times, values = markets.history(markets.ids[i])
            recent = values[times >= view.ts - self.forecaster.window, 0]
            if recent.size >= 2:
                want[i] = recent.std()
        self.pairs.append((self.forecaster.spreads(markets), want))
        return Decision.hold()


def test_extremized_spreads_in_a_replay_equal_the_whole_history_cut_at_the_window() -> None:
    """Hourly points for 10 days against a 1-day window: the spreads read from the window's
    points alone equal those of the whole history cut by hand, at every decision; a market
    whose points are 3 days apart has no spread (no two points in any day) rather than an
    error once its last point has left the window."""
    hours = np.arange(240) * 3_600 + T
    rng = np.random.default_rng(5)
    markets = [MarketInfo(id=f"h{k}", question="?", outcomes=("Yes", "No")) for k in range(3)]
    series = {m.id: (hours, rng.uniform(0.05, 0.95, hours.size)) for m in markets[:2]}
    series["h2"] = (hours[::72], rng.uniform(0.05, 0.95, hours[::72].size))
    tape = Tape.from_series(markets, series, {})
    probe = SpreadProbe(window=DAY)
    config = CohortConfig(start=datetime.fromtimestamp(T, UTC), agents={"p": "hold"}, universe=3,
                          decision_cadence="tick", mark_cadence="weekly")  # fmt: skip
    CohortRunner(tape, config, strategies={"p": probe}).run(None)
    assert len(probe.pairs) == hours.size
    for got, want in probe.pairs:
        np.testing.assert_array_equal(got, want)
    assert np.isfinite(probe.pairs[-1][1][:2]).all() and np.isnan(probe.pairs[-1][1][2])


# -- contrarian ----------------------------------------------------------------------------


def test_contrarian_backs_the_underdogs_of_the_most_lopsided_markets() -> None:
    # |q - 0.5|: m0 0.4, m1 0.05, m2 0 (no underdog), m3 0.3, m4 held -> m0 then m3.
    # m0: NO at 0.1 -> 400 * 0.1 = $40 -> raised to the $50 minimum; m3: YES at 0.2 -> $80.
    held = PositionView("a/m4/NO/1", "m4", "NO", 10.0, 50.0, 0.01)
    view = make_view([0.9, 0.45, 0.5, 0.2, 0.99], held=[held])
    decision = Contrarian(markets=2).decide(view)
    assert rows(decision.bets) == [("m0", "NO", 50.0, 0.1), ("m3", "YES", 80.0, 0.2)]


def test_contrarian_holds_without_cash_or_underdogs() -> None:
    assert Contrarian().decide(make_view([0.9], cash=100)).action == "HOLD"
    assert Contrarian().decide(make_view([0.5, 1.0])).action == "HOLD"


# -- forecasters and settings ----------------------------------------------------------------


def test_file_forecaster_aligns_to_the_universe(tmp_path: Path) -> None:
    # Unknown ids are ignored, missing ones and blanks are NaN.
    path = predictions(tmp_path, {"zzz": 0.1, "m1": 0.25, "m2": ""})
    p = FileForecaster(path).forecast(make_view([0.5, 0.5, 0.5]))
    assert math.isnan(p[0]) and p[1] == 0.25 and math.isnan(p[2])


def test_file_forecaster_reads_jsonl_with_a_named_column(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"market_id": "m0", "mine": 0.3}\n\n{"market_id": "m1", "mine": 0.9}\n')
    p = FileForecaster(path, column="mine").forecast(make_view([0.5, 0.5]))
    assert p.tolist() == [0.3, 0.9]


@pytest.mark.parametrize(
    ("name", "text", "column", "message"),
    [
        ("p.csv", None, "pred_prob", "cannot read"),
        ("p.csv", "market_id,prob\nm0,0.5\n", "pred_prob", "missing column 'pred_prob'"),
        ("p.csv", "market_id,pred_prob\nm0,0.5\nm1,abc\n", "pred_prob", "row 2: pred_prob 'abc'"),
        ("p.csv", "market_id,pred_prob\nm0,1.5\n", "pred_prob", "row 1: pred_prob '1.5' is not"),
        (
            "p.csv",
            "market_id,pred_prob\nm0,0.5\nm0,0.6\n",
            "pred_prob",
            "row 2: market m0 already has a forecast in row 1",
        ),
        ("p.jsonl", '{"market_id": "m0"}\n', "pred_prob", "missing column 'pred_prob'"),
        (
            "p.jsonl",
            '{"market_id": "m0", "pred_prob": 1}\n{"market_id": "m1"}',
            "pred_prob",
            "row 2: no 'pred_prob'",
        ),
        ("p.jsonl", "[1]\n", "pred_prob", "row 1: expected a JSON object"),
        ("p.jsonl", "{oops\n", "pred_prob", "row 1: not valid JSON"),
        ("p.txt", "", "pred_prob", "unknown format, expected .csv or .jsonl"),
        ("p.csv", "market_id,pred_prob\n", "pred_prob", "no predictions"),
    ],
)
def test_bad_prediction_files_are_one_line_errors(
    tmp_path: Path, name: str, text: str | None, column: str, message: str
) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(StrategyError, match=message) as caught:
        build_strategy(f"sign?forecaster=file:{path}&column={column}")
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_forecaster_names() -> None:
    assert isinstance(build_forecaster("market"), MarketForecaster)
    assert isinstance(build_forecaster("extremized"), ExtremizedForecaster)
    assert isinstance(build_forecaster("diffusion"), DiffusionForecaster)
    with pytest.raises(StrategyError, match="unknown forecaster 'oracle': use market, ext"):
        build_forecaster("oracle")
    with pytest.raises(StrategyError, match=r"forecaster file needs an argument: file:PATH"):
        build_forecaster("file")
    with pytest.raises(StrategyError, match="takes no argument"):
        build_forecaster("market:now")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("sign?B=abc", "B"),
        ("sign?bogus=1", "bogus"),
        ("linear?c=-1", "c"),
        ("extremized?a=3", "a"),
        ("contrarian?markets=0", "markets"),
    ],
)
def test_bad_settings_name_the_field(spec: str, field: str) -> None:
    with pytest.raises(StrategyError, match=rf"bad settings: {field}:"):
        build_strategy(spec)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("favourite?stake=inf", "favourite: bad settings: stake: 'inf' is not finite"),
        ("random?max_amount=1e400", "random: bad settings: max_amount: '1e400' is not finite"),
        ("extremized?B=Infinity", "extremized: bad settings: B: 'Infinity' is not finite"),
        ("sign?forecaster=market&B=inf", "sign: bad settings: B: 'inf' is not finite"),
    ],
)
def test_a_setting_that_is_no_finite_number_is_refused(spec: str, message: str) -> None:
    """pydantic's lax floats take them, and no bound was written against them: stake=inf
    bet all the cash, B=inf raised an OverflowError at every decision."""
    with pytest.raises(StrategyError) as caught:
        build_strategy(spec)
    assert str(caught.value) == message


# -- a real replay -------------------------------------------------------------------------


def test_every_builtin_runs_the_sample_cleanly(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('[{"action": "HOLD"}]')
    # llm needs a model and a server; tests/strategies/test_llm_agent.py replays it against a
    # local one.
    agents = {name: name for name in BUILTINS if name != "llm"} | {
        "scripted": f"scripted:{script}",
        "sign_market": "sign?forecaster=market",
        "linear_big": "linear?B=5000",
    }
    config = CohortConfig(start=datetime(2024, 9, 1, tzinfo=UTC), agents=agents, universe=20)
    with EventStore.open(tmp_path / "run.db") as store:
        run = CohortRunner(load_tape(sample_path()), config).run(store)
        events = list(store.read(stream=run.cohort))
    decisions = [e for e in events if isinstance(e, DecisionMade)]
    assert decisions and all(e.error is None for e in decisions)
    assert [e.reason for e in events if isinstance(e, OrderRejected)] == []
    assert run.state.books["sign_market"].cash == 10_000.0
    traded = {e.agent for e in decisions if e.bets}
    assert {"favourite", "contrarian", "extremized", "sign", "linear", "linear_big"} <= traded
