"""95% intervals for results over cohorts, and which one is honest when.

Two methods:

* ``cohorts`` — Student's t over per-cohort values: right when cohorts are independent
  draws (different markets, different weeks).
* ``markets`` — a bootstrap that resamples *markets*: each draw picks the universe's markets
  with replacement and applies the same picks to every cohort, so a market that several cohorts
  traded moves all of them together, as it did. The draws give the standard error; the
  interval is the estimate ± a t quantile times it (``bootstrap_interval`` says why).
  Weekly cohorts of one tape trade the same markets resolving the same week; their returns
  are far from independent, and t over them treats 26 echoes of one set of outcomes as 26
  experiments (the coverage test in ``tests/ledger/test_intervals.py`` measures how badly). The
  assumption it keeps is that *markets* are independent; markets that resolve on one event
  (an election) still move together, and no interval computed from one such event can know
  that.

``auto`` picks ``markets`` when any market appears in more than one cohort, else ``cohorts``.
The bootstrap is seeded, so a report is the same every time it is made. Pure numpy, no scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

from ledger.errors import LedgerError

if TYPE_CHECKING:  # numpy loads with the first bootstrap: a report with none starts faster
    import numpy as np

Method = Literal["markets", "cohorts"]
MethodChoice = Literal["auto", "markets", "cohorts"]
METHOD_CHOICES: tuple[MethodChoice, ...] = ("auto", "markets", "cohorts")

DRAWS = 2000
"""Bootstrap draws: the 2.5% and 97.5% quantiles then move by well under a tenth of the
interval's width between seeds."""

_Z_975 = 1.959963984540054
_SERIES_MAX_DF = 1000
"""Above this the exact series (one term per two degrees of freedom) gives way to the
Cornish-Fisher expansion, whose error there is below 1e-9."""


class PairedDifference(NamedTuple):
    """The mean of paired differences ``a - b`` and its 95% interval."""

    mean: float
    ci_low: float | None
    ci_high: float | None
    significant: bool


def choose_method(choice: MethodChoice, markets_per_cohort: Sequence[Sequence[str]]) -> Method:
    """``auto`` resolved: resample markets when cohorts share any, else t over cohorts."""
    if choice != "auto":
        return choice
    seen: set[str] = set()
    for markets in markets_per_cohort:
        if seen.intersection(markets):
            return "markets"
        seen.update(markets)
    return "cohorts"


# -- Student's t over cohorts ------------------------------------------------------------------


def _t_two_sided_mass(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer ``df``, by the finite series of Abramowitz and
    Stegun 26.7.3-4; exact up to rounding, so no table runs out and no scipy is needed."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return (2.0 / math.pi) * (theta + math.sin(theta) * math.cos(theta) * total)
    term, total = 1.0, 1.0
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (12.706 for df=1)."""
    if df < 1:
        raise LedgerError(f"degrees of freedom must be at least 1, got {df}")
    if df > _SERIES_MAX_DF:
        z = _Z_975
        return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    lo, hi = 0.0, 64.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_two_sided_mass(mid, df) < 0.95:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return (lo + hi) / 2


def mean_ci(values: Sequence[float]) -> tuple[float, float | None, float | None]:
    """Mean and 95% interval ``mean ± t·s/√n`` (sample s); no interval for a single value."""
    n = len(values)
    if n == 0:
        raise LedgerError("cannot take the mean of no values")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, None, None
    s = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile_975(n - 1) * s / math.sqrt(n)
    return mean, mean - half, mean + half


def paired_difference(a: Sequence[float], b: Sequence[float]) -> PairedDifference:
    """Compare two strategies on the same cohorts: the t interval of per-cohort differences.

    Pairing removes the variation that cohorts share (a bull week lifts both). ``significant``
    means the 95% interval excludes zero; one pair never is.
    """
    if len(a) != len(b):
        raise LedgerError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    mean, low, high = mean_ci([x - y for x, y in zip(a, b, strict=True)])
    return PairedDifference(mean, low, high, _excludes_zero(low, high))


def _excludes_zero(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and (low > 0 or high < 0)


# -- the bootstrap over markets ----------------------------------------------------------------


def market_weights(n_markets: int, draws: int = DRAWS, seed: int = 0) -> np.ndarray:
    """``draws × n_markets`` counts: how often each market is picked in each resample of
    ``n_markets`` markets with replacement. One matrix serves every agent and every figure of
    a report, so paired differences resample both agents alike."""
    if n_markets < 1 or draws < 1:
        raise LedgerError("a bootstrap needs at least one market and one draw")
    import numpy as np

    rng = np.random.default_rng(seed)
    return rng.multinomial(n_markets, np.full(n_markets, 1.0 / n_markets), size=draws).astype(
        np.float64
    )


def cohort_mean_draws(
    weights: np.ndarray, numerators: np.ndarray, denominators: np.ndarray | None = None
) -> np.ndarray:
    """Per draw, the mean over cohorts of each cohort's weighted sum over markets (or ratio of
    sums: ``numerators`` / ``denominators``, e.g. summed Brier / bets). ``numerators`` is
    ``cohorts × markets``; a cohort whose ratio has nothing under it in a draw is left out of
    that draw's mean, as a cohort without resolved bets is left out of the plain mean."""
    import numpy as np

    top = weights @ numerators.T
    if denominators is None:
        return np.asarray(top.mean(axis=1))
    bottom = weights @ denominators.T
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(bottom > 0, top / bottom, np.nan)
    counted = np.isfinite(ratio).sum(axis=1)
    total = np.nansum(ratio, axis=1)
    return np.asarray(np.where(counted > 0, total / np.maximum(counted, 1), np.nan))


def bootstrap_interval(
    draws: np.ndarray, estimate: float, clusters: int
) -> tuple[float | None, float | None]:
    """``estimate ± t(G−1) · √(G/(G−1)) · sd(draws)``, G the markets that carry any of the
    figure; None with one such market or fewer than two finite draws. With none (an agent that
    never bet, two agents that bet alike) the figure is the same in every resample: the
    interval is the estimate itself.

    Not the draws' 2.5% and 97.5% quantiles: with a few dozen markets, a handful of which carry
    most of a return, those cover about 88% on fair tapes where this covers about 96% (measured
    over 300 tapes; ``tests/ledger/test_intervals.py`` runs 100). The t quantile and the factor
    are the small-sample corrections usual for clustered standard errors.
    """
    if clusters == 0:
        return estimate, estimate
    import numpy as np

    finite = draws[np.isfinite(draws)]
    if clusters < 2 or finite.size < 2:
        return None, None
    half = t_quantile_975(clusters - 1) * math.sqrt(clusters / (clusters - 1))
    half *= float(np.std(finite, ddof=1))
    return estimate - half, estimate + half


def bootstrap_difference(
    draws_a: np.ndarray, draws_b: np.ndarray, mean: float, clusters: int
) -> PairedDifference:
    """The paired difference ``a - b`` from draws made with the same market weights."""
    low, high = bootstrap_interval(draws_a - draws_b, mean, clusters)
    return PairedDifference(mean, low, high, _excludes_zero(low, high))
