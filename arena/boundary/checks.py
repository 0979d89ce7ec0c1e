"""What a plugin returns, made safe to log: ``checked`` turns a decision into builtin, bounded
values (finite amounts up to ``MAX_AMOUNT``, beliefs in [0, 1], at most ``MAX_ORDERS`` orders and
``MAX_TEXT`` characters of reasoning and of each model call's texts, ``MAX_TRACE_TEXT`` of model
text in all, truncations noted), or says why it cannot.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterable, Sized
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from ledger.events import BetIntent, ModelCall, SellIntent
from strategies.api import (
    Decision,
    Trace,
)

if TYPE_CHECKING:
    pass


MAX_AMOUNT = 1e12
"""The largest dollar amount a bet may ask for: far beyond any cash, far below overflow."""

MAX_ORDERS = 1_000
"""Orders (bets plus sells) kept from one decision: one bet and one sell on every market of
the default 500-market universe; the rest are dropped with a note in the log."""

MAX_TEXT = 100_000
"""Characters kept of a decision's reasoning and of each text of its trace (an LLM's prompt
and answer fit many times over); a 50 MB reasoning per decision made a 550 MB log."""

MAX_CALLS = 10_000
"""Model calls kept from one decision's trace (a forecaster asks once per market or more)."""

MAX_TRACE_TEXT = 2_000_000
"""Characters kept of one decision's model calls and system prompts together: each text is
also capped at ``MAX_TEXT``, but twenty calls of 2 MB answers wrote 40 MB per decision."""

CALL_TEXTS = ("model", "question", "request", "system", "answer", "finish_reason", "reasoning",
              "error", "rejected")  # fmt: skip

TRACE_TEXTS = ("prompt", "raw_response", "model", "error")
TRACE_COUNTS = ("tokens_in", "tokens_out", "retries")
TRACE_REALS = ("cost", "latency_ms")


def capped(text: str, limit: int = MAX_TEXT) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters, and whether it was cut; loggable (see
    :func:`loggable`)."""
    text = loggable(text)
    return (text, False) if len(text) <= limit else (text[:limit], True)


def loggable(text: str) -> str:
    """``text`` with any lone surrogate (``"\\udcff"``, what ``os.fsdecode`` makes of a
    stray byte) replaced by '?': UTF-8 cannot encode one, and a plugin's reasoning, error
    message or market id holding one crashed the run at the log's next flush, writing none
    of the cohort."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="replace").decode()
    return text


def _number(x: object) -> float | None:
    """``x`` as a builtin float if it is a finite real number (numpy scalars included)."""
    if type(x) is float:  # the common case, without the abstract-class check
        return x if math.isfinite(x) else None
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
        return None
    value = float(x)
    return value if math.isfinite(value) else None


def _text(x: object) -> str | None:
    return None if x is None else loggable(str(x))


def _bet(bet: object) -> BetIntent:
    if (
        type(bet) is BetIntent
        and type(bet.market) is str
        and type(bet.side) is str
        and bet.market.isascii()
        and bet.side.isascii()
        and type(bet.amount) is float
        and math.isfinite(bet.amount)
        and abs(bet.amount) <= MAX_AMOUNT
        and (bet.belief is None or (type(bet.belief) is float and 0.0 <= bet.belief <= 1.0))
    ):
        return bet  # already builtin and bounded; frozen, so the plugin cannot change it later
    if not isinstance(bet, BetIntent):
        raise TypeError(f"bets must be Bet, not {type(bet).__name__}")
    if not (isinstance(bet.market, str) and isinstance(bet.side, str)):
        raise TypeError(f"bet {bet!r} needs a market id and a side as strings")
    amount, belief = _number(bet.amount), _number(bet.belief)
    if amount is None or (bet.belief is not None and belief is None):
        raise TypeError(f"bet {bet!r} needs a finite amount (and belief, if given)")
    if abs(amount) > MAX_AMOUNT:
        raise ValueError(f"bet on {bet.market}: amount {amount:g} is beyond {MAX_AMOUNT:g}")
    if belief is not None and not 0.0 <= belief <= 1.0:
        raise ValueError(f"bet on {bet.market}: belief {belief:g} is not a probability in [0, 1]")
    market, side = loggable(str(bet.market)), loggable(str(bet.side))
    return BetIntent(market=market, side=side, amount=amount, belief=belief)


