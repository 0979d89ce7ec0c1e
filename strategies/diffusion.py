"""forecastbench's logit diffusion forecaster (methodology §2.7), in numpy with hand-written
backprop.

A conditional denoising diffusion model over one number, the logit of P(YES): trained to predict
the noise ε in x_t = √ᾱ_t·x₀ + √(1 − ᾱ_t)·ε from (x_t, t, condition), then run backwards from
pure noise by a deterministic DDIM sampler. A forecast is the mean of the sampled probabilities
over several samples, as ``pm_difftrain`` does.

What is forecastbench's, exactly:

* the schedule: T = 64 steps, β linear from 1e-4 to 2e-2, ᾱ = cumprod(1 − β);
* the sinusoidal time embedding (dim 64, all sines, then all cosines);
* the "original" (2025-12-25) ε-prediction MLP, not the later residual one with LayerNorm and
  dropout: time-MLP Linear(64→h) SiLU Linear(h→h); input [x_t, time, condition];
  Linear(in→h) SiLU, (depth − 1)×[Linear(h→h) SiLU], Linear(h→1); torch's default
  initialisation (uniform ±1/√fan_in, biases too);
* training: MSE on ε, AdamW (weight decay 0.01 on every parameter, constant learning rate),
  gradient norm clipped to 1.0; every step draws its rows, t ~ U{0..T−1} and ε ~ N(0, 1)
  from one numpy generator seeded with ``seed``;
* labels → logits with label smoothing p = y·(1 − 2ε) + ε, ε = 1e-3 (so ±6.9068);
* sampling: timesteps int64(linspace(T − 1, 0, n)), η = 0; sample m starts from
  N(0, 1) drawn with seed + 10,000 + m.

Where we differ, and why:

* **The strided DDIM bug is fixed.** The original always moves x to t − 1, even when the next
  timestep of a strided schedule (32 of 64 steps) is t − 2 or t − 3, so the next step reads x
  at the wrong noise level. We move to the next strided timestep, which is what DDIM means; with
  n = T the two agree.
* **The model works in units of the smoothed logit**: x₀ = logit(p)/6.9068, so a resolved
  market is ±1, and a sample x̂₀ means P(YES) = sigmoid(6.9068·x̂₀). T = 64 steps of this
  schedule only bring ᾱ down to 0.52, so a raw ±6.9 target is still at ±5 ± 0.7 at t = 63,
  while the sampler starts from N(0, 1): where the model has never been trained, so its
  forecasts hardly follow the condition. On a task whose answer is one condition bit, raw
  targets with the defaults below forecast 0.61 to 0.80 for bit 1 and 0.58 to 0.61 for bit 0
  (seeds 0 to 3); training twice as long at lr 3e-3 helps only sometimes (0.77 and 0.07, but
  0.29 and 0.13 with batches of 128). With ±1 targets x₆₃ has variance ᾱ + (1 − ᾱ) = 1, the
  sampler starts where training was, and the same four runs forecast above 0.996 and below
  0.005.
* **Text becomes a hashed bag of words**, not MiniLM: no model can be downloaded here and
  we add no dependency. Words and word bigrams of the question (pm_difftrain adds the
  description, which a cohort's markets do not carry) are hashed (blake2b, so the same
  text gives the same vector in every process, unlike Python's ``hash``) into ``EMBED_DIM``
  signed buckets and L2-normalised, as pm_difftrain normalises its sentence embeddings. Markets
  whose questions share words get similar conditions. The market forecaster
  (``strategies.market_diffusion``) conditions on these words and on the market's price path.
* Computation is in float64 (torch's is float32): the finite-difference gradient check needs it,
  and the schedule matches the original's float32 values to 1e-7. Sampling may run in float32
  (``Denoiser.as_float32``).
* Only η = 0 is implemented: it is the only value the original uses, and it makes the forecast a
  function of the seed alone.
* The defaults are smaller (``DiffusionConfig``) so a cohort trains in seconds on a small
  machine; ``ORIGINS`` holds forecastbench's (30 to 45 s on two slow cores).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

T = 64
BETA_START = 1e-4
BETA_END = 2e-2
TIME_DIM = 64
WEIGHT_DECAY = 0.01
"""torch's AdamW default, which the original keeps."""
MAX_GRAD_NORM = 1.0
LABEL_EPS = 1e-3
"""pm_difftrain's label smoothing: a resolved YES is trained as p = 0.999, not as p = 1."""
LOGIT_CLIP = 1e-9
SAMPLE_SEED_OFFSET = 10_000
"""Sample m of a forecast starts from the noise of ``default_rng(seed + 10_000 + m)``."""
FINAL_LOSS_WINDOW = 200
"""The reported loss is the mean of the last 200 step losses, as forecastbench's ``final_loss``."""
EMBED_DIM = 256
"""Buckets of hashed text features (MiniLM gives 384 dense dimensions). A question's dozen or so
features rarely share a bucket; across a whole vocabulary many words do, and the random signs
keep that sharing from reading as similarity on average."""


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


