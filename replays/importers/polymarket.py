"""Import Gamma market objects plus CLOB ``/prices-history`` series into a tape.

This is the generic path: raw Gamma ``/markets`` (or ``/events``) objects or the recorder's
simplified objects, and one ``{"token_id", "history"}`` JSON line per token. The election and
BTC data sets, and ``arena tapes record``, all end up here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from replays.errors import TapeError
from replays.importers.parsing import (
    align_outcomes,
    clean_series,
    first,
    is_closed,
    json_list,
    market_info,
    verdict,
)
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.untrusted import Budget, content_lines, read_file
from replays.validate import Instant, check_markets

Series = tuple[np.ndarray, np.ndarray]


@dataclass
class ImportResult:
    """The tape plus what the import decided to leave out, for the summary the CLI shows."""

    tape: Tape
    skipped_no_prices: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)  # closed, but no decisive price
    notes: list[str] = field(default_factory=list)


class _Point(msgspec.Struct):
    t: Instant
    p: float | None  # Python-written files say NaN for a missing price; read as null


class _TokenHistory(msgspec.Struct):
    token_id: str
    history: list[_Point]


def _read(path: Path) -> bytes:
    """The file's bytes (gunzipped), within the same size limit a tape file has."""
    return read_file(path, Budget(str(path)))


def read_json(path: Path) -> Any:
    """Decode a JSON file, turning every way it can be unreadable into a one-line error."""
    try:
        return msgspec.json.decode(_read(path))
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise TapeError(f"{path}: bad JSON: {exc}") from None
    except RecursionError:  # msgspec's guard, at the interpreter's recursion limit
        raise TapeError(f"{path}: bad JSON: nested too deeply") from None


def read_market_objects(path: Path) -> list[dict[str, Any]]:
    """Market objects from a Gamma ``/markets`` array, an ``/events`` array, or one object.

    Event children inherit their event (and so its tags) when they do not embed one.
    """
    data = read_json(path)
    items = data if isinstance(data, list) else [data]
    markets: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            raise TapeError(f"{path}: expected market objects, found {type(item).__name__}")
        children = json_list(item.get("markets"))
        if "outcomes" not in item and children:
            event = {k: v for k, v in item.items() if k != "markets"}
            markets.extend({"events": [event], **c} for c in children if isinstance(c, dict))
        else:
            markets.append(item)
    return markets


def read_price_histories(path: Path) -> tuple[dict[str, Series], int]:
    """``{token_id: (times, prices)}`` from JSON lines (optionally gzipped), and how many
    points had no price (``NaN``/``null``) and were dropped rather than invented."""
    raw = _read(path)
    decoder = msgspec.json.Decoder(_TokenHistory)
    histories: dict[str, Series] = {}
    dropped = 0
    for number, line in content_lines(raw, 0):
        try:
            row = decoder.decode(line.replace(b"NaN", b"null"))
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
            raise TapeError(f"{path}: line {number}: {exc}") from None
        n = len(row.history)
        times = np.fromiter((h.t for h in row.history), dtype=np.int64, count=n)
        prices = np.fromiter((np.nan if h.p is None else h.p for h in row.history), np.float64, n)
        known = ~np.isnan(prices)
        dropped += n - int(known.sum())
        histories[row.token_id] = clean_series(times[known], prices[known])
    return histories, dropped


def _market_series(market: MarketInfo, histories: Mapping[str, Series]) -> Series | None:
    """The stored series of one market, or None when its tokens have no history."""
    tokens = market.clob_token_ids
    if len(tokens) != len(market.outcomes):
        return None
    found = [histories.get(t) for t in tokens]
    if market.is_binary:
        yes, no = found[market.yes_column], found[1 - market.yes_column]
        if yes is not None and yes[0].size:
            return yes
        if no is not None and no[0].size:
            return no[0], 1.0 - no[1]
        return None
    present = [s for s in found if s is not None and s[0].size]
    return align_outcomes(present) if len(present) == len(found) else None


