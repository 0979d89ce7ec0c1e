"""Reading a model's answer: clean it, find the JSON, and check it against the betting rules.

The steps and the error cases follow Forecaster Arena's parser (methodology §1.6), HEAD flavour for
the extraction: the first *balanced* object that mentions ``"action"``, counted with strings
and escapes respected, so a ``}`` inside the reasoning does not cut the object short. Every
problem is reported as one readable sentence, because it goes back to the model in the retry
prompt and into the log.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from strategies.api import Bet, Sell

ACTIONS = ("BET", "SELL", "HOLD")

_OPEN_FENCE = re.compile(r"\A```[ \t]*(?:json)?[ \t]*\n?", re.IGNORECASE)
_CLOSE_FENCE = re.compile(r"\n?[ \t]*```\s*\Z")


class ResponseError(ValueError):
    """The answer cannot be used; the message says why, in words the model can act on."""


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """A valid answer, already in the broker's vocabulary."""

    action: str
    reasoning: str
    bets: tuple[Bet, ...] = ()
    sells: tuple[Sell, ...] = ()


def clean(text: str) -> str:
    """The JSON text inside a model's answer: trimmed, unfenced, unquoted, extracted."""
    text = text.strip()
    if text.startswith("```"):
        text = _CLOSE_FENCE.sub("", _OPEN_FENCE.sub("", text, count=1), count=1).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    if not text.startswith("{"):
        found = extract_object(text)
        if found is not None:
            text = found
    return text


EXTRACTION_STEPS = 200_000
"""Braces, quotes and backslashes the extraction looks at in all before it gives up: trying
every ``{`` of a 100,000-character answer of unbalanced braces as a start would otherwise take
billions of steps."""

_MARKS = re.compile(r'[{}"\\]')


def extract_object(text: str) -> str | None:
    """The first balanced ``{...}`` in ``text`` that contains ``"action"``, or None.

    Each ``{`` is tried as a start; a balanced candidate without ``"action"`` cannot contain
    one either, so the scan skips past it rather than retrying every brace inside it. Past
    ``EXTRACTION_STEPS`` marks looked at in all, there is none.
    """
    budget = [EXTRACTION_STEPS]
    start = text.find("{")
    while start != -1 and budget[0] > 0:
        end = _balanced_end(text, start, budget)
        if end is None:
            start = text.find("{", start + 1)
            continue
        candidate = text[start : end + 1]
        if '"action"' in candidate:
            return candidate
        start = text.find("{", end + 1)
    return None


def _balanced_end(text: str, start: int, budget: list[int]) -> int | None:
    """The index of the ``}`` closing the ``{`` at ``start``, ignoring braces in strings (and
    what a backslash escapes in them); None if there is none or ``budget`` runs out. Only the
    marks that matter are visited, so a long answer costs its braces and quotes, not its
    length."""
    depth = 0
    in_string = False
    escaped = -1  # the index of the character a backslash escapes
    for match in _MARKS.finditer(text, start):
        i = match.start()
        if i == escaped:
            continue
        budget[0] -= 1
        if budget[0] < 0:
            return None
        ch = text[i]
        if in_string:
            if ch == "\\":
                escaped = i + 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def parse_response(
    text: str, *, cash: float, min_bet: float = 50.0, max_fraction: float = 0.25
) -> ParsedResponse:
    """The decision in ``text``, checked against the cash at the start of the decision.

    Raises ResponseError with the first problem found; one bad bet or sell invalidates the
    whole answer, as in the original, so the model is asked again rather than half-obeyed.
    """
    cleaned = clean(text)
    if not cleaned:
        raise ResponseError("the response is empty")
    try:
        data = json.loads(cleaned)
    except json.JSONDecodeError as exc:
        raise ResponseError(f"the response is not valid JSON ({exc})") from None
    except ValueError:  # an integer of thousands of digits
        raise ResponseError("the response holds a number too long to read") from None
    except RecursionError:
        raise ResponseError("the response is nested too deeply to read") from None
    if not isinstance(data, dict):
        raise ResponseError("the response must be a JSON object")
    action = data.get("action")
    if not isinstance(action, str) or not action.strip():
        raise ResponseError('the "action" field is missing')
    action = action.strip().upper()
    if action not in ACTIONS:
        raise ResponseError(f'"action" must be BET, SELL or HOLD, not {_shown(data["action"])}')
    reasoning = data.get("reasoning")
    if not isinstance(reasoning, str) or not reasoning.strip():
        raise ResponseError('"reasoning" must be a non-empty string')
    if action == "BET":
        max_bet = max_fraction * cash
        bets = tuple(
            _bet(k, entry, min_bet, max_bet, max_fraction)
            for k, entry in enumerate(_entries(data, "bets"), 1)
        )
        return ParsedResponse(action, reasoning, bets=bets)
    if action == "SELL":
        sells = tuple(_sell(k, entry) for k, entry in enumerate(_entries(data, "sells"), 1))
        return ParsedResponse(action, reasoning, sells=sells)
    return ParsedResponse(action, reasoning)


