"""``scripted``: replay a list of decisions written in Forecaster Arena's response format.

The file holds a JSON list; entry *k* is the decision at the *k*-th decision instant, and the
agent holds once the list runs out. This makes a hand-written scenario (or an LLM transcript)
reproducible without a model in the loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from strategies.api import Bet, Decision, Sell, Strategy, StrategyError, View


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


class Scripted(Strategy):
    """Plays back the decisions in a JSON file, one per decision instant, then holds."""

    description = "plays back decisions from a JSON file (Forecaster Arena format)"

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
