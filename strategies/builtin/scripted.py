"""``scripted``: replay a list of decisions written in Forecaster Arena's response format.

The file holds a JSON list; entry *k* is the decision at the *k*-th decision instant, and the
agent holds once the list runs out. This makes a hand-written scenario (or an LLM transcript)
reproducible without a model in the loop.

Each decision goes through the LLM agent's parser first (``strategies.llm.parse``, Forecaster
Arena's rules): one invalid bet or sell rejects the whole decision, which is then a HOLD with the
parser's reason as its error, exactly as a model's answer would be (no retry: a script cannot
answer again). Without it, a scenario with one bet under the minimum still filled the others
(an extra $1,000 the original never places). A script may leave ``reasoning`` out, and sell by
``market_id`` and ``side`` where the original needs a ``position_id``: the parser is given a
stand-in for each, and the decision keeps what the script wrote. ``checked=false`` hands every
order to the broker as written, for scenarios about the broker's own rejections.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pydantic

from strategies.api import Bet, Decision, Sell, Strategy, StrategyError, View
from strategies.llm.parse import ResponseError, parse_response


class _BetEntry(msgspec.Struct, forbid_unknown_fields=False):
    market_id: str
    side: str
    amount: float
    probability: float | None = None


class _SellEntry(msgspec.Struct, forbid_unknown_fields=False):
    percentage: float
    position_id: str | None = None
    market_id: str | None = None
    side: str | None = None


class _Entry(msgspec.Struct, forbid_unknown_fields=False):
    action: str
    bets: list[_BetEntry] = []
    sells: list[_SellEntry] = []
    reasoning: str = ""


def read_script(path: str | Path) -> list[Any]:
    """The decisions of a script file; a missing or malformed file is a one-line error."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise StrategyError(f"scripted: cannot read {path}: {exc.strerror}") from None
    try:
        entries = msgspec.json.decode(raw, type=list[_Entry])
    except msgspec.ValidationError as exc:
        raise StrategyError(f"scripted: {path}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise StrategyError(f"scripted: {path} is not valid JSON: {exc}") from None
    for k, entry in enumerate(entries, 1):
        if entry.action.upper() not in ("BET", "SELL", "HOLD"):
            raise StrategyError(f"scripted: {path}: decision {k}: unknown action {entry.action!r}")
    return entries


class ScriptedSettings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    checked: bool = pydantic.Field(
        default=True,
        description="check each decision with the llm agent's parser (Forecaster Arena's "
        "rules: one bad bet rejects the decision); false: the broker alone judges each order",
    )


def check_entry(entry: _Entry, view: View) -> None:
    """Raise ResponseError when Forecaster Arena's parser would reject ``entry``'s decision
    at ``view``'s cash; the stand-ins are for what a hand-written script may leave out."""
    answer = {
        "action": entry.action,
        "reasoning": entry.reasoning or "scripted",
        "bets": [
            {"market_id": b.market_id, "side": b.side, "amount": b.amount} for b in entry.bets
        ],
        "sells": [
            {"position_id": s.position_id or f"{s.market_id}:{s.side}", "percentage": s.percentage}
            for s in entry.sells
        ],
    }
    parse_response(
        msgspec.json.encode(answer).decode(),
        cash=view.cash,
        min_bet=view.min_bet,
        max_fraction=view.max_fraction,
    )


class Scripted(Strategy):
    """Plays back the decisions in a JSON file, one per decision instant, then holds."""

    description = "plays back decisions from a JSON file (Forecaster Arena format)"
    Settings = ScriptedSettings
    settings: ScriptedSettings

    def __init__(self, path: str = "", **values: Any) -> None:
        super().__init__(**values)
        if not path:
            raise StrategyError("scripted needs a file: NAME=scripted:decisions.json")
        self._entries = read_script(path)
        self._next = 0

    def decide(self, view: View) -> Decision:
        if self._next >= len(self._entries):
            return Decision.hold("script finished")
        entry = self._entries[self._next]
        self._next += 1
        if self.settings.checked:
            try:
                check_entry(entry, view)
            except ResponseError as exc:
                raise StrategyError(
                    f"scripted: decision {self._next} rejected, as Forecaster Arena's parser "
                    f"rejects a whole answer: {exc}"
                ) from None
        action = entry.action.upper()
        bets = (
            [
                Bet(market=b.market_id, side=b.side, amount=b.amount, belief=b.probability)
                for b in entry.bets
            ]
            if action == "BET"
            else []
        )
        sells = (
            [
                Sell(
                    percentage=s.percentage,
                    position_id=s.position_id,
                    market=s.market_id,
                    side=s.side,
                )
                for s in entry.sells
            ]
            if action == "SELL"
            else []
        )
        return Decision(bets=bets, sells=sells, reasoning=entry.reasoning)
