"""Scoring metrics against numbers worked out by hand, plus invariants over random inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.errors import LedgerError
from ledger.metrics import (
    MetricInputError,
    alr_to_simplex,
    asymmetric_extremize,
    bin_index,
    bounded_trader_profit,
    brier,
    brier_skill_score,
    ece,
    extremize_factor,
    group_calibration_bias,
    kelly_bankroll,
    log_loss,
    logit_to_prob,
    multiclass_brier,
    multiclass_log_loss,
    murphy,
    prob_to_logit,
    realized_trading_pnl,
    reliability,
    simplex_to_alr,
    squared_calibration_error,
)

approx = pytest.approx

# ---------------------------------------------------------------- proper scores


def test_brier_by_hand() -> None:
    # (0.8-1)^2 + (0.3-0)^2 + (0.5-1)^2 = 0.04 + 0.09 + 0.25 = 0.38; / 3
    assert brier([0.8, 0.3, 0.5], [1, 0, 1]) == approx(0.38 / 3, abs=1e-15)


def test_log_loss_by_hand() -> None:
    # -(ln 0.8 + ln 0.7) / 2 = (0.2231435513 + 0.3566749439) / 2 = 0.2899092476
    assert log_loss([0.8, 0.3], [1, 0]) == approx(0.2899092476, abs=1e-9)


def test_log_loss_clips_certain_misses_at_1e6() -> None:
    # p=0 with y=1 and p=1 with y=0 both cost about -ln(1e-6) = 13.8155 (the second exactly
    # -ln(1 - (1 - 1e-6)), which float rounding puts 1e-11 away), not infinity
    assert log_loss([0.0, 1.0], [1, 0]) == approx(-math.log(1e-6), rel=1e-10)


def test_squared_calibration_error_by_hand() -> None:
    # ((0.6-0.5)^2 + (0.2-0.5)^2) / 2 = (0.01 + 0.09) / 2 = 0.05
    assert squared_calibration_error([0.6, 0.2], [0.5, 0.5]) == approx(0.05, abs=1e-15)


def test_multiclass_brier_sums_over_classes() -> None:
    # row 1, y=0: 0.3^2 + 0.2^2 + 0.1^2 = 0.14; row 2, y=2: 0.2^2 + 0.5^2 + 0.7^2 = 0.78
    # mean = 0.46 (a per-class average would give 0.46 / 3)
    q = [[0.7, 0.2, 0.1], [0.2, 0.5, 0.3]]
    assert multiclass_brier(q, [0, 2]) == approx(0.46, abs=1e-15)


def test_multiclass_log_loss_clips_and_renormalises() -> None:
    # row 1: [0.2, 0.2, 0.2] renormalises to thirds: -ln(1/3) = ln 3
    # row 2: [0.5, 0.5, 0] clips the 0 to 1e-9, row sum 1 + 1e-9: -ln(1e-9 / (1 + 1e-9))
    q = [[0.2, 0.2, 0.2], [0.5, 0.5, 0.0]]
    expected = (math.log(3) + (-math.log(1e-9) + math.log1p(1e-9))) / 2
    assert multiclass_log_loss(q, [0, 2]) == approx(expected, rel=1e-12)


def test_brier_skill_score_references() -> None:
    p, y = [0.8, 0.3, 0.5], [1, 0, 1]  # B = 0.38/3
    # vs random: 1 - (0.38/3)/0.25 = 1 - 0.50667 = 0.49333
    assert brier_skill_score(p, y) == approx(1 - 0.38 / 3 / 0.25, abs=1e-15)
    # climatology: o = 2/3, B_ref = 2/9; 1 - (0.38/3)/(2/9) = 1 - 0.57 = 0.43
    assert brier_skill_score(p, y, "climatology") == approx(0.43, abs=1e-12)
    # market [0.6, 0.4, 0.5]: B_ref = (0.16 + 0.16 + 0.25)/3 = 0.57/3; 1 - 0.38/0.57 = 1/3
    assert brier_skill_score(p, y, [0.6, 0.4, 0.5]) == approx(1 / 3, abs=1e-12)


def test_brier_skill_score_guards_a_perfect_reference() -> None:
    # all outcomes 1: climatology B_ref = 1 * 0 = 0, guarded to 0 rather than dividing by zero
    assert brier_skill_score([0.9, 0.8], [1, 1], "climatology") == 0.0
    with pytest.raises(MetricInputError, match="reference"):
        brier_skill_score([0.9], [1], "crowd")


# ---------------------------------------------------------------- bins and ECE


def test_bin_index_right_closed_forecastbench_edges() -> None:
    q = np.array([0.0, 0.05, 0.05000001, 0.1, 1.0])
    # [0, 0.05] is bin 0, (0.05, 0.10] bin 1, and 1.0 the last bin (19)
    assert bin_index(q, 20, right_closed=True).tolist() == [0, 0, 1, 1, 19]


def test_bin_index_left_closed_keeps_one_in_last_bin() -> None:
    q = np.array([0.0, 0.05, 0.04999999, 0.1, 1.0])
    # [0, 0.05) is bin 0, [0.05, 0.10) bin 1, [0.95, 1.0] bin 19 (1.0 is not dropped)
    assert bin_index(q, 20, right_closed=False).tolist() == [0, 1, 0, 2, 19]


def test_ece_by_hand_and_edge_convention() -> None:
    p, y = [0.05, 0.08], [1, 0]
    # right-closed: 0.05 in bin 0, 0.08 in bin 1: (|1-0.05| + |0-0.08|)/2 = (0.95+0.08)/2 = 0.515
    assert ece(p, y, 20, right_closed=True) == approx(0.515, abs=1e-12)
    # left-closed: both in bin 1: mean q 0.065, mean y 0.5: |0.5-0.065| = 0.435
    assert ece(p, y, 20, right_closed=False) == approx(0.435, abs=1e-12)


def test_ece_three_bins_by_hand() -> None:
    p, y = [0.05, 0.05, 0.10, 0.875], [0, 1, 1, 1]
    # bins 0, 1, 17: 2/4*|0.5-0.05| + 1/4*|1-0.1| + 1/4*|1-0.875| = 0.225 + 0.225 + 0.03125
    assert ece(p, y) == approx(0.48125, abs=1e-12)


def test_reliability_reports_counts_and_means() -> None:
    stats = reliability([0.05, 0.05, 0.10, 0.875], [0, 1, 1, 1], 20)
    assert stats.count[[0, 1, 17]].tolist() == [2, 1, 1]
    assert stats.n == 4
    assert stats.observed[0] == 0.5
    assert math.isnan(stats.mean_forecast[5])  # empty bin


# ---------------------------------------------------------------- Murphy


def test_murphy_by_hand_exact_when_constant_within_bins() -> None:
    # bins {0.2: y 0,1} and {0.8: y 1,1}; o = 0.75
    # REL = (2*(0.2-0.5)^2 + 2*(0.8-1)^2)/4 = (0.18 + 0.08)/4 = 0.065
    # RES = (2*(0.5-0.75)^2 + 2*(1-0.75)^2)/4 = 0.25/4 = 0.0625
    # UNC = 0.75*0.25 = 0.1875; Brier = (0.04+0.64+0.04+0.04)/4 = 0.19 = REL - RES + UNC
    m = murphy([0.2, 0.2, 0.8, 0.8], [0, 1, 1, 1], 10)
    assert (m.reliability, m.resolution, m.uncertainty) == approx(
        (0.065, 0.0625, 0.1875), abs=1e-15
    )
    assert m.brier == approx(0.19, abs=1e-15)
    assert m.reconstructed == approx(m.brier, abs=1e-15)


def test_murphy_keeps_true_brier_apart_from_reconstruction() -> None:
    # one bin holding 0.1 and 0.3: REL = (0.2-0.5)^2 = 0.09, RES = 0, UNC = 0.25 -> 0.34,
    # but the true Brier is (0.01 + 0.49)/2 = 0.25: the within-bin variance term is missing
    m = murphy([0.1, 0.3], [0, 1], bins=1)
    assert m.reconstructed == approx(0.34, abs=1e-15)
    assert m.brier == approx(0.25, abs=1e-15)


# ---------------------------------------------------------------- group bias


def test_group_calibration_bias_by_hand() -> None:
    p, y = [0.2, 0.4, 0.6, 0.9, 0.5], [0, 1, 1, 1, 0]
    # residuals y-p: a: -0.2, 0.6 -> 0.2; b: 0.4, 0.1 -> 0.25; c: -0.5
    # worst 0.5; average (2*0.2 + 2*0.25 + 1*0.5)/5 = 1.4/5 = 0.28
    bias = group_calibration_bias(p, y, ["a", "a", "b", "b", "c"])
    assert bias.worst_abs_bias == approx(0.5, abs=1e-15)
    assert bias.avg_abs_bias == approx(0.28, abs=1e-15)
    assert bias.n_groups == 3


# ---------------------------------------------------------------- trading


def test_sign_pnl_by_hand() -> None:
    p, q, y = [0.7, 0.3, 0.5], [0.5, 0.4, 0.5], [1, 1, 0]
    # B=2, c=0.1: b = [2, -2, 0 (p == q)]
    # 2*(1-0.5) - 0.2 = 0.8; -2*(1-0.4) - 0.2 = -1.4; 0 -> mean -0.6/3 = -0.2
    pnl = realized_trading_pnl(p, q, y, B=2.0, transaction_cost=0.1, mode="sign")
    assert pnl == approx(-0.2, abs=1e-15)


def test_linear_pnl_by_hand() -> None:
    p, q, y = [0.7, 0.3, 0.5], [0.5, 0.4, 0.5], [1, 1, 0]
    # B=2, c=0.1: b = [0.4, -0.2, 0]
    # 0.4*0.5 - 0.04 = 0.16; -0.2*0.6 - 0.02 = -0.14; 0 -> mean 0.02/3
    pnl = realized_trading_pnl(p, q, y, B=2.0, transaction_cost=0.1, mode="linear")
    assert pnl == approx(0.02 / 3, abs=1e-15)


def test_pnl_rejects_unknown_mode() -> None:
    with pytest.raises(MetricInputError, match="mode"):
        realized_trading_pnl([0.6], [0.5], [1], mode="kelly")  # type: ignore[arg-type]


def test_kelly_by_hand_without_fee() -> None:
    p, q, y = [0.6, 0.2, 0.9], [0.5, 0.4, 0.5], [1, 1, 0]
    # row 1 YES f = 0.1/0.5 = 0.2, odds 1, won: 1 * (1 + 0.2) = 1.2
    # row 2 NO f = 0.2/0.4 = 0.5 -> cap 0.25, YES happened so NO lost: 1.2 * 0.75 = 0.9
    # row 3 YES f = 0.4/0.5 = 0.8 -> 0.25, lost: 0.9 * 0.75 = 0.675
    result = kelly_bankroll(p, q, y)
    assert result.n == 3
    assert result.final_bankroll == approx(0.675, abs=1e-15)
    assert result.roi == approx(-0.325, abs=1e-15)


def test_kelly_by_hand_fee_taken_before_bet() -> None:
    p, q, y = [0.6, 0.2, 0.9], [0.5, 0.4, 0.5], [1, 1, 0]
    # fee 0.1: row 1 pays 0.1*0.2 = 2% -> 0.98, won * 1.2 -> 1.176
    # row 2 pays 0.1*0.25 -> 1.176*0.975 = 1.1466, lost * 0.75 -> 0.85995
    # row 3 -> 0.85995*0.975 = 0.83845125, lost * 0.75 -> 0.6288384375
    result = kelly_bankroll(p, q, y, fee=0.1)
    assert result.final_bankroll == approx(0.6288384375, abs=1e-15)


def test_kelly_no_bet_wins_at_no_odds_and_skips_ties() -> None:
    # NO f = 0.2/0.4 = 0.5 -> 0.25, odds 0.4/0.6 = 2/3, NO won: 1 + 0.25*2/3 = 7/6;
    # the second row has p == q: no bet, factor 1
    result = kelly_bankroll([0.2, 0.5], [0.4, 0.5], [0, 1])
    assert result.final_bankroll == approx(7 / 6, abs=1e-15)


def test_bounded_trader_profit_by_hand() -> None:
    # |p-q| = 0.2, 0.05; c=0.1: max(0.1, 0) and max(-0.05, 0) -> mean 0.05, * B=2 -> 0.1
    assert bounded_trader_profit([0.7, 0.5], [0.5, 0.45], B=2.0, transaction_cost=0.1) == approx(
        0.1, abs=1e-15
    )
    # c=0: 2 * (0.2 + 0.05)/2 = 0.25
    assert bounded_trader_profit([0.7, 0.5], [0.5, 0.45], B=2.0) == approx(0.25, abs=1e-15)


# ---------------------------------------------------------------- transforms


def test_logit_by_hand() -> None:
    # ln(0.75/0.25) = ln 3; the inverse gives 0.75 back; 0 is clipped to 1e-6 first
    assert prob_to_logit([0.5, 0.75]).tolist() == approx([0.0, math.log(3)], abs=1e-15)
    assert logit_to_prob(math.log(3)) == approx(0.75, abs=1e-15)
    assert prob_to_logit(0.0) == approx(math.log(1e-6 / (1 - 1e-6)), abs=1e-12)


def test_alr_by_hand() -> None:
    # last category is the reference: [ln(0.2/0.5), ln(0.3/0.5)] = [ln 0.4, ln 0.6]
    assert simplex_to_alr([0.2, 0.3, 0.5]).tolist() == approx([math.log(0.4), math.log(0.6)])
    # zeros map to thirds: e^0/(1+2) each and 1/(1+2)
    assert alr_to_simplex([0.0, 0.0]).tolist() == approx([1 / 3] * 3, abs=1e-15)
    with pytest.raises(MetricInputError):
        simplex_to_alr([1.0])


def test_extremize_factor_by_hand() -> None:
    # a = 0.5: 1.5 at s <= 0.05, 0.75 at s >= 0.20, between f = 1.5 - 5(s - 0.05)
    # s = 0.10 -> 1.25; s = 0.125 -> 1.125
    factors = extremize_factor([0.0, 0.05, 0.10, 0.125, 0.20, 0.5])
    assert factors.tolist() == approx([1.5, 1.5, 1.25, 1.125, 0.75, 0.75], abs=1e-12)


def test_asymmetric_extremize_by_hand() -> None:
    p = [0.7, 0.7, 0.7, 0.95, 0.02]
    s = [0.03, 0.25, 0.10, 0.0, 0.0]
    # 0.5 + 0.2*1.5 = 0.8; 0.5 + 0.2*0.75 = 0.65; 0.5 + 0.2*1.25 = 0.75;
    # 0.5 + 0.45*1.5 = 1.175 -> clip 0.99; 0.5 - 0.48*1.5 = -0.22 -> clip 0.01
    assert asymmetric_extremize(p, s).tolist() == approx([0.8, 0.65, 0.75, 0.99, 0.01])


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("p", "y", "message"),
    [
        ([0.5, 0.5], [1], "differ in length"),
        ([0.5], [2], "0/1 label"),
        ([1.2], [1], "outside"),
        ([-0.1], [0], "outside"),
        ([float("nan")], [1], "finite"),
        ([], [], "empty"),
        ([[0.5]], [[1]], "1-D"),
        (["x"], [1], "not numeric"),
    ],
)
def test_bad_inputs_raise_a_ledger_error(p: list[object], y: list[object], message: str) -> None:
    with pytest.raises(LedgerError, match=message):
        brier(p, y)  # type: ignore[arg-type]


def test_bad_bins_and_stakes_raise() -> None:
    with pytest.raises(MetricInputError, match="bins"):
        ece([0.5], [1], bins=0)
    with pytest.raises(MetricInputError, match="B must be"):
        realized_trading_pnl([0.6], [0.5], [1], B=-1.0)
    with pytest.raises(MetricInputError, match="class"):
        multiclass_brier([[0.5, 0.5]], [2])


# ---------------------------------------------------------------- properties

probabilities = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
bin_counts = st.integers(min_value=1, max_value=30)


@st.composite
def forecasts_and_outcomes(draw: st.DrawFn) -> tuple[list[float], list[int]]:
    n = draw(st.integers(min_value=1, max_value=60))
    p = draw(st.lists(probabilities, min_size=n, max_size=n))
    y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return p, y


@given(forecasts_and_outcomes())
def test_brier_lies_in_unit_interval(data: tuple[list[float], list[int]]) -> None:
    assert 0.0 <= brier(*data) <= 1.0


@given(forecasts_and_outcomes(), bin_counts, st.booleans())
def test_ece_between_zero_and_one(
    data: tuple[list[float], list[int]], bins: int, right_closed: bool
) -> None:
    assert 0.0 <= ece(*data, bins, right_closed=right_closed) <= 1.0 + 1e-12


@given(st.data(), bin_counts, st.booleans())
def test_murphy_exact_when_forecasts_constant_within_bins(
    data: st.DataObject, bins: int, right_closed: bool
) -> None:
    # forecasts drawn from a few bin centres, so every bin holds one forecast value
    centres = (np.arange(bins) + 0.5) / bins
    k = data.draw(st.lists(st.integers(0, bins - 1), min_size=1, max_size=60))
    y = data.draw(st.lists(st.integers(0, 1), min_size=len(k), max_size=len(k)))
    m = murphy(centres[k], y, bins, right_closed=right_closed)
    assert m.reconstructed == approx(m.brier, abs=1e-12)
    assert min(m.reliability, m.resolution, m.uncertainty) >= 0.0


@given(st.lists(st.floats(0.01, 1.0), min_size=2, max_size=6))
def test_alr_round_trip(weights: list[float]) -> None:
    simplex = np.array(weights) / sum(weights)
    assert alr_to_simplex(simplex_to_alr(simplex)) == approx(simplex, abs=1e-12)


@given(st.floats(1e-6, 1 - 1e-6))
def test_logit_round_trip(p: float) -> None:
    assert logit_to_prob(prob_to_logit(p)) == approx(p, abs=1e-12)


@given(forecasts_and_outcomes())
def test_kelly_bankroll_stays_positive_and_ties_never_bet(
    data: tuple[list[float], list[int]],
) -> None:
    p, y = data
    assert kelly_bankroll(p, list(reversed(p)), y).final_bankroll > 0.0
    assert kelly_bankroll(p, p, y).final_bankroll == 1.0
