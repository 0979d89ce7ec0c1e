"""The ``llm`` agent: its prompt, its parser, its retries and fallbacks, and its cassettes.

Every HTTP exchange goes to the fake server of ``llm_server.py`` on 127.0.0.1, started and
stopped by the test. The prompt numbers are worked out by hand next to each expectation.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from freezegun import freeze_time
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from ledger.events import DecisionMade
from ledger.rules import RULES
from ledger.store import EventStore
from replays.samples import sample_path
from replays.tapefile import load_tape
from strategies.api import Bet, MarketMeta, MarketsView, PositionView, Sell, StrategyError, View
from strategies.llm.agent import LLMAgent, LLMSettings
from strategies.llm.cassette import CassetteMiss, Player
from strategies.llm.connection import Connection
from strategies.llm.overhead import measure_overhead
from strategies.llm.parse import ResponseError, clean, extract_object, parse_response
from strategies.llm.prompt import fixed, locale_number, retry_prompt, user_prompt
from strategies.llm.schema import decision_schema
from strategies.loader import build_strategy
from tests.conftest import START, WEEK, hand_config, make_hand_tape
from tests.llm_server import HOLD, FakeLLM, Received, Reply

KEY_ENV = "ARENA_TEST_LLM_KEY"
KEY = "sk-test-SECRET-0123456789abcdef"
MODEL = "test/model"


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A known key, and no connection settings leaking in from the shell running the tests."""
    monkeypatch.setenv(KEY_ENV, KEY)
    for name in Connection.model_fields:
        monkeypatch.delenv(f"ARENA_LLM_{name.upper()}", raising=False)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    """The fake server, and the environment pointing the agents at it."""
    with FakeLLM() as fake:
        connect(monkeypatch, fake)
        yield fake