def recorded_facts(
    market: MarketInfo, obj: Mapping[str, Any], times: np.ndarray, recorded_at: int | None
) -> MarketInfo:
    """``market`` with how far its history reaches and what its volume was when.

    A closed market's history is taken as complete over its scheduled life: a gap between two
    points, or after the last, is a time nobody traded (an illiquid market), so it is covered
    until it closed, or until its scheduled end when it closed later (``closed_coverage``).
    Its volume is final. An open market is covered until the recording was made
    (``recorded_at``, when the market list was fetched: every history was fetched after it),
    where the volume it had then is its one volume point; with no recording instant, only
    until its last point. A point later than any of these shows the recording reached it, so
    coverage is never shorter than the history."""
    last = int(times[-1])
    if is_closed(obj):
        return msgspec.structs.replace(market, covered_until=closed_coverage(market, last))
    if recorded_at is None:
        return msgspec.structs.replace(market, covered_until=last)
    return msgspec.structs.replace(
        market,
        covered_until=max(recorded_at, last),
        volume_history=((recorded_at, market.volume),),
    )


def closed_coverage(market: MarketInfo, last: int) -> int:
    """How far a closed market's history vouches for its price: until it closed, but not past
    its scheduled end (Gamma ``endDate``) unless the history has points there.

    After the scheduled end the question is being decided and its answer becomes knowable, while
    Gamma may close the market hours or days later (a median 12 h over the 16,127 markets of
    2024 with both dates). No point in that window is not evidence that the price held: the shared
    BTC tapes are recordings of each market's last day that stop a minute before its end, and
    Gamma closed 692 of the 728 more than an hour later (median 3.4 h). Carried across it, the
    last price would be bought and sold after trading at it ended and the outcome was known.
    Before the end a gap is a gap in trading: a sparse, illiquid market is still covered until
    its end or close, whichever is first."""
    close = last if market.close_ts is None else market.close_ts
    reach = close if market.end_ts is None else min(close, market.end_ts)
    return max(reach, last)


def assemble(
    objects: Iterable[Mapping[str, Any]],
    histories: Mapping[str, Series],
    source: str,
    recorded_at: int | None = None,
) -> ImportResult:
    """Markets, series and resolutions from parsed objects; the one place tapes are imported.

    ``recorded_at`` is when a live recording fetched its markets (see ``recorded_facts``)."""
    markets: list[MarketInfo] = []
    series: dict[str, Series] = {}
    resolutions: dict[str, Resolution] = {}
    skipped: list[str] = []
    undecided: list[str] = []
    for obj in objects:
        if first(obj, "id", "market_id") is None:
            raise TapeError(f"{source}: a market object has no id: {str(dict(obj))[:80]}")
        try:
            market = market_info(obj)
            judged = verdict(obj, market)
        except TapeError as exc:
            raise TapeError(f"{source}: {exc}") from None
        check_markets(source, [market])  # refused by name, not skipped as "no prices"
        found = _market_series(market, histories)
        if found is None:
            skipped.append(market.id)
            continue
        if market.open_ts is None:
            market = msgspec.structs.replace(market, open_ts=int(found[0][0]))
        market = recorded_facts(market, obj, found[0], recorded_at)
        markets.append(market)
        series[market.id] = found
        if judged.resolution is not None:
            resolutions[market.id] = judged.resolution
        elif judged.kind == "undecided":
            undecided.append(market.id)
    tape = Tape.from_series(markets, series, resolutions, source=source)
    return ImportResult(tape, skipped, undecided)


def import_polymarket(
    markets_path: str | Path, prices_path: str | Path, recorded_at: int | None = None
) -> ImportResult:
    """A tape from a Gamma markets JSON file and a CLOB price-history JSON-lines file, with the
    markets skipped (no prices) and left undecided, and the import's notes."""
    markets_path, prices_path = Path(markets_path), Path(prices_path)
    objects = read_market_objects(markets_path)
    histories, dropped = read_price_histories(prices_path)
    source = f"{markets_path}+{prices_path.name}"
    result = assemble(objects, histories, source, recorded_at)
    if dropped:
        result.notes.append(f"dropped {dropped} points without a price (NaN or null)")
    return result
