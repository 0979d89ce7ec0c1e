"""parity, groupstress and intrinsic-post: forecastbench's evaluation-only experiments (§2.5).

Each returns a ``LabResult`` whose checks are the seed's analytic facts. Standard errors used:

* oracle Brier: a row's (f − y)² is (1 − a)² with probability a and a² otherwise
  (a = ½ + α/2), so its variance is a(1 − a)(1 − 2a)² = (¼ − α²/4)·α²;
* Brier(q_ρ) − Brier(oracle) = SCE + mean 2(q − f)(f − y), the last term of mean 0 and
  variance 4c²(¼ − α²/4)/n with c = (α/2)(1 − ρ^k);
* the post-processed SCE: see ``_post_expectation``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from arena.forecasting.lab.checks import Check, bound, exact, hoeffding_z, sampled
from arena.forecasting.lab.cube import CubeHistogram, SubcubeBias, coordinate_sets, count_sets
from arena.forecasting.lab.llm import BitsModel
from arena.forecasting.lab.parity import ParityMarket, ParitySample, sample
from arena.forecasting.lab.progress import Progress
from arena.forecasting.lab.result import LabResult
from arena.forecasting.lab.scoring import binary_scores
from ledger.metrics import bin_index, fit_group_bin_postprocessor

LLM_MAX_EXAMPLES = 200
TOP_J = 10


@dataclass(frozen=True)
class ParityConfig:
    """``parity``'s defaults (methodology §2.5)."""

    d: int = 16
    k: int = 8
    alpha: float = 0.8
    n: int = 50_000
    seed: int = 0
    rho: float = 0.95
    L: int = 4
    bins: int = 20
    cost: float = 0.0
    B: float = 1.0
    float32: bool = False


def _scores(
    q: np.ndarray, data: ParitySample, cfg: ParityConfig | IntrinsicPostConfig
) -> dict[str, float]:
    return {"n": len(q)} | binary_scores(q, data.p, data.y, bins=cfg.bins, B=cfg.B, cost=cfg.cost)


def _parity_facts(
    market: ParityMarket, rho: float, models: dict[str, dict[str, float]], n: int, float32: bool
) -> list[Check]:
    """The population facts of §2.5, each against the sample's measurement."""
    alpha = market.alpha
    oracle = 0.25 - alpha**2 / 4
    c = 0.5 * alpha * (1.0 - rho**market.k)
    oracle_brier = models["oracle"]["brier"]
    return [
        sampled(
            "oracle Brier = ¼ − α²/4",
            oracle_brier,
            oracle,
            math.sqrt(oracle * alpha**2 / n),
            float32,
        ),
        exact("constant ½ Brier = ¼", models["const_0.5"]["brier"], 0.25, float32),
        exact("diffusion SCE = (α/2)²(1 − ρ^k)²", models["diff_analytic"]["sce"], c * c, float32),
        sampled(
            "diffusion Brier − oracle Brier = SCE",
            models["diff_analytic"]["brier"] - oracle_brier,
            c * c,
            math.sqrt(4 * c * c * oracle / n),
            float32,
        ),
    ]


def run_parity(cfg: ParityConfig, progress: Progress, llm: BitsModel | None = None) -> LabResult:
    """Oracle, constant ½, analytic diffusion q_ρ and the L-query surrogate (and an LLM on the
    first ``llm.max_examples`` rows), scored against the truth: the "cliff vs fog" table."""
    market = ParityMarket.create(cfg.d, cfg.k, cfg.alpha, cfg.seed, cfg.float32)
    advance = progress.stage("sampling", 1)
    data = sample(market, cfg.n, cfg.seed)
    advance(1, "")
    forecasts = {
        "oracle": data.p,
        "const_0.5": np.full(cfg.n, 0.5),
        "diff_analytic": market.diffusion(data.z, cfg.rho),
        "L_query_oracle": market.l_query(data.z, cfg.L),
    }
    advance = progress.stage("scoring", len(forecasts))
    models = {}
    for name, q in forecasts.items():
        models[name] = _scores(q, data, cfg)
        advance(1, name)
    config = {**asdict(cfg), "S": list(market.S)}
    if llm is not None:
        head = data.rows(0, min(llm.max_examples, cfg.n))
        models[llm.name] = _scores(llm.forecast(head.z, progress), head, cfg)
        models[llm.name]["failures"] = llm.failures
        config["llm"] = llm.describe()
    checks = _parity_facts(market, cfg.rho, models, cfg.n, cfg.float32)
    return LabResult("parity", config, models, checks)


