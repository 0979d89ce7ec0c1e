"""An experiment's analytic facts, each measured against its expected value with a tolerance
that comes from the sampling, never from trial and error.

A fact is one of three kinds:

* ``sampled``: the measurement is a sample mean whose standard error is known in closed form;
  it passes within ``Z`` standard errors (Z = 5: a false alarm about once in 1.7 million);
* ``exact``: the quantity is a deterministic function of the sample (e.g. the SCE of q_ρ, whose
  every row is the same number), so it passes within floating-point rounding;
* ``bound``: a maximum over many sampled means (groupstress's other J) passes under the
  Hoeffding bound that holds for all of them at once with probability 1 − ``FAMILY_RISK``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

Z = 5.0
FAMILY_RISK = 1e-6
ROUNDING = {False: 1e-9, True: 1e-6}
"""Rounding allowance of an ``exact`` fact in float64, and with forecastbench's float32 cast."""

Kind = Literal["sampled", "exact", "bound", "claim"]


@dataclass(frozen=True)
class Check:
    """One fact: what was measured, what theory says, how far apart they may be, and why."""

    name: str
    measured: float
    expected: float
    tolerance: float
    kind: Kind
    basis: str

    @property
    def ok(self) -> bool:
        if self.kind == "claim":  # "measured below expected", e.g. beats the constant ½
            return self.measured < self.expected
        return abs(self.measured - self.expected) <= self.tolerance

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def sampled(name: str, measured: float, expected: float, stderr: float, float32: bool) -> Check:
    tolerance = Z * stderr + ROUNDING[float32]
    return Check(name, measured, expected, tolerance, "sampled", f"{Z:g} standard errors")


def exact(name: str, measured: float, expected: float, float32: bool) -> Check:
    return Check(name, measured, expected, ROUNDING[float32], "exact", "rounding only")


def hoeffding_z(n_means: int) -> float:
    """z with P(any of ``n_means`` means of values in [−c, c] strays past c·z/√count) ≤
    FAMILY_RISK: Hoeffding's 2·exp(−count·t²/(2c²)) per mean, union over all of them."""
    return math.sqrt(2.0 * math.log(2.0 * max(n_means, 1) / FAMILY_RISK))


def bound(name: str, measured: float, limit: float, what: str) -> Check:
    return Check(name, measured, 0.0, limit, "bound", what)


def claim(name: str, measured: float, below: float, what: str) -> Check:
    return Check(name, measured, below, 0.0, "claim", what)
