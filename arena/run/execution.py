"""A cohort's execution: the model its orders meet, spelled as an agent is (``KIND?key=value``),
and the venue the runner builds from it over the cohort's tape.

``fa`` (the default) is Forecaster Arena's rule, the broker's own path: every order whole at the
tape's price, no fee, and every log made before execution models existed keeps its bytes and
its cohort id. Any other model goes through ``ledger.venue``:

* ``mid``: Forecaster Arena's methodology v2, the midpoint at execution; on a price tape the
  tape's price is taken as that midpoint.
* ``touch``: the best ask for a buy, the best bid for a sell (``cap=true``: no more than the
  top level holds), from the cohort's recorded books (``--books``); on a price tape alone it
  needs ``spread_ticks=K``: a synthetic spread of K ticks around the tape's price, marked
  ``synthetic`` on every fill.
* ``l2``: a walk of the recorded order book, level by level; it needs books.

With books, an order meets the latest snapshot at or before its instant (plus ``latency``
milliseconds: the book standing when the order arrives) and never a later one.

Fees (``--fees``): ``none``, ``auto``, Polymarket's dated schedule (``ledger.fees``) by each
market's category, or a user's table (a ``.toml`` or ``.json`` file of that shape); unset,
``none`` for ``fa`` and ``mid`` (Forecaster Arena charges none) and ``auto`` for the book
models. An unknown fee refuses the order with that reason. A table is named in the cohort id by
its hash (``table:SHA256``, never its path) and recorded whole in the opening
(``fee_table``), so ``verify`` and ``ladder`` derive its fees from the log alone.
"""

from __future__ import annotations

import json
import tomllib
from bisect import bisect_left
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from itertools import accumulate
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from ledger.execution import OrderBook, model_for
from ledger.execution.liquidation import sell_down
from ledger.fees import FeeRule, FeeSchedule, FeeTableError, Side, fee_category
from ledger.projection import Book
from ledger.venue import BookSource, Venue, quote_books
from replays.books import Books
from replays.errors import TapeError
from replays.tape import Tape

DEFAULT = "fa"
FEES = ("auto", "none")
TABLE = "table:"
"""How a cohort names a user's fee table: ``table:`` and the sha256 of its canonical form."""
BOOK_MODELS = ("touch", "l2")


def parse(spec: str) -> tuple[str, dict[str, Any]]:
    """``"touch?spread_ticks=2&cap=true"`` → ``("touch", {"spread_ticks": 2, "cap": True})``:
    true/false are booleans, whole numbers ints, anything else text (decimals stay exact)."""
    name, _, query = spec.partition("?")
    params: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        if value in ("true", "false"):
            params[key] = value == "true"
        elif value.lstrip("-").isdigit():
            params[key] = int(value)
        else:
            params[key] = value
    return name.strip(), params


def check(spec: str, books: bool = False) -> str:
    """``spec`` if it names a model that can run with (or without) recorded ``books``; else
    ValueError with one line saying why (the settings model turns it into a field error)."""
    try:
        name, params = parse(spec)
    except ValueError:
        raise ValueError(f"execution {spec!r} is not KIND or KIND?key=value&...") from None
    model_for(name, **params)  # an unknown model or parameter: LedgerError, one line
    if books:
        return spec
    if name == "l2":
        raise ValueError("execution 'l2' walks a recorded order book: give --books FILE")
    if name == "touch" and params.get("spread_ticks") is None:
        raise ValueError(
            "execution 'touch' on a price tape needs --books FILE, or spread_ticks=K (a "
            "synthetic spread of K ticks around the tape's price)"
        )
    return spec


MAX_LATENCY_MS = 86_400_000
"""The longest latency a cohort may have: a day."""


def latency_settings(value: str) -> dict[str, Any]:
    """``--latency``: ``MS`` (whole milliseconds), ``llm`` (each decision's model calls'
    recorded time), ``FILE`` (milliseconds per agent, ``read_latencies``), or ``llm+MS`` /
    ``llm+FILE`` (both), as the cohort settings ``latency_ms``, ``latency`` and
    ``latency_by_agent``; anything else is a ValueError of one line."""
    text = value.strip()
    think = text == "llm" or text.startswith("llm+")
    rest = text.removeprefix("llm+") if text != "llm" else "0"
    chosen: dict[str, Any] = {"latency_ms": 0, "latency": "llm" if think else None,
                              "latency_by_agent": None}  # fmt: skip
    ms = _milliseconds(rest)
    if ms is not None:
        return chosen | {"latency_ms": ms}
    if rest.endswith((".toml", ".json")):
        return chosen | {"latency_by_agent": read_latencies(Path(rest))}
    raise ValueError(
        f"latency {value!r} is not MS, llm, FILE (.toml or .json), llm+MS or llm+FILE "
        "(whole milliseconds, or with a unit: 250ms, 1.5s)"
    )


