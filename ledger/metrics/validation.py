"""Input checks shared by every metric.

A metric fed a label of 2 or a probability of 1.3 still returns a number, and that number is
wrong without anyone noticing; so every public metric converts its inputs here first and fails
loudly with a message that names the argument and the first offending position.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ledger.errors import LedgerError

FloatArray = NDArray[np.float64]


class MetricInputError(LedgerError):
    """Inputs a metric cannot score: empty, mismatched, labels or probabilities out of range."""


def as_vector(name: str, values: ArrayLike, *, finite: bool = True) -> FloatArray:
    """A non-empty, 1-D float64 copy of ``values``, finite unless ``finite`` is False (times,
    where NaN and infinity mean "unknown" and "never")."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MetricInputError(f"{name}: not numeric ({exc})") from None
    if array.ndim != 1:
        raise MetricInputError(f"{name}: expected a 1-D sequence, got shape {array.shape}")
    if array.size == 0:
        raise MetricInputError(f"{name}: empty, nothing to score")
    bad = np.flatnonzero(~np.isfinite(array)) if finite else np.array([], dtype=np.intp)
    if bad.size:
        raise MetricInputError(f"{name}[{bad[0]}] is {array[bad[0]]}, not a finite number")
    return array


def as_group_codes(name: str, values: ArrayLike, n_groups: int | None = None) -> NDArray[np.intp]:
    """A 1-D array of integer group codes from 0 (below ``n_groups`` when given)."""
    codes = np.asarray(values)
    if codes.ndim != 1 or codes.dtype.kind not in "iu" or (codes.size and codes.min() < 0):
        raise MetricInputError(f"{name}: expected a 1-D array of integer group codes from 0")
    if n_groups is not None and codes.size and codes.max() >= n_groups:
        raise MetricInputError(f"{name}: codes must lie in 0..{n_groups - 1}")
    return codes.astype(np.intp)


def as_probabilities(name: str, values: ArrayLike) -> FloatArray:
    """A 1-D float64 array whose every entry lies in [0, 1]."""
    array = as_vector(name, values)
    _check_unit_interval(name, array)
    return array


def as_outcomes(name: str, values: ArrayLike) -> FloatArray:
    """A 1-D float64 array of 0/1 labels (float so arithmetic with forecasts needs no casts)."""
    array = as_vector(name, values)
    bad = np.flatnonzero((array != 0.0) & (array != 1.0))
    if bad.size:
        raise MetricInputError(f"{name}[{bad[0]}] is {array[bad[0]]}, expected a 0/1 label")
    return array


def same_length(**arrays: NDArray[np.generic]) -> int:
    """The common length of ``arrays``; mismatched inputs would silently broadcast or truncate."""
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) != 1:
        listed = ", ".join(f"{name}={n}" for name, n in lengths.items())
        raise MetricInputError(f"inputs differ in length: {listed}")
    return next(iter(lengths.values()))


def check_positive_int(name: str, value: int) -> None:
    """Bin counts and similar sizes must be at least 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise MetricInputError(f"{name} must be a positive integer, got {value!r}")


def check_non_negative(name: str, value: float) -> None:
    """Stakes and costs: a negative one would flip the meaning of the result."""
    if not np.isfinite(value) or value < 0:
        raise MetricInputError(f"{name} must be a finite number >= 0, got {value!r}")


def _check_unit_interval(name: str, array: NDArray[np.float64]) -> None:
    bad = np.flatnonzero((array < 0.0) | (array > 1.0))
    if bad.size:
        raise MetricInputError(f"{name}[{bad[0]}] is {array.flat[bad[0]]}, outside [0, 1]")


def as_probability_matrix(name: str, values: ArrayLike) -> FloatArray:
    """An (n, C) float64 array of class probabilities in [0, 1], n >= 1 and C >= 2."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MetricInputError(f"{name}: not numeric ({exc})") from None
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] < 2:
        raise MetricInputError(f"{name}: expected shape (n >= 1, classes >= 2), got {array.shape}")
    flat = array.ravel()
    if not np.all(np.isfinite(flat)):
        raise MetricInputError(f"{name}: contains a value that is not a finite number")
    _check_unit_interval(name + " (flattened)", flat)
    return array
