"""Record a tape from the live Polymarket APIs, resumably.

A recording is a directory of the APIs' own raw shapes, so the importer that reads the offline
data in ``shared/data/polymarket`` also reads what we record, and nothing is lost to an early
interpretation:

- ``markets.json``: the chosen raw Gamma market objects (the top N by volume), written once;
- ``prices.jsonl``: one ``{"token_id", "history"}`` line per token, the CLOB ``/prices-history``
  body, appended and flushed token by token so a crash loses at most the token in flight;
- ``state.json``: the options the recording was started with, and how far it got.

Running again over the same directory resumes: ``markets.json`` is reused, tokens already in
``prices.jsonl`` are not asked for again, and a last line cut short by a crash is dropped.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from replays import instants
from replays.errors import TapeError
from replays.http import JsonFetcher, QueryParams
from replays.importers.polymarket import ImportResult, import_polymarket
from replays.tapefile import save_tape
from replays.untrusted import Budget, content_lines, read_file

GAMMA_URL = "https://gamma-api.polymarket.com"
CLOB_URL = "https://clob.polymarket.com"
INTERVALS = ("1h", "1d", "1w", "1m", "max")
# The CLOB answers an empty history for resolved markets below 12-hour fidelity
# (Polymarket/py-clob-client#216), and the tapes we replay are resolved markets.
DEFAULT_FIDELITY = 720

Market = dict[str, Any]
OnProgress = Callable[[int, int], None]  # (tokens done, tokens in all)


@dataclass(frozen=True)
class Endpoints:
    """Where Gamma and the CLOB live; tests point both at a local server."""

    gamma_url: str = GAMMA_URL
    clob_url: str = CLOB_URL


@dataclass(frozen=True)
class RecordOptions:
    """What to record. All of it is saved in ``state.json`` and must match on resume, because
    mixing two selections in one directory would make a tape nobody asked for."""

    top: int = 100
    start: str | None = None  # ISO-8601 UTC: markets that start at or after it
    end: str | None = None  # ISO-8601 UTC: markets that end at or before it
    tags: tuple[str, ...] = ()  # numeric tag ids or tag slugs; a market needs any one of them
    closed: bool | None = True  # True: resolved markets only; False: open only; None: both
    interval: str = "max"
    fidelity: int | None = DEFAULT_FIDELITY
    page_size: int = 100

    def __post_init__(self) -> None:
        if self.top < 1:
            raise TapeError(f"--top must be at least 1, not {self.top}")
        if self.interval not in INTERVALS:
            raise TapeError(
                f"--interval must be one of {', '.join(INTERVALS)}, not {self.interval}"
            )
        if self.fidelity is not None and self.fidelity < 1:
            raise TapeError(f"--fidelity must be a positive number of minutes, not {self.fidelity}")
        for name, value in (("--start", self.start), ("--end", self.end)):
            if value is not None:
                parse_instant(value, name)

    def as_state(self) -> dict[str, Any]:
        state = asdict(self)
        state["tags"] = list(self.tags)
        del state["page_size"]  # how we page does not change what is recorded
        return state


@dataclass
class RecordingSummary:
    """What a run did; ``requests`` counts every HTTP attempt, retries included."""

    directory: str
    markets: int
    tokens: int
    recorded: int = 0
    resumed: int = 0
    points: int = 0
    requests: int = 0
    markets_reused: bool = False


def parse_instant(text: str, name: str = "instant") -> datetime:
    """:func:`replays.instants.parse_instant`, its error a TapeError naming the option."""
    try:
        return instants.parse_instant(text)
    except ValueError as exc:
        raise TapeError(f"{name}: {exc}") from None


def market_volume(market: Market) -> float:
    """``volumeNum`` if Gamma sent it, else the ``volume`` string parsed; 0 when neither is."""
    for key in ("volumeNum", "volume"):
        value = market.get(key)
        if value is None or isinstance(value, bool):
            continue
        try:
            return float(value)
        except (TypeError, ValueError):
            continue
    return 0.0


def price_tokens(market: Market) -> list[str]:
    """The tokens whose price history the tape needs.

    A two-outcome market's second price is one minus the first, so only the first (YES) token
    is fetched; a market with more outcomes needs every token.
    """
    raw = market.get("clobTokenIds")
    try:
        tokens = json.loads(raw or "[]") if isinstance(raw, str) else raw
    except (ValueError, RecursionError):
        raise TapeError(
            f"market {market.get('id')}: clobTokenIds is not a JSON list: {raw!r}"
        ) from None
    if not tokens:
        return []
    if not isinstance(tokens, list) or not all(isinstance(t, str | int) for t in tokens):
        raise TapeError(f"market {market.get('id')}: clobTokenIds is not a list of ids: {raw!r}")
    ids = [str(t) for t in tokens]
    return ids[:1] if len(ids) == 2 else ids


class MarketSelector:
    """Pages Gamma ``/events`` and ``/markets`` and keeps the top N markets by volume.

    Both endpoints are asked because each misses something: ``/markets`` cannot filter by tag
    slug and its markets carry no tags, while ``/events`` groups markets under tagged events.
    Events come first, so a market seen in both keeps the copy with its event (and tags).
    """

    def __init__(self, fetcher: JsonFetcher, gamma_url: str, options: RecordOptions) -> None:
        self._fetcher = fetcher
        self._gamma_url = gamma_url.rstrip("/")
        self._options = options
        self._start = parse_instant(options.start) if options.start else None
        self._end = parse_instant(options.end) if options.end else None

    def select(self) -> list[Market]:
        found: dict[str, Market] = {}
        for tag in self._options.tags or (None,):
            for market in self._event_markets(tag):
                found.setdefault(str(market.get("id")), market)
            if tag is None or tag.isdigit():  # /markets filters by tag id only
                for market in self._listed_markets(tag):
                    found.setdefault(str(market.get("id")), market)
        chosen = [m for m in found.values() if self._wanted(m)]
        chosen.sort(key=lambda m: (-market_volume(m), str(m.get("id"))))
        return chosen[: self._options.top]

    def _filters(self, tag: str | None, *, slug_allowed: bool) -> dict[str, str | int | bool]:
        params: dict[str, str | int | bool] = {"ascending": False}
        if self._options.closed is not None:
            params["closed"] = self._options.closed
        if self._options.start is not None:
            params["start_date_min"] = _iso(self._options.start)
        if self._options.end is not None:
            params["end_date_max"] = _iso(self._options.end)
        if tag is not None:
            if tag.isdigit():
                params["tag_id"] = int(tag)
            elif slug_allowed:
                params["tag_slug"] = tag
        return params

    def _event_markets(self, tag: str | None) -> Iterator[Market]:
        params = {"order": "volume", **self._filters(tag, slug_allowed=True)}
        volumes: list[float] = []
        for events in self._pages("/events", params):
            for event in events:
                parent = {k: v for k, v in event.items() if k != "markets"}
                for child in event.get("markets") or []:
                    market = dict(child)
                    market.setdefault("events", [parent])
                    volumes.append(market_volume(market))
                    yield market
            # An event's volume is the sum of its markets', so no market of a later event can
            # out-trade the last event seen: once N markets beat it, later pages cannot matter.
            floor = market_volume(events[-1])
            if sum(1 for v in volumes if v >= floor) >= self._options.top:
                return

    def _listed_markets(self, tag: str | None) -> Iterator[Market]:
        params = {"order": "volumeNum", **self._filters(tag, slug_allowed=False)}
        count = 0
        for markets in self._pages("/markets", params):
            yield from markets
            count += len(markets)
            if count >= self._options.top:  # ordered by volume: the rest are smaller
                return

    def _pages(self, path: str, params: QueryParams) -> Iterator[list[Market]]:
        """Successive pages of objects not seen before, until a short or an all-repeat page
        (a server that ignores ``offset`` must not loop us forever)."""
        size = self._options.page_size
        seen: set[str] = set()
        offset = 0
        while True:
            page = self._fetcher.get_json(
                self._gamma_url + path, {**params, "limit": size, "offset": offset}
            )
            if not isinstance(page, list):
                raise TapeError(f"Gamma {path} answered {type(page).__name__}, not a JSON array")
            fresh = [o for o in page if isinstance(o, dict) and str(o.get("id")) not in seen]
            seen.update(str(o.get("id")) for o in fresh)
            if fresh:
                yield fresh
            if len(page) < size or not fresh:
                return
            offset += size

    def _wanted(self, market: Market) -> bool:
        """Gamma filters events by date and status, not each of their markets: check each."""
        options = self._options
        if options.closed is not None and bool(market.get("closed")) != options.closed:
            return False
        start, end = market.get("startDate"), market.get("endDate")
        # A market without the date cannot be shown to lie in the window, so it is left out.
        if self._start and not (start and parse_instant(str(start)) >= self._start):
            return False
        if self._end and not (end and parse_instant(str(end)) <= self._end):
            return False
        return bool(price_tokens(market))


class RecordingDir:
    """The files of one recording, and the rules that make it safe to resume."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.markets_path = path / "markets.json"
        self.prices_path = path / "prices.jsonl"
        self.state_path = path / "state.json"

    def check_options(self, options: RecordOptions) -> None:
        if not self.state_path.exists():
            return
        try:
            started = json.loads(_capped(self.state_path))["options"]
        except (ValueError, KeyError, TypeError, RecursionError):
            raise TapeError(f"{self.state_path}: not a recording state file") from None
        wanted = options.as_state()
        if started != wanted:
            diffs = ", ".join(
                f"{k}: {started.get(k)!r} then, {wanted[k]!r} now"
                for k in wanted
                if started.get(k) != wanted[k]
            )
            raise TapeError(
                f"{self.path} was recorded with other options ({diffs}); use another --dir"
            )

    def recorded_at(self) -> int | None:
        """When the market list was fetched (unix seconds), if the state file says."""
        if not self.state_path.exists():
            return None
        try:
            value = json.loads(_capped(self.state_path)).get("recorded_at")
        except (ValueError, AttributeError, RecursionError):
            raise TapeError(f"{self.state_path}: not a recording state file") from None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def write_state(
        self,
        options: RecordOptions,
        summary: RecordingSummary,
        done: bool,
        recorded_at: int | None,
    ) -> None:
        state = {
            "options": options.as_state(),
            "recorded_at": recorded_at,
            "markets": summary.markets,
            "tokens": summary.tokens,
            "tokens_recorded": summary.recorded + summary.resumed,
            "complete": done,
        }
        _write_atomically(self.state_path, json.dumps(state, indent=2) + "\n")

    def read_markets(self) -> list[Market] | None:
        if not self.markets_path.exists():
            return None
        try:
            markets = json.loads(_capped(self.markets_path))
        except (ValueError, RecursionError):
            raise TapeError(f"{self.markets_path}: not valid JSON; delete it to re-fetch") from None
        if not isinstance(markets, list):
            raise TapeError(f"{self.markets_path}: expected a JSON array of Gamma markets")
        return markets

    def write_markets(self, markets: list[Market]) -> None:
        _write_atomically(self.markets_path, json.dumps(markets, indent=1) + "\n")

    def recorded_tokens(self) -> set[str]:
        """Token ids already in ``prices.jsonl``, after cutting off a torn last line.

        Only the last line can be torn (we append one line at a time and flush), so a bad line
        anywhere else means the file was damaged some other way, and we refuse to guess.
        """
        if not self.prices_path.exists():
            return set()
        data = self.prices_path.read_bytes()  # appended to below: its bytes as they are
        whole = data.rfind(b"\n") + 1
        torn = data[whole:]  # whatever follows the last newline: nothing, or a cut-off line
        tokens: set[str] = set()
        for number, line in content_lines(data[:whole], 0):  # no list of every line
            try:
                row = json.loads(line)
                if not isinstance(row.get("history"), list):
                    raise ValueError("no history")
                tokens.add(str(row["token_id"]))
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                raise TapeError(
                    f"{self.prices_path}:{number}: not a recorded price line; "
                    "the file is damaged, delete it to record again"
                ) from None
        if torn:
            with self.prices_path.open("r+b") as handle:
                handle.truncate(len(data) - len(torn))
        return tokens