def _milliseconds(text: str) -> int | None:
    """``250``, ``250ms`` or ``1.5s`` as whole milliseconds; None if it is none of these (a
    fraction of a millisecond is refused rather than rounded: the book it meets would move)."""
    number, scale = (text[:-2], 1) if text.endswith("ms") else (text, 1)
    if text.endswith("s") and not text.endswith("ms"):
        number, scale = text[:-1], 1000
    try:
        exact = Decimal(number) * scale
    except InvalidOperation:
        return None
    if not exact.is_finite() or not 0 <= exact <= MAX_LATENCY_MS:
        return None
    if exact != exact.to_integral_value():
        return None
    return int(exact)


def read_latencies(path: Path) -> dict[str, int]:
    """``--latency FILE``: a ``.toml`` or ``.json`` table of agent names to whole milliseconds
    (``fast = 250``, ``{"slow": 1500}``), each agent's orders meeting the book that much later;
    an agent left out waits 0. A file that is not such a table is a ValueError of one line."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except OSError as exc:
        raise ValueError(f"latency file {path}: cannot read it: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError(f"latency file {path}: cannot read it: not UTF-8 text") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"latency file {path}: not valid {path.suffix[1:].upper()}: "
                         f"{str(exc).splitlines()[0]}") from None  # fmt: skip
    if not isinstance(data, dict) or not data:
        raise ValueError(f"latency file {path}: not a table of agent names to milliseconds")
    check_latencies(data, None, f"latency file {path}")
    return dict(data)


def check_latencies(
    latencies: Mapping[str, Any] | None, agents: Mapping[str, str] | None, what: str = "latency"
) -> None:
    """Each latency whole milliseconds within a day, and (given the cohort's ``agents``) each
    named agent one of them; else a ValueError of one line."""
    for name, ms in (latencies or {}).items():
        if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= MAX_LATENCY_MS:
            raise ValueError(f"{what}: agent {name!r} has {ms!r}, not whole milliseconds from "
                             f"0 to {MAX_LATENCY_MS:,}")  # fmt: skip
        if agents is not None and name not in agents:
            raise ValueError(f"{what}: agent {name!r} is not one of the cohort's "
                             f"({', '.join(agents)})")  # fmt: skip


def agent_latencies(latencies: Mapping[str, int] | None) -> dict[str, str]:
    """What a cohort's opening records of ``--latency FILE``: the table as canonical JSON
    text (``latency_by_agent``), read back by ``recorded_latencies``."""
    if not latencies:
        return {}
    return {"latency_by_agent": json.dumps(dict(latencies), sort_keys=True, separators=(",", ":"))}


def recorded_latencies(settings: Mapping[str, Any]) -> dict[str, int]:
    """The per-agent latencies a cohort's opening ``settings`` record; {} where none."""
    text = settings.get("latency_by_agent")
    if not isinstance(text, str):
        return {}
    data = json.loads(text)
    check_latencies(data, None, "the cohort's latency_by_agent")
    return dict(data)


def fees_for(spec: str, fees: str | FeeSchedule | None) -> str:
    """The fee setting a cohort runs with: the one given (a table as ``table:SHA256``), else
    the model's default. ``fa`` is Forecaster Arena's rule, which has no fee: fees there are a
    ValueError saying so, as is a table that cannot be read or used (one line naming it)."""
    name = parse(spec)[0]
    if fees is None:
        return "auto" if name in BOOK_MODELS else "none"
    chosen = (
        fees if isinstance(fees, str) and fees in FEES else TABLE + schedule(fees).schedule_hash()
    )
    if name == DEFAULT and chosen != "none":
        raise ValueError("execution 'fa' charges no fee (Forecaster Arena's rule): choose mid, "
                         "touch or l2 to pay fees")  # fmt: skip
    return chosen


def schedule(fees: str | FeeSchedule) -> FeeSchedule:
    """The schedule ``auto``, ``none`` or a fee table file names (a ``FeeSchedule`` is itself);
    a file that is not a usable table is a ValueError of one line naming it and the entry."""
    if isinstance(fees, FeeSchedule):
        return fees
    if fees in FEES:
        return FeeSchedule.from_option(fees)
    path = Path(fees)
    try:
        stat = path.stat()
    except OSError as exc:
        raise ValueError(f"fees {fees!r} is not auto, none or a fee table file: "
                         f"{exc.strerror}") from None  # fmt: skip
    try:
        return _table_file(path, stat.st_mtime_ns, stat.st_size)
    except FeeTableError as exc:
        raise ValueError(str(exc)) from None


@lru_cache(maxsize=16)
def _table_file(path: Path, mtime_ns: int, size: int) -> FeeSchedule:
    """A fee table file read once while it is unchanged (a cohort's checks, id and run each ask
    for it)."""
    return FeeSchedule.from_file(path)


def fee_table(fees: str | None) -> dict[str, str]:
    """What a cohort's opening records of its fees beyond their name: a user's table, whole
    (``fee_table``, canonical JSON text), so the log alone says what every fee was."""
    if fees is None or fees in FEES:
        return {}
    text = json.dumps(schedule(fees).table(), sort_keys=True, separators=(",", ":"))
    return {"fee_table": text}


def recorded_fees(settings: Mapping[str, Any]) -> str | FeeSchedule | None:
    """The fees a cohort's opening ``settings`` record: ``auto``, ``none``, the user's table
    it holds, or None where it says nothing (Forecaster Arena's rule). A recorded table that is
    not the one the opening names by hash is a ``FeeTableError``."""
    fees, table = settings.get("fees"), settings.get("fee_table")
    if not isinstance(table, str):
        return fees if isinstance(fees, str) else None
    try:
        data = json.loads(table, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise FeeTableError(f"the cohort's fee table is not JSON: {exc.msg}") from None
    if not isinstance(data, Mapping):
        raise FeeTableError("the cohort's fee table is not an object")
    found = FeeSchedule.from_mapping(data, "the cohort's fee table")
    if fees != TABLE + found.schedule_hash():
        raise FeeTableError(f"the cohort's fee table is not the {fees!r} its opening names")
    return found


def venue(
    tape: Tape,
    spec: str,
    fees: str | FeeSchedule | None,
    books: Books | None = None,
    latency_ms: int = 0,
    shared: bool = False,
    think: bool = False,
    per_agent: Mapping[str, int] | None = None,
) -> Venue | None:
    """The venue of a cohort on ``tape`` (and its ``books``); None for ``fa`` without fees, the
    broker's own path. ``think``: ``--latency llm``, orders wait for the model too;
    ``per_agent``: ``--latency FILE``, milliseconds more for each named agent."""
    name, params = parse(spec)
    chosen = fees_for(spec, fees)
    if name == DEFAULT and chosen == "none":
        return None
    table = schedule(chosen if fees is None else fees)
    category = {
        info.id: fee_category(info.category, info.tags) for info in tape.markets
    }  # looked up once per market, not per order

    known: dict[str, tuple[int, int, FeeRule]] = {}  # per market: the rule of one period

    def fee_rule(market: str, ts: int) -> FeeRule | None:
        """The market's rule at ``ts``, looked up once per market and period (the rule
        depends on the category and the period alone; an unknown fee raises every time)."""
        if chosen == "none":
            return None
        found = known.get(market)
        if found is not None and found[0] <= ts < found[1]:
            return found[2]
        rule = table.rule_for(category.get(market), ts)
        period = table.period_at(ts)
        if period is not None:
            low = -(2**63) if period.start is None else period.start
            known[market] = (low, 2**63 if period.end is None else period.end, rule)
        return rule

    source = quote_books if books is None else recorded_books(tape, books)
    model = model_for(name, **params)
    return Venue(
        model=model, books=source, fees=fee_rule, latency_ms=latency_ms, shared=shared,
        think=think, per_agent=dict(per_agent or {}),
    )  # fmt: skip


def recorded_books(tape: Tape, books: Books) -> BookSource:
    """The book of an outcome at an instant: the recorded snapshot at or before it, as the
    models read a book; None where the books hold nothing for it (the order is refused).

    The side the order takes is cut after the levels it could reach (shares at the best price:
    a buy's dollars over the best ask, a sell's shares; plus what was taken before, and one
    level more), and the other side after its best level, which is all a marketable order
    reads of it: 20 levels turned into exact decimals for every order cost 5 times the walk.
    The books were validated level by level when imported (``arena tapes validate``)."""
    outcomes = {info.id: info.outcomes for info in tape.markets}
    prefix = books.hash[:16]

    def book(
        market: str, outcome: int, ts_ms: int, price: float, side: Side, quantity: float,
        taken: float,
    ) -> OrderBook | None:  # fmt: skip
        try:
            k = books.token(market, outcomes[market][outcome])
        except (KeyError, IndexError, TapeError):
            return None
        snap = books.book_at(k, ts_ms)
        if snap is None:
            return None
        takes, other = (snap.ask_px, snap.ask_sz), (snap.bid_px, snap.bid_sz)
        if side == "sell":
            takes, other = other, takes
        px, sz = takes[0].tolist(), takes[1].tolist()
        shares = quantity / px[0] if side == "buy" and px and px[0] > 0 else quantity
        reach = bisect_left(list(accumulate(sz)), shares + taken) + 2  # lists: a few levels
        cut = [(px[:reach], sz[:reach]), (other[0][:1].tolist(), other[1][:1].tolist())]
        (ask_px, ask_sz), (bid_px, bid_sz) = cut if side == "buy" else cut[::-1]
        return OrderBook.columns(
            ts_ms=snap.ts, bid_px=bid_px, bid_sz=bid_sz, ask_px=ask_px, ask_sz=ask_sz,
            tick=snap.tick, token=f"{market}#{outcome}", id=f"{prefix}:{snap.row}",
        )  # fmt: skip

    return book


def best_bids(tape: Tape, books: Books, market: str, ts_ms: int) -> list[float]:
    """``--marks-at bid``: the best bid of each outcome of ``market`` in the book standing at
    ``ts_ms``, 0 where nobody bids (a position no one would buy is worth nothing sold now)."""
    bids = []
    for outcome in tape.markets[tape.index[market]].outcomes:
        snap = books.book_at(books.token(market, outcome), ts_ms)
        bids.append(float(snap.bid_px[0]) if snap is not None and snap.bid_px.size else 0.0)
    return bids


def book_mids(tape: Tape, books: Books, market: str, ts_ms: int) -> list[float]:
    """``--marks-at mid``: each outcome of ``market`` at the midpoint of its book standing at
    ``ts_ms`` (Prophet Arena's mark); a one-sided book at the side it has, an empty one at 0,
    so a mark is derived from the books alone (``arena verify`` derives it again)."""
    mids = []
    for outcome in tape.markets[tape.index[market]].outcomes:
        snap = books.book_at(books.token(market, outcome), ts_ms)
        bid = float(snap.bid_px[0]) if snap is not None and snap.bid_px.size else None
        ask = float(snap.ask_px[0]) if snap is not None and snap.ask_px.size else None
        if bid is not None and ask is not None:
            mids.append((bid + ask) / 2)
        else:
            mids.append(bid if bid is not None else ask if ask is not None else 0.0)
    return mids


def liquidation_marks(
    tape: Tape,
    books: Books,
    accounts: Mapping[str, Book],
    marks: Mapping[str, list[float]],
    ts_ms: int,
    shared: bool,
) -> dict[str, dict[str, list[float]]]:
    """``Marked.held`` for ``--marks-at liquidation``: per agent (in the cohort's order), per
    market it holds that is marked (``marks``: its prices, the best bids), each outcome's price
    per share of what the agent holds if sold now down the bid book standing at ``ts_ms``
    (``ledger.execution.liquidation``). Isolated, each agent walks the whole book; shared, the
    agents walk one book one after another. An outcome held with no book is worth 0."""
    outcomes = {info.id: info.outcomes for info in tape.markets}
    taken: dict[tuple[str, int], list[float]] = {}
    held: dict[str, dict[str, list[float]]] = {}
    for agent, account in accounts.items():
        if not shared:
            taken = {}
        values: dict[str, list[float]] = {}
        for position in account.positions.values():
            market, outcome = position.market, position.outcome
            if market not in marks or position.shares <= 0.0:
                continue
            try:
                snap = books.book_at(books.token(market, outcomes[market][outcome]), ts_ms)
            except (KeyError, IndexError, TapeError):
                snap = None
            prices = values.setdefault(market, list(marks[market]))
            if snap is None:
                prices[outcome] = 0.0
                continue
            key = (market, outcome)
            bids = snap.bid_px.tolist(), snap.bid_sz.tolist()
            proceeds, taken[key] = sell_down(*bids, position.shares, taken.get(key, ()))
            prices[outcome] = proceeds / position.shares
        if values:
            held[agent] = values
    return held
