"""The diffusion forecaster: the original's numbers, exact gradients, an exact sampler, a model that
learns, and an edge agent that trades on it (or says why it cannot)."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from ledger.events import DecisionMade, Event, OrderFilled, OrderPlaced
from ledger.store import EventStore
from replays.samples import sample_path
from replays.tapefile import load_tape
from strategies.api import StrategyError
from strategies.builtin.edge import Linear, Sign
from strategies.diffusion import (
    ALPHA_BAR,
    DEFAULTS,
    LOGIT_SCALE,
    ORIGINS,
    AdamW,
    Denoiser,
    DiffusionConfig,
    _silu_in_place,
    clip_grad_norm,
    ddim_sample,
    embed_texts,
    forecast,
    label_logits,
    label_targets,
    time_embedding,
    timesteps,
    train,
)
from strategies.forecaster_registry import build_forecaster
from strategies.loader import build_strategy
from strategies.market_diffusion.forecaster import DiffusionForecaster
from tests.conftest import Arena

# -- the original's numbers ----------------------------------------------------------------------


def test_schedule_matches_the_original() -> None:
    assert ALPHA_BAR.shape == (64,)
    assert ALPHA_BAR[0] == pytest.approx(0.9999, abs=1e-15)  # 1 − β₀ = 1 − 1e-4
    assert ALPHA_BAR[63] == pytest.approx(0.52332, abs=5e-6)
    assert np.all(np.diff(ALPHA_BAR) < 0)


def test_strided_timesteps() -> None:
    steps = timesteps(32)
    assert steps.dtype == np.int64 and steps.size == 32
    assert steps[:3].tolist() == [63, 60, 58]  # int64(63 − 63/31) = int64(60.97) = 60
    assert steps[-2:].tolist() == [2, 0]
    assert timesteps(64).tolist() == list(range(63, -1, -1))
    with pytest.raises(ValueError, match="sample steps"):
        timesteps(65)


def test_time_embedding_is_sines_then_cosines() -> None:
    e = time_embedding(np.array([0, 1]))
    assert e.shape == (2, 64)
    assert e[0, :32].tolist() == [0.0] * 32  # sin(0)
    assert e[0, 32:].tolist() == [1.0] * 32  # cos(0)
    # f₀ = 1 and f₃₁ = exp(−ln(10⁴)·31/31) = 10⁻⁴
    assert e[1, 0] == pytest.approx(math.sin(1.0))
    assert e[1, 31] == pytest.approx(math.sin(1e-4))
    assert e[1, 32] == pytest.approx(math.cos(1.0))
    assert e[1, 63] == pytest.approx(math.cos(1e-4))


def test_labels_become_smoothed_logits() -> None:
    # p = y·(1 − 2·0.001) + 0.001 ∈ {0.999, 0.001}: logit ±ln(999) = ±6.906755
    assert label_logits(np.array([1, 0])) == pytest.approx([6.906755, -6.906755], abs=1e-6)
    assert pytest.approx(math.log(999)) == LOGIT_SCALE
    assert label_targets(np.array([1, 0])) == pytest.approx([1.0, -1.0], abs=1e-15)


def test_the_originals_config() -> None:
    assert (ORIGINS.hidden, ORIGINS.depth, ORIGINS.steps, ORIGINS.batch, ORIGINS.lr) == (
        256,
        3,
        2000,
        256,
        2e-4,
    )
    assert (ORIGINS.sample_steps, ORIGINS.mc) == (32, 16) == (DEFAULTS.sample_steps, DEFAULTS.mc)


def test_text_embedding_is_stable_and_normalised() -> None:
    a, b, c = embed_texts(["Will Trump win?", "will TRUMP win", "Will Harris win?"])
    assert np.array_equal(a, b)  # case and punctuation do not matter
    assert np.linalg.norm(a) == pytest.approx(1.0) and np.linalg.norm(c) == pytest.approx(1.0)
    # will, trump, win, "will trump", "trump win": five ±1 counts in blake2b buckets, so the
    # same in every process (Python's hash() would move them with PYTHONHASHSEED)
    assert np.flatnonzero(a).tolist() == [1, 121, 145, 186, 252]
    assert a[a != 0] * math.sqrt(5) == pytest.approx([1, -1, -1, -1, -1])
    assert a @ c == pytest.approx(2 / 5)  # two of five features shared: "will" and "win"
    assert embed_texts([""]).tolist() == [[0.0] * 256]


# -- gradients and the optimiser -----------------------------------------------------------


def test_backprop_matches_finite_differences() -> None:
    rng = np.random.default_rng(0)
    model = Denoiser.init(cond_dim=3, hidden=5, depth=3, rng=rng)
    x = rng.standard_normal((7, 1))
    t = rng.integers(0, 64, size=7)
    cond = rng.standard_normal((7, 3))
    eps = rng.standard_normal((7, 1))
    _, grads = model.loss_and_grads(x, t, cond, eps)
    assert set(grads) == set(model.params) == {
        "time.0.W", "time.0.b", "time.1.W", "time.1.b",
        "in.x", "in.time", "in.cond", "in.b",
        "hidden.1.W", "hidden.1.b", "hidden.2.W", "hidden.2.b",
        "out.W", "out.b",
    }  # fmt: skip
    h = 1e-6
    for name, param in model.params.items():
        numeric = np.zeros_like(param)
        for i in np.ndindex(param.shape):
            old = param[i]
            param[i] = old + h
            up = model.loss_and_grads(x, t, cond, eps)[0]
            param[i] = old - h
            down = model.loss_and_grads(x, t, cond, eps)[0]
            param[i] = old
            numeric[i] = (up - down) / (2 * h)
        scale = max(float(np.abs(numeric).max()), 1e-3)
        assert np.abs(numeric - grads[name]).max() / scale < 1e-6, name


def test_adamw_first_step_by_hand() -> None:
    # Step 1: m̂ = g and v̂ = g², so the Adam step is lr·g/(|g| + 1e-8) ≈ lr·sign(g); the decay
    # first shrinks p by lr·0.01: 1.0·(1 − 0.001) − 0.1 = 0.899, −2.0·0.999 + 0.1 = −1.898.
    params = {"p": np.array([1.0, -2.0])}
    AdamW(params, lr=0.1).step({"p": np.array([0.5, -3.0])})
    assert params["p"] == pytest.approx([0.899, -1.898], abs=1e-8)


def test_gradient_norm_is_clipped_to_one() -> None:
    grads = {"a": np.array([3.0, 0.0]), "b": np.array([4.0])}
    assert clip_grad_norm(grads) == 5.0
    assert [*grads["a"], *grads["b"]] == pytest.approx([0.6, 0.0, 0.8], abs=1e-6)
    small = {"a": np.array([0.3, 0.4])}
    assert clip_grad_norm(small) == pytest.approx(0.5)
    assert small["a"].tolist() == [0.3, 0.4]


# -- the sampler ---------------------------------------------------------------------------


def noise_oracle(x0: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
    """A perfect ε-predictor for known x₀: the noise that put the starting point where it is,
    ε = (x_T − √ᾱ_T·x₀)/√(1 − ᾱ_T), which a deterministic DDIM keeps all the way down."""
    noise: list[np.ndarray] = []

    def predict(x: np.ndarray, t: int) -> np.ndarray:
        if not noise:
            noise.append((x - math.sqrt(ALPHA_BAR[t]) * x0) / math.sqrt(1 - ALPHA_BAR[t]))
        return noise[0]

    return predict


def t_minus_one_sample(
    predict: Callable[[np.ndarray, int], np.ndarray], x: np.ndarray, n_steps: int
) -> np.ndarray:
    """The original's sampler, bug included: from every strided t it moves x to t − 1."""
    for t in timesteps(n_steps):
        eps = predict(x, int(t))
        x0 = (x - math.sqrt(1 - ALPHA_BAR[t]) * eps) / math.sqrt(ALPHA_BAR[t])
        if t == 0:
            return x0
        x = math.sqrt(ALPHA_BAR[t - 1]) * x0 + math.sqrt(1 - ALPHA_BAR[t - 1]) * eps
    raise AssertionError("the timesteps end at 0")


