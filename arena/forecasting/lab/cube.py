"""Worst subcube biases max_a |E[r | z_J = a]| for every J of size k, through the Walsh basis.

groupstress asks, for each of the C(d, k) coordinate sets J, how far the residual r = f − q
averages from 0 on the worst of its 2^k subcubes. Grouping the rows once per J costs
C(d, k)·n (3432 × 200,000 at the defaults). Instead the rows are histogrammed once on the cube
(count and residual sum per point, 2^d cells), both histograms are Walsh–Hadamard transformed
once (d·2^d), and the marginal of a histogram on J is the inverse transform of its 2^k
coefficients on the subsets of J. That costs k·2^k per J, whatever n is, and is exact: the same
sums a per-J grouping would add up, in another order. With ``exact`` the histogram is the whole
cube, each point once, which is the population rather than a sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import combinations, islice
from math import comb

import numpy as np

MAX_CUBE_DIM = 24
"""2^24 cells, as forecastbench's published d = 24 runs need: two float64 histograms and their
transforms, 1.0 GiB at the process's peak (``arena bench lab --published``)."""
MAX_EXACT_DIM = 18
"""forecastbench's limit for ``--exact``."""
J_CHUNK = 2048


def walsh_hadamard(h: np.ndarray) -> np.ndarray:
    """Unnormalised Walsh–Hadamard transform along the last axis (length 2^m):
    H(T) = Σ_x h(x)·(−1)^{|T ∧ x|}. It is its own inverse up to a factor 2^m."""
    out = np.array(h, dtype=np.float64)
    n = out.shape[-1]
    step = 1
    while step < n:
        view = out.reshape(*out.shape[:-1], n // (2 * step), 2, step)
        a, b = view[..., 0, :].copy(), view[..., 1, :]
        view[..., 0, :] += b
        view[..., 1, :] = a - b
        step *= 2
    return out


def cube_index(z: np.ndarray) -> np.ndarray:
    """Each row's cell on the cube: bit i set iff z_i = +1."""
    cells: np.ndarray = ((z > 0).astype(np.int64) << np.arange(z.shape[1])).sum(axis=1)
    return cells


@dataclass(frozen=True)
class SubcubeBias:
    """One J: its worst |mean residual| over the non-empty subcubes, and the fewest rows any
    of them holds (the Hoeffding bound on a subcube's mean scales with 1/√count)."""

    J: tuple[int, ...]
    worst: float
    min_count: float
    worst_scaled: float
    """max_a |mean_a|·√count_a: the worst bias in units where sampling noise is O(1)."""


class CubeHistogram:
    """Counts and residual sums on the cube, Walsh-transformed, ready for any J."""

    def __init__(self, d: int, count: np.ndarray, total: np.ndarray) -> None:
        self.d = d
        self.count_hat = walsh_hadamard(count)
        self.total_hat = walsh_hadamard(total)

    @classmethod
    def of_rows(cls, z: np.ndarray, r: np.ndarray) -> CubeHistogram:
        d = z.shape[1]
        _check_dim(d, MAX_CUBE_DIM, "the cube histogram")
        cell = cube_index(z)
        size = 1 << d
        return cls(
            d,
            np.bincount(cell, minlength=size).astype(np.float64),
            np.bincount(cell, weights=r, minlength=size),
        )

    @classmethod
    def of_cube(cls, d: int, residual: Callable[[np.ndarray], np.ndarray]) -> CubeHistogram:
        """Every point of {−1, +1}^d once: the population's histogram."""
        _check_dim(d, MAX_EXACT_DIM, "--exact")
        cells = np.arange(1 << d, dtype=np.int64)
        z = np.where((cells[:, None] >> np.arange(d)) & 1, 1, -1).astype(np.int8)
        return cls(d, np.ones(1 << d), residual(z))

    def biases(self, Js: list[tuple[int, ...]]) -> list[SubcubeBias]:
        """The worst subcube bias of each J (all J of one size)."""
        out: list[SubcubeBias] = []
        for start in range(0, len(Js), J_CHUNK):
            chunk = Js[start : start + J_CHUNK]
            index = _subset_indices(np.array(chunk, dtype=np.int64))
            scale = 1.0 / index.shape[1]
            count = walsh_hadamard(self.count_hat[index]) * scale
            total = walsh_hadamard(self.total_hat[index]) * scale
            count = np.rint(count)  # integer counts, up to the transform's rounding
            seen = count > 0
            mean = np.divide(total, count, out=np.zeros_like(total), where=seen)
            worst = np.abs(mean).max(axis=1)
            scaled = (np.abs(mean) * np.sqrt(count)).max(axis=1)
            fewest = np.where(seen, count, np.inf).min(axis=1)
            out += [
                SubcubeBias(J, float(w), float(c), float(s))
                for J, w, c, s in zip(chunk, worst, fewest, scaled, strict=True)
            ]
        return out


def _subset_indices(Js: np.ndarray) -> np.ndarray:
    """(nJ, 2^k) cube indices of every subset of each J, subset m holding J_t iff bit t of m,
    so the inverse transform's position a is the subcube key Σ_t 1{z_{J_t} = +1}·2^t."""
    k = Js.shape[1]
    masks = np.arange(1 << k, dtype=np.int64)
    member = (masks[:, None] >> np.arange(k)) & 1  # (2^k, k)
    index: np.ndarray = (member[None, :, :] << Js[:, None, :]).sum(axis=2)
    return index


def _check_dim(d: int, limit: int, what: str) -> None:
    if d > limit:
        raise ValueError(f"d = {d} is too large for {what} (at most {limit})")


def coordinate_sets(d: int, k: int, max_j: int | None) -> Iterator[tuple[int, ...]]:
    """The J of size k in lexicographic order, the first ``max_j`` of them if given."""
    every = combinations(range(d), k)
    return every if max_j is None else islice(every, max_j)


def count_sets(d: int, k: int, max_j: int | None) -> int:
    total = comb(d, k)
    return total if max_j is None else min(total, max_j)
