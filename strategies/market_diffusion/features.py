"""What the market diffusion model is conditioned on: what is knowable about a market at an
instant, as one row of numbers.

A market at instant ``ts`` is known by its price points up to ``ts`` (never after), its
*scheduled* end (``end_ts``, never when it actually closed), its volume as of ``ts`` (NaN
where unknown: a closed market's final total is never used), its category and its question.
From those, one row:

* per ALR coordinate of the prices (m − 1 of them for m outcomes; the logit of YES for a
  binary market, methodology §2.6 with YES first and NO the reference): the level now, its change
  over the last day and the last week, and its realised volatility over the last week (the
  square root of the summed squared point-to-point changes, which does not depend on how often
  the tape samples the price); all in units of ``LOGIT_SCALE``, prices clipped to
  [``PRICE_CLIP``, 1 − ``PRICE_CLIP``] so a price of 0 or 1 is a finite ±1.
* how long the market has been priced, and how long until its scheduled end (log-days), with
  a flag saying whether the end is known;
* log volume as of the instant, with a flag saying whether it is known;
* the category, hashed into ``CATEGORY_DIM`` signed buckets;
* the question's words and bigrams, hashed into ``EMBED_DIM`` buckets (``embed_texts``).

Every number is scaled by hand to be of order one, so the row needs no fitted normalisation
(nothing to store, nothing to get out of step between training and forecasting).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ledger.metrics import simplex_to_alr
from strategies.diffusion import EMBED_DIM, LOGIT_SCALE, embed_texts

DAY = 86_400
WEEK = 7 * DAY
PRICE_CLIP = 1e-3
"""Prices are clipped to [0.001, 0.999] before their log-ratios: ±6.9, the label's own size."""
CATEGORY_DIM = 16
LOG_DAYS_SCALE = 5.0
"""log1p(days) / 5: a year is 1.18."""
LOG_VOLUME_SCALE = 15.0
"""log1p(dollars) / 15: $3.3M is 1."""
PRICE_FEATURES = 4
"""Per ALR coordinate: level, day change, week change, week volatility."""
MARKET_FEATURES = 5
"""Age, time to end, end known, volume, volume known."""


def condition_dim(outcomes: int) -> int:
    """The length of a row for an ``outcomes``-outcome market."""
    return PRICE_FEATURES * (outcomes - 1) + MARKET_FEATURES + CATEGORY_DIM + EMBED_DIM


@dataclass(frozen=True)
class MarketFacts:
    """The static facts of a market the model reads: question, category, scheduled end, and
    its volume points ``(t, volume)`` (each known from its instant on)."""

    question: str
    category: str | None
    end_ts: int | None
    volume_history: tuple[tuple[int, float], ...] = ()


def ordered(outcomes: Sequence[str]) -> list[int]:
    """The column order the model uses: YES first for a binary market (whichever way the tape
    lists it), outcome order otherwise. The last column is the ALR reference."""
    lower = [o.casefold() for o in outcomes]
    if len(lower) == 2 and set(lower) == {"yes", "no"}:
        return [lower.index("yes"), lower.index("no")]
    return list(range(len(outcomes)))


def price_coordinates(prices: np.ndarray) -> np.ndarray:
    """(n, m) prices in model order to (n, m − 1) ALR coordinates in units of LOGIT_SCALE."""
    clipped = np.clip(np.asarray(prices, dtype=np.float64), PRICE_CLIP, 1.0 - PRICE_CLIP)
    return simplex_to_alr(clipped) / LOGIT_SCALE


def _category_row(category: str | None) -> np.ndarray:
    row = np.zeros(CATEGORY_DIM)
    if category:
        digest = hashlib.blake2b(category.casefold().encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        row[value % CATEGORY_DIM] = 1.0 if (value >> 32) & 1 else -1.0
    return row


def _volumes_at(history: tuple[tuple[int, float], ...], instants: np.ndarray) -> np.ndarray:
    """The volume known at each instant: its latest point at or before it, else NaN."""
    if not history:
        return np.full(instants.size, np.nan)
    times = np.array([t for t, _ in history], dtype=np.int64)
    values = np.array([v for _, v in history], dtype=np.float64)
    at = np.searchsorted(times, instants, side="right") - 1
    return np.where(at >= 0, values[np.maximum(at, 0)], np.nan)


def _log_days(seconds: np.ndarray) -> np.ndarray:
    days: np.ndarray = np.log1p(np.maximum(seconds, 0) / DAY) / LOG_DAYS_SCALE
    return days


def conditions(
    facts: MarketFacts,
    times: np.ndarray,
    prices: np.ndarray,
    instants: np.ndarray,
    text: np.ndarray | None = None,
) -> np.ndarray:
    """One row per instant for one market whose points are ``times`` (increasing) and
    ``prices`` ((n, m), model order). Each row reads only the points at or before its instant;
    every instant must be at or after the first point. ``text`` is the question's
    ``embed_texts`` row when the caller has it already."""
    instants = np.asarray(instants, dtype=np.int64)
    times = np.asarray(times, dtype=np.int64)
    if times.size == 0 or (instants.size and instants.min() < times[0]):
        raise ValueError("every instant needs a price point at or before it")
    u = price_coordinates(prices)
    squares = np.concatenate([np.zeros((1, u.shape[1])), np.cumsum(np.diff(u, axis=0) ** 2, 0)])
    now = np.searchsorted(times, instants, side="right") - 1

    def back(seconds: int) -> np.ndarray:
        return np.maximum(np.searchsorted(times, instants - seconds, side="right") - 1, 0)

    day, week = back(DAY), back(WEEK)
    level = u[now]
    volume = _volumes_at(facts.volume_history, instants)
    end = facts.end_ts
    market = np.column_stack(
        [
            _log_days(instants - times[0]),
            _log_days(end - instants) if end is not None else np.zeros(instants.size),
            np.full(instants.size, 0.0 if end is None else 1.0),
            np.where(np.isfinite(volume), np.log1p(np.nan_to_num(volume)) / LOG_VOLUME_SCALE, 0),
            np.isfinite(volume).astype(np.float64),
        ]
    )
    if text is None:
        text = embed_texts([facts.question])[0]
    static = np.concatenate([_category_row(facts.category), text])
    return np.column_stack(
        [
            level,
            level - u[day],
            level - u[week],
            np.sqrt(squares[now] - squares[week]),
            market,
            np.broadcast_to(static, (instants.size, static.size)),
        ]
    )


def label_coordinates(winner: int, outcomes: int) -> np.ndarray:
    """A resolved market's training target: the ALR coordinates of its smoothed one-hot
    outcome (winner's index in model order), in units of LOGIT_SCALE. For a binary market that
    is pm_difftrain's ±6.9068 over itself, ±1; for m outcomes the winner gets 1 − (m − 1)·ε and
    each other ε, ε = 1e-3, as pm_difftrain smooths a binary label."""
    eps = 1e-3
    p = np.full(outcomes, eps)
    p[winner] = 1.0 - (outcomes - 1) * eps
    coords: np.ndarray = simplex_to_alr(p[None, :])[0] / LOGIT_SCALE
    return coords