def _capped(path: Path) -> bytes:
    """A recording's own file, read within the size limit a tape has: a recording folder can
    come from someone else."""
    return read_file(path, Budget(str(path)))


def record(
    fetcher: JsonFetcher,
    directory: Path,
    options: RecordOptions,
    endpoints: Endpoints | None = None,
    progress: OnProgress | None = None,
    clock: Callable[[], float] = time.time,
) -> RecordingSummary:
    """Record (or finish recording) ``directory``; ``progress(done, total)`` follows tokens.

    The instant the market list is fetched is kept in ``state.json`` as ``recorded_at``: the
    tape's open markets are covered until then, and their volume is known as of then."""
    endpoints = endpoints or Endpoints()
    requests_before = fetcher.requests
    files = RecordingDir(directory)
    files.check_options(options)

    markets = files.read_markets()
    reused = markets is not None
    recorded_at = files.recorded_at() if reused else None
    if markets is None:
        recorded_at = int(clock())
        markets = MarketSelector(fetcher, endpoints.gamma_url, options).select()
        # made only now: a first request that fails leaves no empty folder behind
        directory.mkdir(parents=True, exist_ok=True)
        files.write_markets(markets)
    token_ids = list(dict.fromkeys(t for m in markets for t in price_tokens(m)))
    summary = RecordingSummary(
        directory=str(directory),
        markets=len(markets),
        tokens=len(token_ids),
        markets_reused=reused,
    )
    done = files.recorded_tokens()
    summary.resumed = sum(1 for t in token_ids if t in done)
    files.write_state(options, summary, False, recorded_at)

    history_url = endpoints.clob_url.rstrip("/") + "/prices-history"
    if progress:
        progress(summary.resumed, summary.tokens)
    with files.prices_path.open("ab") as out:
        for token in token_ids:
            if token in done:
                continue
            history = _history(fetcher, history_url, token, options)
            out.write(json.dumps({"token_id": token, "history": history}).encode() + b"\n")
            out.flush()
            os.fsync(out.fileno())
            summary.recorded += 1
            summary.points += len(history)
            if progress:
                progress(summary.resumed + summary.recorded, summary.tokens)
    summary.requests = fetcher.requests - requests_before
    files.write_state(options, summary, True, recorded_at)
    return summary


def write_tape(directory: Path, out: Path) -> ImportResult:
    """Build the tape from a finished recording with the Polymarket importer, and save it.

    The result also lists the markets the importer left out (no usable prices), which a
    recording at too fine a fidelity produces and the user should hear about.
    """
    files = RecordingDir(directory)
    result = import_polymarket(files.markets_path, files.prices_path, files.recorded_at())
    save_tape(result.tape, out)
    return result


def _history(
    fetcher: JsonFetcher, url: str, token: str, options: RecordOptions
) -> list[dict[str, Any]]:
    params: dict[str, str | int] = {"market": token, "interval": options.interval}
    if options.fidelity is not None:
        params["fidelity"] = options.fidelity
    body = fetcher.get_json(url, params)
    history = body.get("history") if isinstance(body, dict) else None
    if not isinstance(history, list):
        raise TapeError(f"CLOB prices-history for token {token}: no 'history' array in the answer")
    return history


def _iso(text: str) -> str:
    return parse_instant(text).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and a rename, so a crash leaves the old file or the new one."""
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
