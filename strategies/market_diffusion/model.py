"""The market diffusion model: forecastbench's denoiser (``strategies.diffusion``) trained on
what was knowable about resolved markets at sampled instants, one network per outcome count,
and the ``.npz`` file it lives in.

A binary market is a 1-D logit diffusion (methodology §2.7); an m-outcome market one in the m − 1
ALR coordinates of its outcome probabilities (the seed's ``difftrain_simplex``, §4.1), so each
outcome count present in the training data gets a network of its own.

Where we go beyond pm_difftrain, and why:

* **The network learns a correction to the market.** A resolved market's target is one of m
  points (its smoothed one-hot outcome), and for targets drawn from those points with the
  market's prices as their probabilities, ε's conditional mean has a closed form (the
  posterior over the points given x_t, ``market_prior``). The network is trained on ε minus
  that, and the sampler adds it back: with a network that outputs zero, the forecast is the
  market price. Trained without it on the BTC tapes (432 markets), the network never learned to
  follow the price far enough: it forecast 0.086 where the market said 0.003 and the outcome
  was NO 1,503 times in 1,503, and its held-out Brier was 0.065 against the market's 0.048.
* **A binary forecast is where the sampler's flow divides YES from NO, not a mean of samples.**
  The deterministic DDIM sampler maps a starting point z to x̂₀ monotonically in one dimension
  (probability-flow paths cannot cross), so bisection finds the z* it sends to 0, to the
  precision of ``mc`` halvings of [−6, 6] (each halving is one sampler run, costing what one
  of ``mc`` samples costs; starting near the prior's own boundary saves four of them). P(YES)
  is the mass above z* of what x *is* at t = 63, not of N(0, 1): with T = 64 steps x₆₃ is the
  mixture (1 − p)·N(−a, s²) + p·N(a, s²) (a = √ᾱ₆₃ = 0.72), so p solves p = its own mixture's
  mass above z* (``_mass_above``). With a network that outputs zero this gives back a price of
  0.003 as 0.0029 and 0.2 as 0.198; 1 − Φ(z*) gives 0.107 and 0.379, and the mean of 16
  sampled probabilities can only say k/16 of the way from 0.001 to 0.999, useless against a
  price of 0.004. Multi-outcome markets keep pm_difftrain's mean over ``mc`` seeded samples
  (no ordering exists in several dimensions), and its N(0, 1) start.
"""

from __future__ import annotations

import functools
import json
import math
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import NormalDist

import numpy as np

from ledger.metrics import alr_to_simplex
from strategies.api import StrategyError
from strategies.diffusion import (
    ALPHA_BAR,
    EMBED_DIM,
    LOGIT_SCALE,
    SAMPLE_SEED_OFFSET,
    Denoiser,
    DiffusionConfig,
    ddim_sample,
    train,
)
from strategies.market_diffusion.features import (
    CATEGORY_DIM,
    PRICE_FEATURES,
    condition_dim,
    label_coordinates,
)

FORMAT = "arena-market-diffusion"
VERSION = 1
"""Bumped whenever a row's features or the network's layout change: a file from another
version would condition on numbers that mean something else."""
FEATURES = {"price": PRICE_FEATURES, "category": CATEGORY_DIM, "text": EMBED_DIM}
"""The feature layout a file records and a load checks."""

MARKET_DEFAULTS = DiffusionConfig(hidden=128, depth=3, steps=2000, batch=256, lr=2e-4)
"""forecastbench's steps, batch and learning rate at half its width: forecasting 500 markets
(the precision of 16 bisection steps, 12 sampler runs of 32 DDIM steps for most rows) then
takes about 0.4 CPU-seconds here.
On the BTC tapes a learning rate of 1e-3 overfit (held-out Brier 0.054 against the price's
0.048, training Brier 0.019); 2e-4 stays with the price."""


class ModelFileError(StrategyError):
    """A model file that cannot be used: missing, corrupt, or written by another version."""