def connect(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> None:
    monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
    monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", KEY_ENV)
    monkeypatch.setenv("ARENA_LLM_RETRIES", "0")


def agent(server: FakeLLM, *, retries: int = 0, timeout: float = 300, **values: Any) -> LLMAgent:
    connection = Connection(
        base_url=server.url, api_key_env=KEY_ENV, retries=retries, backoff=0, timeout=timeout
    )
    return LLMAgent(MODEL, connection=connection, settings=LLMSettings(**values))


def spec(server: FakeLLM, extra: str = "") -> str:
    """The agent spec: the model and what shapes its answers; the server comes from the
    environment (see ``connect``)."""
    return f"llm:{MODEL}{'?' + extra.lstrip('&') if extra else ''}"


# -- a hand-built view ---------------------------------------------------------------------------

SEP8 = 1_725_753_600  # Sunday 2024-09-08 00:00 UTC
OCT1_NOON = 1_727_784_000  # 2024-10-01 12:00 UTC: "Closes" keeps the date only
NOV5 = 1_730_764_800  # 2024-11-05 00:00 UTC

META = (
    MarketMeta("m-closed", "Old?", ("Yes", "No"), "Politics", 9e9, SEP8 - 1, True),
    MarketMeta("m-thin", "Thin?", ("Yes", "No"), "", 0.0, None, True),
    MarketMeta("m-bin", "Will it rain?", ("Yes", "No"), "Weather", 1_234_567.891, OCT1_NOON, True),
    MarketMeta("m-multi", "Who wins?", ("Trump", "Harris", "Other"), None, 2.5e6, NOV5, False),
)
QUOTES: tuple[tuple[float, ...], ...] = (
    (0.9, 0.1),
    (0.3, 0.7),
    (0.1234, 0.8766),
    (0.55, 0.4, 0.05),
)


def hand_view(positions: tuple[PositionView, ...] = (), cash: float = 9850.5) -> View:
    ids = tuple(m.id for m in META)
    markets = MarketsView(
        ts=SEP8,
        ids=ids,
        index={mid: i for i, mid in enumerate(ids)},
        meta=META,
        yes=np.array([q[0] for q in QUOTES]),
        open_mask=np.array([False, True, True, True]),
        volume=np.array([m.volume for m in META]),
        binary=np.array([m.is_binary for m in META]),
        prices=lambda i: QUOTES[i],
        history=lambda i, t, since: (np.array([], dtype=np.int64), np.array([])),
    )
    return View(
        ts=SEP8,
        week=2,
        cash=cash,
        rules=RULES["v1"],
        markets=markets,
        shares=np.zeros((4, 3)),
        _positions=lambda: positions,
    )


# Listed in opening order, as the runner does: the NO position first, Harris later.
POSITIONS = (
    PositionView(id="p1", market="m-bin", side="NO", shares=200.0, cost=150.0, price=0.8766),
    PositionView(id="p2", market="m-multi", side="Harris", shares=100.0, cost=30.0, price=0.4),
)

# cash 9850.50; max bet 0.25 × 9850.5 = 2462.625, a tie that JS toFixed rounds up to 2462.63.
# p1 (NO at 1 − 0.1234 = 0.8766): value 200 × 0.8766 = 175.32, entry 150/200 = 75.0%, P/L 25.32.
# p2 (Harris at 0.4): value 100 × 0.4 = 40.00, entry 30/100 = 30.0%, P/L 10.00.
# positions 215.32; total 9850.50 + 215.32 = 10065.82; P/L 65.82 = +0.6582% -> +0.66%.
# Markets: m-closed is not tradeable; the rest by volume: m-multi 2.5M, m-bin 1.23M, m-thin 0.
EXPECTED_PROMPT = """\
CURRENT DATE: 2024-09-08
DECISION WEEK: 2

YOUR PORTFOLIO:
- Cash Balance: $9850.50
- Maximum Bet Size: $2462.63 (25% of cash)
- Positions Value: $215.32
- Total Portfolio: $10065.82
- P/L: $65.82 (+0.66%)

YOUR CURRENT POSITIONS:
- ID: p2
  Market: "Who wins?"
  Side: Harris | Shares: 100.00
  Entry: 30.0% | Current: 40.0%
  Value: $40.00 | P/L: $10.00

- ID: p1
  Market: "Will it rain?"
  Side: NO | Shares: 200.00
  Entry: 75.0% | Current: 87.7%
  Value: $175.32 | P/L: $25.32

AVAILABLE MARKETS (Top 3 by volume):
- ID: m-multi
  Question: "Who wins?"
  Category: General
  Type: Multi-outcome
  Outcomes: ["Trump","Harris","Other"]
  Prices: {"Trump":0.55,"Harris":0.4,"Other":0.05}
  Volume: $2,500,000
  Closes: 2024-11-05

- ID: m-bin
  Question: "Will it rain?"
  Category: Weather
  Type: Binary (YES/NO)
  Prices: 12.3% YES / 87.7% NO
  Volume: $1,234,567.891
  Closes: 2024-10-01

- ID: m-thin
  Question: "Thin?"
  Category: General
  Type: Binary (YES/NO)
  Prices: 30.0% YES / 70.0% NO
  Volume: $N/A
  Closes: N/A

What is your decision? Respond with valid JSON only."""


def test_user_prompt_of_a_hand_built_view_is_exact() -> None:
    assert user_prompt(hand_view(POSITIONS)) == EXPECTED_PROMPT


def test_prompt_without_positions_and_with_a_market_limit() -> None:
    text = user_prompt(hand_view(), markets=2)
    # no positions: total = cash 9850.50, P/L 9850.50 − 10000 = −149.50, and −149.5 / 10000 × 100
    # is −1.4949999… in binary, which JS toFixed(2) prints as −1.49 (so does ours)
    assert "- Positions Value: $0.00\n- Total Portfolio: $9850.50\n" in text
    assert "- P/L: $-149.50 (-1.49%)\n\nYOUR CURRENT POSITIONS: None\n\nAVAILABLE MARKETS" in text
    assert "(Top 2 by volume)" in text and "m-thin" not in text


def test_javascript_number_formatting() -> None:
    # ties round away from zero as JS toFixed does; Python's format would give 2462.62 / -0.12
    assert fixed(2462.625, 2) == "2462.63" and f"{2462.625:.2f}" == "2462.62"
    assert fixed(-0.125, 2) == "-0.13"
    assert fixed(-0.0, 2) == "0.00"
    assert fixed(0.0001, 1) == "0.0"
    # toLocaleString: grouping, at most 3 decimals, rounding the printed decimal (1.0005)
    assert locale_number(1.0005) == "1.001"
    assert locale_number(1234.5) == "1,234.5"
    assert locale_number(987_654_321.0) == "987,654,321"


@given(
    st.floats(min_value=-1e9, max_value=1e9, allow_nan=False)
    | st.integers(-(10**6), 10**6).map(lambda k: k / 200),  # exact ties at 2 decimals
    st.integers(0, 3),
)
def test_fixed_agrees_with_the_exact_decimal_rounding(x: float, digits: int) -> None:
    exact = Decimal(x if x != 0 else 0.0).quantize(
        Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP
    )
    assert fixed(x, digits) == str(exact)


def test_retry_prompt_echoes_500_characters_of_the_previous_answer() -> None:
    previous = "x" * 499 + "yz"  # 501 characters: cut after the y, then "..."
    text = retry_prompt("ORIGINAL", "the response is not valid JSON", previous)
    assert text.startswith("ORIGINAL\n\n---\n")
    assert "the response is not valid JSON" in text
    assert "x" * 499 + "y...\n" in text and "yz" not in text
    assert "z" not in retry_prompt("O", "e", "x" * 500) and "..." not in retry_prompt("O", "e", "x")


# -- the parser ----------------------------------------------------------------------------------

BET = json.dumps(
    {"action": "BET", "bets": [{"market_id": "m1", "side": "NO", "amount": 100}], "reasoning": "r"}
)


def test_fenced_json_is_unwrapped() -> None:
    for fenced in (f"```json\n{BET}\n```", f"```\n{BET}\n```", f"  ```JSON {BET}```  "):
        parsed = parse_response(fenced, cash=10_000)
        assert parsed.bets == (Bet(market="m1", side="NO", amount=100.0),)


def test_json_inside_text_is_found() -> None:
    text = f"Here is my decision: {{not this}} {BET}\nGood luck {{ok}}!"
    assert parse_response(text, cash=10_000).action == "BET"
    assert parse_response(f"'{BET}'", cash=10_000).action == "BET"  # wrapping quotes


def test_braces_inside_strings_do_not_end_the_object() -> None:
    body = '{"action": "HOLD", "reasoning": "a } closes and { opens, \\" quoted }"}'
    text = f"My {{draft}} answer:\n{body} done"
    assert extract_object(text) == body
    assert parse_response(text, cash=10_000).reasoning == 'a } closes and { opens, " quoted }'


@pytest.mark.parametrize(
    ("amount", "accepted"),
    [("100", False), (49, False), (49.99, False), (50, True), (2500, True), (2500.01, False)],
)
def test_bet_amount_must_be_a_number_from_50_to_a_quarter_of_cash(
    amount: Any, accepted: bool
) -> None:
    # cash 10,000: the largest bet is 0.25 × 10,000 = 2,500
    text = json.dumps(
        {"action": "BET", "bets": [{"market_id": "m", "side": "YES", "amount": amount}],
         "reasoning": "r"}
    )  # fmt: skip
    if accepted:
        assert parse_response(text, cash=10_000).bets[0].amount == amount
    else:
        with pytest.raises(ResponseError, match="amount"):
            parse_response(text, cash=10_000)


@pytest.mark.parametrize(
    ("percentage", "accepted"),
    [(0.5, False), (1, True), (100, True), (100.5, False), ("50", False)],
)
def test_sell_percentage_must_be_a_number_from_1_to_100(percentage: Any, accepted: bool) -> None:
    text = json.dumps(
        {"action": "sell", "sells": [{"position_id": 7, "percentage": percentage}],
         "reasoning": "r"}
    )  # fmt: skip
    if accepted:
        parsed = parse_response(text, cash=10_000)
        assert parsed.action == "SELL"
        assert parsed.sells == (Sell(percentage=float(percentage), position_id="7"),)
    else:
        with pytest.raises(ResponseError, match="percentage"):
            parse_response(text, cash=10_000)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"action": "HOLD"}', "reasoning"),
        ('{"action": "HOLD", "reasoning": "   "}', "reasoning"),
        ('{"reasoning": "r"}', "action"),
        ('{"action": "BUY", "reasoning": "r"}', "BET, SELL or HOLD"),
        ('{"action": "BET", "bets": [], "reasoning": "r"}', "bets"),
        ('{"action": "SELL", "reasoning": "r"}', "sells"),
        ('{"action": "BET", "bets": [{"side": "YES", "amount": 60}], '
         '"reasoning": "r"}', "market_id"),
        ('{"action": "BET", "bets": [{"market_id": "m", "side": " ", "amount": 60}], '
         '"reasoning": "r"}', "side"),
        ('{"action": "BET", "bets": [{"market_id": "m", "side": "YES", "amount": 60}, '
         '{"market_id": "n", "side": "NO", "amount": 10}], "reasoning": "r"}', "bet 2"),
        ("I would rather not say.", "not valid JSON"),
        ("", "empty"),
        ("[1, 2]", "JSON object"),
    ],
)  # fmt: skip
def test_invalid_answers_are_rejected_with_a_reason(text: str, error: str) -> None:
    with pytest.raises(ResponseError, match=re.escape(error)):
        parse_response(text, cash=10_000)


