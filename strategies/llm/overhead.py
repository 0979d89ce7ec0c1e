"""What the ``llm`` agent and forecaster cost per call themselves, the model left out.

``measure_overhead`` runs the real agent and forecaster on a synthetic view of ``markets``
binary markets (with ``positions`` open) against an ``InstantModel``, a completer that answers
at once from memory with a valid answer and usage: what remains is arena's own work per call
(prompt, schema, request record, parsing, trace). ``arena bench llm`` subtracts nothing else: a
real server's time is the rest of a decision.

The issue's target is under 5 ms a decision with 500 markets shown.
"""

from __future__ import annotations

import json
import time
from typing import Any

import msgspec
import numpy as np

from ledger.rules import RULES
from strategies.api import MarketMeta, MarketsView, PositionView, View
from strategies.llm.agent import LLMAgent
from strategies.llm.client import Answer, Request, blank_call
from strategies.llm.forecast import LLMForecaster

START = 1_725_148_800  # 2024-09-01 00:00 UTC
MODEL = "overhead/instant"


class InstantModel:
    """A completer answering every request at once: ``answer`` for the agent, a fixed p_yes
    for the forecaster, with usage and latency filled as a server would."""

    model = MODEL

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def ask(self, request: Request) -> Answer:
        text = self.answer if request.question == "decision" else '{"p_yes": 0.42}'
        call = msgspec.structs.replace(
            blank_call(self.model, request), status=200, answer=text, finish_reason="stop",
            tokens_in=1000, tokens_out=40, latency_ms=0.0, structured=request.schema is not None,
        )  # fmt: skip
        return Answer((call,))

    def abort(self) -> None:
        """Nothing is in flight."""


def synthetic_view(markets: int, positions: int = 0) -> View:
    """A decision instant with ``markets`` open binary markets of distinct volumes and
    ``positions`` positions held on the first of them."""
    ids = tuple(f"0x{i:064x}" for i in range(markets))
    meta = tuple(
        MarketMeta(mid, f"Will event {i} happen by the end of the year?", ("Yes", "No"),
                   "Politics", 1e6 - i, START + 90 * 86_400, True)
        for i, mid in enumerate(ids)
    )  # fmt: skip
    yes = np.linspace(0.05, 0.95, markets)
    view_markets = MarketsView(
        ts=START, ids=ids, index={m: i for i, m in enumerate(ids)}, meta=meta, yes=yes,
        open_mask=np.ones(markets, dtype=bool), volume=np.array([m.volume for m in meta]),
        binary=np.ones(markets, dtype=bool), prices=lambda i: (yes[i], 1 - yes[i]),
        history=lambda i, t, since: (np.array([], dtype=np.int64), np.array([])),
    )  # fmt: skip
    held = tuple(
        PositionView(id=f"p{k}", market=ids[k], side="YES", shares=100.0, cost=40.0,
                     price=float(yes[k]))
        for k in range(min(positions, markets))
    )  # fmt: skip
    return View(
        ts=START, week=1, cash=9_000.0, rules=RULES["v1"], markets=view_markets,
        shares=np.zeros((markets, 2)), _positions=lambda: held,
    )  # fmt: skip


def measure_overhead(markets: int = 500, repeats: int = 20, positions: int = 5) -> dict[str, Any]:
    """Milliseconds of arena's own work: per ``llm`` decision (best and median of ``repeats``)
    and per ``llm`` forecaster question, on ``markets`` markets."""
    view = synthetic_view(markets, positions)
    bet = {"market_id": view.markets.ids[0], "side": "YES", "amount": 100.0}
    answer = json.dumps({"action": "BET", "bets": [bet], "reasoning": "a fair edge"})
    agent = LLMAgent(MODEL, completer=InstantModel(answer))
    decisions = []
    for _ in range(repeats):
        started = time.perf_counter()
        decision = agent.decide(view)
        decisions.append((time.perf_counter() - started) * 1000)
    assert decision.bets, "the instant model's answer must parse"
    forecaster = LLMForecaster(MODEL, InstantModel(answer), concurrency=1)
    started = time.perf_counter()
    forecaster.forecast(view)
    forecaster.trace()
    per_question = (time.perf_counter() - started) * 1000 / markets
    return {
        "markets": markets,
        "decision_ms_best": min(decisions),
        "decision_ms_median": float(np.median(decisions)),
        "forecast_question_ms": per_question,
    }