@dataclass(frozen=True)
class TrainingSet:
    """Training rows grouped by outcome count: conditions (n, c), ALR targets (n, m − 1) and
    the market's prices at each row's instant (n, m), model order, from ``markets`` markets
    that resolved at or before ``trained_through``."""

    conditions: Mapping[int, np.ndarray]
    targets: Mapping[int, np.ndarray]
    prices: Mapping[int, np.ndarray]
    markets: Mapping[int, int]
    trained_through: int


@dataclass(frozen=True)
class Summary:
    """What a model was trained on and how, for the log and for ``arena diffusion eval``."""

    config: DiffusionConfig
    seed: int
    trained_through: int
    """The latest resolution instant among its training markets: the model may forecast only
    at later instants (anything earlier would let it know outcomes from the forecast's future)."""
    markets: dict[int, int] = field(default_factory=dict)
    rows: dict[int, int] = field(default_factory=dict)
    final_loss: dict[int, float] = field(default_factory=dict)

    def line(self) -> str:
        c = self.config
        counts = ", ".join(
            f"{self.markets[m]} {'binary' if m == 2 else f'{m}-outcome'} markets "
            f"({self.rows[m]} rows, final loss {self.final_loss[m]:.4f})"
            for m in sorted(self.markets)
        )
        return (
            f"market diffusion: {counts}; hidden {c.hidden}, depth {c.depth}, {c.steps} steps "
            f"of {c.batch}, lr {c.lr:g}, {c.sample_steps} sample steps, mc {c.mc}, "
            f"seed {self.seed}"
        )


Progress = Callable[[int, int, float], None]
"""Told (outcome count, finished step from 1, loss) after every training step."""