printable = st.text(st.characters(codec="utf-8", exclude_characters="{}"), max_size=30)


@settings(max_examples=60, deadline=None)
@given(
    before=printable,
    after=printable,
    reasoning=st.text(max_size=40).filter(str.strip),
    extra=st.dictionaries(st.text(max_size=5), st.text(max_size=10), max_size=3),
)
def test_an_answer_survives_any_text_around_it(
    before: str, after: str, reasoning: str, extra: dict[str, str]
) -> None:
    """Whatever prose (without braces) surrounds it, the object comes back as it was written."""
    obj = {**extra, "action": "HOLD", "reasoning": reasoning}
    body = json.dumps(obj)
    text = f"{before} {body} {after}" if before.strip() else f"x {body} {after}"
    assert json.loads(clean(text)) == obj


# -- the agent against the fake server -----------------------------------------------------------


def test_a_valid_answer_becomes_the_decision_with_its_trace(server: FakeLLM) -> None:
    server.queue(BET.replace("m1", "m-bin"))
    decision = agent(server).decide(hand_view())
    assert list(decision.bets) == [Bet(market="m-bin", side="NO", amount=100.0)]
    trace = decision.trace
    assert trace is not None
    assert (trace.model, trace.retries, trace.error) == (MODEL, 0, None)
    assert (trace.tokens_in, trace.tokens_out, trace.cost) == (1200, 40, 0.0021)
    assert trace.raw_response == BET.replace("m1", "m-bin")
    [call] = trace.calls
    assert (call.question, call.attempt, call.reask, call.status) == ("decision", 1, 0, 200)
    assert call.messages == [{"role": "user", "content": user_prompt(hand_view())}]
    assert call.system is not None and "Forecaster Arena (v1)" in trace.prompts[call.system]
    assert call.structured and call.finish_reason == "stop" and call.error is None
    [request] = server.received
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == MODEL and request.body["temperature"] == 0
    assert request.body["max_tokens"] == 2048 and "reasoning" not in request.body
    system, user = request.body["messages"]
    assert system["role"] == "system" and "Forecaster Arena (v1)" in system["content"]
    assert "$50.00" in system["content"] and "25%" in system["content"]
    assert user == {"role": "user", "content": user_prompt(hand_view())}