def _plain_key(x: object) -> bool:
    return x is None or (type(x) is str and x.isascii())


def _sell(sell: object) -> SellIntent:
    if (
        type(sell) is SellIntent
        and type(sell.percentage) is float
        and math.isfinite(sell.percentage)
        and _plain_key(sell.position_id)
        and _plain_key(sell.market)
        and _plain_key(sell.side)
    ):
        return sell  # already builtin; frozen, so the plugin cannot change it later
    if not isinstance(sell, SellIntent):
        raise TypeError(f"sells must be Sell, not {type(sell).__name__}")
    percentage = _number(sell.percentage)
    if percentage is None:
        raise TypeError(f"sell {sell!r} needs a finite percentage")
    keys = (sell.position_id, sell.market, sell.side)
    if not all(k is None or isinstance(k, str) for k in keys):
        raise TypeError(f"sell {sell!r} needs its position id, market and side as strings")
    return SellIntent(
        percentage=percentage,
        position_id=_text(sell.position_id),
        market=_text(sell.market),
        side=_text(sell.side),
    )


def _trace(trace: object, notes: list[str]) -> Trace | None:
    """The trace with every field of its declared type, texts capped; else a TypeError."""
    if trace is None:
        return None
    if not isinstance(trace, Trace):
        raise TypeError("trace must be a strategies.api.Trace")
    fields: dict[str, Any] = {}
    for name in TRACE_TEXTS:
        value = getattr(trace, name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"trace.{name} must be a string or None")
        if value is not None:
            value, cut = capped(str(value))
            if cut:
                notes.append(f"trace.{name} cut to {MAX_TEXT:,} characters")
        fields[name] = value
    for name in TRACE_COUNTS:
        value = getattr(trace, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral | type(None)):
            raise TypeError(f"trace.{name} must be a whole number")
        if value is not None and not -(2**62) < int(value) < 2**62:
            raise ValueError(f"trace.{name} is out of range")
        fields[name] = None if value is None else int(value)
    for name in TRACE_REALS:
        value = getattr(trace, name)
        if value is not None and _number(value) is None:
            raise TypeError(f"trace.{name} must be a finite number or None")
        fields[name] = None if value is None else _number(value)
    if fields["retries"] is None:
        raise TypeError("trace.retries must be a whole number")
    if not isinstance(trace.prompts, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in trace.prompts.items()
    ):
        raise TypeError("trace.prompts must map digests to texts")
    cut_texts: list[int] = []
    room, prompts = MAX_TRACE_TEXT, {}
    for digest, text in trace.prompts.items():
        kept_text = _cut(text, cut_texts)
        room -= len(digest) + len(kept_text)
        if room < 0:
            raise ValueError(f"trace.prompts: over {MAX_TRACE_TEXT:,} characters")
        prompts[digest] = kept_text
    calls = _limited(_sequence(trace.calls, "trace.calls"), MAX_CALLS, "trace.calls", notes,
                     "model calls")  # fmt: skip
    kept: list[ModelCall] = []
    dropped: list[str] = []
    for given in calls:
        call, size = _model_call(given, cut_texts, dropped)
        if size > room:
            notes.append(f"trace.calls: {len(calls) - len(kept):,} dropped past "
                         f"{MAX_TRACE_TEXT:,} characters of model text")  # fmt: skip
            break
        room -= size
        kept.append(call)
    if cut_texts:
        notes.append(f"trace.calls: {len(cut_texts):,} texts cut to {MAX_TEXT:,} characters")
    if dropped:
        notes.append(f"trace.calls: {', '.join(sorted(set(dropped)))} out of range, left out")
    fields["calls"], fields["prompts"] = tuple(kept), prompts
    return Trace(**fields)


def _cut(text: str, cut: list[int]) -> str:
    """``text`` capped at ``MAX_TEXT``, adding its full length to ``cut`` when it was."""
    kept, was_cut = capped(text)
    if was_cut:
        cut.append(len(text))
    return kept


def _sequence(items: object, what: str) -> Iterable[Any]:
    if not isinstance(items, list | tuple):
        raise TypeError(f"{what} must be a list or tuple")
    return items


CALL_COUNTS = {"attempt": 1, "reask": 0, "status": None, "tokens_in": None, "tokens_out": None}
"""A model call's whole numbers, each with what it becomes when out of range."""
CALL_REALS = ("cost", "latency_ms")