def _entries(data: dict[str, Any], key: str) -> list[Any]:
    entries = data.get(key)
    if not isinstance(entries, list) or not entries:
        raise ResponseError(f'{data["action"].upper()} needs a non-empty "{key}" array')
    return entries


def _number(x: Any) -> float | None:
    """A JSON number as a float; a numeric string, a boolean or NaN is not one. An integer
    too large for a float is infinite, which every bound refuses."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    try:
        value = float(x)
    except OverflowError:
        value = math.inf if x > 0 else -math.inf
    return None if math.isnan(value) else value


def _shown(x: Any) -> str:
    """A value as the model wrote it, short enough for a message that goes back to it."""
    text = repr(x)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text):,} characters)"


def _identifier(x: Any) -> str | None:
    """An id as text: models sometimes write a numeric id without quotes, which is still it."""
    if isinstance(x, bool) or not isinstance(x, str | int):
        return None
    text = str(x).strip()
    return text or None


def _bet(k: int, entry: Any, min_bet: float, max_bet: float, max_fraction: float) -> Bet:
    if not isinstance(entry, dict):
        raise ResponseError(f"bet {k} must be a JSON object")
    market = _identifier(entry.get("market_id"))
    if market is None:
        raise ResponseError(f'bet {k} needs a "market_id"')
    side = entry.get("side")
    if not isinstance(side, str) or not side.strip():
        raise ResponseError(f'bet {k} needs a "side"')
    amount = _number(entry.get("amount"))
    if amount is None:
        raise ResponseError(
            f'bet {k}: "amount" must be a JSON number, not {_shown(entry.get("amount"))}'
        )
    if amount < min_bet:
        raise ResponseError(
            f"bet {k}: amount ${amount:.2f} is below the minimum bet ${min_bet:.2f}"
        )
    if amount > max_bet:
        raise ResponseError(
            f"bet {k}: amount ${amount:.2f} is above the maximum bet ${max_bet:.2f} "
            f"({max_fraction * 100:g}% of cash)"
        )
    return Bet(market=market, side=side.strip(), amount=amount)


def _sell(k: int, entry: Any) -> Sell:
    if not isinstance(entry, dict):
        raise ResponseError(f"sell {k} must be a JSON object")
    position = _identifier(entry.get("position_id"))
    if position is None:
        raise ResponseError(f'sell {k} needs a "position_id"')
    percentage = _number(entry.get("percentage"))
    if percentage is None or not 1 <= percentage <= 100:
        raise ResponseError(
            f'sell {k}: "percentage" must be a number from 1 to 100, '
            f"not {_shown(entry.get('percentage'))}"
        )
    return Sell(percentage=percentage, position_id=position)