def test_strided_ddim_recovers_x0_with_a_perfect_predictor() -> None:
    x0 = np.array([[-6.9], [-1.0], [0.0], [2.5], [6.9]])
    start = np.random.default_rng(1).standard_normal((5, 1))
    for n_steps in (32, 8, 64):
        out = ddim_sample(noise_oracle(x0), start, n_steps)
        assert np.abs(out - x0).max() < 1e-9, n_steps
    # the original's t − 1 step is exact only with every timestep
    assert np.abs(t_minus_one_sample(noise_oracle(x0), start, 64) - x0).max() < 1e-9
    assert np.abs(t_minus_one_sample(noise_oracle(x0), start, 32) - x0).max() > 0.1


def test_sampling_is_deterministic() -> None:
    model = Denoiser.init(cond_dim=2, hidden=8, depth=2, rng=np.random.default_rng(3))
    cond = np.array([[1.0, 0.0], [0.0, 1.0]])
    start = np.random.default_rng(4).standard_normal((2, 1))
    first = ddim_sample(model.predictor(cond), start.copy(), 32)
    assert np.array_equal(first, ddim_sample(model.predictor(cond), start.copy(), 32))
    config = DiffusionConfig(hidden=8, depth=2)
    assert np.array_equal(forecast(model, cond, config, 9), forecast(model, cond, config, 9))


