"""Any price archive as a tape: a plain prices file of ``(market, ts, price)`` and a small
markets file, no Polymarket JSON (``replays/FORMAT.md``, "Plain tapes").

The prices file is CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``, the ``parquet``
extra): ``market``, ``ts`` (whole unix seconds or ISO-8601), ``price`` (the first outcome's,
YES for a binary market), and for a market of more than two outcomes an ``outcome`` column, one
row per outcome and instant. The markets file is CSV: ``market``, ``question``, and optionally
``outcomes`` (labels joined by ``|``, ``Yes|No`` when blank), ``resolution`` (the winning label,
``VOID``, or blank while unresolved), ``resolved_at`` (default: ``end``, else the market's last
price), ``end`` (the scheduled end agents may see), ``volume`` and ``category``.

Input is refused rather than repaired: a NaN or out-of-range price, rows out of time order
within a market, a repeated (market, ts, outcome), a market the markets file does not list or a
resolution that is not one of its outcomes is a one-line TapeError naming the file and the
line (CSV) or row (Parquet). A repaired archive would be a different archive, silently.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from replays.errors import TapeError
from replays.importers.books import read_parquet
from replays.importers.polymarket import ImportResult
from replays.instants import parse_instant
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.untrusted import Budget, read_file
from replays.validate import MAX_INSTANT

VOID = "VOID"
DEFAULT_OUTCOMES = ("Yes", "No")


def _rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, row)`` of a CSV or Parquet file: where is ``line N`` (CSV, the header being
    line 1) or ``row N`` (Parquet, from 1)."""
    source = str(path)
    budget = Budget(source)
    if path.name.endswith(".parquet"):
        for n, row in enumerate(read_parquet(path, None, budget).to_pylist(), start=1):
            yield f"row {n}", row
        return
    if not path.name.endswith((".csv", ".csv.gz")):
        raise TapeError(f"{source}: not a .csv, .csv.gz or .parquet file")
    try:
        text = read_file(path, budget).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TapeError(f"{source}: not UTF-8 text: {exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    try:
        for row in reader:
            yield f"line {reader.line_num}", row
    except csv.Error as exc:
        raise TapeError(f"{source}: line {reader.line_num}: bad CSV: {exc}") from None


def _require(path: Path, row: dict[str, Any], names: tuple[str, ...]) -> None:
    missing = [n for n in names if n not in row]
    if missing:
        raise TapeError(f"{path}: no column {missing[0]!r}")


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _instant(value: Any) -> int | None:
    """Whole unix seconds, ISO-8601 text or a datetime as unix seconds; None if it is none."""
    if isinstance(value, datetime):
        ts = int(parse_instant(value.isoformat()).timestamp())
    elif isinstance(value, int) and not isinstance(value, bool):
        ts = value
    else:
        text = _text(value)
        try:
            ts = int(text) if text.lstrip("-").isdigit() else int(parse_instant(text).timestamp())
        except ValueError:
            return None
    return ts if 0 <= ts < MAX_INSTANT else None


def _units_hint(value: Any) -> str:
    """What a whole number too big to be unix seconds most likely is: milliseconds (as
    Polymarket's and most exchanges' feeds give them), microseconds or nanoseconds."""
    text = _text(value) if not isinstance(value, int) else str(value)
    if not text.isdigit():
        return ""
    for digits, unit, scale in ((13, "milliseconds", 1_000), (16, "microseconds", 10**6),
                                (19, "nanoseconds", 10**9)):  # fmt: skip
        if len(text) == digits:
            return f": it looks like {unit}; divide by {scale:,} for seconds"
    return ""


@dataclass
class _Market:
    """One line of the markets file, and the prices read for it so far."""

    info: MarketInfo
    verdict: str | None  # the winning label, VOID, or None while unresolved
    resolved_at: int | None
    points: dict[int, dict[int, float]] = field(default_factory=dict)  # ts -> outcome -> price
    last: tuple[int, str] | None = None  # the latest instant read, and where


def read_markets(path: Path) -> dict[str, _Market]:
    """The markets file, checked line by line."""
    markets: dict[str, _Market] = {}
    seen_at: dict[str, str] = {}
    for where, row in _rows(path):
        _require(path, row, ("market", "question"))

        def fail(problem: str, where: str = where) -> TapeError:
            return TapeError(f"{path}: {where}: {problem}")

        mid = _text(row["market"])
        if not mid:
            raise fail("market is empty")
        if mid in markets:
            raise fail(f"market {mid!r} is listed twice (first on {seen_at[mid]})")
        labels = tuple(x.strip() for x in _text(row.get("outcomes")).split("|") if x.strip())
        outcomes = labels or DEFAULT_OUTCOMES
        if len(outcomes) < 2 or len({x.lower() for x in outcomes}) != len(outcomes):
            raise fail(f"outcomes {'|'.join(outcomes)!r} are not two or more distinct labels")
        verdict = _text(row.get("resolution")) or None
        if verdict is not None and verdict.upper() == VOID:
            verdict = VOID
        elif verdict is not None:
            match = [x for x in outcomes if x.lower() == verdict.lower()]
            if not match:
                raise fail(f"resolution {verdict!r} is not one of {', '.join(outcomes)} or VOID")
            verdict = match[0]
        times = {}
        for name in ("end", "resolved_at"):
            given = row.get(name)
            times[name] = None if not _text(given) else _instant(given)
            if _text(given) and times[name] is None:
                raise fail(f"{name} {_text(given)[:40]!r} is not an instant")
        if times["resolved_at"] is not None and verdict is None:
            raise fail("resolved_at is given but resolution is blank")
        volume = 0.0
        if _text(row.get("volume")):
            try:
                volume = float(_text(row["volume"]))
            except ValueError:
                volume = math.nan
            if not (math.isfinite(volume) and volume >= 0):
                raise fail(f"volume {_text(row['volume'])[:40]!r} is not an amount >= 0")
        info = MarketInfo(
            id=mid, question=_text(row["question"]), outcomes=outcomes, volume=volume,
            end_ts=times["end"], category=_text(row.get("category")) or None,
        )  # fmt: skip
        markets[mid] = _Market(info, verdict, times["resolved_at"])
        seen_at[mid] = where
    if not markets:
        raise TapeError(f"{path}: no markets")
    return markets


def read_prices(path: Path, markets: dict[str, _Market], markets_path: Path) -> int:
    """Every price row into its market's points, checked; returns how many rows were read."""
    count = 0
    for where, row in _rows(path):
        _require(path, row, ("market", "ts", "price"))

        def fail(problem: str, where: str = where) -> TapeError:
            return TapeError(f"{path}: {where}: {problem}")

        mid = _text(row["market"])
        market = markets.get(mid)
        if market is None:
            raise fail(f"market {mid!r} is not in {markets_path}")
        ts = _instant(row["ts"])
        if ts is None:
            raise fail(f"ts {_text(row['ts'])[:40]!r} is not an instant (unix seconds or ISO)"
                       + _units_hint(row["ts"]))  # fmt: skip
        try:
            price = (
                float(row["price"])
                if not isinstance(row["price"], str)
                else float(row["price"].strip())
            )
        except (TypeError, ValueError):
            price = math.nan
        if not 0.0 <= price <= 1.0:  # NaN fails too
            raise fail(f"price {_text(row['price'])[:40]!r} is not a number in [0, 1]")
        outcomes = market.info.outcomes
        label = _text(row.get("outcome"))
        if label:
            found = [k for k, x in enumerate(outcomes) if x.lower() == label.lower()]
            if not found:
                raise fail(f"outcome {label!r} is not one of {mid}'s: {', '.join(outcomes)}")
            k = found[0]
        elif len(outcomes) == 2:
            k = 0
        else:
            raise fail(f"market {mid} has {len(outcomes)} outcomes: give each row's outcome")
        if market.last is not None and ts < market.last[0]:
            raise fail(
                f"ts {ts} of {mid} is before the {market.last[0]} on {market.last[1]}: "
                "sort each market's rows by time"
            )
        at = market.points.setdefault(ts, {})
        if k in at:
            raise fail(f"{mid} already has a price for {outcomes[k]} at ts {ts}")
        at[k] = price
        market.last = (ts, where)
        count += 1
    return count


def _series(path: Path, market: _Market) -> tuple[np.ndarray, np.ndarray]:
    """A market's instants and outcome prices (a two-outcome market's second price is one
    minus its first where only the first was given)."""
    outcomes = market.info.outcomes
    times = np.array(sorted(market.points), dtype=np.int64)
    prices = np.empty((times.size, len(outcomes)))
    for j, ts in enumerate(times.tolist()):
        at = market.points[ts]
        if len(outcomes) == 2 and set(at) == {0}:
            at = {0: at[0], 1: 1.0 - at[0]}
        if len(at) != len(outcomes):
            missing = next(x for k, x in enumerate(outcomes) if k not in at)
            raise TapeError(f"{path}: market {market.info.id} at ts {ts}: no price for {missing}")
        prices[j] = [at[k] for k in range(len(outcomes))]
    return times, prices


def import_price_columns(prices_path: str | Path, markets_path: str | Path) -> ImportResult:
    """The tape of a plain prices file and its markets file (see the module's docstring)."""
    prices_path, markets_path = Path(prices_path), Path(markets_path)
    markets = read_markets(markets_path)
    if read_prices(prices_path, markets, markets_path) == 0:
        raise TapeError(f"{prices_path}: no prices")
    priced = [m for m in markets.values() if m.points]
    series = {m.info.id: _series(prices_path, m) for m in priced}
    resolutions = []
    for m in priced:
        if m.verdict is None:
            continue
        ts = m.resolved_at if m.resolved_at is not None else m.info.end_ts
        ts = ts if ts is not None else int(series[m.info.id][0][-1])
        winner = None if m.verdict == VOID else m.verdict
        resolutions.append(Resolution(market=m.info.id, ts=ts, winner=winner))
    tape = Tape.from_series(
        [m.info for m in priced], series, resolutions, source=f"columns:{prices_path.name}"
    )
    skipped = [m.info.id for m in markets.values() if not m.points]
    return ImportResult(tape, skipped_no_prices=skipped)