def test_the_schema_narrows_the_answer_to_this_decision(server: FakeLLM) -> None:
    """Markets shown m-multi, m-bin, m-thin (m-closed is not open); cash 9,850.50 pays 197
    minimum bets, so at most 3 bets; the two positions are the only sells. One shape per
    action: BET with its bets, SELL with its sells, HOLD with neither, each with reasoning."""
    agent(server).decide(hand_view(POSITIONS))
    fmt = server.received[0].body["response_format"]
    assert fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    bet, sell, hold = schema["anyOf"]
    assert [a["properties"]["action"]["enum"] for a in (bet, sell, hold)] == [
        ["BET"], ["SELL"], ["HOLD"],
    ]  # fmt: skip
    assert bet["required"] == ["action", "bets", "reasoning"]
    assert sell["required"] == ["action", "sells", "reasoning"]
    assert hold["required"] == ["action", "reasoning"] and set(hold["properties"]) == {
        "action", "reasoning",
    }  # fmt: skip
    assert all(a["additionalProperties"] is False for a in (bet, sell, hold))
    item = bet["properties"]["bets"]["items"]["properties"]
    assert item["market_id"]["enum"] == ["m-multi", "m-bin", "m-thin"]
    assert item["side"]["enum"] == ["Trump", "Harris", "Other", "YES", "NO"]
    # whole dollars from $50 to floor(0.25 × 9,850.50 = 2,462.625)
    assert item["amount"] == {"type": "integer", "minimum": 50, "maximum": 2462}
    assert bet["properties"]["bets"]["minItems"] == 1 and bet["properties"]["bets"]["maxItems"] == 3
    sells = sell["properties"]["sells"]
    assert sells["items"]["properties"]["position_id"]["enum"] == ["p1", "p2"]
    assert sells["maxItems"] == 2 and sells["minItems"] == 1
    assert sells["items"]["properties"]["percentage"] == {
        "type": "integer", "minimum": 1, "maximum": 100,
    }  # fmt: skip
    # max_tokens 2,048: reasoning up to 1,500 characters, about a quarter of them
    assert hold["properties"]["reasoning"] == {"type": "string", "minLength": 1, "maxLength": 1500}


def test_the_reasoning_and_the_orders_are_bounded_by_max_tokens() -> None:
    """max_tokens 200: reasoning at most 150 characters (a quarter of 200 tokens at three
    characters a token), and (200 - 50 - 32) // 64 = 1 bet; 2,048: 1,500 and the markets."""
    markets = hand_view().markets
    short = decision_schema(
        markets, [0, 1, 2], POSITIONS, cash=9_000.0, min_bet=50, max_bet=2_250, max_tokens=200
    )
    bet, sell, hold = short["anyOf"]
    assert hold["properties"]["reasoning"]["maxLength"] == 150
    assert bet["properties"]["bets"]["maxItems"] == 1
    assert sell["properties"]["sells"]["maxItems"] == 1
    long = decision_schema(
        markets, [0, 1, 2], (), cash=9_000.0, min_bet=50, max_bet=2_250, max_tokens=2048
    )
    bet, hold = long["anyOf"]
    assert bet["properties"]["bets"]["maxItems"] == 3
    assert hold["properties"]["reasoning"]["maxLength"] == 1500


def test_bet_is_left_out_when_no_whole_dollar_lies_between_the_minimum_and_the_cap() -> None:
    """min $50.50, cap $50.90: no integer amount can satisfy both, so only HOLD is offered;
    with a cap of $51.00 the single whole dollar 51 is."""
    markets = hand_view().markets
    narrow = decision_schema(markets, [1, 2], (), cash=203.6, min_bet=50.5, max_bet=50.9)
    assert narrow["properties"]["action"]["enum"] == ["HOLD"] and "bets" not in narrow["properties"]
    one = decision_schema(markets, [1, 2], (), cash=204.0, min_bet=50.5, max_bet=51.0)
    bet, _ = one["anyOf"]
    amount = bet["properties"]["bets"]["items"]["properties"]["amount"]
    assert (amount["minimum"], amount["maximum"]) == (51, 51)