@dataclass(frozen=True)
class GroupStressConfig:
    """``groupstress``'s defaults (methodology §2.5); ``max_j`` keeps the first J only."""

    d: int = 14
    k: int = 7
    alpha: float = 0.8
    n: int = 200_000
    seed: int = 0
    rho: float = 0.9
    L: int = 3
    exact: bool = False
    max_j: int | None = None
    bins: int = 20
    cost: float = 0.0
    B: float = 1.0
    float32: bool = False


def _stress(
    forecast: Callable[[np.ndarray], np.ndarray],
    market: ParityMarket,
    cfg: GroupStressConfig,
    data: ParitySample | None,
    Js: list[tuple[int, ...]],
) -> tuple[SubcubeBias, list[SubcubeBias]]:
    """The J = S bias and every other J's, for the residual f − forecast."""
    if data is None:
        hist = CubeHistogram.of_cube(cfg.d, lambda z: market.residual(market.truth(z), forecast(z)))
    else:
        hist = CubeHistogram.of_rows(data.z, market.residual(data.p, forecast(data.z)))
    at_s = hist.biases([market.S])[0]
    return at_s, hist.biases(Js)


def run_groupstress(cfg: GroupStressConfig, progress: Progress) -> LabResult:
    """The worst subcube bias max_a |E[f − q | z_J = a]| for every J of size k, for q_ρ and
    the L-query surrogate: only J = S shows a bias, (α/2)(1 − ρ^k) for q_ρ and α/2 for a
    surrogate that cannot read k coordinates."""
    market = ParityMarket.create(cfg.d, cfg.k, cfg.alpha, cfg.seed, cfg.float32)
    total = count_sets(cfg.d, cfg.k, cfg.max_j)
    Js = [J for J in coordinate_sets(cfg.d, cfg.k, cfg.max_j) if J != market.S]
    q_of: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "diff_analytic": lambda z: market.diffusion(z, cfg.rho),
        "L_query_oracle": lambda z: market.l_query(z, cfg.L),
    }
    data = None
    models: dict[str, dict[str, float]] = {}
    if not cfg.exact:
        advance = progress.stage("sampling", 1)
        data = sample(market, cfg.n, cfg.seed)
        advance(1, "")
    advance = progress.stage(f"subcube biases ({total:,} J × 2 models)", len(q_of))
    checks: list[Check] = []
    ranking: dict[str, list[dict[str, Any]]] = {}
    theory = {
        "diff_analytic": 0.5 * cfg.alpha * (1.0 - cfg.rho**cfg.k),
        "L_query_oracle": 0.0 if cfg.k <= cfg.L else 0.5 * cfg.alpha,
    }
    for name in q_of:
        at_s, others = _stress(q_of[name], market, cfg, data, Js)
        worst_other = max(others, key=lambda b: b.worst_scaled, default=None)
        models[name] = {
            "gcal_S": at_s.worst,
            "gcal_S_theory": theory[name],
            "max_other_J": max((b.worst for b in others), default=0.0),
        }
        if data is not None:
            models[name] = (
                {"n": cfg.n}
                | binary_scores(
                    q_of[name](data.z), data.p, data.y, bins=cfg.bins, B=cfg.B, cost=cfg.cost
                )
                | models[name]
            )
        checks.append(exact(f"{name}: max over a at J = S", at_s.worst, theory[name], cfg.float32))
        checks.append(_other_j_check(name, worst_other, theory[name], len(others), cfg))
        top = sorted([at_s, *others], key=lambda b: -b.worst)[:TOP_J]
        ranking[name] = [{"J": list(b.J), "max_abs_bias": b.worst} for b in top]
        advance(1, name)
    config = {**asdict(cfg), "S": list(market.S), "n_J": total}
    if cfg.exact:
        config["n"] = None  # the whole cube, each point once: no sample
    return LabResult("groupstress", config, models, checks, {"top_J": ranking})


