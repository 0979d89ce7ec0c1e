"""Structural checks every tape passes before anyone can use it.

The checks run on the flat columns with numpy (no per-point Python), so a 5M-point tape
validates in a fraction of a second, and each failure names the file, the market and the
problem in one line, the form the CLI prints.

Metadata and the column layout are checked before any array is shaped from them: a bad
outcome list or offsets array must be an error, not a numpy reshape or broadcast traceback.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated

import msgspec
import numpy as np

from replays.errors import TapeError
from replays.markets import MarketInfo, Resolution

# Instants are unix seconds in [1970-01-01, 2100-01-01). The bound is far past any market
# Polymarket lists, and it keeps every instant an int64 that a schedule built from it (marks
# every hour up to a resolution) stays small: a resolution at 2**63 asked for 777 TiB.
MAX_INSTANT = 4_102_444_800
INSTANT_RANGE = "1970-01-01..2100-01-01"
_CHECK_BLOCK = 1 << 22  # points checked per block (4 MB of booleans)
Instant = Annotated[int, msgspec.Meta(ge=0, lt=MAX_INSTANT)]


def _outside(ts: int) -> bool:
    return not 0 <= ts < MAX_INSTANT


def _market_of(offsets: np.ndarray, flat_index: int) -> int:
    """The market whose slice of a flat array contains ``flat_index``."""
    return int(np.searchsorted(offsets, flat_index, side="right")) - 1


def _first_where(column: np.ndarray, test: Callable[[np.ndarray], np.ndarray]) -> int:
    """The first index of ``column`` where ``test`` holds, or -1: tested a block at a time, so
    checking a 100M-point column needs a block's booleans, not 100 MB of them."""
    for first in range(0, column.shape[0], _CHECK_BLOCK):
        found = np.flatnonzero(test(column[first : first + _CHECK_BLOCK]))
        if found.size:
            return first + int(found[0])
    return -1


def check_markets(source: str, markets: Sequence[MarketInfo]) -> None:
    """Metadata a tape's arrays are shaped from: ids, outcome lists, instants, volume."""

    def fail(market: str, problem: str) -> TapeError:
        return TapeError(f"{source}: market {market}: {problem}")

    seen: set[str] = set()
    for market in markets:
        if market.id in seen:
            raise fail(market.id, "appears twice in the market list")
        seen.add(market.id)
        if len(market.outcomes) < 2:
            raise fail(market.id, f"needs at least two outcomes, has {list(market.outcomes)}")
        labels: set[str] = set()
        for label in market.outcomes:
            if label.lower() in labels:
                raise fail(market.id, f"outcome {label!r} is listed twice")
            labels.add(label.lower())
        for name in ("open_ts", "close_ts", "end_ts", "covered_until"):
            ts = getattr(market, name)
            if ts is not None and _outside(ts):
                raise fail(market.id, f"{name} t={ts} is outside {INSTANT_RANGE}")
        _check_volume_history(market.id, market.volume_history, fail)
        if not (math.isfinite(market.volume) and market.volume >= 0):
            raise fail(market.id, f"volume {market.volume:g} is not a finite amount >= 0")


def check_layout(source: str, n_markets: int, offsets: np.ndarray, n_times: int) -> None:
    """The point offsets cut the flat columns into one slice per market, in order."""
    if offsets.shape != (n_markets + 1,):
        raise TapeError(
            f"{source}: corrupt tape: offsets has {offsets.shape[0]} entries for "
            f"{n_markets} markets (needs {n_markets + 1})"
        )
    if offsets[0] != 0 or offsets[-1] != n_times:
        raise TapeError(f"{source}: corrupt tape: point offsets do not match the markets")
    if np.any(np.diff(offsets) < 0):
        raise TapeError(f"{source}: corrupt tape: point offsets decrease")


def resolutions_by_market(source: str, resolutions: Iterable[Resolution]) -> dict[str, Resolution]:
    """One resolution per market; a second one is an error, never a silent overwrite."""
    out: dict[str, Resolution] = {}
    for res in resolutions:
        if res.market in out:
            raise TapeError(f"{source}: market {res.market}: resolved twice "
                            f"({out[res.market].winner!r} and {res.winner!r})")  # fmt: skip
        out[res.market] = res
    return out