BETAS = _read_only(np.linspace(BETA_START, BETA_END, T))
ALPHA_BAR = _read_only(np.cumprod(1.0 - BETAS))
"""ᾱ_t for t = 0..T − 1: ᾱ₀ = 0.9999, ᾱ₆₃ ≈ 0.52332."""


@dataclass(frozen=True)
class DiffusionConfig:
    """The hyper-parameters a user may choose.

    The defaults train on a few hundred markets in under a second on two slow cores: a network
    a quarter as wide as forecastbench's, a fifth of its steps on a quarter of its batch, with a
    learning rate five times larger so the shorter run still gets somewhere. Batches of 64 also
    keep every product small enough that OpenBLAS does not spread it over threads: with 128, a
    busy two-core machine trained up to ten times slower. ``ORIGINS`` is forecastbench's
    pm_difftrain setting (hidden 256, depth 3, 2000 steps of 256, lr 2e-4).
    """

    hidden: int = 64
    depth: int = 3
    steps: int = 400
    batch: int = 64
    lr: float = 1e-3
    sample_steps: int = 32
    mc: int = 16


DEFAULTS = DiffusionConfig()
ORIGINS = DiffusionConfig(hidden=256, depth=3, steps=2000, batch=256, lr=2e-4)


def timesteps(n_steps: int) -> np.ndarray:
    """The sampler's timesteps, T − 1 down to 0: int64(linspace(T − 1, 0, n)), as the original.

    For n = 32 that is 63, 60, 58, …, 2, 0 (truncation, not rounding, makes the first gap 3).
    """
    if not 2 <= n_steps <= T:
        raise ValueError(f"sample steps must be in 2..{T}, got {n_steps}")
    return np.linspace(T - 1, 0, n_steps).astype(np.int64)


def time_embedding(t: np.ndarray) -> np.ndarray:
    """Sinusoidal embedding of timesteps: [sin(t·f₀..f₃₁), cos(t·f₀..f₃₁)] with
    f_j = exp(−ln(10⁴)·j/31), so f₀ = 1 and f₃₁ = 10⁻⁴ (the original's formula for dim 64)."""
    half = TIME_DIM // 2
    freqs = np.exp(-math.log(10_000.0) * np.arange(half) / (half - 1))
    angles = np.asarray(t, dtype=np.float64)[:, None] * freqs
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


TIME_TABLE = _read_only(time_embedding(np.arange(T)))
"""Every timestep's embedding: t only takes T values, so they are computed once."""


def label_logits(labels: np.ndarray) -> np.ndarray:
    """0/1 outcomes to pm_difftrain's smoothed logits (±6.9068 for ε = 1e-3)."""
    p = np.asarray(labels, dtype=np.float64) * (1.0 - 2.0 * LABEL_EPS) + LABEL_EPS
    p = np.clip(p, LOGIT_CLIP, 1.0 - LOGIT_CLIP)
    return np.log(p / (1.0 - p))