class MarketModel:
    """One trained denoiser per outcome count, and how they were trained."""

    def __init__(self, denoisers: Mapping[int, Denoiser], summary: Summary) -> None:
        self.denoisers = dict(denoisers)
        self.summary = summary
        self._sampling = {m: d.as_float32() for m, d in self.denoisers.items()}

    @classmethod
    def fit(
        cls,
        data: TrainingSet,
        config: DiffusionConfig,
        seed: int,
        progress: Progress | None = None,
    ) -> MarketModel:
        """Trains a network per outcome count with rows, each from ``default_rng(seed)``."""
        denoisers, losses = {}, {}
        for m in sorted(data.conditions):
            report = None if progress is None else _for_outcomes(progress, m)
            prior = _training_prior(data.prices[m])
            trained = train(data.targets[m], data.conditions[m], config, seed, report, prior)
            denoisers[m], losses[m] = trained.model, trained.final_loss
        rows = {m: int(c.shape[0]) for m, c in data.conditions.items()}
        summary = Summary(config, seed, data.trained_through, dict(data.markets), rows, losses)
        return cls(denoisers, summary)

    def outcome_counts(self) -> list[int]:
        return sorted(self.denoisers)

    def forecast(self, outcomes: int, conditions: np.ndarray, prices: np.ndarray) -> np.ndarray:
        """(n, outcomes) probabilities, model order (YES first for binary), for n rows of an
        outcome count the model was trained on, with the market's prices (n, outcomes) at each
        row's instant."""
        c = self.summary.config
        weights = market_weights(prices)
        network = self._sampling[outcomes]
        if outcomes == 2:
            return _flow_boundary(lambda rows: network.predictor(conditions[rows]), weights, c)
        net = network.predictor(np.tile(conditions, (c.mc, 1)))
        n = conditions.shape[0]
        tiled = np.tile(weights, (c.mc, 1))
        starts = np.array(
            [
                np.random.default_rng(self.summary.seed + SAMPLE_SEED_OFFSET + k).standard_normal(
                    outcomes - 1
                )
                for k in range(c.mc)
            ]
        )
        x0 = ddim_sample(
            _with_prior(net, tiled), np.repeat(starts, n, axis=0).astype(np.float32), c.sample_steps
        )
        probs = alr_to_simplex(LOGIT_SCALE * np.clip(x0.astype(np.float64), -50.0, 50.0))
        mean: np.ndarray = probs.reshape(c.mc, n, outcomes).mean(axis=0)
        return mean

    def save(self, path: Path) -> None:
        """Writes the networks and the summary to ``path`` (``.npz``, plain arrays only)."""
        s = self.summary
        meta = {
            "config": asdict(s.config),
            "seed": s.seed,
            "trained_through": s.trained_through,
            "markets": {str(m): v for m, v in s.markets.items()},
            "rows": {str(m): v for m, v in s.rows.items()},
            "final_loss": {str(m): v for m, v in s.final_loss.items()},
            "features": FEATURES,
        }
        arrays: dict[str, np.ndarray] = {
            "format": np.array(FORMAT),
            "version": np.array(VERSION),
            "meta": np.array(json.dumps(meta, sort_keys=True)),
        }
        for m, denoiser in self.denoisers.items():
            for name, value in denoiser.params.items():
                arrays[f"m{m}/{name}"] = value
        with path.open("wb") as handle:
            np.savez(handle, allow_pickle=False, **arrays)

    @classmethod
    def load(cls, path: Path) -> MarketModel:
        """Reads a file ``save`` wrote, with ``allow_pickle=False``; anything else is a
        one-line ``ModelFileError`` naming the file."""
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
        except FileNotFoundError:
            raise ModelFileError(f"model file {path}: no such file") from None
        except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ModelFileError(f"model file {path}: not a model file ({reason})") from None
        return cls._from_arrays(path, arrays)

    @classmethod
    def _from_arrays(cls, path: Path, arrays: dict[str, np.ndarray]) -> MarketModel:
        where = f"model file {path}"
        if str(arrays.get("format", "")) != FORMAT:
            raise ModelFileError(f"{where}: not an {FORMAT} file")
        version = int(arrays["version"]) if "version" in arrays else None
        if version != VERSION:
            raise ModelFileError(
                f"{where}: written by version {version} of the market diffusion model; this "
                f"arena reads version {VERSION} (train it again with arena diffusion train)"
            )
        try:
            meta = json.loads(str(arrays["meta"]))
            summary = Summary(
                config=DiffusionConfig(**meta["config"]),
                seed=int(meta["seed"]),
                trained_through=int(meta["trained_through"]),
                markets={int(m): int(v) for m, v in meta["markets"].items()},
                rows={int(m): int(v) for m, v in meta["rows"].items()},
                final_loss={int(m): float(v) for m, v in meta["final_loss"].items()},
            )
            features = meta["features"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(f"{where}: unreadable summary ({exc})") from None
        if features != FEATURES:
            raise ModelFileError(f"{where}: features {features} differ from this arena's")
        denoisers = {m: _denoiser(where, arrays, m, summary.config) for m in summary.markets}
        return cls(denoisers, summary)


def _denoiser(where: str, arrays: dict[str, np.ndarray], m: int, c: DiffusionConfig) -> Denoiser:
    """The network for m outcomes, checked against the shapes its config implies."""
    expected = Denoiser.init(condition_dim(m), c.hidden, c.depth, np.random.default_rng(0), m - 1)
    params = {}
    for name, like in expected.params.items():
        value = arrays.get(f"m{m}/{name}")
        if value is None or value.shape != like.shape or value.dtype != np.float64:
            got = "missing" if value is None else f"{value.dtype}{list(value.shape)}"
            raise ModelFileError(f"{where}: parameter m{m}/{name} is {got}, not float64"
                                 f"{list(like.shape)}")  # fmt: skip
        if not np.all(np.isfinite(value)):
            raise ModelFileError(f"{where}: parameter m{m}/{name} is not finite")
        params[name] = value
    return Denoiser(params)


def _for_outcomes(progress: Progress, m: int) -> Callable[[int, float], None]:
    def report(step: int, loss: float) -> None:
        progress(m, step, loss)

    return report


WEIGHT_CLIP = 1e-6
"""The prior takes a price as it is, clipped only so that its logarithm is finite
(forecastbench's logit clip). The features clip at 1e-3; clipping the prior there too made a
price of 0.0005 a forecast of 0.001, and the sign rule bought YES on the difference."""


def market_weights(prices: np.ndarray) -> np.ndarray:
    """Market prices (n, m) as the prior's probabilities: clipped to [1e-6, 1 − 1e-6], then
    scaled to sum to 1."""
    clipped = np.clip(np.asarray(prices, dtype=np.float64), WEIGHT_CLIP, 1.0 - WEIGHT_CLIP)
    weights: np.ndarray = clipped / clipped.sum(axis=1, keepdims=True)
    return weights


def market_prior(x: np.ndarray, t: np.ndarray | int, weights: np.ndarray) -> np.ndarray:
    """E[ε | x_t] when x₀ is outcome k's target point v_k with probability ``weights[:, k]``:
    the posterior over the points, w_k ∝ q_k·exp(−|x_t − √ᾱ_t·v_k|²/(2(1 − ᾱ_t))), gives
    x̂₀ = Σ w_k·v_k and ε = (x_t − √ᾱ_t·x̂₀)/√(1 − ᾱ_t). x is (n, m − 1), in x's dtype."""
    vertices = _vertices(weights.shape[1])
    ab = np.asarray(ALPHA_BAR[t], dtype=np.float64).reshape(-1, 1)
    xs = np.asarray(x, dtype=np.float64)
    if weights.shape[1] == 2:
        x0 = _binary_posterior_mean(xs, ab, weights, vertices[:, 0])
    else:
        d2 = ((xs[:, None, :] - np.sqrt(ab)[:, :, None] * vertices[None]) ** 2).sum(axis=2)
        logits = np.log(weights) - d2 / (2.0 * (1.0 - ab))
        logits -= logits.max(axis=1, keepdims=True)
        w = np.exp(logits)
        w /= w.sum(axis=1, keepdims=True)
        x0 = w @ vertices
    eps: np.ndarray = (xs - np.sqrt(ab) * x0) / np.sqrt(1.0 - ab)
    return eps.astype(x.dtype, copy=False)


def _binary_posterior_mean(
    x: np.ndarray, ab: np.ndarray, weights: np.ndarray, points: np.ndarray
) -> np.ndarray:
    """The posterior mean for two points v₀ (YES) and v₁ (NO): their log-odds are
    ln(q₀/q₁) + √ᾱ·(v₀ − v₁)·(2x − √ᾱ·(v₀ + v₁))/(2(1 − ᾱ)), the difference of the two
    squared distances expanded, so x̂₀ = v₁ + (v₀ − v₁)·sigmoid(log-odds): the general
    formula's value without its (n, m, m − 1) arrays, which the sampler paid for every step."""
    v0, v1 = float(points[0]), float(points[1])
    root = np.sqrt(ab)
    odds = np.log(weights[:, :1] / weights[:, 1:])
    odds = odds + root * (v0 - v1) * (2.0 * x - root * (v0 + v1)) / (2.0 * (1.0 - ab))
    posterior: np.ndarray = v1 + (v0 - v1) * (0.5 + 0.5 * np.tanh(0.5 * odds))
    return posterior


@functools.cache
def _vertices(m: int) -> np.ndarray:
    """The m outcomes' target points, (m, m − 1), read-only (the sampler asks every step)."""
    points = np.array([label_coordinates(k, m) for k in range(m)])
    points.setflags(write=False)
    return points


def _training_prior(
    prices: np.ndarray,
) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    weights = market_weights(prices)

    def prior(x: np.ndarray, t: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return market_prior(x, t, weights[rows])

    return prior


def _with_prior(
    net: Callable[[np.ndarray, int], np.ndarray], weights: np.ndarray
) -> Callable[[np.ndarray, int], np.ndarray]:
    def predict(x: np.ndarray, t: int) -> np.ndarray:
        eps: np.ndarray = net(x, t) + market_prior(x, t, weights)
        return eps

    return predict


BOUNDARY_SPAN = 6.0
"""Bisection searches z* in [−6, 6]: P(YES) from 1e-9 to 1 − 1e-9."""
GUESS_HALVINGS = 4
"""The bisection starts from a bracket 2⁻⁴ of [−6, 6] wide (±0.375) around the boundary the
market prior alone would give, and so needs four sampler runs fewer for the same precision.
The network's correction moves z* by less than that for nearly every row (trained for 2,000
steps on 600 synthetic markets: median 0.057, largest 0.51, 1 row in 500 beyond 0.375); a row
whose z* lies outside is searched again over [−6, 6]."""


def _flow_boundary(
    predictor: Callable[[np.ndarray], Callable[[np.ndarray, int], np.ndarray]],
    weights: np.ndarray,
    c: DiffusionConfig,
) -> np.ndarray:
    """(n, 2) [P(YES), P(NO)]: the mass above z*, the starting point the sampler's flow sends
    to 0, located to the precision of ``c.mc`` bisection steps over [−6, 6] (a bracket
    12/2^mc wide; see the module's docstring). ``predictor(rows)`` is the network on those
    rows' conditions.

    Every sampler run costs the same per row, and the flow's end is ±1 on either side of z*
    (a step, so only its sign tells anything): the saving is in the runs. The first search is
    over ±0.375 around the prior's boundary, 4 runs fewer; a row whose bracket ends against
    either edge of it (z* may be outside) is searched again over [−6, 6] with all mc runs."""
    n = weights.shape[0]
    everyone = np.arange(n)
    guess = _prior_boundary(weights[:, 0])
    halvings = min(GUESS_HALVINGS, c.mc)
    half = BOUNDARY_SPAN / 2**halvings
    lo, hi = _bisect(predictor, weights, everyone, guess - half, guess + half,
                     c.mc - halvings, c.sample_steps)  # fmt: skip
    outside = everyone[(lo == guess - half) | (hi == guess + half)]
    if outside.size:
        span = np.full(outside.size, BOUNDARY_SPAN)
        lo[outside], hi[outside] = _bisect(
            predictor, weights, outside, -span, span, c.mc, c.sample_steps
        )
    return np.column_stack([p_yes := _mass_above(0.5 * (lo + hi)), 1.0 - p_yes])


def _bisect(
    predictor: Callable[[np.ndarray], Callable[[np.ndarray, int], np.ndarray]],
    weights: np.ndarray,
    rows: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    steps: int,
    sample_steps: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` halvings of [lo, hi] for ``rows``, each one sampler run of all of them: the
    half whose flow ends below 0 at its lower end and above at its upper end is kept."""
    predict = _with_prior(predictor(rows), weights[rows])
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        above = ddim_sample(predict, mid[:, None].astype(np.float32), sample_steps)[:, 0] > 0
        hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
    return lo, hi


def _prior_boundary(p_yes: np.ndarray) -> np.ndarray:
    """The z* of the market prior alone (a network that adds nothing): ``_mass_above``'s
    inverse at the price, read off a table of it (a starting guess: 0.003 in z is plenty)."""
    grid, mass = _mass_table()
    guess: np.ndarray = np.interp(p_yes, mass, grid)
    return guess


@functools.cache
def _mass_table() -> tuple[np.ndarray, np.ndarray]:
    """z over [−6, 6] from high to low and ``_mass_above`` of it, increasing, for np.interp."""
    grid = np.linspace(BOUNDARY_SPAN, -BOUNDARY_SPAN, 4097)
    return grid, _mass_above(grid)


def _mass_above(z: np.ndarray) -> np.ndarray:
    """P(YES) from the boundary z*, self-consistently: x at the first timestep is
    (1 − p)·N(−a, s²) + p·N(a, s²) (a = √ᾱ, s = √(1 − ᾱ) at t = T − 1, targets ±1), and p is
    its mass above z*, so p = Φ̄((z* + a)/s) / (Φ((z* − a)/s) + Φ̄((z* + a)/s))."""
    a, s = math.sqrt(ALPHA_BAR[-1]), math.sqrt(1.0 - ALPHA_BAR[-1])
    normal = NormalDist()
    no_above = np.array([1.0 - normal.cdf((v + a) / s) for v in z])
    yes_below = np.array([normal.cdf((v - a) / s) for v in z])
    mass: np.ndarray = no_above / (yes_below + no_above)
    return mass
