"""Record order books from Polymarket's CLOB market WebSocket into a recording directory, and
build a ``.books`` file from it: ``arena tapes record books``.

Polymarket serves no historical books, so a researcher who wants books for a category must
record them. The recorder subscribes to the tokens of the markets asked for, keeps each token's
book from the feed (``replays.book_stream``), and appends a snapshot to ``journal.jsonl`` each
time a book changes. Every ``check_every`` seconds it asks the REST ``/book`` of each token,
checks the answer's hash, and compares the book with the one it kept: a book that drifted (a
message lost) is replaced by the REST one, recorded ``via: rest``, and counted.

Resumable, like ``arena tapes record``: the journal is flushed line by line, a torn last line
(a kill mid-write) is cut off when the directory is opened again, and a snapshot is written only
when it is newer than the token's last and differs from it. So a dropped connection (the feed
sends every book again on subscribe) and a re-run of the same command both continue the
journal without a gap in the books and without a duplicate line.

The WebSocket client is ``websockets`` (the ``record`` extra): a well-kept implementation of the
protocol with a size cap on every message after decompression, which a hand-written client
would have to get right on its own.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from replays.book_stream import (
    MAX_MESSAGE_BYTES,
    BookRecord,
    BookState,
    FeedCounts,
    StreamError,
    parse_rest_book,
)
from replays.errors import TapeError
from replays.http import FetchError, JsonFetcher, RetryPolicy
from replays.importers.books import BooksImport, SnapshotRows, assemble

WS_URL = "wss://ws-subscriptions-clob.polymarket.com/ws/market"
JOURNAL = "journal.jsonl"
TOKENS = "tokens.json"
PING_EVERY = 10.0
"""Seconds between keep-alive ``PING`` texts (the channel drops a quiet connection)."""
FSYNC_EVERY = 1.0
"""Seconds between ``fsync`` calls: a kill loses at most this much of what was flushed."""
CONDITION_ID = re.compile(r"0x[0-9a-fA-F]{64}")
"""A market's condition id as the CLOB names it: 32 bytes in hex."""


@dataclass(frozen=True)
class RecordedToken:
    """One outcome token to record: its id, its market (condition id) and outcome label."""

    token: str
    market: str
    outcome: str


class Connection(Protocol):
    """What the recorder needs of a WebSocket (``websockets.sync`` gives exactly this)."""

    def send(self, message: str) -> None: ...

    def recv(self, timeout: float | None = None) -> str | bytes: ...


Connect = Callable[[str], AbstractContextManager[Connection]]


def websocket_connect(url: str) -> AbstractContextManager[Connection]:
    """A ``websockets`` client connection capped at ``MAX_MESSAGE_BYTES`` a message."""
    try:
        from websockets.sync.client import connect
    except ImportError:
        raise TapeError(
            "recording books needs the 'record' extra: pip install 'arena[record]'"
        ) from None
    connection: AbstractContextManager[Connection] = connect(
        url, max_size=MAX_MESSAGE_BYTES, open_timeout=15, close_timeout=2
    )
    return connection


def _connection_errors() -> tuple[type[BaseException], ...]:
    """What a lost connection raises: the socket's errors, and the ``websockets`` library's
    (``ConnectionClosed``, a failed handshake) where it is installed."""
    try:
        from websockets.exceptions import WebSocketException
    except ImportError:
        return (OSError, TimeoutError)
    return (OSError, TimeoutError, WebSocketException)


def lookup_tokens(
    fetcher: JsonFetcher, clob_url: str, markets: Sequence[str]
) -> list[RecordedToken]:
    """The outcome tokens of each market (condition id), from the CLOB's ``/markets/{id}``.

    Every id is checked before the first request: a placeholder pasted from help (``0x…``)
    would otherwise be retried against the network and end as an unhelpful HTTP failure."""
    for market in markets:
        if not CONDITION_ID.fullmatch(market):
            raise TapeError(f"market {market!r} is not a condition id (0x and 64 hex digits)")
    found: list[RecordedToken] = []
    for market in markets:
        answer = fetcher.get_json(f"{clob_url.rstrip('/')}/markets/{market}")
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list) or not tokens:
            raise TapeError(f"market {market}: the CLOB lists no tokens for it")
        for i, entry in enumerate(tokens):
            token = entry.get("token_id") if isinstance(entry, dict) else None
            outcome = entry.get("outcome") if isinstance(entry, dict) else None
            if not isinstance(token, str) or not token or not isinstance(outcome, str):
                raise TapeError(f"market {market}: token {i} has no token_id and outcome")
            found.append(RecordedToken(token=token, market=market, outcome=outcome))
    return found