def check_columns(
    source: str,
    markets: Sequence[MarketInfo],
    offsets: np.ndarray,
    times: np.ndarray,
    prices: np.ndarray,
    price_offsets: np.ndarray,
    resolutions: Mapping[str, Resolution],
    *,
    grid: bool = False,
) -> None:
    """Raise ``TapeError`` for the first problem found; return quietly if the tape is sound.

    ``check_markets`` and ``check_layout`` have passed: the slices are well formed. ``times``
    is the flat column, or with ``grid`` the one series of instants every market shares
    (``Tape`` keeps it once); a fault in a shared grid is named by the first market.
    """

    def fail(market: str, problem: str) -> TapeError:
        return TapeError(f"{source}: market {market}: {problem}")

    if not markets or offsets[-1] == 0:
        raise TapeError(f"{source}: empty tape (no markets or no price points)")
    ids = [m.id for m in markets]
    if price_offsets[-1] != prices.shape[0]:
        raise TapeError(f"{source}: corrupt tape: price count does not match the instants")
    series = np.array([0, times.shape[0]], dtype=np.int64) if grid else offsets
    for i, market in enumerate(markets):
        covered = market.covered_until
        first = 0 if grid else int(offsets[i])
        if covered is not None and offsets[i + 1] > offsets[i] and covered < times[first]:
            raise fail(market.id, f"covered until t={covered}, before its first point")

    at = _first_where(prices, lambda block: ~np.isfinite(block))
    if at >= 0:
        m = _market_of(price_offsets, at)
        raise fail(ids[m], f"price is {float(prices[at])} (NaN or infinite)")
    at = _first_where(prices, lambda block: (block < 0.0) | (block > 1.0))
    if at >= 0:
        m = _market_of(price_offsets, at)
        raise fail(ids[m], f"price {float(prices[at])} is outside [0, 1]")

    bad = np.flatnonzero((times < 0) | (times >= MAX_INSTANT))
    if bad.size:
        m = _market_of(series, int(bad[0]))
        raise fail(ids[m], f"instant t={int(times[bad[0]])} is outside {INSTANT_RANGE}")
    not_rising = times[1:] <= times[:-1]  # no int64 diff: a bool per point, not eight bytes
    inner = series[1:-1]
    not_rising[inner[(inner > 0) & (inner < times.shape[0])] - 1] = False  # series boundaries
    bad = np.flatnonzero(not_rising)
    if bad.size:
        i = int(bad[0])
        kind = "duplicate" if times[i + 1] == times[i] else "unsorted"
        raise fail(ids[_market_of(series, i)], f"{kind} instants at t={int(times[i + 1])}")

    position = {mid: i for i, mid in enumerate(ids)}
    for key, res in resolutions.items():
        i = position.get(res.market, -1)
        if i < 0 or key != res.market:
            raise fail(res.market, "resolution for a market not in the tape")
        if _outside(res.ts):
            raise fail(res.market, f"resolution instant t={res.ts} is outside {INSTANT_RANGE}")
        market = markets[i]
        if res.winner is not None and res.winner not in market.outcomes:
            raise fail(
                res.market, f"resolution winner {res.winner!r} is not one of {market.outcomes}"
            )
        opened = market.open_ts
        if opened is None and offsets[i + 1] > offsets[i]:
            opened = int(times[0 if grid else offsets[i]])
        if opened is not None and res.ts < opened:
            raise fail(res.market, f"resolved at t={res.ts}, before it opened at t={opened}")


def _check_volume_history(
    market: str, history: Sequence[tuple[int, float]], fail: Callable[[str, str], TapeError]
) -> None:
    """Volume points: strictly increasing instants, finite non-negative volumes."""
    for k, (ts, volume) in enumerate(history):
        if _outside(ts):
            raise fail(market, f"volume history instant t={ts} is outside {INSTANT_RANGE}")
        if not (math.isfinite(volume) and volume >= 0):
            raise fail(market, f"volume {volume} at t={ts} is not a finite, non-negative number")
        if k and ts <= history[k - 1][0]:
            raise fail(market, f"volume history instants not increasing at t={ts}")
