"""The JSON schemas sent as ``response_format``, built from what a decision can contain.

A schema narrows what a model may write to what could be valid: the action enum, the market ids
shown and the sides they have as enums, at most as many bets as there are markets shown (and as
the cash can pay minimum bets for), position ids of the positions held, numeric bounds on
amounts and percentages. Servers that constrain decoding with it (llama.cpp, vLLM, most of
OpenRouter's providers) then cannot produce prose or broken JSON, which a 135 M model otherwise
does nine times in ten. Servers do not all enforce numeric bounds, so the parser still checks
every amount after.

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
"""Characters of reasoning a schema allows: a small model otherwise rambles to ``max_tokens``."""


def decision_schema(
    markets: MarketsView,
    shown: Sequence[int],
    positions: Sequence[PositionView],
    *,
    cash: float,
    min_bet: float,
    max_bet: float,
) -> dict[str, Any]:
    """The schema of the ``llm`` agent's answer at one decision."""
    ids: list[str] = []
    sides: list[str] = []
    for i in shown:
        meta = markets.meta(markets.ids[i])
        ids.append(meta.id)
        for side in ("YES", "NO") if meta.is_binary else meta.outcomes:
            if side not in sides:
                sides.append(side)
    actions = ["HOLD"]
    properties: dict[str, Any] = {"action": {"type": "string", "enum": actions}}
    affordable = math.floor(cash / min_bet) if min_bet > 0 else len(ids)
    lowest, highest = math.ceil(min_bet), math.floor(max_bet)
    if ids and highest >= lowest and affordable >= 1:
        actions.insert(0, "BET")
        properties["bets"] = {
            "type": "array",
            "minItems": 1,
            "maxItems": min(len(ids), affordable),
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
    if positions:
        actions.insert(-1, "SELL")
        properties["sells"] = {
            "type": "array",
            "minItems": 1,
            "maxItems": len(positions),
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
    properties["reasoning"] = {"type": "string", "minLength": 1, "maxLength": REASONING_LIMIT}
    return {
        "type": "object",
        "properties": properties,
        "required": ["action", "reasoning"],
        "additionalProperties": False,
    }


FORECAST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"p_yes": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["p_yes"],
    "additionalProperties": False,
}
"""The ``llm`` forecaster's answer: ``{"p_yes": <number in [0, 1]>}``."""