def test_without_positions_or_cash_the_schema_leaves_sell_and_bet_out(server: FakeLLM) -> None:
    agent(server).decide(hand_view(cash=49.0))
    props = server.received[0].body["response_format"]["json_schema"]["schema"]["properties"]
    assert props["action"]["enum"] == ["HOLD"] and set(props) == {"action", "reasoning"}


def test_reasoning_settings_are_sent(server: FakeLLM) -> None:
    agent(server, reasoning_effort="low", reasoning_tokens=500, max_tokens=300).decide(hand_view())
    body = server.received[0].body
    assert body["reasoning"] == {"effort": "low", "max_tokens": 500} and body["max_tokens"] == 300


def test_garbage_then_a_valid_answer_is_one_retry(server: FakeLLM) -> None:
    server.queue("I think YES on everything!", HOLD)
    decision = agent(server).decide(hand_view())
    assert decision.action == "HOLD" and decision.reasoning == "nothing stands out"
    trace = decision.trace
    assert trace is not None and trace.retries == 1 and trace.error is None
    assert trace.raw_response == HOLD
    # usage adds up over both calls: 1200 + 1200 in, 40 + 40 out, 0.0021 × 2 dollars
    assert (trace.tokens_in, trace.tokens_out, trace.cost) == (2400, 80, 0.0042)
    first, second = server.received
    assert second.user_prompt.startswith(first.user_prompt + "\n\n---\n")
    assert "not valid JSON" in second.user_prompt
    assert "I think YES on everything!" in second.user_prompt
    rejected, accepted = trace.calls
    assert rejected.rejected is not None and "not valid JSON" in rejected.rejected
    assert (accepted.reask, accepted.rejected) == (1, None)
    assert accepted.messages[-1]["content"] == second.user_prompt


def test_garbage_twice_becomes_a_system_default_hold(server: FakeLLM) -> None:
    server.queue("no idea", '{"action": "BET", "bets": [], "reasoning": "all in"}')
    decision = agent(server).decide(hand_view())
    assert decision.action == "HOLD" and not decision.bets
    assert decision.reasoning == (
        '[SYSTEM DEFAULT] Failed after 1 retries: BET needs a non-empty "bets" array'
    )
    assert decision.trace is not None and decision.trace.error == (
        'BET needs a non-empty "bets" array'
    )
    assert decision.trace.retries == 1 and len(server.received) == 2


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "the response is empty"),
        ("I would buy YES on rain.", "not valid JSON"),
        ('{"action": "BET", "bets": [{"market_id": "m-bin", "side": "YES", "amo', "not valid"),
        (
            '{"action": "BET", "bets": [{"market_id": "m-bin", "side": "YES", "amount": 1e15}],'
            ' "reasoning": "all in"}',
            "above the maximum bet",
        ),
        (
            '{"action": "SELL", "sells": [{"position_id": "p1", "percentage": -20}],'
            ' "reasoning": "out"}',
            '"percentage" must be a number from 1 to 100',
        ),
        # valid under a schema that lets BET and SELL leave their orders out
        ('{"action": "BET", "reasoning": "YES"}', 'BET needs a non-empty "bets" array'),
        ('{"action": "SELL", "reasoning": "out"}', 'SELL needs a non-empty "sells" array'),
        # numbers and nesting Python's JSON reader cannot hold
        (
            '{"action": "BET", "bets": [{"market_id": "m-bin", "side": "YES", "amount": '
            + "9" * 400
            + '}], "reasoning": "all in"}',
            "bet 1: amount $inf is above the maximum bet",
        ),
        (
            '{"action": "BET", "bets": [{"market_id": "m-bin", "side": "YES", "amount": 1e400}],'
            ' "reasoning": "all in"}',
            "above the maximum bet",
        ),
        (
            '{"action": "SELL", "sells": [{"position_id": "p1", "percentage": '
            + "9" * 400
            + '}], "reasoning": "out"}',
            '"percentage" must be a number from 1 to 100, not 99999999999999999999... (400 ch',
        ),
        ('{"action": "HOLD", "reasoning": "x", "n": ' + "9" * 5000 + "}", "number too long"),
        (
            '{"action": "HOLD", "reasoning": "x", "n": ' + "[" * 20_000 + "]" * 20_000 + "}",
            "nested too deeply",
        ),
    ],
    ids=lambda x: x[:40] if isinstance(x, str) else x,
)
def test_bad_answers_are_reasked_then_a_hold_with_the_reason(
    server: FakeLLM, answer: str, reason: str
) -> None:
    server.queue(answer, answer)
    decision = agent(server).decide(hand_view(POSITIONS))
    assert decision.action == "HOLD" and decision.trace is not None
    assert decision.trace.error is not None and reason in decision.trace.error
    assert [c.reask for c in decision.trace.calls] == [0, 1]
    assert all(c.rejected and reason in c.rejected for c in decision.trace.calls)


