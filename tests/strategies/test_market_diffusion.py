"""The market diffusion forecaster: its features by hand, the market prior, what it may learn
from (nothing resolved later), its model file, and arena diffusion train/eval."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.api import Context, MarketMeta, ResolvedMarket, StrategyError
from strategies.builtin.edge import Sign
from strategies.diffusion import ALPHA_BAR, LOGIT_SCALE, Denoiser, DiffusionConfig
from strategies.loader import build_strategy
from strategies.market_diffusion.examples import ResolvedPath, market_rows, training_set
from strategies.market_diffusion.features import (
    CATEGORY_DIM,
    DAY,
    LOG_VOLUME_SCALE,
    MarketFacts,
    condition_dim,
    conditions,
    label_coordinates,
    ordered,
)
from strategies.market_diffusion.forecaster import DiffusionForecaster
from strategies.market_diffusion.model import (
    FORMAT,
    MarketModel,
    ModelFileError,
    Summary,
    _bisect,
    _mass_above,
    _prior_boundary,
    market_prior,
    market_weights,
)

TINY = DiffusionConfig(hidden=16, depth=2, steps=60, batch=32, lr=1e-3, sample_steps=8, mc=8)
T0 = 1_700_000_000


def logit(p: float) -> float:
    return math.log(p / (1 - p)) / LOGIT_SCALE


# -- features ------------------------------------------------------------------------------


def test_a_row_by_hand() -> None:
    times = np.array([T0, T0 + DAY, T0 + 8 * DAY, T0 + 9 * DAY])
    yes = np.array([0.5, 0.2, 0.6, 0.8])
    facts = MarketFacts("Will it rain?", "Weather", T0 + 19 * DAY, ((T0, 1000.0),))
    instant = T0 + 9 * DAY + 3600  # an hour after the last point
    row = conditions(facts, times, np.column_stack([yes, 1 - yes]), np.array([instant]))[0]
    assert row.shape == (condition_dim(2),)
    level, day, week, vol = row[:4]
    assert level == pytest.approx(logit(0.8))
    # a day back is T0 + 8d + 1h: the price then was the 0.6 of T0 + 8d
    assert day == pytest.approx(logit(0.8) - logit(0.6))
    # a week back is T0 + 2d + 1h: the price then was the 0.2 of T0 + 1d
    assert week == pytest.approx(logit(0.8) - logit(0.2))
    # the changes after that point: 0.2 → 0.6 → 0.8
    squares = (logit(0.6) - logit(0.2)) ** 2 + (logit(0.8) - logit(0.6)) ** 2
    assert vol == pytest.approx(math.sqrt(squares))
    age, to_end, end_known, volume, volume_known = row[4:9]
    assert age == pytest.approx(math.log1p(9 + 1 / 24) / 5)
    assert to_end == pytest.approx(math.log1p(10 - 1 / 24) / 5)
    assert (end_known, volume_known) == (1.0, 1.0)
    assert volume == pytest.approx(math.log1p(1000) / LOG_VOLUME_SCALE)
    category = row[9 : 9 + CATEGORY_DIM]
    assert np.count_nonzero(category) == 1 and abs(category.sum()) == 1
    text = row[9 + CATEGORY_DIM :]
    assert np.linalg.norm(text) == pytest.approx(1.0)


def test_unknowns_are_flagged_zero() -> None:
    facts = MarketFacts("q", None, None)
    row = conditions(facts, np.array([T0]), np.array([[0.5, 0.5]]), np.array([T0]))[0]
    assert row[:9].tolist() == [0.0] * 9  # price ½, no change, no age, no end, no volume
    assert not row[9 : 9 + CATEGORY_DIM].any()


def test_an_instant_before_any_point_is_refused() -> None:
    with pytest.raises(ValueError, match="price point at or before"):
        conditions(
            MarketFacts("q", None, None), np.array([T0]), np.ones((1, 2)) / 2, np.array([T0 - 1])
        )


@settings(max_examples=40, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 3 * DAY), min_size=1, max_size=30),
    prices=st.lists(st.floats(0, 1), min_size=30, max_size=30),
    cut=st.integers(0, 29),
)
def test_a_row_reads_nothing_after_its_instant(
    gaps: list[int], prices: list[float], cut: int
) -> None:
    times = T0 + np.cumsum([0, *gaps])
    yes = np.array(prices[: times.size])
    both = np.column_stack([yes, 1 - yes])
    k = min(cut, times.size - 1)
    instant = int(times[k])  # the next point, at least a second later, is unseen
    facts = MarketFacts("q", "c", T0 + 100 * DAY)
    whole = conditions(facts, times, both, np.array([instant]))
    known = conditions(facts, times[: k + 1], both[: k + 1], np.array([instant]))
    assert np.array_equal(whole, known)


def test_model_order_puts_yes_first_and_labels_are_unit() -> None:
    assert ordered(("No", "Yes")) == [1, 0]
    assert ordered(("Yes", "No")) == [0, 1]
    assert ordered(("Red", "Blue", "Green")) == [0, 1, 2]
    assert label_coordinates(0, 2).tolist() == pytest.approx([1.0])
    assert label_coordinates(1, 2).tolist() == pytest.approx([-1.0])
    # three outcomes, the last (the reference) won: both coordinates ln(ε/(1 − 2ε))/6.9068
    assert label_coordinates(2, 3) == pytest.approx([math.log(1e-3 / 0.998) / LOGIT_SCALE] * 2)


# -- the market prior and the sampler -------------------------------------------------------


def zero_model(outcomes: int = 2, config: DiffusionConfig = TINY) -> MarketModel:
    d = Denoiser.init(condition_dim(outcomes), 16, 2, np.random.default_rng(0), outcomes - 1)
    d.params["out.W"][:] = 0.0
    d.params["out.b"][:] = 0.0
    return MarketModel({outcomes: d}, Summary(config, 0, T0, {outcomes: 1}, {outcomes: 1}, {}))


def test_a_network_that_adds_nothing_forecasts_the_price() -> None:
    q = np.array([0.0005, 0.003, 0.01, 0.05, 0.2, 0.5, 0.8, 0.99])
    model = zero_model(config=DiffusionConfig(sample_steps=32, mc=16))
    p = model.forecast(2, np.zeros((q.size, condition_dim(2))), np.column_stack([q, 1 - q]))
    # the 32-step sampler's discretisation; measured 0.000472, 0.00287 … 0.9903
    assert p[:, 0] == pytest.approx(q, rel=0.07)
    assert np.all(np.diff(p[:, 0]) > 0) and p.sum(axis=1) == pytest.approx(1.0)


def test_the_prior_at_the_last_step_is_the_posterior_mean() -> None:
    # binary, t = 0 (ᾱ = 0.9999): x = 0.9 is all but certainly the YES point 1, so
    # ε = (0.9 − 0.99995·1)/0.01 = −9.995
    eps = market_prior(np.array([[0.9]]), 0, market_weights(np.array([[0.5, 0.5]])))
    assert eps[0, 0] == pytest.approx((0.9 - math.sqrt(0.9999)) / math.sqrt(1e-4), rel=1e-6)


@given(
    st.floats(-4.0, 4.0),
    st.integers(0, 63),
    st.floats(1e-6, 1.0 - 1e-6),
)
def test_the_binary_prior_is_the_general_posterior(x: float, t: int, q: float) -> None:
    # the general formula by hand: posterior over the points +1 (YES) and −1 (NO)
    ab = ALPHA_BAR[t]
    logits = np.log([q, 1 - q]) - (x - math.sqrt(ab) * np.array([1.0, -1.0])) ** 2 / (2 * (1 - ab))
    w = np.exp(logits - logits.max())
    x0 = (w[0] - w[1]) / w.sum()
    eps = market_prior(np.array([[x]]), t, market_weights(np.array([[q, 1 - q]])))
    assert eps[0, 0] == pytest.approx((x - math.sqrt(ab) * x0) / math.sqrt(1 - ab), abs=1e-9)


def test_the_search_near_the_prior_finds_the_full_search_s_boundary() -> None:
    # a network that adds −0.9 to ε̂ moves z* far from the prior's boundary for some prices
    # (searched again over [−6, 6]) and little for others: either way the result lies within
    # the precision of 16 halvings of [−6, 6] (12/2¹⁶) of what the full search finds
    config = DiffusionConfig(sample_steps=32, mc=16)
    model = zero_model(config=config)
    model.denoisers[2].params["out.b"][:] = -0.9
    model = MarketModel(model.denoisers, model.summary)
    q = np.array([1e-4, 0.003, 0.05, 0.3, 0.5, 0.7, 0.95, 0.999])
    conditions, weights = (
        np.zeros((q.size, condition_dim(2))),
        market_weights(np.column_stack([q, 1 - q])),
    )
    net = model._sampling[2]
    rows, span = np.arange(q.size), np.full(q.size, 6.0)
    lo, hi = _bisect(lambda r: net.predictor(conditions[r]), weights, rows, -span, span, 16, 32)
    moved = np.abs(0.5 * (lo + hi) - _prior_boundary(q))
    assert np.any(moved > 0.375) and np.any(moved < 0.375)  # both paths are taken
    width = 12 / 2**16
    p = model.forecast(2, conditions, np.column_stack([q, 1 - q]))[:, 0]
    assert np.all(p <= _mass_above(lo - width)) and np.all(p >= _mass_above(hi + width))


def test_multi_outcome_forecasts_are_distributions() -> None:
    model = zero_model(3, DiffusionConfig(sample_steps=16, mc=32))
    prices = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    p = model.forecast(3, np.zeros((2, condition_dim(3))), prices)
    assert p.shape == (2, 3) and p.sum(axis=1) == pytest.approx(1.0)
    assert p.argmax(axis=1).tolist() == [0, 2]


# -- what it may learn from ------------------------------------------------------------------


def path(k: int, resolved: int, winner: str, drift: float) -> ResolvedPath:
    times = T0 + DAY * np.arange(6, dtype=np.int64)
    yes = np.clip(0.5 + drift * np.arange(6), 0.01, 0.99)
    facts = MarketFacts(f"market {k}", "c", int(times[-1]) + DAY)
    return ResolvedPath(str(k), facts, ("Yes", "No"), times, np.column_stack([yes, 1 - yes]),
                        winner, resolved)  # fmt: skip


def test_rows_stop_before_the_resolution() -> None:
    rows = market_rows(path(0, T0 + 3 * DAY, "Yes", 0.05), -(2**62), 8)
    assert rows is not None and rows.instants.max() == T0 + 2 * DAY  # the last point before
    assert market_rows(path(0, T0, "Yes", 0.05), -(2**62), 8) is None  # no point before it


def test_a_later_resolution_changes_nothing() -> None:
    early = [path(k, T0 + 6 * DAY + k, "Yes" if k % 2 else "No", 0.08 * (k % 3 - 1))
             for k in range(12)]  # fmt: skip
    cut = T0 + 7 * DAY
    later = path(99, cut, "Yes", 0.08)
    poisoned = ResolvedPath("99", later.facts, later.outcomes, later.times,
                            1 - later.prices, "No", cut)  # fmt: skip
    first = training_set([*early, later], cut)
    second = training_set([*early, poisoned], cut)
    assert first.markets == {2: 12} and first.trained_through == T0 + 6 * DAY + 11
    a, b = MarketModel.fit(first, TINY, 3), MarketModel.fit(second, TINY, 3)
    for name, value in a.denoisers[2].params.items():
        assert np.array_equal(value, b.denoisers[2].params[name])


def resolved_market(p: ResolvedPath) -> ResolvedMarket:
    meta = MarketMeta(p.id, p.facts.question, p.outcomes, "c", 1.0, p.facts.end_ts, True)
    return ResolvedMarket(meta, p.winner, p.resolved_ts, None, (p.times, p.prices))


def context(start: int, resolved: list[ResolvedMarket]) -> Context:
    return Context("c", start, "v1", 10_000.0, 50.0, 0.25, np.random.default_rng(0), (),
                   tuple(resolved))  # fmt: skip


def test_the_forecaster_trains_at_setup_or_says_why_not() -> None:
    f = DiffusionForecaster(TINY, seed=1)
    f.setup(context(T0 + 30 * DAY, []))
    assert f.model is None and f.abstain is not None
    assert "0 market(s) with a price path resolved before the cohort" in f.abstain
    paths = [path(k, T0 + 6 * DAY, "Yes" if k % 2 else "No", 0.05) for k in range(12)]
    f.setup(context(T0 + 30 * DAY, [resolved_market(p) for p in paths]))
    assert f.model is not None and f.abstain is None
    trace = f.trace()
    assert trace is not None and trace.model is not None
    assert trace.model.startswith("market diffusion: 12 binary markets (96 rows")


def test_a_model_file_from_the_cohorts_future_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "m.npz"
    zero_model().save(file)  # trained through T0
    f = DiffusionForecaster(model=file)
    with pytest.raises(StrategyError, match="not before the cohort's start"):
        f.setup(context(T0, []))
    f.setup(context(T0 + 1, []))
    assert f.abstain is None


# -- the model file --------------------------------------------------------------------------


def test_a_model_file_round_trips(tmp_path: Path) -> None:
    paths = [path(k, T0 + 6 * DAY, "Yes" if k % 2 else "No", 0.05) for k in range(12)]
    model = MarketModel.fit(training_set(paths, 2**62), TINY, 0)
    model.save(tmp_path / "m.npz")
    again = MarketModel.load(tmp_path / "m.npz")
    assert again.summary == model.summary
    rows = market_rows(paths[0], -(2**62), 4)
    assert rows is not None
    assert np.array_equal(
        model.forecast(2, rows.conditions, rows.prices),
        again.forecast(2, rows.conditions, rows.prices),
    )


def test_bad_model_files_are_one_line_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.npz"
    zero_model().save(good)
    arrays = dict(np.load(good))
    cases: dict[str, tuple[dict[str, object] | bytes, str]] = {
        "corrupt": (good.read_bytes()[:200], "not a model file"),
        "other": ({**arrays, "version": np.array(2)}, "written by version 2"),
        "foreign": ({"x": np.zeros(3)}, f"not an {FORMAT} file"),
        "shape": (
            {**arrays, "m2/out.W": np.zeros((3, 3))},
            r"m2/out.W is float64\[3, 3\], not float64\[16, 1\]",
        ),
        "pickled": ({**arrays, "meta": np.array([{"a": 1}], dtype=object)}, "not a model file"),
    }
    for name, (content, message) in cases.items():
        file = tmp_path / f"{name}.npz"
        if isinstance(content, bytes):
            file.write_bytes(content)
        else:
            np.savez(file, **content)  # type: ignore[arg-type]
        with pytest.raises(ModelFileError, match=message) as caught:
            MarketModel.load(file)
        assert "\n" not in str(caught.value)
    with pytest.raises(ModelFileError, match="no such file"):
        MarketModel.load(tmp_path / "missing.npz")


def test_an_agent_reads_a_model_file_by_name(tmp_path: Path) -> None:
    file = tmp_path / "m.npz"
    zero_model().save(file)
    agent = build_strategy(f"sign?forecaster=diffusion:{file}")
    assert isinstance(agent, Sign) and isinstance(agent.forecaster, DiffusionForecaster)
    assert agent.forecaster.model is not None and agent.forecaster.path == file
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(StrategyError, match=r"bad\.npz: not a model file"):
        build_strategy(f"sign?forecaster=diffusion:{tmp_path / 'bad.npz'}")


def test_a_model_file_takes_no_training_settings(tmp_path: Path) -> None:
    file = tmp_path / "m.npz"
    zero_model().save(file)
    with pytest.raises(StrategyError, match="hidden, steps apply only to a model trained at setup"):
        build_strategy(f"sign?forecaster=diffusion:{file}&steps=10&hidden=8")


def test_each_outcome_count_gets_its_own_network() -> None:
    binary = [path(k, T0 + 6 * DAY, "Yes" if k % 2 else "No", 0.05) for k in range(4)]
    times = T0 + DAY * np.arange(4, dtype=np.int64)
    prices = np.tile([0.5, 0.3, 0.2], (4, 1))
    colours = ("Red", "Blue", "Green")
    winners = ("Red", "blue", "GREEN")
    facts = [MarketFacts(f"three {k}", None, None) for k in range(6)]
    end = T0 + 5 * DAY
    three = [
        ResolvedPath(f"t{k}", facts[k], colours, times, prices, winners[k % 3], end)
        for k in range(6)
    ]
    data = training_set([*binary, *three], 2**62, per_market=3)
    assert data.markets == {2: 4, 3: 6}
    assert data.conditions[3].shape == (18, condition_dim(3))
    assert data.targets[3].shape == (18, 2) and data.prices[3].shape == (18, 3)
    # "blue" won market t1, matched whatever its case: its target is outcome 1's point
    assert data.targets[3][3] == pytest.approx(label_coordinates(1, 3))
    model = MarketModel.fit(data, TINY, 0)
    assert model.outcome_counts() == [2, 3]
    p = model.forecast(3, data.conditions[3][:2], data.prices[3][:2])
    assert p.shape == (2, 3) and p.sum(axis=1) == pytest.approx(1.0)
