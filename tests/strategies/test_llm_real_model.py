"""The ``llm`` agent and the ``llm`` forecaster against a real model, end to end.

SmolLM2-135M on llama.cpp (``arena llm serve``, pinned builds) answers a cohort of the hand
tape (three markets, decisions at 0, +7d and +14d) for both agents, recorded to a cassette
through ``arena replay`` as a user would run it. Then the server is stopped, and the cohort
replays offline from the cassette and from the log itself. What the model says is not asserted
(a 135M model's trading is no one's benchmark); what arena does with every answer is: each
went out with its JSON schema, came back through the parser (used, or rejected with the reason)
and the rules (each order filled or rejected), and is in the log whole; the report's token
totals are the server's own counters; a second live run against the same server, its prompt
cache warm, gets the same answers and closes on the same state; and every replay is the same
log byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.events import (
    CohortClosed,
    DecisionMade,
    ModelCalled,
    OrderFilled,
    OrderPlaced,
    OrderRejected,
)
from ledger.store import EventStore
from replays.tapefile import save_tape
from tests.conftest import Arena, make_hand_tape
from tests.llama_server import LlamaServer

MODEL = "smollm2-135m"
MARKETS = ["a", "b", "tie-w"]
QUESTIONS = [["a", "b", "tie-w"], ["a", "b"], ["b"]]
"""What the forecaster asks at each decision: every open market of the universe. tie-w
resolves at +7d and a at +14d, before the decisions at those instants."""


def replay_args(tape: Path, db: Path) -> list[str]:
    return [
        "--tape", str(tape), "--start", "2024-01-07", "--universe", "3", "--marks", "weekly",
        "--jobs", "1", "--db", str(db), "--json",
        "--agent", f"trader=llm:{MODEL}?markets=3&max_tokens=256",
        "--agent", f"edge=sign?forecaster=llm:{MODEL}",
    ]  # fmt: skip


def run(arena: Arena, tape: Path, db: Path) -> dict[str, object]:
    result = arena("replay", *replay_args(tape, db))
    assert result.exit_code == 0, result.output
    out: dict[str, object] = json.loads(result.stdout)
    return out


def answers_and_state(db: Path) -> tuple[list[str | None], list[str]]:
    """Every answer the model gave, in order, and each cohort's closing state digest."""
    with EventStore.open(db) as store:
        events = list(store.read())
    answers = [e.call.answer for e in events if isinstance(e, ModelCalled)]
    return answers, [e.state_digest for e in events if isinstance(e, CohortClosed)]


@pytest.mark.slow  # three minutes of a 135M model answering on one thread
def test_a_cohort_against_the_real_model_is_logged_whole_and_replays_offline(
    arena: Arena, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = tmp_path / "hand.tape"
    save_tape(make_hand_tape(), tape)
    cassette = tmp_path / "answers.jsonl"
    monkeypatch.setenv("ARENA_LLM_CONCURRENCY", "1")
    monkeypatch.setenv("ARENA_LLM_MODE", "record")
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(cassette))
    with LlamaServer() as server:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", server.base_url)
        before = server.tokens()
        recorded = run(arena, tape, tmp_path / "recorded.db")
        after = server.tokens()
        # live again, the server's prompt cache warm with the same prompts: the same answers
        # (every request says cache_prompt false), so the same cohort (the log's digest also
        # covers each call's latency, which no two live runs share)
        monkeypatch.setenv("ARENA_LLM_MODE", "live")
        run(arena, tape, tmp_path / "again.db")
        monkeypatch.setenv("ARENA_LLM_MODE", "replay")
    assert server.returncode == 0  # stopped, cleanly: nothing below can reach it
    assert answers_and_state(tmp_path / "again.db") == answers_and_state(tmp_path / "recorded.db")

    with EventStore.open(tmp_path / "recorded.db") as store:
        events = list(store.read())
    made = {(e.agent, e.week): e for e in events if isinstance(e, DecisionMade)}
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert sorted(made) == [(a, w) for a in ("edge", "trader") for w in (1, 2, 3)]

    # every call went out with its schema and was answered; the forecaster's, one per open
    # market, in market order; the trader's, one per decision and one per re-ask
    assert calls and all(c.call.structured and c.call.status == 200 for c in calls)
    assert all(c.call.tokens_in and c.call.tokens_out for c in calls)
    edge = [[c.call.question for c in calls if (c.agent, c.week) == ("edge", w)] for w in (1, 2, 3)]
    assert edge == QUESTIONS
    for week in (1, 2, 3):
        asked = [c.call for c in calls if (c.agent, c.week) == ("trader", week)]
        assert [(q.question, q.reask) for q in asked] == [
            ("decision", k) for k in range(len(asked))
        ]
        assert len(asked) <= 2  # max_retries=1
        # every answer the schema shaped is JSON, unless the token budget cut it off
        for q in asked:
            assert q.answer is not None and q.finish_reason in ("stop", "length")
            if q.finish_reason == "stop":
                json.loads(q.answer)
        # the parser either used the last answer, or said why not and the decision held
        decision, last = made["trader", week], asked[-1]
        if last.rejected is None and last.error is None:
            assert not decision.reasoning.startswith("[SYSTEM DEFAULT]")
        else:
            assert decision.action == "HOLD" and decision.error
        assert all(q.rejected for q in asked[:-1])  # a re-ask follows only a rejection

    # every order was decided by the rules: filled, or rejected with its reason
    placed = sorted(e.order_id for e in events if isinstance(e, OrderPlaced))
    decided = sorted(e.order_id for e in events if isinstance(e, OrderFilled | OrderRejected))
    assert placed == decided
    assert all(e.reason for e in events if isinstance(e, OrderRejected))

    # the report's token totals are the server's own count of what it processed
    result = arena("report", tmp_path / "recorded.db", "--json")
    assert result.exit_code == 0, result.output
    total = json.loads(result.stdout)["model_usage_total"]
    assert (total["tokens_in"], total["tokens_out"]) == (after[0] - before[0], after[1] - before[1])
    assert total["calls"] == len(calls) == len(cassette.read_text().splitlines())
    assert total["cost"] is None  # a local server reports none, and none is made up

    # offline, the server gone: from the cassette, and from the recorded log itself
    assert run(arena, tape, tmp_path / "replayed.db")["digest"] == recorded["digest"]
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(tmp_path / "recorded.db"))
    assert run(arena, tape, tmp_path / "from_log.db")["digest"] == recorded["digest"]