class Journal:
    """The recording directory: ``tokens.json`` (what is recorded) and ``journal.jsonl``."""

    def __init__(self, directory: Path, tokens: Sequence[RecordedToken]) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        wanted = [vars(t) for t in tokens]
        listed = directory / TOKENS
        if listed.exists():
            stored = _read_json(listed)
            if stored != wanted:
                raise TapeError(
                    f"{directory}: recorded other markets ({len(stored)} tokens); "
                    "use another --dir, or the same markets, to resume"
                )
        else:
            listed.write_text(json.dumps(wanted, indent=1))
        self.tokens = list(tokens)
        self.last: dict[str, BookRecord] = {}
        self.lines = 0
        path = directory / JOURNAL
        for record in _read_records(path):
            self.last[record.token] = record
            self.lines += 1
        self.resumed = self.lines
        self._file = path.open("a", encoding="utf-8")
        self._synced = time.monotonic()

    def write(self, record: BookRecord) -> bool:
        """Append ``record`` unless it adds nothing: older than the token's last snapshot, or
        the same book (a resubscription sends every book again)."""
        last = self.last.get(record.token)
        if last is not None and (record.ts < last.ts or record.content() == last.content()):
            return False
        self._file.write(json.dumps(record.as_json(), separators=(",", ":")) + "\n")
        self._file.flush()
        if time.monotonic() - self._synced >= FSYNC_EVERY:
            os.fsync(self._file.fileno())
            self._synced = time.monotonic()
        self.last[record.token] = record
        self.lines += 1
        return True

    def close(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise TapeError(f"{path}: unreadable ({type(error).__name__})") from None


def _read_records(path: Path) -> Iterator[BookRecord]:
    """The journal's records; a torn last line (no newline: a kill mid-write) is cut off."""
    if not path.exists():
        return
    with path.open("rb+") as handle:
        data = handle.read()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            handle.truncate(end)
    for number, line in enumerate(data[:end].splitlines(), start=1):
        try:
            raw = json.loads(line)
            yield BookRecord(
                token=raw["token"], market=raw["market"], ts=int(raw["ts"]), tick=raw["tick"],
                bids=tuple((str(p), str(s)) for p, s in raw["bids"]),
                asks=tuple((str(p), str(s)) for p, s in raw["asks"]),
                via=raw.get("via", "ws"),
            )  # fmt: skip
        except (ValueError, KeyError, TypeError):
            raise TapeError(f"{path}: line {number} is not a book record") from None


@dataclass
class RecordBooksOptions:
    """How long and how carefully to record (none of it changes what a book is)."""

    duration: float | None = None  # seconds of recording; None: until stopped
    check_every: float = 60.0  # seconds between REST /book checks of every token
    max_reconnects: int = 20
    idle_timeout: float = 60.0  # seconds with no message before the connection counts as dead


@dataclass
class BookRecording:
    """What a recording did: the feed's counts, snapshots written, checks and reconnections."""

    directory: str
    tokens: int
    written: int = 0
    resumed: int = 0
    reconnects: int = 0
    rest_checks: int = 0
    rest_hash_failures: int = 0
    rest_resyncs: int = 0
    feed: FeedCounts = field(default_factory=FeedCounts)
    stopped_by: str = "duration"


def record_books(
    directory: Path,
    tokens: Sequence[RecordedToken],
    options: RecordBooksOptions,
    *,
    ws_url: str = WS_URL,
    clob_url: str | None = None,
    fetcher: JsonFetcher | None = None,
    connect: Connect = websocket_connect,
    policy: RetryPolicy | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[BookRecording], None] | None = None,
) -> BookRecording:
    """Record until ``options.duration`` has passed (or Ctrl-C): every change of every token's
    book appended to the journal; REST checks when ``clob_url`` and ``fetcher`` are given."""
    journal = Journal(directory, tokens)
    state = BookState({t.token: t.market for t in tokens})
    summary = BookRecording(str(directory), len(tokens), resumed=journal.resumed)
    summary.feed = state.counts
    policy = policy or RetryPolicy()
    started = clock()
    next_check = started + options.check_every
    failures = 0

    def left() -> float | None:
        return None if options.duration is None else options.duration - (clock() - started)

    try:
        while (remaining := left()) is None or remaining > 0:
            try:
                with connect(ws_url) as ws:
                    ws.send(json.dumps({"assets_ids": [t.token for t in tokens], "type": "market"}))
                    pinged = clock()
                    while (remaining := left()) is None or remaining > 0:
                        wait = min(PING_EVERY, options.idle_timeout, remaining or PING_EVERY)
                        try:
                            message = ws.recv(timeout=max(wait, 0.01))
                        except TimeoutError:
                            if clock() - pinged >= options.idle_timeout:
                                raise ConnectionError(
                                    "no message within the idle timeout"
                                ) from None
                            message = None
                        if message is not None:
                            failures = 0
                            for record in state.apply_message(message):
                                summary.written += journal.write(record)
                        if clock() - pinged >= PING_EVERY:
                            ws.send("PING")
                            pinged = clock()
                        if fetcher is not None and clob_url and clock() >= next_check:
                            _check_books(fetcher, clob_url, tokens, state, journal, summary)
                            next_check = clock() + options.check_every
                        if progress is not None:
                            progress(summary)
            except _connection_errors() as error:
                _lost(error, summary, failures, options, policy, sleep)
                failures += 1
    except KeyboardInterrupt:
        summary.stopped_by = "interrupt"
    finally:
        journal.close()
    return summary