def test_a_truncated_answer_is_recorded_as_truncation_and_reasked(server: FakeLLM) -> None:
    server.queue(Reply('{"action": "HOLD", "reasoning": "becau', finish_reason="length"), HOLD)
    decision = agent(server).decide(hand_view())
    assert decision.action == "HOLD" and decision.reasoning == "nothing stands out"
    assert decision.trace is not None
    cut, fine = decision.trace.calls
    assert cut.finish_reason == "length" and cut.error is not None and "cut off" in cut.error
    assert cut.answer == '{"action": "HOLD", "reasoning": "becau'
    assert "cut off" in server.received[1].user_prompt and fine.reask == 1


def test_a_thinking_models_reasoning_is_kept(server: FakeLLM) -> None:
    server.queue(Reply(HOLD, reasoning="Rain at 12% looks fair; nothing to do."))
    decision = agent(server).decide(hand_view())
    assert decision.trace is not None
    assert decision.trace.calls[0].reasoning == "Rain at 12% looks fair; nothing to do."


def test_server_errors_past_the_retries_become_a_hold(server: FakeLLM) -> None:
    server.queue(Reply(status=500), Reply(status=502))
    decision = agent(server, retries=1).decide(hand_view())
    assert decision.action == "HOLD" and decision.trace is not None
    assert decision.trace.error == "HTTP 502: injected 502"
    assert [(c.attempt, c.status) for c in decision.trace.calls] == [(1, 500), (2, 502)]
    assert decision.reasoning.startswith("[SYSTEM DEFAULT]") and len(server.received) == 2


def test_a_timeout_becomes_a_hold_and_is_not_sent_again(server: FakeLLM) -> None:
    server.queue(Reply(stall=0.6))
    decision = agent(server, retries=3, timeout=0.1).decide(hand_view())
    assert decision.action == "HOLD" and decision.trace is not None
    assert decision.trace.error == "no answer within 0.1 s (read timeout)"
    assert len(server.received) == 1 and decision.trace.calls[0].status is None


def test_latency_is_real_time_under_the_frozen_clock(server: FakeLLM) -> None:
    server.queue(Reply(stall=0.05))
    the_agent = agent(server)
    with freeze_time(datetime(2024, 9, 8, tzinfo=UTC)):
        decision = the_agent.decide(hand_view())
    # the server waited 50 ms before answering; a frozen perf_counter would measure 0
    assert decision.trace is not None and decision.trace.latency_ms is not None
    assert decision.trace.latency_ms >= 50


# -- specs and settings --------------------------------------------------------------------------


def test_spec_names_the_model_and_what_shapes_its_answers(server: FakeLLM) -> None:
    built = build_strategy(spec(server, "markets=10&max_tokens=500&reasoning_effort=high"))
    assert isinstance(built, LLMAgent) and built.model == MODEL
    assert (built.settings.markets, built.settings.max_tokens) == (10, 500)
    assert built.settings.reasoning() == {"effort": "high"}


def test_the_agent_follows_the_environments_base_url(server: FakeLLM) -> None:
    build_strategy(spec(server)).decide(hand_view())  # type: ignore[attr-defined]
    assert len(server.received) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("llm", "llm needs a model"),
        ("llm:m?temperature=1", "temperature"),
        ("llm:m?base_url=http://x", "base_url is a connection setting"),
        ("llm:m?cassette=c.jsonl", "ARENA_LLM_CASSETTE"),
    ],
)
def test_bad_specs_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(StrategyError, match=re.escape(message)) as caught:
        build_strategy(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"ARENA_LLM_MODE": "replay"}, "mode=replay needs a cassette"),
        (
            {"ARENA_LLM_MODE": "replay", "ARENA_LLM_CASSETTE": "/nonexistent/c.jsonl"},
            "does not exist",
        ),
        ({"ARENA_LLM_API_KEY_ENV": "ARENA_TEST_UNSET_KEY"}, "ARENA_TEST_UNSET_KEY is not set"),
        ({}, "OPENROUTER_API_KEY is not set"),
        ({"ARENA_LLM_TIMEOUT": "soon"}, "ARENA_LLM_TIMEOUT"),
        ({"ARENA_LLM_CONCURRENCY": "0"}, "ARENA_LLM_CONCURRENCY"),
        # each was a cohort of failed calls ("UnsupportedProtocol"), not an error up front
        (
            {"ARENA_LLM_BASE_URL": "not a url"},
            "ARENA_LLM_BASE_URL: 'not a url' is not an http:// or https:// URL",
        ),
        (
            {"ARENA_LLM_BASE_URL": "ftp://example.com/v1"},
            "ARENA_LLM_BASE_URL: 'ftp://example.com/v1' is not an http:// or https:// URL",
        ),
        ({"ARENA_LLM_BASE_URL": "http:///v1"}, "'http:///v1' is not an http:// or https://"),
    ],
)
def test_bad_connections_are_one_line_errors(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], message: str
) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(StrategyError, match=re.escape(message)) as caught:
        build_strategy("llm:m")
    assert "\n" not in str(caught.value)