def _other_j_check(
    name: str, worst: SubcubeBias | None, c: float, n_sets: int, cfg: GroupStressConfig
) -> Check:
    """Every J ≠ S is unbiased in the population; in a sample, each subcube mean of a residual
    ±c strays by at most c·z/√count for all of them at once (Hoeffding, union bound)."""
    label = f"{name}: every J ≠ S near 0"
    if worst is None:
        return exact(label, 0.0, 0.0, cfg.float32)
    if cfg.exact:
        return exact(label, worst.worst, 0.0, cfg.float32)
    z = hoeffding_z(n_sets * (1 << cfg.k))
    return bound(
        label + " (max |bias|·√count)",
        worst.worst_scaled,
        c * z + 1e-9,
        f"Hoeffding, all {n_sets * (1 << cfg.k):,} subcubes at once, risk 1e-6",
    )


@dataclass(frozen=True)
class IntrinsicPostConfig:
    """``intrinsic_post``'s defaults (methodology §2.5)."""

    d: int = 16
    k: int = 8
    alpha: float = 0.8
    rho: float = 0.95
    L: int = 4
    n_train: int = 50_000
    n_test: int = 10_000
    seed: int = 0
    bins: int = 20
    post_bins: int = 20
    post_prior: float = 5.0
    post_clip: float = 1e-4
    cost: float = 0.0
    B: float = 1.0
    float32: bool = False


def _gcal_s(market: ParityMarket, data: ParitySample, q: np.ndarray) -> float:
    """max_a |mean(f − q) on z_S = a| over the subcubes of S present in the test split."""
    keys = market.group_keys(data.z)
    count = np.bincount(keys, minlength=1 << market.k)
    total = np.bincount(keys, weights=market.residual(data.p, q), minlength=1 << market.k)
    seen = count > 0
    return float(np.abs(total[seen] / count[seen]).max())


def _post_expectation(
    k: float,
    train_keys: np.ndarray,
    train_p: np.ndarray,
    test_keys: np.ndarray,
    test_p: np.ndarray,
    centre: np.ndarray,
) -> tuple[float, float]:
    """Expected test SCE of a post-processed base, and its standard error, given where the
    training rows fell: the sample tax made explicit.

    On parity a base forecast depends on z only through χ_S, so all rows of a subcube of S
    share one bin. Its post-processed forecast is (Σy + k·centre)/(n_g + k), Σy binomial:
    bias k(centre − f)/(n_g + k), variance n_g·f(1 − f)/(n_g + k)². A subcube with no
    training rows falls back to its bin over all subcubes (the same formula over that bin's
    rows). The test SCE averages e_g = (forecast_g − f_g)² over test rows; with A ≈ normal
    (μ, σ²), Var(A²) = 2σ⁴ + 4μ²σ², and the e_g of different subcubes are independent but
    for fallbacks sharing a bin, whose covariance we leave out (they arise only when a
    subcube is empty in training, which the checked sizes make rare).
    """
    groups = len(centre)
    n_g = np.bincount(train_keys, minlength=groups).astype(np.float64)
    f_g = np.zeros(groups)
    f_g[train_keys] = train_p
    f_g[test_keys] = test_p
    mean_est = (n_g * f_g + k * centre) / (n_g + k)
    var_est = n_g * f_g * (1 - f_g) / (n_g + k) ** 2
    # an empty subcube falls back to its bin over all subcubes: per-bin sums, once (a scan of
    # every subcube per empty one was quadratic in 2^k: k = 16 ran for minutes)
    empty = n_g == 0
    _, bin_of = np.unique(centre, return_inverse=True)
    rows = np.bincount(bin_of, weights=n_g)[bin_of]
    sum_f = np.bincount(bin_of, weights=n_g * f_g)[bin_of]
    sum_v = np.bincount(bin_of, weights=n_g * f_g * (1 - f_g))[bin_of]
    no_data = empty & (rows == 0)  # raw q: no data in the bin at all
    fallback = empty & ~no_data
    mean_est[fallback] = (sum_f + k * centre)[fallback] / (rows + k)[fallback]
    var_est[fallback] = sum_v[fallback] / (rows + k)[fallback] ** 2
    mean_est[no_data], var_est[no_data] = centre[no_data], 0.0
    mu = mean_est - f_g
    weight = np.bincount(test_keys, minlength=groups) / len(test_keys)
    expected = float(np.sum(weight * (mu**2 + var_est)))
    variance = float(np.sum(weight**2 * (2 * var_est**2 + 4 * mu**2 * var_est)))
    return expected, math.sqrt(variance)


@dataclass(frozen=True)
class _Arm:
    """One base forecaster of intrinsic-post, with the rows it is fitted and scored on."""

    name: str
    train: ParitySample
    test: ParitySample
    q_train: np.ndarray
    q_test: np.ndarray
    surrogate: bool