LOGIT_SCALE = float(label_logits(np.array(1.0)))
"""The size of a resolved market's smoothed logit, 6.9068: the model's unit (see above)."""


def label_targets(labels: np.ndarray) -> np.ndarray:
    """0/1 outcomes to what the model is trained on: ±1, the smoothed logit over its size."""
    return label_logits(labels) / LOGIT_SCALE


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1/(1 + e^−x), written with tanh so that it never overflows."""
    return 0.5 + 0.5 * np.tanh(0.5 * x)


def _silu_grad(a: np.ndarray) -> np.ndarray:
    s = sigmoid(a)
    return s * (1.0 + a * (1.0 - s))


_WORD = re.compile(r"\w+")


def _bucket(feature: str) -> tuple[int, float]:
    """A feature's bucket (low bits of its blake2b hash) and sign (bit 32)."""
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return digest % EMBED_DIM, 1.0 if (digest >> 32) & 1 else -1.0


def embed_texts(texts: Iterable[str]) -> np.ndarray:
    """One L2-normalised row per text: signed counts of its words and word bigrams, hashed into
    ``EMBED_DIM`` buckets. Signs make colliding features cancel on average instead of piling
    up. A text with no words is the zero vector: no condition at all."""
    rows = []
    for text in texts:
        words = _WORD.findall(text.casefold())
        row = np.zeros(EMBED_DIM)
        for feature in [*words, *(f"{a} {b}" for a, b in pairwise(words))]:
            index, sign = _bucket(feature)
            row[index] += sign
        norm = np.linalg.norm(row)
        rows.append(row / norm if norm > 0 else row)
    return np.array(rows, dtype=np.float64).reshape(len(rows), EMBED_DIM)


Params = dict[str, np.ndarray]