def test_the_sampler_s_network_is_the_trained_one() -> None:
    # the predictor (condition projected once, time-MLP tabulated, SiLUs in place) against the
    # forward pass training differentiates, for one-number x and for ALR x (out_dim 3)
    for out_dim in (1, 3):
        model = Denoiser.init(5, 16, 3, np.random.default_rng(out_dim), out_dim=out_dim)
        rng = np.random.default_rng(7)
        cond, x = rng.standard_normal((6, 5)), 3.0 * rng.standard_normal((6, out_dim))
        predict = model.predictor(cond)
        p = model.params
        for t in (0, 17, 63):
            _, th = model._time(time_embedding(np.full(6, t)))
            a = x @ p["in.x"] + th @ p["in.time"] + cond @ p["in.cond"] + p["in.b"]
            assert np.allclose(predict(x, t), model._trunk(a)[0], rtol=1e-12, atol=1e-12)


@given(
    st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=40),
    st.sampled_from([np.float32, np.float64]),
)
def test_silu_in_place_is_a_times_sigmoid_without_warnings(
    values: list[float], dtype: type
) -> None:
    a: np.ndarray = np.array(values, dtype=dtype)
    expected = a.astype(np.float64) / (1.0 + np.exp(-np.clip(a.astype(np.float64), -700, 700)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e^−a overflowing must stay silent
        got = _silu_in_place(a.copy())
    assert got.dtype == dtype
    assert np.allclose(got, expected, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-30)


# -- training ------------------------------------------------------------------------------

BIT = np.array([[1.0], [0.0]])


def bit_forecasts(seed: int) -> np.ndarray:
    """Train on 100 rows whose label is their condition bit; forecast bit 1 and bit 0."""
    cond = np.tile(BIT, (50, 1))
    trained = train(label_targets(cond[:, 0]), cond, DEFAULTS, seed)
    return forecast(trained.model, BIT, DEFAULTS, seed)


def test_training_learns_a_one_bit_condition() -> None:
    first = bit_forecasts(seed=0)
    yes, no = first
    assert yes > 0.9 and no < 0.1  # seeds 0..3 give above 0.996 and below 0.005
    assert np.array_equal(first, bit_forecasts(seed=0))
    assert not np.array_equal(first, bit_forecasts(seed=1))


# -- settings ------------------------------------------------------------------------------


def test_settings_reach_the_forecaster() -> None:
    agent = build_strategy("sign?forecaster=diffusion&hidden=256&steps=2000&batch=256&lr=2e-4")
    assert isinstance(agent, Sign) and isinstance(agent.forecaster, DiffusionForecaster)
    assert agent.forecaster.config == ORIGINS and agent.forecaster.seed is None
    seeded = build_strategy("linear?forecaster=diffusion&seed=7&mc=4&sample_steps=64")
    assert isinstance(seeded, Linear) and isinstance(seeded.forecaster, DiffusionForecaster)
    assert seeded.forecaster.seed == 7
    assert seeded.forecaster.config == DiffusionConfig(mc=4, sample_steps=64)
    assert isinstance(build_forecaster("diffusion"), DiffusionForecaster)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("sign?steps=100", "steps: only for forecaster=diffusion"),
        ("linear?forecaster=market&seed=1&mc=2", "mc, seed: only for forecaster=diffusion"),
        ("sign?forecaster=diffusion&sample_steps=65", "sample_steps:"),
        ("sign?forecaster=diffusion&lr=0", "lr:"),
        ("sign?forecaster=diffusion&seed=-1", "seed:"),
    ],
)
def test_bad_diffusion_settings(spec: str, message: str) -> None:
    with pytest.raises(StrategyError, match=f"bad settings: .*{message}"):
        build_strategy(spec)


