"""``arena lab``: each experiment's analytic facts, its standard errors, the Walsh-basis subcube
biases against brute force, the trained diffusion model, the CLI and the LLM bridge."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from itertools import combinations
from typing import Any

import numpy as np
import pytest

from arena.forecasting.lab.checks import Check
from arena.forecasting.lab.cube import CubeHistogram, walsh_hadamard
from arena.forecasting.lab.experiments import (
    GroupStressConfig,
    IntrinsicPostConfig,
    ParityConfig,
    run_groupstress,
    run_intrinsic_post,
    run_parity,
)
from arena.forecasting.lab.parity import ParityMarket, encode, sample, subcube_keys
from arena.forecasting.lab.progress import Silent
from arena.forecasting.lab.training import (
    DiffTrainConfig,
    SimplexConfig,
    blind_sce,
    blind_simplex_sce,
    run_difftrain,
    run_difftrain_simplex,
)
from ledger.metrics import bin_index
from tests.conftest import Arena
from tests.llm_server import FakeLLM, Received

SMALL_TRAINING = {"d": 5, "k": 2, "n_train": 2000, "n_test": 2000, "steps": 300, "batch": 64,
                  "hidden": 32, "lr": 3e-3}  # fmt: skip


def failed(checks: list[Check]) -> list[Check]:
    return [c for c in checks if not c.ok]


def test_parity_defaults_meet_every_fact_and_match_the_closed_forms() -> None:
    result = run_parity(ParityConfig(), Silent())
    assert failed(result.checks) == []
    models = result.models
    assert set(models) == {"oracle", "const_0.5", "diff_analytic", "L_query_oracle"}
    # (α/2)²(1 − ρ^k)² = (0.4 · (1 − 0.95^8))² = (0.4 · 0.336599)² = 0.0181257
    assert models["diff_analytic"]["sce"] == pytest.approx(0.0181257290, abs=1e-9)
    # the bounded trader against q_ρ earns B·|f − q| = 0.4 · 0.336599 on every row
    assert models["diff_analytic"]["arb"] == pytest.approx(0.1346318, abs=1e-7)
    # L = 4 < k = 8: the surrogate is the constant ½, SCE α²/4 = 0.16
    assert models["L_query_oracle"] == models["const_0.5"]
    assert models["const_0.5"]["sce"] == pytest.approx(0.16)
    # 5 standard errors of the oracle's Brier: 5·√((¼ − α²/4)·α²/n) = 5·√(0.09·0.64/50000)
    oracle = result.checks[0]
    assert oracle.tolerance == pytest.approx(5 * math.sqrt(0.09 * 0.64 / 50_000), rel=1e-6)


def test_the_standard_errors_are_the_spread_seen_over_seeds() -> None:
    """Measured − expected, in standard errors, over 60 seeds: spread about 1, so the
    tolerances are neither padded nor too tight (the sample std of 60 normals is 1 ± 0.09)."""
    z: dict[str, list[float]] = {}
    for seed in range(60):
        checks = run_parity(ParityConfig(d=8, k=3, n=2000, seed=seed), Silent()).checks
        post = IntrinsicPostConfig(d=8, k=3, n_train=2000, n_test=2000, seed=seed)
        checks += run_intrinsic_post(post, Silent()).checks
        for c in checks:
            if c.kind == "sampled":
                z.setdefault(c.name, []).append((c.measured - c.expected) / (c.tolerance / 5))
    assert len(z) == 4
    for name, values in z.items():
        assert 0.6 < float(np.std(values)) < 1.4, name
        assert abs(float(np.mean(values))) < 0.6, name


def test_parity_sample_follows_forecastbench_draws() -> None:
    market = ParityMarket.create(d=6, k=3, alpha=0.8, seed=7)
    chosen = np.random.default_rng(7).choice(6, size=3, replace=False)
    assert tuple(sorted(int(i) for i in chosen)) == market.S
    data = sample(market, 5, seed=7)
    rng = np.random.default_rng(7 + 1_000_000)
    z = 2 * rng.integers(0, 2, size=(5, 6), dtype=np.int8) - 1
    assert np.array_equal(data.z, z)
    chi = np.prod(z[:, list(market.S)], axis=1)
    assert np.array_equal(data.p, 0.5 + 0.4 * chi)
    assert np.array_equal(data.y, rng.binomial(1, 0.5 + 0.4 * chi))


def test_float32_computes_as_the_original_does() -> None:
    """The original's χ is float32, so ½ + 0.4·χ is float32 arithmetic: float32(0.4) is
    0.4000000059604645, ½ − it is 0.09999999403953552 (exactly representable), and
    ½ + it rounds to float32(0.9) = 0.8999999761581421. Casting the float64 0.1 instead gave
    0.10000000149011612, on the other side of the ECE edge 0.1."""
    market = ParityMarket.create(d=1, k=1, alpha=0.8, seed=0, float32=True)
    z = np.array([[1], [-1]], dtype=np.int8)
    chi = market.chi(z)
    truth = market.truth(z)
    assert truth[chi > 0][0] == 0.8999999761581421
    assert truth[chi < 0][0] == 0.09999999403953552
    assert bin_index(truth[chi < 0], 20).tolist() == [1]  # (0.05, 0.1], as the original
    # q_ρ at ρ = 0.5, k = 1: ½ ± float32(0.2) = ½ ± 0.20000000298023224, each rounded to float32
    assert market.diffusion(z, 0.5).tolist() == [0.699999988079071, 0.30000001192092896]
    plain = run_parity(ParityConfig(d=6, k=2, n=4000), Silent())
    cast = run_parity(ParityConfig(d=6, k=2, n=4000, float32=True), Silent())
    assert failed(cast.checks) == []
    assert plain.models["oracle"]["brier"] != cast.models["oracle"]["brier"]
    assert plain.models["oracle"]["brier"] == pytest.approx(cast.models["oracle"]["brier"], 1e-6)


def test_encodings_are_the_seeds() -> None:
    z = np.array([1, -1, 1], dtype=np.int8)
    assert encode(z, "plain") == "Bits: 1 0 1"
    assert encode(z, "natural") == "Bit 0 is +1. Bit 1 is -1. Bit 2 is +1."


def test_walsh_hadamard_is_its_own_inverse_up_to_the_length() -> None:
    h = np.arange(8.0)
    assert np.allclose(walsh_hadamard(walsh_hadamard(h)) / 8, h)
    # H(T) = Σ_x h(x)(−1)^{|T∧x|}: T = 0 sums everything, T = 1 alternates
    assert walsh_hadamard(h)[0] == 28.0
    assert walsh_hadamard(h)[1] == sum(h[x] * (-1) ** (x & 1) for x in range(8))


def test_subcube_biases_equal_grouping_row_by_row() -> None:
    rng = np.random.default_rng(3)
    z = (2 * rng.integers(0, 2, size=(500, 6)) - 1).astype(np.int8)
    r = rng.normal(size=500)
    Js = list(combinations(range(6), 3))
    biases = CubeHistogram.of_rows(z, r).biases(Js)
    for J, bias in zip(Js, biases, strict=True):
        keys = subcube_keys(z, J)
        count = np.bincount(keys, minlength=8)
        mean = np.bincount(keys, weights=r, minlength=8)[count > 0] / count[count > 0]
        assert bias.worst == pytest.approx(np.abs(mean).max(), abs=1e-12)
        assert bias.min_count == count[count > 0].min()


def test_groupstress_exact_only_s_is_biased() -> None:
    result = run_groupstress(GroupStressConfig(d=10, k=4, exact=True), Silent())
    assert failed(result.checks) == []
    diffusion = result.models["diff_analytic"]
    assert diffusion["gcal_S"] == pytest.approx(0.4 * (1 - 0.9**4), abs=1e-12)  # 0.13756
    assert diffusion["max_other_J"] < 1e-12
    assert result.models["L_query_oracle"]["gcal_S"] == pytest.approx(0.4)  # α/2, L = 3 < 4
    assert result.extra["top_J"]["diff_analytic"][0]["J"] == result.config["S"]
    assert result.config["n_J"] == math.comb(10, 4)


def test_groupstress_sampled_other_j_stay_under_the_hoeffding_bound() -> None:
    result = run_groupstress(GroupStressConfig(d=10, k=4, n=20_000), Silent())
    assert failed(result.checks) == []
    diffusion = result.models["diff_analytic"]
    assert 0 < diffusion["max_other_J"] < diffusion["gcal_S"]
    assert result.extra["top_J"]["diff_analytic"][0]["J"] == result.config["S"]


def test_groupstress_refuses_an_exact_cube_too_large() -> None:
    with pytest.raises(ValueError, match="at most 18"):
        run_groupstress(GroupStressConfig(d=19, k=2, exact=True, max_j=3), Silent())


def test_intrinsic_post_repairs_what_it_has_seen_enough_of() -> None:
    plenty = run_intrinsic_post(IntrinsicPostConfig(d=10, k=5, n_train=20_000), Silent())
    assert failed(plenty.checks) == []
    m = plenty.models
    assert m["AR-intrinsic"]["gcal_S"] == pytest.approx(0.4)
    assert m["AR+post"]["sce"] < 0.01 < m["AR-intrinsic"]["sce"]
    assert m["Diffusion+post"]["gcal_S"] < m["Diffusion-intrinsic"]["gcal_S"]
    # 2^8 = 256 subcubes and 64 training rows: most subcubes were never seen, the repair falls
    # back to the bin over all of them (about ½), and the sample tax is nearly the whole error
    scarce = run_intrinsic_post(IntrinsicPostConfig(n_train=64, n_test=5000), Silent())
    assert failed(scarce.checks) == []
    assert scarce.models["AR+post"]["sce"] > 0.1


def test_difftrain_beats_the_constant_on_a_small_parity() -> None:
    result = run_difftrain(DiffTrainConfig(**SMALL_TRAINING), Silent())
    assert failed(result.checks) == []
    assert result.models["diffusion"]["sce"] < 0.2 * result.models["const_0.5"]["sce"]
    assert result.config["target_scale"] == pytest.approx(math.log(0.9 / 0.1))


def test_a_sampler_that_ignores_z_scores_the_blind_sce() -> None:
    # by hand: (α/2)²(1 + 1/mc) = 0.16·2 = 0.32 at mc = 1, 0.16·17/16 = 0.17 at mc = 16
    assert blind_sce(DiffTrainConfig(alpha=0.8, mc=1)) == pytest.approx(0.32)
    assert blind_sce(DiffTrainConfig(alpha=0.8, mc=16)) == pytest.approx(0.17)
    # and by simulation: 4 draws of ½ ± α/2 at random per row, whatever χ_S is
    rng, n, alpha = np.random.default_rng(5), 200_000, 0.6
    f = 0.5 + alpha / 2 * rng.choice([-1.0, 1.0], n)
    q = 0.5 + alpha / 2 * rng.choice([-1.0, 1.0], (4, n)).mean(axis=0)
    errors = (q - f) ** 2
    expected = blind_sce(DiffTrainConfig(alpha=alpha, mc=4))
    assert abs(errors.mean() - expected) < 5 * errors.std() / math.sqrt(n)
    # the simplex estimate: q independent of p, so E‖q − p‖² = E‖p − μ‖²(1 + 1/mc)
    p = rng.dirichlet([1.0, 2.0, 3.0], n)
    qs = p[rng.integers(0, n, (3, n))].mean(axis=0)
    squared = np.sum((qs - p) ** 2, axis=1)
    assert abs(squared.mean() - blind_simplex_sce(p, 3)) < 5 * squared.std() / math.sqrt(n)


def test_difftrain_strided_bug_changes_the_forecast() -> None:
    short = {**SMALL_TRAINING, "steps": 100, "n_test": 200}
    fixed = run_difftrain(DiffTrainConfig(**short), Silent())
    buggy = run_difftrain(DiffTrainConfig(**short, strided_bug=True), Silent())
    assert fixed.models["diffusion"]["sce"] != buggy.models["diffusion"]["sce"]
    full = {**short, "sample_steps": 64, "steps": 50}
    a = run_difftrain(DiffTrainConfig(**full), Silent()).models["diffusion"]
    b = run_difftrain(DiffTrainConfig(**full, strided_bug=True), Silent()).models["diffusion"]
    assert a == b  # with every step taken the two samplers are one


def test_difftrain_simplex_beats_uniform_and_knows_its_brier() -> None:
    result = run_difftrain_simplex(SimplexConfig(**SMALL_TRAINING, m=3), Silent())
    assert failed(result.checks) == []
    assert result.models["uniform"]["brier"] == pytest.approx(2 / 3)
    assert len(result.config["S"]) == 2  # one S_i per ALR coordinate


def test_cli_json_shape(arena: Arena) -> None:
    result = arena("lab", "parity", "--n", "3000", "--d", "8", "--k", "3", "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["config"]["n"] == 3000 and report["config"]["k"] == 3
    for metrics in report["models"].values():
        assert {"brier", "logloss", "sce", "ece", "arb"} <= set(metrics)
    assert all(check["ok"] for check in report["checks"])


def test_cli_table_and_progress(arena: Arena) -> None:
    result = arena("lab", "groupstress", "--d", "8", "--k", "3", "--exact")
    assert result.exit_code == 0, result.output
    assert "analytic facts" in result.output and "✓" in result.output
    assert "worst subcube biases, by J" in result.output


def test_cli_bad_input_is_one_line(arena: Arena) -> None:
    result = arena("lab", "parity", "--d", "4", "--k", "6", "--quiet")
    assert result.exit_code != 0
    assert "k must be in 1..d=4, got 6" in result.output
    assert "Traceback" not in result.output


def test_cli_check_fails_on_a_broken_fact(arena: Arena, monkeypatch: pytest.MonkeyPatch) -> None:
    import arena.forecasting.lab.experiments as experiments

    broken = experiments.exact("a fact that is false", 1.0, 0.0, False)
    original = experiments._parity_facts
    monkeypatch.setattr(experiments, "_parity_facts", lambda *a: [*original(*a), broken])
    monkeypatch.setattr("arena.commands.lab.run_parity", experiments.run_parity)
    result = arena("lab", "parity", "--n", "500", "--d", "4", "--k", "2", "--quiet", "--check")
    assert result.exit_code == 1
    assert "an analytic fact failed" in result.output


def bits_answer(request: Received) -> str:
    """A model that reads the first bit: 0.9 when it is set, garbage when the second is."""
    prompt = request.user_prompt
    info = prompt.split("INFORMATION:\n")[1]
    first_set = info.startswith("Bits: 1") or info.startswith("Bit 0 is +1")
    second_set = info.startswith("Bits: 1 1") or "Bit 1 is +1" in info
    if first_set and second_set:
        return "I cannot tell."
    return '{"p_yes": 0.9}' if first_set else '{"p_yes": 0.2}'


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM(bits_answer) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", "")
        monkeypatch.setenv("ARENA_LLM_CONCURRENCY", "4")
        for name in ("ARENA_LLM_MODE", "ARENA_LLM_CASSETTE"):
            monkeypatch.delenv(name, raising=False)
        yield fake


@pytest.mark.parametrize("encoding", ["plain", "natural"])
def test_llm_answers_the_first_rows(arena: Arena, stub: FakeLLM, encoding: str) -> None:
    args = ["parity", "--n", "400", "--d", "6", "--k", "2", "--quiet", "--json", "--llm",
            "stub-model", "--llm-encoding", encoding, "--llm-max-examples", "40"]  # fmt: skip
    result = arena("lab", *args)
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.output)
    llm = report["models"]["llm:stub-model"]
    assert llm["n"] == 40 and len(stub.received) == 40
    assert report["config"]["llm"] == {"model": "stub-model", "encoding": encoding,
                                       "max_examples": 40}  # fmt: skip
    head = sample(ParityMarket.create(6, 2, 0.8, 0), 400, 0).rows(0, 40)
    first, second = head.z[:, 0] > 0, head.z[:, 1] > 0
    assert llm["failures"] == int(np.sum(first & second))
    q = np.where(first & second, 0.5, np.where(first, 0.9, 0.2))  # a failure counts as ½
    assert llm["brier"] == pytest.approx(float(np.mean((q - head.y) ** 2)))
    marker = "Bits: " if encoding == "plain" else "Bit 0 is "
    assert all(marker in r.user_prompt for r in stub.received)


def test_llm_in_intrinsic_post_replaces_the_surrogate(arena: Arena, stub: FakeLLM) -> None:
    args = ["intrinsic-post", "--d", "6", "--k", "2", "--n-train", "300", "--n-test", "300",
            "--quiet", "--json", "--llm", "stub-model", "--llm-max-examples", "30"]  # fmt: skip
    result = arena("lab", *args)
    assert result.exit_code == 0, result.output
    models = json.loads(result.output)["models"]
    assert set(models) == {"llm:stub-model-intrinsic", "llm:stub-model+post",
                           "Diffusion-intrinsic", "Diffusion+post"}  # fmt: skip
    assert models["llm:stub-model-intrinsic"]["n"] == 30
    assert len(stub.received) == 60  # 30 training rows and 30 test rows


def test_a_bad_training_setting_fails_before_any_training(arena: Arena) -> None:
    result = arena("lab", "difftrain", "--sample-steps", "1", "--quiet")
    assert result.exit_code == 1
    assert "sample steps must be in 2..64, got 1" in result.output
    result = arena("lab", "difftrain-simplex", "--alpha", "6", "--quiet")
    assert "alpha must be in (0, 5], got 6.0" in result.output