def _lost(
    error: BaseException,
    summary: BookRecording,
    failures: int,
    options: RecordBooksOptions,
    policy: RetryPolicy,
    sleep: Callable[[float], None],
) -> None:
    """A dropped connection: wait, then connect again (the feed resends every book)."""
    summary.reconnects += 1
    if summary.reconnects > options.max_reconnects:
        raise TapeError(
            f"the market channel dropped {summary.reconnects} times "
            f"(last: {type(error).__name__}: {str(error)[:80]}); the journal is kept, "
            "re-run to resume"
        ) from None
    sleep(policy.backoff(failures))


def _check_books(
    fetcher: JsonFetcher,
    clob_url: str,
    tokens: Sequence[RecordedToken],
    state: BookState,
    journal: Journal,
    summary: BookRecording,
) -> None:
    """Each token's REST ``/book``: its hash checked, the kept book replaced if it drifted."""
    for t in tokens:
        try:
            rest = parse_rest_book(fetcher.get_json(f"{clob_url.rstrip('/')}/book",
                                                    {"token_id": t.token}))  # fmt: skip
        except (FetchError, StreamError) as error:
            state.counts.refuse(StreamError(f"/book: {error}"))
            continue
        summary.rest_checks += 1
        if not rest.hash_ok:
            summary.rest_hash_failures += 1
            continue  # a book whose hash does not hold is not trusted over the feed's
        if rest.token != t.token:
            continue
        record = state.resync(t.token, rest)
        if record is not None:
            summary.rest_resyncs += 1
            summary.written += journal.write(record)


def build_books(directory: Path, attribution: str = "") -> BooksImport:
    """The journal as a checked ``.books`` store (tokens in (market, outcome) order; a tick
    the feed stated is kept, else inferred from the prices)."""
    tokens = [RecordedToken(**t) for t in _read_json(directory / TOKENS)]
    outcome = {t.token: t for t in tokens}
    records = list(_read_records(directory / JOURNAL))
    if not records:
        raise TapeError(f"{directory}: the journal holds no book yet")
    source = str(directory / JOURNAL)
    bid_n, ask_n = [], []
    bid_px: list[float] = []
    bid_sz: list[float] = []
    ask_px: list[float] = []
    ask_sz: list[float] = []
    ticks = []
    for r in records:
        bid_n.append(len(r.bids))
        ask_n.append(len(r.asks))
        bid_px.extend(float(p) for p, _ in r.bids)
        bid_sz.extend(float(s) for _, s in r.bids)
        ask_px.extend(float(p) for p, _ in r.asks)
        ask_sz.extend(float(s) for _, s in r.asks)
        ticks.append(np.nan if r.tick is None else float(r.tick))
    tick = np.asarray(ticks, dtype=np.float64)
    if np.isnan(tick).any():
        tick[:] = np.nan  # one snapshot without a stated tick: infer every one alike
    rows = SnapshotRows(
        source=source,
        market=[outcome[r.token].market for r in records],
        outcome=[outcome[r.token].outcome for r in records],
        token=[r.token for r in records],
        ts=np.asarray([r.ts for r in records], dtype=np.int64),
        tick=tick,
        bid_n=np.asarray(bid_n, dtype=np.int64),
        bid_px=np.asarray(bid_px, dtype=np.float64),
        bid_sz=np.asarray(bid_sz, dtype=np.float64),
        ask_n=np.asarray(ask_n, dtype=np.int64),
        ask_px=np.asarray(ask_px, dtype=np.float64),
        ask_sz=np.asarray(ask_sz, dtype=np.float64),
        label="line",
    )
    return assemble(rows, attribution=attribution)


def load_tokens(directory: Path) -> list[RecordedToken]:
    """The tokens a recording directory records (to resume without asking the CLOB again)."""
    path = directory / TOKENS
    return [RecordedToken(**t) for t in _read_json(path)] if path.exists() else []


__all__ = [
    "WS_URL",
    "BookRecording",
    "Journal",
    "RecordBooksOptions",
    "RecordedToken",
    "build_books",
    "load_tokens",
    "lookup_tokens",
    "record_books",
]
