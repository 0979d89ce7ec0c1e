"""Turning Polymarket's loose API shapes into typed values, shared by every importer.

Gamma encodes lists as JSON strings, mixes two timestamp formats, and spells numbers as strings;
the recorder's simplified objects use snake_case. One place absorbs all of that so importers
only decide what a market *is*.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from replays.errors import TapeError
from replays.markets import MarketInfo, Resolution

DECISIVE = 0.99  # methodology §1.9: a price at or above this names the winner
CATCH_ALL = frozenset({"All"})  # Gamma tags every event "All"; useless as a category


def parse_ts(value: Any) -> int | None:
    """Unix seconds from an int, an ISO instant ("...Z") or Gamma's "2024-11-07 11:18:52+00".

    None only when the value is absent; a value that is present but names no instant raises
    ``ValueError``, because reading it as "absent" would quietly turn a garbled end date into a
    market without a scheduled end (and a garbled close into an open market)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"not an instant: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not an instant: {value!r}")
        return int(value)
    text = str(value).strip().replace(" ", "T", 1)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    elif text.endswith("+00"):
        text += ":00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not an instant: {str(value)[:60]!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp())


def instant(obj: Mapping[str, Any], *keys: str) -> int | None:
    """The instant under the first present key, or None when no key is present; an unreadable
    one is a ``TapeError`` naming the market and the field."""
    for key in keys:
        value = obj.get(key)
        if value is None or value == "":
            continue
        try:
            return parse_ts(value)
        except ValueError as exc:
            market = first(obj, "id", "market_id")
            raise TapeError(f"market {market}: {key}: {exc}") from None
    return None


def json_list(value: Any) -> list[Any]:
    """A list that Gamma may have JSON-encoded into a string; [] when absent or unreadable."""
    if isinstance(value, list):
        return value
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            decoded = json.loads(value)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply
            return []
        return decoded if isinstance(decoded, list) else []
    return []


