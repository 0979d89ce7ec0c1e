"""The JSON schemas sent as ``response_format``, built from what a decision can contain.

A schema narrows what a model may write to what could be valid: one shape per action, as
``anyOf`` (a BET must carry ``bets``, a SELL ``sells``, a HOLD neither: with one shape whose
arrays were optional, SmolLM2-135M answered ``{"action": "BET", "reasoning": "YES"}`` 18 times
in 19), the market ids shown and the sides they have as enums, at most as many orders as there
are markets shown (and as the cash can pay minimum bets for, and as fit in ``max_tokens``), the
position ids held, numeric bounds on amounts and percentages, and reasoning bounded well under
``max_tokens``. Servers that constrain decoding with it (llama.cpp, vLLM, most of OpenRouter's
providers) then cannot produce prose or broken JSON, which a 135 M model otherwise does nine
times in ten. Servers do not all enforce a schema, nor its numeric bounds, so the parser still
checks every answer after.

Amounts and percentages are asked for as whole numbers: llama.cpp's grammar enforces
``minimum``/``maximum`` on integers but not on numbers (measured with SmolLM2-135M: as
``number`` it bet $49.50 and $67,546,333.30 against bounds of 50..2,500; as ``integer`` $495,
$500 and $100, all within them). Whole dollars on bets of $50 and more lose nothing a decision
needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from strategies.api import MarketsView, PositionView

REASONING_LIMIT = 1_500
"""Characters of reasoning a schema allows at most: a small model otherwise rambles to
``max_tokens``, and the answer is cut off before its bets."""

CHARACTERS_PER_TOKEN = 3
"""A low guess of the characters a token holds (English runs near 4; hex ids nearer 2.5), so
limits worked out from ``max_tokens`` err on the side of fitting."""

TOKENS_PER_ORDER = 64
"""A generous guess of the tokens one bet or sell takes: a 66-character hex market id alone
is some 30."""


def reasoning_limit(max_tokens: int | None) -> int:
    """Characters of reasoning allowed when the answer may be ``max_tokens`` long: about a
    quarter of them, and at most ``REASONING_LIMIT``, leaving the rest for the orders."""
    if max_tokens is None:
        return REASONING_LIMIT
    return max(40, min(REASONING_LIMIT, max_tokens * CHARACTERS_PER_TOKEN // 4))


def orders_limit(max_tokens: int | None) -> int:
    """Bets (or sells) that fit in what ``max_tokens`` leaves after the reasoning."""
    if max_tokens is None:
        return 1_000
    left = max_tokens - reasoning_limit(max_tokens) // CHARACTERS_PER_TOKEN - 32
    return max(1, left // TOKENS_PER_ORDER)


def decision_schema(
    markets: MarketsView,
    shown: Sequence[int],
    positions: Sequence[PositionView],
    *,
    cash: float,
    min_bet: float,
    max_bet: float,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """The schema of the ``llm`` agent's answer at one decision: one object per action that
    can be taken now, each with what that action needs (``bets`` for BET, ``sells`` for SELL,
    nothing else for HOLD) and the reasoning, as ``anyOf`` (only HOLD: that object alone)."""
    ids: list[str] = []
    sides: list[str] = []
    for i in shown:
        meta = markets.meta(markets.ids[i])
        ids.append(meta.id)
        for side in ("YES", "NO") if meta.is_binary else meta.outcomes:
            if side not in sides:
                sides.append(side)
    reasoning = {"type": "string", "minLength": 1, "maxLength": reasoning_limit(max_tokens)}
    fitting = orders_limit(max_tokens)
    choices = []
    affordable = math.floor(cash / min_bet) if min_bet > 0 else len(ids)
    lowest, highest = math.ceil(min_bet), math.floor(max_bet)
    if ids and highest >= lowest and affordable >= 1:
        bets = {
            "type": "array",
            "minItems": 1,
            "maxItems": min(len(ids), affordable, fitting),
            "items": {
                "type": "object",
                "properties": {
                    "market_id": {"type": "string", "enum": ids},
                    "side": {"type": "string", "enum": sides},
                    "amount": {"type": "integer", "minimum": lowest, "maximum": highest},
                },
                "required": ["market_id", "side", "amount"],
                "additionalProperties": False,
            },
        }
        choices.append(_answer("BET", reasoning, bets=bets))
    if positions:
        sells = {
            "type": "array",
            "minItems": 1,
            "maxItems": min(len(positions), fitting),
            "items": {
                "type": "object",
                "properties": {
                    "position_id": {"type": "string", "enum": [p.id for p in positions]},
                    "percentage": {"type": "integer", "minimum": 1, "maximum": 100},
                },
                "required": ["position_id", "percentage"],
                "additionalProperties": False,
            },
        }
        choices.append(_answer("SELL", reasoning, sells=sells))
    choices.append(_answer("HOLD", reasoning))
    if len(choices) == 1:
        return choices[0]
    return {"type": "object", "anyOf": choices}


def _answer(action: str, reasoning: dict[str, Any], **orders: dict[str, Any]) -> dict[str, Any]:
    """The answer taking ``action``: the action, its ``orders`` (required), the reasoning; the
    order of the keys is the order a model is asked to write them in."""
    properties = {"action": {"type": "string", "enum": [action]}, **orders, "reasoning": reasoning}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


FORECAST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"p_yes": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["p_yes"],
    "additionalProperties": False,
}
"""The ``llm`` forecaster's answer: ``{"p_yes": <number in [0, 1]>}``."""
