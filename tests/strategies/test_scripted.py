"""``scripted:`` decisions pass Forecaster Arena's parser, as the llm agent's answers do."""

from __future__ import annotations

import json
from pathlib import Path

from arena.run.runner import CohortRunner
from ledger.events import AnyEvent, DecisionMade, OrderFilled, OrderRejected
from ledger.store import EventStore
from replays.tape import Tape
from tests.conftest import hand_config

BET_AND_TOO_SMALL = {
    "action": "BET",
    "reasoning": "a looks cheap",
    "bets": [
        {"market_id": "a", "side": "YES", "amount": 1000, "probability": 0.7},
        {"market_id": "b", "side": "YES", "amount": 40},
    ],
}


def _replay(
    tmp_path: Path, tape: Tape, script: list[object], spec_tail: str = ""
) -> list[AnyEvent]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    config = hand_config({"s": f"scripted:{path}{spec_tail}"})
    with EventStore.open(tmp_path / "run.db") as store:
        run = CohortRunner(tape, config).run(store)
        return list(store.read(stream=run.cohort))


def test_one_bad_bet_rejects_the_whole_decision(tmp_path: Path, hand_tape: Tape) -> None:
    """Cash 10,000: the $40 bet is under the $50 minimum, so the original's parser refuses the
    answer and the $1,000 bet beside it is never placed (it used to fill)."""
    events = _replay(tmp_path, hand_tape, [BET_AND_TOO_SMALL])
    assert [e for e in events if isinstance(e, OrderFilled | OrderRejected)] == []
    first = next(e for e in events if isinstance(e, DecisionMade) and e.agent == "s")
    assert first.action == "HOLD" and first.bets == []
    assert first.error is not None
    assert "scripted: decision 1 rejected" in first.error
    assert "bet 2: amount $40.00 is below the minimum bet $50.00" in first.error


def test_a_bet_over_a_quarter_of_cash_is_refused_by_the_parser(
    tmp_path: Path, hand_tape: Tape
) -> None:
    over = {"action": "BET", "bets": [{"market_id": "a", "side": "YES", "amount": 2500.01}]}
    events = _replay(tmp_path, hand_tape, [over])
    first = next(e for e in events if isinstance(e, DecisionMade) and e.agent == "s")
    assert first.error is not None
    assert "above the maximum bet $2500.00 (25% of cash)" in first.error


def test_valid_decisions_keep_what_the_script_wrote(tmp_path: Path, hand_tape: Tape) -> None:
    """No reasoning and a sell by market and side: the parser sees stand-ins, the decision
    is the script's."""
    script = [
        {"action": "BET", "bets": [{"market_id": "a", "side": "YES", "amount": 1000}]},
        {"action": "SELL", "sells": [{"market_id": "a", "side": "YES", "percentage": 50}]},
    ]
    events = _replay(tmp_path, hand_tape, script)
    fills = [e for e in events if isinstance(e, OrderFilled)]
    # $1,000 of a YES at 0.5 is 2,000 shares; half of them sold a week later at 0.75
    assert [(f.price, f.shares, f.amount) for f in fills] == [
        (0.5, 2_000.0, 1_000.0),
        (0.75, 1_000.0, 750.0),
    ]
    decisions = [e for e in events if isinstance(e, DecisionMade) and e.agent == "s"]
    assert [d.error for d in decisions] == [None] * len(decisions)
    assert decisions[0].reasoning == ""


def test_unchecked_hands_every_order_to_the_broker(tmp_path: Path, hand_tape: Tape) -> None:
    events = _replay(tmp_path, hand_tape, [BET_AND_TOO_SMALL], "?checked=false")
    [fill] = [e for e in events if isinstance(e, OrderFilled)]
    [rejected] = [e for e in events if isinstance(e, OrderRejected)]
    assert fill.amount == 1_000.0
    assert rejected.reason == "bet $40.00 is below the $50.00 minimum"