def _linear(fan_in: int, fan_out: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    bound = 1.0 / math.sqrt(fan_in)
    return (
        rng.uniform(-bound, bound, size=(fan_in, fan_out)),
        rng.uniform(-bound, bound, size=fan_out),
    )


class Denoiser:
    """The ε-prediction MLP, with its forward pass and its gradients.

    The input layer Linear(1 + h + c → h) over concat[x_t, time, cond] is kept as three weight
    blocks (``in.x``, ``in.time``, ``in.cond``): the same function, but the sampler can then
    project the condition once instead of at every step of every sample.
    """

    def __init__(self, params: Params) -> None:
        self.params = params
        self.depth = 1 + sum(1 for n in params if n.startswith("hidden.") and n.endswith(".W"))

    @classmethod
    def init(
        cls, cond_dim: int, hidden: int, depth: int, rng: np.random.Generator, out_dim: int = 1
    ) -> Denoiser:
        """torch.nn.Linear's default initialisation, drawn from ``rng`` layer by layer.

        ``out_dim`` is the size of x: 1 for a logit, m − 1 for the ALR coordinates of an
        m-outcome market (``SimplexALRDiffusionForecaster``'s out_dim, methodology §2.7)."""
        p: Params = {}
        p["time.0.W"], p["time.0.b"] = _linear(TIME_DIM, hidden, rng)
        p["time.1.W"], p["time.1.b"] = _linear(hidden, hidden, rng)
        w, p["in.b"] = _linear(out_dim + hidden + cond_dim, hidden, rng)
        p["in.x"], p["in.time"] = w[:out_dim], w[out_dim : out_dim + hidden]
        p["in.cond"] = w[out_dim + hidden :]
        for k in range(1, depth):
            p[f"hidden.{k}.W"], p[f"hidden.{k}.b"] = _linear(hidden, hidden, rng)
        p["out.W"], p["out.b"] = _linear(hidden, out_dim, rng)
        return cls({name: np.array(value) for name, value in p.items()})  # own, contiguous

    def _time(self, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The time-MLP on embeddings ``e``: its hidden pre-activation and its output."""
        p = self.params
        a = e @ p["time.0.W"] + p["time.0.b"]
        return a, (a * sigmoid(a)) @ p["time.1.W"] + p["time.1.b"]

    def _trunk(self, a: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
        """From the input layer's pre-activation to ε: the output, and every hidden layer's
        pre-activation and activation (for backprop)."""
        p = self.params
        pre, post = [a], [a * sigmoid(a)]
        for k in range(1, self.depth):
            a = post[-1] @ p[f"hidden.{k}.W"] + p[f"hidden.{k}.b"]
            pre.append(a)
            post.append(a * sigmoid(a))
        return post[-1] @ p["out.W"] + p["out.b"], pre, post

    def loss_and_grads(
        self, x: np.ndarray, t: np.ndarray, cond: np.ndarray, eps: np.ndarray
    ) -> tuple[float, Params]:
        """The mean squared error of ε̂(x, t, cond) against ``eps`` and its gradient for every
        parameter: x and eps are (n, out_dim), t is (n,) timesteps, cond is (n, c)."""
        p = self.params
        e = TIME_TABLE[t]
        a_time, th = self._time(e)
        a_in = x @ p["in.x"] + th @ p["in.time"] + cond @ p["in.cond"] + p["in.b"]
        out, pre, post = self._trunk(a_in)
        diff = out - eps
        loss = float(np.mean(diff**2))

        g: Params = {}
        d_out = 2.0 * diff / diff.size
        g["out.W"], g["out.b"] = post[-1].T @ d_out, d_out.sum(axis=0)
        d_post = d_out @ p["out.W"].T
        for k in range(self.depth - 1, 0, -1):
            d_pre = d_post * _silu_grad(pre[k])
            g[f"hidden.{k}.W"], g[f"hidden.{k}.b"] = post[k - 1].T @ d_pre, d_pre.sum(axis=0)
            d_post = d_pre @ p[f"hidden.{k}.W"].T
        d_in = d_post * _silu_grad(pre[0])
        g["in.x"], g["in.time"], g["in.cond"] = x.T @ d_in, th.T @ d_in, cond.T @ d_in
        g["in.b"] = d_in.sum(axis=0)
        d_th = d_in @ p["in.time"].T
        g["time.1.W"], g["time.1.b"] = (a_time * sigmoid(a_time)).T @ d_th, d_th.sum(axis=0)
        d_time = (d_th @ p["time.1.W"].T) * _silu_grad(a_time)
        g["time.0.W"], g["time.0.b"] = e.T @ d_time, d_time.sum(axis=0)
        return loss, g

    def as_float32(self) -> Denoiser:
        """The same network in float32, for sampling: half the time of float64 here (the
        SiLUs dominate, and numpy vectorises float32 ones twice as wide), and a forecast's
        precision is far coarser than float32's."""
        return Denoiser({name: value.astype(np.float32) for name, value in self.params.items()})

    def predictor(self, cond: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
        """ε̂(x, t) for a fixed block of conditions, all rows at one timestep, as the sampler
        asks, in the parameters' precision (float64, or float32 after ``as_float32``).

        Only x changes from step to step, so the condition's projection is computed once per
        block and the time-MLP's contribution once per timestep (t takes only T values); a
        step is then the trunk alone, with its activations computed in place."""
        p = self.params
        dtype = p["in.b"].dtype
        base = np.asarray(cond, dtype=dtype) @ p["in.cond"] + p["in.b"]
        time_in = self._time(TIME_TABLE.astype(dtype, copy=False))[1] @ p["in.time"]
        layers = [(p[f"hidden.{k}.W"], p[f"hidden.{k}.b"]) for k in range(1, self.depth)]
        # for one-number x, (n, 1) @ (1, h) is a broadcast product, which numpy does faster
        project = np.multiply if p["in.x"].shape[0] == 1 else np.matmul

        def predict(x: np.ndarray, t: int) -> np.ndarray:
            a = project(x, p["in.x"])
            a += base
            a += time_in[t]
            h = _silu_in_place(a)
            for w, b in layers:
                h = h @ w
                h += b
                h = _silu_in_place(h)
            out: np.ndarray = h @ p["out.W"] + p["out.b"]
            return out

        return predict


def _silu_in_place(a: np.ndarray) -> np.ndarray:
    """a·sigmoid(a) = a/(1 + e^−a), overwriting ``a``: one scratch array and four passes, where
    ``a * sigmoid(a)`` makes five temporaries (a third of the sampler's time went there).
    e^−a overflows to inf for very negative a, and a/inf is the right answer, −0."""
    scratch = np.negative(a)
    with np.errstate(over="ignore"):
        np.exp(scratch, out=scratch)
    scratch += 1.0
    np.divide(a, scratch, out=a)
    return a


def clip_grad_norm(grads: Params) -> float:
    """Scales every gradient by 1/(norm + 1e-6) when their global norm exceeds 1, as torch's
    ``clip_grad_norm_(…, 1.0)``; returns the norm before clipping."""
    norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads.values()))
    scale = MAX_GRAD_NORM / (norm + 1e-6)
    if scale < 1.0:
        for g in grads.values():
            g *= scale
    return norm


class AdamW:
    """torch.optim.AdamW with its defaults (β = 0.9, 0.999; ε = 1e-8; weight decay 0.01),
    updating ``params`` in place: the decay shrinks each parameter by lr·0.01 before the Adam
    step, apart from the gradient's moments."""

    beta1 = 0.9
    beta2 = 0.999
    eps = 1e-8

    def __init__(self, params: Params, lr: float) -> None:
        self.params = params
        self.lr = lr
        self.t = 0
        self.m = {name: np.zeros_like(v) for name, v in params.items()}
        self.v = {name: np.zeros_like(v) for name, v in params.items()}

    def step(self, grads: Params) -> None:
        self.t += 1
        c1 = 1.0 - self.beta1**self.t
        c2 = 1.0 - self.beta2**self.t
        for name, param in self.params.items():
            g = grads[name]
            m, v = self.m[name], self.v[name]
            m *= self.beta1
            m += (1.0 - self.beta1) * g
            v *= self.beta2
            v += (1.0 - self.beta2) * g * g
            param *= 1.0 - self.lr * WEIGHT_DECAY
            param -= self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)