def test_a_local_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default key variable is OpenRouter's, asked for only when talking to OpenRouter."""
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setenv("ARENA_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert Connection.from_env().key_env is None
    assert isinstance(build_strategy("llm:m"), LLMAgent)


# -- whole replays -------------------------------------------------------------------------------

FIRST_MARKET = re.compile(r"^- ID: (\S+)$", re.MULTILINE)


def bet_then_sell(request: Received) -> str:
    """Bets $100 on YES of the first market listed, then sells half of its first position."""
    prompt = request.user_prompt
    head, _, listed = prompt.partition("AVAILABLE MARKETS")
    if "YOUR CURRENT POSITIONS: None" in head:
        market = FIRST_MARKET.search(listed)
        if market is None:
            return HOLD
        bet = {"market_id": market[1], "side": "YES", "amount": 100}
        return json.dumps({"action": "BET", "bets": [bet], "reasoning": "first market"})
    position = FIRST_MARKET.search(head)
    assert position is not None
    sell = {"position_id": position[1], "percentage": 50}
    return json.dumps({"action": "SELL", "sells": [sell], "reasoning": "take half"})


def decisions(db: Path) -> list[DecisionMade]:
    with EventStore.open(db) as store:
        return [e for e in store.read() if isinstance(e, DecisionMade)]


def test_a_no_position_is_shown_at_its_own_price_in_a_replay(server: FakeLLM) -> None:
    """Week 1 bets $1,000 on NO of market a at YES 0.5 (NO 0.5): 1,000 / 0.5 = 2,000 shares.
    At week 2 (+7d) a's YES price is 0.75, so NO is 1 − 0.75 = 0.25: value 2,000 × 0.25 = $500,
    P/L 500 − 1,000 = −$500; cash 9,000, total 9,500, P/L −500 = −5.00%."""
    bet = {"market_id": "a", "side": "NO", "amount": 1000}
    server.queue(json.dumps({"action": "BET", "bets": [bet], "reasoning": "a is overpriced"}))
    CohortRunner(make_hand_tape(), hand_config({"llm": spec(server)})).run()
    week2 = server.received[1].user_prompt
    assert week2.startswith(
        "CURRENT DATE: 2024-01-14\n"
        "DECISION WEEK: 2\n\n"
        "YOUR PORTFOLIO:\n"
        "- Cash Balance: $9000.00\n"
        "- Maximum Bet Size: $2250.00 (25% of cash)\n"
        "- Positions Value: $500.00\n"
        "- Total Portfolio: $9500.00\n"
        "- P/L: $-500.00 (-5.00%)\n\n"
        "YOUR CURRENT POSITIONS:\n"
        "- ID: llm/a/NO/1\n"
        '  Market: "a?"\n'
        "  Side: NO | Shares: 2000.00\n"
        "  Entry: 50.0% | Current: 25.0%\n"
        "  Value: $500.00 | P/L: $-500.00\n\n"
        "AVAILABLE MARKETS"
    )
    assert int(datetime(2024, 1, 14, tzinfo=UTC).timestamp()) == START + WEEK


def test_the_api_key_never_reaches_the_log(tmp_path: Path, server: FakeLLM) -> None:
    """A real replay of the embedded sample: the first answer is a 401 whose message quotes the
    key, the second an answer that quotes it too, the rest bet and sell; the stored payloads
    are then searched for the key."""
    server.queue(Reply(status=401), Reply("Sure: " + HOLD, echo_key=True, reasoning=f"key {KEY}"))
    server.responder = bet_then_sell
    config = CohortConfig(
        start=datetime(2024, 9, 1, tzinfo=UTC),
        agents={"llm": spec(server)},
        universe=5,
        mark_cadence="weekly",
    )
    db = tmp_path / "run.db"
    with EventStore.open(db) as store:
        CohortRunner(load_tape(sample_path()), config).run(store)
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in server.received)
    made = decisions(db)
    assert len(made) == len(server.received) >= 4
    assert made[0].action == "HOLD" and made[0].error is not None and "401" in made[0].error
    assert made[1].action == "HOLD" and made[2].action == "BET" and made[3].action == "SELL"
    assert all(d.model == MODEL for d in made)
    assert made[0].raw_response is None and all(d.raw_response for d in made[1:])
    with sqlite3.connect(db) as conn:
        payloads = "\n".join(row[0] for row in conn.execute("SELECT payload FROM events"))
    assert KEY not in payloads and "SECRET" not in payloads
    assert (
        "your header was Bearer ***" in payloads and "Incorrect API key provided: ***" in payloads
    )


def test_a_replay_question_missing_from_the_cassette_stops_the_run(tmp_path: Path) -> None:
    cassette = tmp_path / "empty.jsonl"
    cassette.write_text("")
    the_agent = LLMAgent(MODEL, completer=Player(MODEL, cassette))
    with pytest.raises(CassetteMiss, match="holds no answer from test/model to request"):
        the_agent.decide(hand_view())