def test_strategies_lists_the_diffusion_settings(arena: Arena) -> None:
    result = arena("strategies", "--json")
    assert result.exit_code == 0, result.output
    entries = {e["name"]: e for e in json.loads(result.output)}
    for rule in ("sign", "linear"):
        settings = {s["name"]: s for s in entries[rule]["settings"]}
        assert "diffusion" in settings["forecaster"]["description"]
        assert settings["hidden"]["default"] == 64
        assert settings["hidden"]["description"] == "diffusion: hidden width (forecastbench: 256)"
        assert settings["lr"]["description"].endswith("(forecastbench: 0.0002)")
        assert settings["seed"]["default"] is None
    assert "hidden" not in {s["name"] for s in entries["extremized"]["settings"]}


# -- through the runner --------------------------------------------------------------------


def replay(db: Path, start: datetime, agents: dict[str, str]) -> list[Event]:
    config = CohortConfig(start=start, agents=agents, universe=20)
    with EventStore.open(db) as store:
        run = CohortRunner(load_tape(sample_path()), config).run(store)
        return list(store.read(stream=run.cohort))


def test_an_edge_agent_trades_on_diffusion_forecasts(tmp_path: Path) -> None:
    # The sample tape's markets resolve from 2024-11-06: 92 of them (41 YES) before the 8th,
    # when the rest are still open (Vermont president among the 92 since it resolves when UMA
    # settled it, 11-06, not at Gamma's close on 11-20). The model stays close to the price, so
    # it is the sign rule (B dollars whatever the edge) that trades on it; linear's B·|p − q| is
    # below $50.
    start = datetime(2024, 11, 8, tzinfo=UTC)
    agents = {"d": "sign?forecaster=diffusion&steps=150&mc=8&sample_steps=16"}
    events = replay(tmp_path / "first.db", start, agents)
    decisions = [e for e in events if isinstance(e, DecisionMade)]
    assert decisions and all(e.error is None for e in decisions)
    for e in decisions:
        assert e.model is not None
        assert e.model.startswith("market diffusion: 92 binary markets (736 rows")
    assert any(e.bets for e in decisions)
    assert any(isinstance(e, OrderFilled) for e in events)
    first = decisions[0]
    assert "forecast" in first.reasoning and "150 steps" in (first.model or "")
    # the seed comes from the agent's generator, so a rerun is the same run
    assert replay(tmp_path / "again.db", start, agents) == events


def test_without_history_the_agent_holds_and_says_why(tmp_path: Path) -> None:
    start = datetime(2024, 9, 1, tzinfo=UTC)
    events = replay(tmp_path / "run.db", start, {"d": "sign?forecaster=diffusion"})
    decisions = [e for e in events if isinstance(e, DecisionMade)]
    assert decisions and all(e.action == "HOLD" and e.error is None for e in decisions)
    assert all(
        e.reasoning == "no forecast: diffusion has nothing to learn from: 0 market(s) with a "
        "price path resolved before the cohort (0 binary); it needs 10 or more, not all resolved "
        "the same way"
        for e in decisions
    )
    assert not any(isinstance(e, OrderPlaced) for e in events)


def test_the_diffusion_agent_is_sign_over_the_diffusion_forecaster(tmp_path: Path) -> None:
    start = datetime(2024, 11, 8, tzinfo=UTC)
    fast = "steps=60&mc=8&sample_steps=16"
    builtin = replay(tmp_path / "builtin.db", start, {"d": f"diffusion?{fast}"})
    spelled = replay(tmp_path / "spelled.db", start, {"d": f"sign?forecaster=diffusion&{fast}"})

    def trades(events: list[Event]) -> list[tuple[object, ...]]:
        return [
            (e.agent, e.market, e.side, e.kind, e.amount, e.price)
            for e in events
            if isinstance(e, OrderFilled)
        ]

    assert trades(builtin) and trades(builtin) == trades(spelled)
    with pytest.raises(StrategyError, match="forecaster is diffusion"):
        build_strategy("diffusion?forecaster=market")