def run_intrinsic_post(
    cfg: IntrinsicPostConfig, progress: Progress, llm: BitsModel | None = None
) -> LabResult:
    """AR (the L-query surrogate, or an LLM) and diffusion q_ρ, each as is and through the
    same group-bin post-processor fitted on the training split (groups: the 2^k subcubes of
    the true S). The post-processor repairs what it has seen enough of: its SCE is the
    sampling noise of 2^k separate frequencies, which is the "sample tax" of rare groups."""
    market = ParityMarket.create(cfg.d, cfg.k, cfg.alpha, cfg.seed, cfg.float32)
    advance = progress.stage("sampling", 1)
    data = sample(market, cfg.n_train + cfg.n_test, cfg.seed)
    train, test = data.rows(0, cfg.n_train), data.rows(cfg.n_train, cfg.n_train + cfg.n_test)
    advance(1, "")
    config = {**asdict(cfg), "S": list(market.S)}
    if llm is None:
        ar = _Arm(
            "AR",
            train,
            test,
            market.l_query(train.z, cfg.L),
            market.l_query(test.z, cfg.L),
            surrogate=True,
        )
    else:  # an LLM is slow: it answers the first max_examples rows of each split
        tr, te = train.rows(0, llm.max_examples), test.rows(0, llm.max_examples)
        ar = _Arm(
            llm.name,
            tr,
            te,
            llm.forecast(tr.z, progress),
            llm.forecast(te.z, progress),
            surrogate=False,
        )
        config["llm"] = llm.describe()
    diffusion = _Arm(
        "Diffusion",
        train,
        test,
        market.diffusion(train.z, cfg.rho),
        market.diffusion(test.z, cfg.rho),
        surrogate=True,
    )
    theory = {
        "AR": 0.0 if cfg.k <= cfg.L else 0.5 * cfg.alpha,
        "Diffusion": 0.5 * cfg.alpha * (1.0 - cfg.rho**cfg.k),
    }
    advance = progress.stage("post-processing", 2)
    models: dict[str, dict[str, float]] = {}
    checks: list[Check] = []
    for arm in (ar, diffusion):
        post = fit_group_bin_postprocessor(
            arm.q_train,
            arm.train.y,
            market.group_keys(arm.train.z),
            1 << cfg.k,
            bins=cfg.post_bins,
            prior_strength=cfg.post_prior,
            clip=cfg.post_clip,
            float32=cfg.float32,  # the original's table and output are float32
        )
        repaired = post.apply(arm.q_test, market.group_keys(arm.test.z))
        for model, q in ((f"{arm.name}-intrinsic", arm.q_test), (f"{arm.name}+post", repaired)):
            models[model] = _scores(q, arm.test, cfg) | {"gcal_S": _gcal_s(market, arm.test, q)}
        if arm.surrogate:
            checks += _intrinsic_checks(arm, cfg, market, models, theory[arm.name])
        advance(1, arm.name)
    return LabResult("intrinsic-post", config, models, checks)


def _intrinsic_checks(
    arm: _Arm,
    cfg: IntrinsicPostConfig,
    market: ParityMarket,
    models: dict[str, dict[str, float]],
    gcal_theory: float,
) -> list[Check]:
    """The base's worst subcube bias on S, and the post-processed SCE against its
    expectation given the training split's subcube counts."""
    groups = 1 << cfg.k
    centre = np.full(groups, 0.5)
    for part, q in ((arm.train, arm.q_train), (arm.test, arm.q_test)):
        clipped = np.clip(q, cfg.post_clip, 1 - cfg.post_clip)
        centre[market.group_keys(part.z)] = (
            bin_index(clipped, cfg.post_bins) + 0.5
        ) / cfg.post_bins
    expected, stderr = _post_expectation(
        cfg.post_prior,
        market.group_keys(arm.train.z),
        arm.train.p,
        market.group_keys(arm.test.z),
        arm.test.p,
        centre,
    )
    return [
        exact(
            f"{arm.name}-intrinsic gcal_S",
            models[f"{arm.name}-intrinsic"]["gcal_S"],
            gcal_theory,
            cfg.float32,
        ),
        sampled(
            f"{arm.name}+post SCE = the sample tax of 2^k groups",
            models[f"{arm.name}+post"]["sce"],
            expected,
            stderr,
            cfg.float32,
        ),
    ]