def to_float(value: Any) -> float | None:
    """A finite float from a number or numeric string; None when absent or not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def amount(obj: Mapping[str, Any], market: str, *keys: str) -> float:
    """A finite amount >= 0 under the first present key, 0.0 when none is present; a value
    that is present but no such amount ("lots", "1e999", -5) is a ``TapeError`` naming the
    market and the field: read as 0 it quietly dropped the market from every universe."""
    for key in keys:
        value = obj.get(key)
        if value is None or value == "":
            continue
        number = to_float(value)
        if number is None or number < 0:
            raise TapeError(f"market {market}: {key}: {str(value)[:40]!r} is not a finite "
                            "amount >= 0")  # fmt: skip
        return number
    return 0.0


def text(value: Any, market: str, key: str) -> str:
    """A field that must be text (a JSON string, or a whole number, as some ids are): anything
    else is a ``TapeError``, not its Python repr (an id that was a JSON object became
    ``"{'a': 1}"``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    kind = {dict: "an object", list: "a list", bool: "a boolean", float: "a fraction"}
    found = kind.get(type(value), type(value).__name__)
    where = f"market {market}: {key}" if market else f"a market's {key}"
    raise TapeError(f"{where}: expected text, found {found}")


def first(obj: Mapping[str, Any], *keys: str) -> Any:
    """The first present, non-empty value among Gamma's and the simplified spellings."""
    for key in keys:
        value = obj.get(key)
        if value is not None and value != "":
            return value
    return None


def event_tags(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """Tag labels of the market's parent events (where the events carry tags)."""
    labels: list[str] = []
    for event in json_list(obj.get("events")):
        if isinstance(event, Mapping):
            labels.extend(
                str(t["label"]) for t in json_list(event.get("tags")) if isinstance(t, Mapping)
                and t.get("label")
            )  # fmt: skip
    return tuple(dict.fromkeys(labels))


def market_info(obj: Mapping[str, Any], first_point: int | None = None) -> MarketInfo:
    """A ``MarketInfo`` from a raw Gamma market object or a simplified recorder object.

    Absent outcomes mean Yes/No (the simplified objects omit them); outcomes that are present
    are kept as given, even empty or repeated, so the tape's validation refuses them by name.
    """
    market_id = text(first(obj, "id", "market_id"), "", "id")
    given = obj.get("outcomes")
    outcomes = (
        ("Yes", "No") if given is None
        else tuple(text(o, market_id, "outcomes") for o in json_list(given))
    )  # fmt: skip
    tags = event_tags(obj)
    category = first(obj, "category")
    volume = amount(obj, market_id, "volumeNum", "volume")
    open_ts = instant(obj, "startDate", "start_date", "createdAt", "created_at")
    end_ts = instant(obj, "endDate", "end_date")
    close_ts = instant(obj, "closedTime", "closed_time")
    question = first(obj, "question", "market_slug", "slug")
    if category:
        category = text(category, market_id, "category")
    return MarketInfo(
        id=market_id,
        question=market_id if question is None else text(question, market_id, "question"),
        outcomes=outcomes,
        description=text(obj.get("description") or "", market_id, "description"),
        category=category or next((t for t in tags if t not in CATCH_ALL), None),
        tags=tags,
        volume=volume,
        open_ts=open_ts if open_ts is not None else first_point,
        close_ts=close_ts if close_ts is not None else end_ts,
        end_ts=end_ts,
        clob_token_ids=tuple(
            str(t) for t in json_list(first(obj, "clobTokenIds", "clob_token_ids"))
        ),
    )


def is_closed(obj: Mapping[str, Any]) -> bool:
    """Gamma says the market is closed, or gives the instant it closed."""
    return obj.get("closed") is True or first(obj, "closedTime", "closed_time") is not None


def uma_settled(obj: Mapping[str, Any]) -> int | None:
    """When UMA's oracle settled the market: ``umaEndDate`` where ``umaResolutionStatus`` is
    "resolved" and the value is an instant; else None.

    Gamma's ``closedTime`` usually is that same second (98 of the 99 election markets that have
    both, every 2024 fixture), but it can lag: the Vermont presidential market was settled on
    2024-11-06 13:32 and closed by Gamma on 11-20, and its price series stopped at 12:00 that
    day. The payout was claimable from the settlement, so that is when the market resolved.
    Markets from 2021-22 carry a free-text deadline there instead ("November 1, 2022", later
    than their close): not the instant anything happened, so it is not read as one."""
    if obj.get("umaResolutionStatus") != "resolved":
        return None
    try:
        return parse_ts(obj.get("umaEndDate"))
    except ValueError:
        return None


@dataclass(frozen=True)
class Verdict:
    """How an importer judged a market's ending: resolved, voided, undecided or still open."""

    kind: str  # "resolved" | "voided" | "undecided" | "open"
    resolution: Resolution | None = None


def _match(outcomes: Sequence[str], label: Any) -> str | None:
    wanted = str(label).lower()
    return next((o for o in outcomes if o.lower() == wanted), None)


def verdict(obj: Mapping[str, Any], market: MarketInfo) -> Verdict:
    """Winner detection in the order of methodology §1.9, and the instant the market resolved.

    That instant is when UMA settled it (``uma_settled``) where that is earlier than Gamma's
    ``closedTime``, else ``closedTime`` (else ``umaEndDate``, else the scheduled end).

    A winner flag (simplified ``winner``; CLOB ``tokens[].winner``) first; then, for a closed
    market only, a token price or an ``outcomePrices`` entry at or above 0.99. All prices 0.5
    means voided. A closed market with no decisive price is "undecided": the originals defer
    it, so the tape leaves it unresolved.
    """
    ts = instant(obj, "closedTime", "closed_time", "umaEndDate", "endDate", "end_date")
    settled = uma_settled(obj)
    if ts is not None and settled is not None and (market.open_ts or 0) <= settled < ts:
        ts = settled
    closed = is_closed(obj)
    tokens = [t for t in json_list(obj.get("tokens")) if isinstance(t, Mapping)]
    flagged = [obj["winner"]] if obj.get("winner") else []
    flagged += [t.get("outcome") for t in tokens if t.get("winner") is True]
    if closed:
        flagged += [t.get("outcome") for t in tokens if (to_float(t.get("price")) or 0) >= DECISIVE]
    prices = [to_float(p) for p in json_list(obj.get("outcomePrices"))]
    if closed and len(prices) == len(market.outcomes):
        flagged += [o for o, p in zip(market.outcomes, prices, strict=True) if (p or 0) >= DECISIVE]
    if flagged and obj.get("winner") and _match(market.outcomes, obj["winner"]) is None:
        # read as no winner, a typo in the flag quietly left a settled market unresolved
        raise TapeError(
            f"market {market.id}: winner {obj['winner']!r} is not one of its outcomes "
            f"({', '.join(market.outcomes)})"
        )
    winner = next((w for w in (_match(market.outcomes, f) for f in flagged) if w), None)
    if ts is None:
        return Verdict("open")
    if winner is not None:
        return Verdict("resolved", Resolution(market=market.id, ts=ts, winner=winner))
    if not closed:
        return Verdict("open")
    if prices and all(p == 0.5 for p in prices):
        return Verdict("voided", Resolution(market=market.id, ts=ts, winner=None))
    return Verdict("undecided")


def clean_series(times: np.ndarray, prices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort by instant and keep the last price of a repeated instant (CLOB repeats some)."""
    order = np.argsort(times, kind="stable")
    times, prices = times[order], prices[order]
    keep = np.ones(times.size, dtype=bool)  # an empty history (CLOB's "no trades") stays empty
    keep[:-1] = times[1:] != times[:-1]
    return times[keep], prices[keep]


def align_outcomes(
    series: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """One ``(n, k)`` price matrix for k outcome tokens sampled at different instants.

    Instants are the union of all tokens' instants, each outcome carried forward as of that
    instant, starting once every outcome has a price (so no row is partly invented).
    """
    grid = np.unique(np.concatenate([t for t, _ in series]))
    grid = grid[grid >= max(int(t[0]) for t, _ in series)]
    columns = [p[np.searchsorted(t, grid, side="right") - 1] for t, p in series]
    return grid, np.column_stack(columns)