def _model_call(call: object, cut: list[int], dropped: list[str]) -> tuple[ModelCall, int]:
    """``call`` as a ModelCall whose every field has its declared type, as the log will read
    it back (msgspec does not check types when a struct is built, only when it is decoded),
    each text capped at ``MAX_TEXT``; and the characters of text it keeps. A number the log
    cannot hold (a token count of 2**80, an infinite cost) is left out, its name added to
    ``dropped``: the call is kept, not the whole trace refused."""
    if not isinstance(call, ModelCall):
        raise TypeError(f"trace.calls must be ModelCall, not {type(call).__name__}")
    try:
        fields = msgspec.to_builtins(call)
        for name, default in CALL_COUNTS.items():
            value = fields.get(name)
            if isinstance(value, int) and not -(2**62) < value < 2**62:
                fields[name] = default
                dropped.append(name)
        for name in CALL_REALS:
            value = fields.get(name)
            if isinstance(value, float) and not math.isfinite(value):
                fields[name] = None
                dropped.append(name)
        for name in CALL_TEXTS:
            if isinstance(fields.get(name), str):
                fields[name] = _cut(fields[name], cut)
        if isinstance(fields.get("messages"), list):
            fields["messages"] = [
                {k: _cut(v, cut) if isinstance(v, str) else v for k, v in m.items()}
                if isinstance(m, dict) else m
                for m in fields["messages"]
            ]  # fmt: skip
        checked_call = msgspec.convert(fields, ModelCall)
    except (msgspec.ValidationError, TypeError) as exc:
        raise TypeError(f"trace.calls: {exc}") from None
    size = sum(len(getattr(checked_call, name) or "") for name in CALL_TEXTS)
    size += sum(len(k) + len(v) for m in checked_call.messages for k, v in m.items())
    return checked_call, size


def _plain_hold(d: Decision) -> bool:
    """HOLD with nothing attached, as most decisions are: nothing in it needs checking."""
    return (
        type(d.bets) is tuple
        and type(d.sells) is tuple
        and not d.bets
        and not d.sells
        and type(d.reasoning) is str
        and len(d.reasoning) <= MAX_TEXT
        and d.reasoning.isascii()
        and d.trace is None
    )


def checked(decision: object) -> tuple[Decision, str | None]:
    """The decision in builtin, bounded types, ready for the broker and the log, and a note of
    anything cut; else a TypeError or ValueError saying why it cannot be taken.

    Strategies naturally compute with numpy, but the log's encoder takes only builtins: a
    ``numpy.float64`` amount must be converted here, not crash the run at the next flush; a
    belief of 7.5 must be refused here, not make every later report of the log fail."""
    if not isinstance(decision, Decision):
        raise TypeError(f"decide() returned {type(decision).__name__}, not a Decision")
    if type(decision) is Decision and _plain_hold(decision):
        return decision, None
    notes: list[str] = []
    sells = _limited(decision.sells, MAX_ORDERS, "sells", notes)
    bets = _limited(decision.bets, MAX_ORDERS - len(sells), "bets", notes)
    if not isinstance(decision.reasoning, str):
        raise TypeError("reasoning must be a string")
    reasoning, cut = capped(str(decision.reasoning))
    if cut:
        notes.append(f"reasoning cut to {MAX_TEXT:,} of {len(decision.reasoning):,} characters")
    trace = _trace(decision.trace, notes)
    return (
        Decision(
            bets=[_bet(b) for b in bets],
            sells=[_sell(s) for s in sells],
            reasoning=reasoning,
            trace=trace,
        ),
        "; ".join(notes) or None,
    )


def _limited(
    orders: Iterable[Any], room: int, what: str, notes: list[str], why: str = "orders"
) -> list[Any]:
    """At most ``room`` items, noting that more were given (never reading more than one past
    the limit, so an endless generator cannot hang the run)."""
    if isinstance(orders, list | tuple):
        kept = list(orders[: room + 1])
    else:
        kept = list(itertools.islice(orders, room + 1))
    if len(kept) > room:
        given = f"{len(orders):,}" if isinstance(orders, Sized) else "more"
        limit = MAX_ORDERS if why == "orders" else room
        notes.append(f"{what}: {given} given, the first {room:,} kept (at most {limit:,} "
                     f"{why} per decision)")  # fmt: skip
    return kept[:room]


# -- the view --------------------------------------------------------------------------------
