"""Changes of scale for probabilities: logits, additive log-ratios, and K-Fish extremization."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ledger.metrics.validation import FloatArray, MetricInputError

LOGIT_EPS = 1e-6
ALR_EPS = 1e-12
AGREE_STD = 0.05
DISAGREE_STD = 0.20
EXTREMIZE_AGGRESSIVENESS = 0.5
EXTREMIZE_CLIP = (0.01, 0.99)


def _floats(name: str, values: ArrayLike) -> FloatArray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MetricInputError(f"{name}: not numeric ({exc})") from None


def prob_to_logit(p: ArrayLike, eps: float = LOGIT_EPS) -> FloatArray:
    """ln(p / (1 - p)) after clipping p into [eps, 1 - eps], so 0 and 1 map to finite logits."""
    clipped = np.clip(_floats("p", p), eps, 1.0 - eps)
    return np.log(clipped / (1.0 - clipped))


def logit_to_prob(u: ArrayLike) -> FloatArray:
    """1 / (1 + e^-u); no clipping on the way back (methodology §2.6)."""
    return 1.0 / (1.0 + np.exp(-_floats("u", u)))


def simplex_to_alr(p: ArrayLike, eps: float = ALR_EPS) -> FloatArray:
    """Additive log-ratio coordinates along the last axis: ln(p_i / p_n) for i < n.

    The last category is the reference. p is clipped to [eps, 1] and renormalised first, so a
    zero probability gives a large negative coordinate instead of -inf.
    """
    probs = _floats("p", p)
    if probs.ndim == 0 or probs.shape[-1] < 2:
        raise MetricInputError(f"p: need at least 2 categories on the last axis, got {probs.shape}")
    clipped = np.clip(probs, eps, 1.0)
    clipped = clipped / clipped.sum(axis=-1, keepdims=True)
    ratios: FloatArray = clipped[..., :-1] / clipped[..., -1:]
    return np.log(ratios)


def alr_to_simplex(u: ArrayLike) -> FloatArray:
    """Inverse of :func:`simplex_to_alr`: p_i = e^u_i / (1 + sum_j e^u_j), p_n = 1 / (same)."""
    coords = _floats("u", u)
    if coords.ndim == 0:
        raise MetricInputError("u: need at least 1 coordinate on the last axis")
    expu = np.exp(coords)
    denominator = 1.0 + expu.sum(axis=-1, keepdims=True)
    return np.concatenate([expu / denominator, 1.0 / denominator], axis=-1)


def extremize_factor(s: ArrayLike, a: float = EXTREMIZE_AGGRESSIVENESS) -> FloatArray:
    """K-Fish's stretch factor from the spread s of the ensemble (methodology §3.2).

    1 + a when the members agree (s <= 0.05), 1 - a/2 when they disagree (s >= 0.20), linear in
    between: agreement earns a bolder forecast, disagreement a more cautious one.
    """
    spread = _floats("s", s)
    if np.any(spread < 0) or not np.all(np.isfinite(spread)):
        raise MetricInputError("s: a spread must be a finite number >= 0")
    agree, disagree = 1.0 + a, 1.0 - a / 2.0
    return np.interp(spread, [AGREE_STD, DISAGREE_STD], [agree, disagree])


def asymmetric_extremize(
    p: ArrayLike,
    s: ArrayLike,
    a: float = EXTREMIZE_AGGRESSIVENESS,
    clip: tuple[float, float] = EXTREMIZE_CLIP,
) -> FloatArray:
    """p' = 0.5 + (p - 0.5) * f(s), a stretch in probability space (not log-odds), clipped into
    [0.01, 0.99] by default: the docs leave the clip open and a factor of 1.5 pushes any p above
    5/6 past 1, so we use the legacy engine's clamp."""
    probs = _floats("p", p)
    stretched = 0.5 + (probs - 0.5) * extremize_factor(s, a)
    return np.clip(stretched, clip[0], clip[1])