def test_on_miss_hold_keeps_the_hold_with_the_reason(tmp_path: Path) -> None:
    cassette = tmp_path / "empty.jsonl"
    cassette.write_text("")
    the_agent = LLMAgent(MODEL, completer=Player(MODEL, cassette, on_miss="hold"))
    decision = the_agent.decide(hand_view())
    assert decision.action == "HOLD" and decision.trace is not None
    assert decision.trace.error is not None and "holds no answer from test/model" in (
        decision.trace.error
    )


def test_the_overhead_measure_runs_the_real_agent_and_forecaster() -> None:
    """Not a timing test: that the bench's measure parses its own answers and says what it
    measured (``arena bench llm`` reports the numbers)."""
    result = measure_overhead(markets=20, repeats=2)
    assert result["markets"] == 20
    assert 0 < result["decision_ms_best"] <= result["decision_ms_median"]
    assert result["forecast_question_ms"] > 0


# -- the rules' wording ----------------------------------------------------------------------------


def test_rules_v2_send_forecaster_arenas_v2_wording(tmp_path: Path, server: FakeLLM) -> None:
    """A cohort under --rules v2: the system prompt of v2 (portfolio value as the goal and the
    score, the cap on a decision's bets together, a bet's size as capital allocation) and the
    user prompt's v2 cap line; under v1 neither, and v1's text as it always was."""
    for rules in ("v1", "v2"):
        config = hand_config({"llm": spec(server)}, rules=rules)
        with EventStore.open(tmp_path / f"{rules}.db") as store:
            CohortRunner(make_hand_tape(), config).run(store)
    v1, v2 = server.received[0], server.received[-1]
    system1, system2 = v1.body["messages"][0]["content"], v2.body["messages"][0]["content"]
    assert "Forecaster Arena (v1)" in system1 and "Forecaster Arena (v2)" in system2
    assert "Your goal is to maximize the value of your paper portfolio." in system2
    assert "forecast accurately" in system1 and "forecast accurately" not in system2
    assert (
        "2. The bets of one decision together are at most 25% of your current cash; if they are "
        "more, none of them is placed." in system2
    )
    assert "5. The size of a bet is a capital-allocation decision" in system2
    assert "- You are ranked by the value of your portfolio" in system2
    assert "Brier score of your bets is kept as a diagnostic only" in system2
    assert "2. No bet is more than 25% of your current cash." in system1
    assert "- Maximum Bet Size: $2500.00 (25% of cash)\n" in v1.user_prompt
    assert (
        "- Maximum Total BET Allocation This Decision: $2500.00 (25% of cash across all bets)\n"
        in v2.user_prompt
    )
    assert "Maximum Bet Size" not in v2.user_prompt


# -- fitting the context --------------------------------------------------------------------------


def test_the_prompt_shows_only_the_markets_that_fit_the_context(server: FakeLLM) -> None:
    """60 markets with 66-character hex ids and a 2,048-token context: the prompt shows the
    top ones that fit beside the answer (256), the template and a re-ask, says how many it
    left out, and the schema offers only those shown; one more would not fit."""
    from strategies.llm.agent import REASK_TOKENS, TEMPLATE_TOKENS
    from strategies.llm.overhead import synthetic_view
    from strategies.llm.prompt import estimated_tokens, system_prompt

    view = synthetic_view(60)
    agent(server, context=2048, max_tokens=256, markets=60).decide(view)
    [request] = server.received
    system, user = (m["content"] for m in request.body["messages"])
    shown = re.search(r"AVAILABLE MARKETS \(Top (\d+) by volume; (\d+) more not shown", user)
    assert shown is not None
    n, left_out = int(shown[1]), int(shown[2])
    assert 0 < n < 60 and n + left_out == 60
    room = 2048 - 256 - TEMPLATE_TOKENS - REASK_TOKENS
    assert estimated_tokens(system) + estimated_tokens(user) <= room
    wider = user_prompt(view, markets=n + 1, left_out=left_out - 1)
    assert estimated_tokens(system_prompt()) + estimated_tokens(wider) > room
    schema = request.body["response_format"]["json_schema"]["schema"]
    bet = schema["anyOf"][0]["properties"]["bets"]["items"]["properties"]
    assert bet["market_id"]["enum"] == list(view.markets.ids[:n])


def test_without_a_context_every_market_asked_for_is_shown(server: FakeLLM) -> None:
    from strategies.llm.overhead import synthetic_view

    agent(server, markets=60).decide(synthetic_view(60))
    assert "AVAILABLE MARKETS (Top 60 by volume):\n" in server.received[0].user_prompt


def test_a_prompt_too_long_for_the_model_is_one_line_naming_the_context(server: FakeLLM) -> None:
    too_long = {"error": {"message": "the request exceeds the available context size"}}
    server.queue(Reply(status=400, body=too_long))
    decision = agent(server).decide(hand_view())
    assert decision.action == "HOLD" and decision.trace is not None
    assert decision.trace.error == (
        "HTTP 400: the prompt is longer than the model's context (the request exceeds the "
        "available context size): show fewer markets (markets=N in the agent spec) or serve a "
        "longer context"
    )
    assert "\n" not in decision.reasoning and len(server.received) == 1
