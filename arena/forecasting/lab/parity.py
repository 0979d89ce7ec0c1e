"""Parity markets: the data-generating process and the forecasters known in closed form.

f(z) = ½ + (α/2)·χ_S(z) with χ_S(z) = ∏_{i∈S} z_i on z uniform in {−1, +1}^d. Sampling follows
forecastbench's ``benchmarks/parity.py`` draw for draw (S from ``default_rng(seed)``, z and then
y from ``default_rng(seed + 1_000_000)``), so a seed names the same market and sample there and
here. The original computes f and q in float32; we compute in float64 and compute as it does,
in float32, behind ``float32`` (methodology §2.2: float32 moves a forecast across a bin edge; the
original's 0.1 is 0.099999994, in the ECE's bin 1, where float32(0.1) = 0.100000001 is in bin 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

SAMPLE_SEED_OFFSET = 1_000_000
Encoding = Literal["plain", "natural"]


@dataclass(frozen=True)
class ParityMarket:
    """The hidden set S (sorted, as the subcube groups are), the signal α, and the float mode."""

    d: int
    S: tuple[int, ...]
    alpha: float
    float32: bool = False

    @property
    def k(self) -> int:
        return len(self.S)

    @classmethod
    def create(cls, d: int, k: int, alpha: float, seed: int, float32: bool = False) -> ParityMarket:
        if not 1 <= k <= d:
            raise ValueError(f"k must be in 1..d={d}, got {k}")
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        chosen = np.random.default_rng(seed).choice(d, size=k, replace=False)
        return cls(d, tuple(sorted(int(i) for i in chosen)), alpha, float32)

    def chi(self, z: np.ndarray) -> np.ndarray:
        """χ_S(z) per row, as float64 ±1."""
        chi: np.ndarray = np.prod(z[:, list(self.S)], axis=1, dtype=np.int64)
        return chi.astype(np.float64)

    def _signal(self, scale: float, z: np.ndarray) -> np.ndarray:
        """½ + scale·χ_S(z). Under ``float32`` as the original computes it: its χ is float32,
        so numpy takes the Python scale to float32 and does the product and the sum there
        (½ − float32(0.4) = 0.099999994), where casting the float64 result would give
        float32(0.1) = 0.100000001, one ulp the other side of 0.1."""
        if self.float32:
            chi32 = self.chi(z).astype(np.float32)
            return (0.5 + scale * chi32).astype(np.float64)
        return 0.5 + scale * self.chi(z)

    def truth(self, z: np.ndarray) -> np.ndarray:
        """f(z) = ½ + (α/2)·χ_S(z)."""
        return self._signal(0.5 * self.alpha, z)

    def diffusion(self, z: np.ndarray, rho: float) -> np.ndarray:
        """The noise operator applied to f, q_ρ = T_ρ f = ½ + (α/2)·ρ^k·χ_S(z)."""
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"rho must be in [0, 1], got {rho}")
        return self._signal(0.5 * self.alpha * rho**self.k, z)

    def residual(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """f − q; under ``float32`` subtracted in float32, as the original subtracts its
        float32 arrays before casting (0.099999994 − 0.699999988 rounds to −0.600000024)."""
        if self.float32:
            return (p.astype(np.float32) - q.astype(np.float32)).astype(np.float64)
        difference: np.ndarray = p - q
        return difference

    def l_query(self, z: np.ndarray, L: int) -> np.ndarray:
        """The stylised AR forecaster: it can read L coordinates, so it knows f iff L ≥ k."""
        return self.truth(z) if self.k <= L else np.full(len(z), 0.5)

    def group_keys(self, z: np.ndarray) -> np.ndarray:
        """The subcube of each row on S: Σ_t 1{z_{S_t} = +1}·2^t (2^k groups)."""
        return subcube_keys(z, self.S)


def subcube_keys(z: np.ndarray, J: tuple[int, ...]) -> np.ndarray:
    """Σ_t 1{z_{J_t} = +1}·2^t: forecastbench's key of the subcube G_{J,a} a row lies in."""
    bits = (z[:, list(J)] > 0).astype(np.int64)
    return bits @ (1 << np.arange(len(J), dtype=np.int64))


@dataclass(frozen=True)
class ParitySample:
    """n rows: z in {−1, +1}^d (int8), the truth f(z) and the outcome y (float 0/1)."""

    z: np.ndarray
    p: np.ndarray
    y: np.ndarray

    def rows(self, start: int, stop: int) -> ParitySample:
        return ParitySample(self.z[start:stop], self.p[start:stop], self.y[start:stop])


def sample(market: ParityMarket, n: int, seed: int) -> ParitySample:
    """z, then y ~ Bernoulli(f(z)), both from ``default_rng(seed + 1_000_000)``."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    rng = np.random.default_rng(seed + SAMPLE_SEED_OFFSET)
    z = (2 * rng.integers(0, 2, size=(n, market.d), dtype=np.int8) - 1).astype(np.int8)
    p = market.truth(z)
    y = rng.binomial(1, p).astype(np.float64)
    return ParitySample(z, p, y)


def encode(z_row: np.ndarray, style: Encoding) -> str:
    """The text an LLM is shown: "plain" is ``Bits: 1 0 1 …`` (1 for +1), "natural" is
    ``Bit 0 is +1. Bit 1 is -1. …``, forecastbench's two encodings."""
    if style == "plain":
        return "Bits: " + " ".join("1" if b > 0 else "0" for b in z_row)
    return " ".join(f"Bit {i} is {'+1' if b > 0 else '-1'}." for i, b in enumerate(z_row))