@dataclass(frozen=True)
class Trained:
    """A trained denoiser and forecastbench's ``final_loss`` (mean of the last 200 steps)."""

    model: Denoiser
    final_loss: float


Prior = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""(x_t, t, rows) -> a known part of ε for those training rows, which the network then need
not learn: it is trained on ε minus it, and the sampler adds it back."""


def train(
    x0: np.ndarray,
    cond: np.ndarray,
    config: DiffusionConfig,
    seed: int,
    progress: Callable[[int, float], None] | None = None,
    prior: Prior | None = None,
) -> Trained:
    """Fits the denoiser to targets ``x0`` (n,) or (n, out_dim) under conditions ``cond`` (n, c).

    One generator, ``default_rng(seed)``, draws the initial weights and then, step after step,
    the batch rows (with replacement), t and ε, so a seed fixes the whole run. ``progress``,
    if given, is told each finished step's number (from 1) and loss. With a ``prior`` the
    network learns only what ε adds to it (the loss is the full ε̂'s error all the same).
    """
    x0 = np.asarray(x0, dtype=np.float64)
    x0 = x0.reshape(-1, 1) if x0.ndim == 1 else x0
    cond = np.asarray(cond, dtype=np.float64)
    rng = np.random.default_rng(seed)
    model = Denoiser.init(cond.shape[1], config.hidden, config.depth, rng, out_dim=x0.shape[1])
    optimiser = AdamW(model.params, config.lr)
    root_ab, root_1m_ab = np.sqrt(ALPHA_BAR), np.sqrt(1.0 - ALPHA_BAR)
    losses = np.empty(config.steps)
    for step in range(config.steps):
        rows = rng.integers(0, x0.shape[0], size=config.batch)
        t = rng.integers(0, T, size=config.batch)
        eps = rng.standard_normal((config.batch, x0.shape[1]))
        x_t = root_ab[t, None] * x0[rows] + root_1m_ab[t, None] * eps
        target = eps if prior is None else eps - prior(x_t, t, rows)
        losses[step], grads = model.loss_and_grads(x_t, t, cond[rows], target)
        clip_grad_norm(grads)
        optimiser.step(grads)
        if progress is not None:
            progress(step + 1, float(losses[step]))
    return Trained(model, float(np.mean(losses[-FINAL_LOSS_WINDOW:])))


def ddim_sample(
    predict: Callable[[np.ndarray, int], np.ndarray],
    x: np.ndarray,
    n_steps: int,
    *,
    strided_bug: bool = False,
) -> np.ndarray:
    """Deterministic DDIM (η = 0) from noise ``x`` at t = T − 1 down to x̂₀.

    At each timestep t: x̂₀ = (x − √(1 − ᾱ_t)·ε̂)/√ᾱ_t, then x moves to the *next strided*
    timestep s: x = √ᾱ_s·x̂₀ + √(1 − ᾱ_s)·ε̂. The original moves to t − 1 instead (methodology
    §2.7's bug), which puts x at the wrong noise level whenever n_steps < T; ``strided_bug``
    does that, to reproduce a figure made with it.
    """
    schedule = timesteps(n_steps)
    x0 = x
    for i, t in enumerate(schedule):
        eps = predict(x, int(t))
        x0 = (x - math.sqrt(1.0 - ALPHA_BAR[t]) * eps) / math.sqrt(ALPHA_BAR[t])
        if i + 1 < len(schedule):
            s = t - 1 if strided_bug else schedule[i + 1]
            x = math.sqrt(ALPHA_BAR[s]) * x0 + math.sqrt(1.0 - ALPHA_BAR[s]) * eps
    return x0


def sample_x0(
    model: Denoiser,
    cond: np.ndarray,
    *,
    sample_steps: int,
    mc: int,
    seed: int,
    strided_bug: bool = False,
) -> np.ndarray:
    """``mc`` samples of x̂₀ per condition row, shape (mc, n, out_dim), in the model's units.

    Sample m starts from ``default_rng(seed + 10_000 + m)``; the samples run side by side as
    one block, which changes nothing but the speed.
    """
    n, out_dim = cond.shape[0], model.params["out.b"].shape[0]
    noise = [
        np.random.default_rng(seed + SAMPLE_SEED_OFFSET + m).standard_normal((n, out_dim))
        for m in range(mc)
    ]
    predict = model.predictor(np.tile(cond, (mc, 1)))
    x0 = ddim_sample(predict, np.concatenate(noise), sample_steps, strided_bug=strided_bug)
    return x0.reshape(mc, n, out_dim)


def forecast(model: Denoiser, cond: np.ndarray, config: DiffusionConfig, seed: int) -> np.ndarray:
    """P(YES) per condition row: the mean of sigmoid(6.9068·x̂₀) over ``config.mc`` samples,
    for a model trained on ``label_targets`` (samples drawn as ``sample_x0`` draws them).
    """
    x0 = sample_x0(model, cond, sample_steps=config.sample_steps, mc=config.mc, seed=seed)
    p: np.ndarray = sigmoid(LOGIT_SCALE * x0[:, :, 0]).mean(axis=0)
    return p
