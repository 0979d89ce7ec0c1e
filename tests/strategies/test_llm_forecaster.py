"""``forecaster=llm``: §2.8's prompt and parser, and sign/linear traders trading its answers.

Every HTTP exchange goes to the fake server of ``llm_server.py`` on 127.0.0.1, started and
stopped by the test; the fake answers each market's question by its text (``ANSWERS``). Built
from a spec, the forecaster asks up to 8 questions at once (``ARENA_LLM_CONCURRENCY`` unset),
so no test here depends on the order questions arrive in unless it asks one at a time.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.boundary.sandbox import DecisionTimeout
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import DecisionMade, ModelCall
from ledger.rules import RULES
from ledger.store import EventStore
from strategies.api import Bet, Decision, MarketMeta, MarketsView, StrategyError, Trace, View
from strategies.builtin.edge import ForecasterTrader
from strategies.llm.cassette import CassetteMiss
from strategies.llm.client import Answer, ChatClient, Request, request_key, total
from strategies.llm.connection import Connection
from strategies.llm.forecast import (
    DEFAULT_MODEL,
    MIN_EDGE,
    LLMForecaster,
    forecast_prompt,
    llm_forecaster,
    parse_p_yes,
)
from strategies.loader import build_strategy
from tests.conftest import hand_config, make_hand_tape
from tests.llm_server import FakeLLM, Received, Reply

KEY_ENV = "ARENA_TEST_LLM_KEY"
KEY = "sk-test-SECRET-0123456789abcdef"
MODEL = "test-model"


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A known key named by ARENA_LLM_API_KEY_ENV, and no cassette settings from the shell."""
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", KEY_ENV)
    for name in Connection.model_fields:
        if name != "api_key_env":
            monkeypatch.delenv(f"ARENA_LLM_{name.upper()}", raising=False)


def client(
    url: str, sleep: Callable[[float], None] = lambda _: None, **settings: Any
) -> ChatClient:
    """A client of the fake server with one retry, its waits handed to ``sleep``."""
    connection = Connection(base_url=url, **({"retries": 1, "backoff": 0.5} | settings))
    return ChatClient(MODEL, connection, api_key=KEY, sleep=sleep)


# -- the parser ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # rule 1: p_yes, quoted or not, anywhere, accepted in [0, 1]
        ('{"p_yes": 0.37}', 0.37),
        ("p_yes: 0.5", 0.5),
        ("'p_yes': '0.25'", 0.25),
        ('{"p_yes": 1}', 1.0),
        ('{"p_yes": 0}', 0.0),
        ('{"p_yes": 2.5e-1}', 0.25),
        ('{"p_yes": 0.8} ' + "x" * 700, 0.8),  # rule 1 is not limited to the tail
        # rule 1 out of range falls to rule 3: the last number 1.5 is in (1, 100], 1.5/100
        ('{"p_yes": 1.5}', 0.015),
        # rule 2: P(YES) / probability [of] yes, then : or =, a number, an optional %
        ("P(YES) = 0.7", 0.7),
        ("Probability of yes: 65%", 0.65),
        # rule 2 wins over rule 3, which would read the last number 5 as 5/100
        ("probability yes=0.3 after weighing 5 factors", 0.3),
        # rule 2 gives 70 (no %), out of range: rule 3 reads the last number 70 as 0.70
        ("P(YES): 70", 0.7),
        # rule 2 only looks at the last 600 characters: rule 3 finds 3 there, 3/100
        ("P(YES) = 0.9. " + "x" * 600 + " in 3 weeks", 0.03),
        # rule 3: the last number, as is in [0, 1], /100 in (1, 100]
        ("I'd say 0.35", 0.35),
        ("around 42 percent", 0.42),
        ("it is 2024 and I say 7", 0.07),
        ("a hundred: 100", 1.0),
        # a percent sign makes a percentage in every rule, even below 1
        ("59.5%", 0.595),
        ('{"p_yes": "59.5%"}', 0.595),
        ("p_yes: 0.5%", 0.005),
        ("I'd put it at 1%", 0.01),
    ],
)
def test_the_three_rules(text: str, expected: float) -> None:
    assert parse_p_yes(text) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "text",
    [
        '{"p_yes": 250}',  # rule 1 rejects, rule 3: 250 > 100
        '{"p_yes": -0.2}',  # rule 1 rejects, rule 3: negative
        "P(YES) = 150%",  # rule 2: 1.5 rejected, rule 3: 150 > 100
        "-59.5%",  # a negative percentage
        '{"p_yes": "-5%"}',
        "It will happen in 2025",
        "no idea",
        "",
        "0.4" + "x" * 600,  # the only number is before the last 600 characters
    ],
)
def test_unreadable_answers_are_failures(text: str) -> None:
    assert parse_p_yes(text) is None


@given(p=st.floats(0.0, 1.0), before=st.text(max_size=40).filter(lambda t: "p_yes" not in t))
def test_a_stated_p_yes_is_read_back_exactly(p: float, before: str) -> None:
    assert parse_p_yes(f"{before}{json.dumps({'p_yes': p})}") == p


# -- a hand-built view ---------------------------------------------------------------------------

SEP8 = 1_725_753_600  # Sunday 2024-09-08 00:00 UTC
OCT1_NOON = 1_727_784_000  # 2024-10-01 12:00 UTC: the prompt keeps the date only
META = (
    MarketMeta("a", "Will A happen?", ("Yes", "No"), "Politics", 5e5, OCT1_NOON, True),
    MarketMeta("b", "Will B happen?", ("Yes", "No"), None, 4e5, None, True),
    MarketMeta("c", "Will C happen?", ("Yes", "No"), "", 3e5, None, True),
    MarketMeta("d", "Closed?", ("Yes", "No"), "Sports", 2e5, SEP8 - 1, True),
    MarketMeta("e", "Who wins?", ("X", "Y", "Z"), None, 1e5, None, False),
)
YES = (0.30, 0.60, 0.40, 0.50, 0.40)

ANSWERS = {
    "Will A happen?": '{"p_yes": 0.45}',  # rule 1: 0.45
    "Will B happen?": "I estimate P(YES) = 20%",  # rule 2: 0.20
    "Will C happen?": "I cannot say.",  # no number: a parse failure
}
QUESTION = re.compile(r"^Question: (.*)$", re.MULTILINE)


def answer(request: Received) -> str:
    question = QUESTION.search(request.user_prompt)
    assert question is not None
    return ANSWERS[question[1]]


def hand_view(ts: int = SEP8, cash: float = 10_000.0) -> View:
    return make_view(META, YES, [True, True, True, False, True], ts=ts, cash=cash)


def make_view(
    meta: Sequence[MarketMeta],
    yes: Sequence[float],
    open_mask: Sequence[bool],
    *,
    ts: int = SEP8,
    cash: float = 10_000.0,
) -> View:
    ids = tuple(m.id for m in meta)
    markets = MarketsView(
        ts=ts,
        ids=ids,
        index={m: i for i, m in enumerate(ids)},
        meta=tuple(meta),
        yes=np.array(yes),
        open_mask=np.array(open_mask),
        volume=np.array([m.volume for m in meta]),
        binary=np.array([m.is_binary for m in meta]),
        prices=lambda i: (yes[i], 1 - yes[i]),
        history=lambda i, t, since: (np.array([], dtype=np.int64), np.array([])),
    )
    return View(
        ts=ts,
        week=1,
        cash=cash,
        rules=RULES["v1"],
        markets=markets,
        shares=np.zeros((len(ids), 3)),
        _positions=lambda: (),
    )


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM(answer) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        yield fake


def trader(spec: str) -> ForecasterTrader:
    built = build_strategy(spec)
    assert isinstance(built, ForecasterTrader)
    return built


def test_the_prompt_of_a_market() -> None:
    expected = (
        "You are a probabilistic forecaster. Estimate the probability that the question below "
        "resolves YES, as a number between 0 and 1.\n"
        'Answer with this JSON object only, nothing else: {"p_yes": <number>}\n\n'
        "INFORMATION:\n"
        "Question: Will A happen?\n"
        "Category: Politics\n"
        "Closes: 2024-10-01\n"
        "Today: 2024-09-08\n"
        "Current market price of YES: 0.3000\n\n"
        "OUTPUT:\n"
    )
    assert forecast_prompt(hand_view(), "a") == expected
    # no category (None or empty) and no close date: those lines are left out; blind: no price
    blind = forecast_prompt(hand_view(), "c", show_price=False)
    assert blind.endswith("INFORMATION:\nQuestion: Will C happen?\nToday: 2024-09-08\n\nOUTPUT:\n")


def test_sign_trades_the_sides_the_answers_imply(server: FakeLLM) -> None:
    """a: p 0.45 vs q 0.30, edge +0.15 -> YES; b: p 0.20 vs q 0.60, edge −0.40 -> NO; c: no
    forecast -> untraded; d is closed and e not binary: never asked. Sign stakes B = $500 each,
    the biggest |edge| first: b then a; the cap 0.25 × 10,000 = 2,500 (then 0.25 × 9,500 =
    2,375) does not bind. Beliefs: NO on b is 1 − 0.20 = 0.80, YES on a is 0.45."""
    agent = trader(f"sign?forecaster=llm:{MODEL}")
    decision = agent.decide(hand_view())
    assert list(decision.bets) == [
        Bet(market="b", side="NO", amount=500.0, belief=0.8),
        Bet(market="a", side="YES", amount=500.0, belief=0.45),
    ]
    asked = {QUESTION.findall(r.user_prompt)[0]: r for r in server.received}
    assert len(server.received) == 3  # in any order: they go out together
    assert sorted(asked) == ["Will A happen?", "Will B happen?", "Will C happen?"]
    request = asked["Will A happen?"]
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == MODEL and request.body["temperature"] == 0
    assert request.body["max_tokens"] == 64
    assert request.body["messages"] == [
        {"role": "user", "content": forecast_prompt(hand_view(), "a")}
    ]
    forecaster = agent.forecaster
    assert isinstance(forecaster, LLMForecaster)
    assert (forecaster.parse_failures, forecaster.ask_failures) == (1, 0)


def test_linear_sizes_by_the_edge(server: FakeLLM) -> None:
    """linear: a 500 × (0.45 − 0.30) = $75 YES; b 500 × (0.20 − 0.60) = −$200 -> $200 NO."""
    decision = trader(f"linear?forecaster=llm:{MODEL}").decide(hand_view())
    assert list(decision.bets) == [
        Bet(market="b", side="NO", amount=200.0, belief=0.8),
        Bet(market="a", side="YES", amount=75.0, belief=0.45),
    ]


def test_questions_are_asked_once_per_decision_instant(server: FakeLLM) -> None:
    agent = trader(f"sign?forecaster=llm:{MODEL}&show_price=false")
    forecaster = agent.forecaster
    first = forecaster.forecast(hand_view())
    again = agent.decide(hand_view())  # the same instant: nothing asked again
    assert len(server.received) == 3
    np.testing.assert_array_equal(first, [0.45, 0.2, np.nan, np.nan, np.nan])
    assert len(again.bets) == 2
    agent.decide(hand_view(SEP8 + 7 * 86_400))  # a week later: all three again
    assert len(server.received) == 6
    assert "Today: 2024-09-15\n" in server.received[-1].user_prompt
    assert all("market price" not in r.user_prompt for r in server.received)


def test_a_garbage_answer_leaves_only_that_market_untraded(server: FakeLLM) -> None:
    """c's answer has no number. forecastbench's 0.5 would be an edge of 0.5 − 0.40 = +0.10 and
    a $500 YES bet; no forecast means no bet."""
    decision = trader(f"sign?forecaster=llm:{MODEL}").decide(hand_view())
    assert {b.market for b in decision.bets} == {"a", "b"}
    assert "on c" not in decision.reasoning


def test_a_server_error_is_retried() -> None:
    """The first question (a) gets a 500, then its answer on the one retry."""
    with FakeLLM(answer) as fake:
        fake.queue(Reply(status=500))
        waits: list[float] = []
        forecaster = LLMForecaster(MODEL, client(fake.url, waits.append))
        p = forecaster.forecast(hand_view())
        asked = [QUESTION.findall(r.user_prompt) for r in fake.received]
    np.testing.assert_array_equal(p, [0.45, 0.2, np.nan, np.nan, np.nan])
    assert asked == [["Will A happen?"]] * 2 + [["Will B happen?"], ["Will C happen?"]]
    assert waits == [0.5] and forecaster.ask_failures == 0


def test_a_market_that_cannot_be_asked_gets_no_forecast() -> None:
    """a gets a 500 twice: past its one retry, no forecast; b and c go on as usual."""
    with FakeLLM(answer) as fake:
        fake.queue(Reply(status=500), Reply(status=500))
        forecaster = LLMForecaster(MODEL, client(fake.url))
        p = forecaster.forecast(hand_view())
    np.testing.assert_array_equal(p, [np.nan, 0.2, np.nan, np.nan, np.nan])
    assert (forecaster.ask_failures, forecaster.parse_failures) == (1, 1)
    trace = forecaster.trace()
    assert trace is not None and trace.error == (
        "a: HTTP 500: injected 500; c: no probability in the answer"
    )


def test_the_api_key_is_in_the_header_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """a's question gets a 401 that quotes the key; the key must not reach a prompt, the
    decision or the trace, whose usage adds up the two answers: 2 × 1,200 tokens in, etc."""

    def refuse_a(request: Received) -> str | Reply:
        return Reply(status=401) if "Will A happen?" in request.user_prompt else answer(request)

    with FakeLLM(refuse_a) as server:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", server.url)
        agent = trader(f"sign?forecaster=llm:{MODEL}")
        decision = agent.decide(hand_view())
    assert [b.market for b in decision.bets] == ["b"]
    forecaster = agent.forecaster
    assert isinstance(forecaster, LLMForecaster)
    trace = forecaster.trace()
    assert trace is not None and trace.error is not None
    assert trace.error.startswith("a: ") and "Incorrect API key provided: ***" in trace.error
    assert (trace.tokens_in, trace.tokens_out, trace.cost) == (2400, 80, 0.0042)
    assert json.loads(trace.raw_response or "") == {
        "b": ANSWERS["Will B happen?"], "c": ANSWERS["Will C happen?"]
    }  # fmt: skip
    everything = [json.dumps(r.body) for r in server.received] + [repr(decision), repr(trace)]
    assert all(KEY not in text and "SECRET" not in text for text in everything)
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in server.received)


def test_a_recorded_run_replays_offline_with_the_same_decisions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cassette = tmp_path / "answers.jsonl"
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(cassette))
    views = [hand_view(), hand_view(SEP8 + 7 * 86_400, cash=9_000.0)]
    spec = f"sign?forecaster=llm:{MODEL}"

    def run() -> list[Decision]:
        agent = trader(spec)
        return [agent.decide(view) for view in views]

    with FakeLLM(answer) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_MODE", "record")
        recorded = run()
        calls = len(fake.received)
    monkeypatch.setenv("ARENA_LLM_MODE", "replay")
    monkeypatch.delenv(KEY_ENV)  # no key and no server: the cassette alone answers
    assert run() == recorded
    assert calls == 6 and len(cassette.read_text().splitlines()) == 6
    assert [len(d.bets) for d in recorded] == [2, 2]
    # a question the cassette has not heard (no price shown) stops the run, naming it ...
    with pytest.raises(CassetteMiss, match=r"holds no answer from test-model to request \w+ \(a\)"):
        trader(f"{spec}&show_price=false").decide(hand_view())
    # ... unless asked to HOLD: then it gets no forecast
    monkeypatch.setenv("ARENA_LLM_ON_MISS", "hold")
    blind = trader(f"{spec}&show_price=false").decide(hand_view())
    assert blind.action == "HOLD"


def test_a_recorded_cohort_replays_offline_with_the_same_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole run on the hand tape, every answer 0.65: recorded, then replayed from the
    cassette alone (the spec, hence the cohort id, unchanged), gives the same log."""
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(tmp_path / "answers.jsonl"))
    tape = make_hand_tape()
    config = hand_config({"sign": f"sign?forecaster=llm:{MODEL}"})
    with FakeLLM(lambda _: '{"p_yes": 0.65}') as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_MODE", "record")
        with EventStore.open(tmp_path / "recorded.db") as store:
            CohortRunner(tape, config).run(store)
            recorded = store.digest()
            made = [e for e in store.read() if isinstance(e, DecisionMade)]
        asked = len(fake.received)
    monkeypatch.setenv("ARENA_LLM_MODE", "replay")
    monkeypatch.delenv(KEY_ENV)
    with EventStore.open(tmp_path / "replayed.db") as store:
        CohortRunner(tape, config).run(store)
        assert store.digest() == recorded
    assert asked >= 3 and made[0].action == "BET"


# -- asking concurrently -------------------------------------------------------------------------

WIDE = 12
PROMPT_OF = re.compile(r"^Question: Will M(\d+) happen\?$", re.MULTILINE)


def wide_view(n: int = WIDE, ts: int = SEP8) -> View:
    """``n`` open binary markets m00, m01, …, each with its own question and price."""
    meta = [
        MarketMeta(f"m{i:02d}", f"Will M{i:02d} happen?", ("Yes", "No"), None, 1e5 - i, None, True)
        for i in range(n)
    ]
    return make_view(meta, [0.2 + 0.05 * i for i in range(n)], [True] * n, ts=ts)


def market_of(request: Received) -> int:
    number = PROMPT_OF.search(request.user_prompt)
    assert number is not None
    return int(number[1])


def scrambled(request: Received) -> Reply:
    """m(i) says p = 0.5 + i/100 at a cost and token count of its own; the first markets
    answer last. m02, m07 fail with HTTP 500 and m04, m09 answer garbage."""
    i = market_of(request)
    stall = (WIDE - i) * 0.02
    if i % 5 == 2:
        return Reply(status=500, stall=stall)
    usage = {"prompt_tokens": 100 + i, "completion_tokens": 10 + i, "cost": 1 / (i + 1)}
    text = "no idea" if i % 5 == 4 else json.dumps({"p_yes": 0.5 + i / 100})
    return Reply(text, stall=stall, usage=usage)


def comparable(forecaster: LLMForecaster) -> dict[str, object]:
    """The trace and counters, less the latency: measured live, it differs run to run."""
    trace = forecaster.trace()
    assert trace is not None
    return {
        "raw_response": trace.raw_response,
        "tokens_in": trace.tokens_in,
        "tokens_out": trace.tokens_out,
        "cost": trace.cost,
        "error": trace.error,
        "failures": (forecaster.ask_failures, forecaster.parse_failures),
    }


@pytest.mark.parametrize(("concurrency", "stall"), [(4, 0.2), (1, 0.05)])
def test_questions_go_out_together_up_to_the_bound(
    concurrency: int, stall: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each answer takes ``stall`` seconds; the server counts the requests it is answering at
    once. One at a time, 0.05 s is still far longer than questions sent together take to
    arrive, and twelve of them in a row do not wait 2.4 s."""
    with FakeLLM(lambda _: Reply('{"p_yes": 0.5}', stall=stall)) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_CONCURRENCY", str(concurrency))
        forecaster = llm_forecaster(MODEL)
        p = forecaster.forecast(wide_view())
    assert sorted(market_of(r) for r in fake.received) == list(range(WIDE))
    np.testing.assert_array_equal(p, np.full(WIDE, 0.5))
    if concurrency == 1:
        assert fake.peak == 1
    else:
        assert 1 < fake.peak <= concurrency


def test_the_answers_do_not_depend_on_the_concurrency() -> None:
    """Answers that come back the later the earlier their market, with failures of both
    kinds, give the same forecasts, log text, usage sums and counters one at a time as eight
    at a time."""
    runs = {}
    with FakeLLM(scrambled) as fake:
        for concurrency in (1, 8):
            forecaster = LLMForecaster(MODEL, client(fake.url), concurrency=concurrency)
            runs[concurrency] = (forecaster.forecast(wide_view()), comparable(forecaster))
        arrived = [market_of(r) for r in fake.received]
    (p1, seen1), (p8, seen8) = runs[1], runs[8]
    np.testing.assert_array_equal(p1, p8)
    assert seen1 == seen8
    assert arrived[: WIDE + 2] == sorted(arrived[: WIDE + 2])  # one at a time: in order
    expected = [np.nan if i % 5 in (2, 4) else 0.5 + i / 100 for i in range(WIDE)]
    np.testing.assert_array_equal(p8, expected)
    assert seen8["failures"] == (2, 2)
    assert list(json.loads(str(seen8["raw_response"]))) == [
        f"m{i:02d}" for i in range(WIDE) if i % 5 != 2
    ]
    costs = [1 / (i + 1) for i in range(WIDE) if i % 5 != 2]
    assert seen8["cost"] == total(costs) != total(costs[::-1])  # summed in market order


class ReverseOrder:
    """A completer that answers the last market first: each question waits until the one
    after it has been answered (or 10 s have passed, so a regression fails instead of hanging).
    Costs and latencies are chosen so that their sum depends on the order of the terms."""

    def __init__(self, n: int) -> None:
        self.answered: list[int] = []
        self._turn = [threading.Event() for _ in range(n)]
        self._turn[-1].set()
        self._lock = threading.Lock()

    def value(self, i: int) -> float:
        return 1 / (i + 1)

    model = MODEL

    def abort(self) -> None:
        pass

    def ask(self, request: Request) -> Answer:
        i = int(re.findall(r"Will M(\d+) happen", request.messages[-1]["content"])[0])
        self._turn[i].wait(timeout=10)
        with self._lock:
            self.answered.append(i)
        if i:
            self._turn[i - 1].set()
        key = request_key(MODEL, request.messages)
        if i == 3:
            return Answer((ModelCall(model=MODEL, question=request.question, request=key,
                                     error="m03 failed"),))  # fmt: skip
        call = ModelCall(
            model=MODEL, question=request.question, request=key, status=200,
            answer=json.dumps({"p_yes": i / 100}), tokens_in=1, tokens_out=1,
            cost=self.value(i), latency_ms=self.value(i),
        )  # fmt: skip
        return Answer((call,))


def test_answers_are_summed_in_market_order_not_arrival_order() -> None:
    completer = ReverseOrder(6)
    forecaster = LLMForecaster(MODEL, completer, concurrency=8)
    p = forecaster.forecast(wide_view(6))
    assert completer.answered == [5, 4, 3, 2, 1, 0]
    np.testing.assert_array_equal(p, [0.0, 0.01, 0.02, np.nan, 0.04, 0.05])
    trace = forecaster.trace()
    assert trace is not None
    answered = [completer.value(i) for i in (0, 1, 2, 4, 5)]
    assert trace.cost == total(answered) != total(answered[::-1])
    assert trace.latency_ms == trace.cost
    assert list(json.loads(trace.raw_response or "")) == ["m00", "m01", "m02", "m04", "m05"]
    assert trace.error == "m03: m03 failed" and forecaster.ask_failures == 1


def test_a_run_recorded_concurrently_replays_at_any_concurrency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded at 8 with answers coming back out of order, replayed at 1 and at 8: the same
    forecasts and trace, latencies included (the cassette keeps them). The cassette holds one
    whole line per question."""
    cassette = tmp_path / "answers.jsonl"
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(cassette))
    view = wide_view()

    def garbage_but_no_errors(request: Received) -> Reply:
        reply = scrambled(request)
        return Reply("no idea", stall=reply.stall) if reply.status != 200 else reply

    def run(concurrency: int) -> tuple[np.ndarray, Trace | None]:
        monkeypatch.setenv("ARENA_LLM_CONCURRENCY", str(concurrency))
        forecaster = llm_forecaster(MODEL)
        return forecaster.forecast(view), forecaster.trace()

    with FakeLLM(garbage_but_no_errors) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_MODE", "record")
        p, trace = run(8)
    assert fake.peak > 1
    monkeypatch.setenv("ARENA_LLM_MODE", "replay")
    monkeypatch.delenv(KEY_ENV)
    for concurrency in (1, 8):
        again, replayed = run(concurrency)
        np.testing.assert_array_equal(again, p)
        assert replayed == trace
    assert trace is not None and trace.error is not None and trace.error.count("m0") == 4
    lines = cassette.read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines]
    questions = {
        request_key(MODEL, [{"role": "user", "content": forecast_prompt(view, m)}])
        for m in view.markets.ids
    }
    assert len(entries) == WIDE and {e["request"] for e in entries} == questions
    assert all(set(e) == {"request", "model", "calls"} for e in entries)


def test_identical_questions_keep_their_answers_in_market_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """x1 and x3 are alike in every line of the prompt, so they ask the very same question;
    the model answers it 0.1 then 0.2. Asked one after another in market order even at 8 at
    a time, x1 gets the first answer and x3 the second, recorded and replayed alike."""
    cassette = tmp_path / "answers.jsonl"
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(cassette))
    same = MarketMeta("x1", "Will X happen?", ("Yes", "No"), None, 3e5, None, True)
    meta = [same, MarketMeta("x2", "Will Y happen?", ("Yes", "No"), None, 2e5, None, True)]
    meta.append(MarketMeta("x3", same.question, same.outcomes, None, 1e5, None, True))
    view = make_view(meta, [0.5, 0.5, 0.5], [True] * 3)
    asked: list[str] = []

    def in_turn(request: Received) -> str:
        asked.append(request.user_prompt)
        return json.dumps({"p_yes": asked.count(request.user_prompt) / 10})

    with FakeLLM(in_turn) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_MODE", "record")
        recorded = llm_forecaster(MODEL).forecast(view)
    np.testing.assert_array_equal(recorded, [0.1, 0.1, 0.2])
    monkeypatch.setenv("ARENA_LLM_MODE", "replay")
    for concurrency in ("8", "1"):
        monkeypatch.setenv("ARENA_LLM_CONCURRENCY", concurrency)
        np.testing.assert_array_equal(llm_forecaster(MODEL).forecast(view), recorded)


def test_the_time_limit_stops_a_decision_waiting_on_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the first decision the server holds every question until a question of the next
    decision arrives, so the runner's 0.5 s limit fires while the forecaster waits: that
    decision is an error and HOLD, its third question (two go out at a time) is never sent,
    and the two held answers, let go during the next decision, leak into nothing."""
    monkeypatch.setenv("ARENA_LLM_CONCURRENCY", "2")
    first_day = "Today: 2024-01-07\n"
    next_decision = threading.Event()
    stuck: list[str] = []

    def hold_the_first_decision(request: Received) -> str:
        if first_day in request.user_prompt:
            if not next_decision.wait(timeout=20):  # only if the limit did not interrupt
                stuck.append(request.user_prompt)
            return '{"p_yes": 0.99}'
        next_decision.set()
        return '{"p_yes": 0.65}'

    with FakeLLM(hold_the_first_decision) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        agent = trader(f"sign?forecaster=llm:{MODEL}")
        config = hand_config({"sign": f"sign?forecaster=llm:{MODEL}"})
        settings = RunSettings(cohort=config, options=RunOptions(decision_timeout=0.5))
        runner = CohortRunner(make_hand_tape(), settings, strategies={"sign": agent})
        with EventStore.open(tmp_path / "run.db") as store:
            runner.run(store)
            made = [e for e in store.read() if isinstance(e, DecisionMade)]
        first = [r for r in fake.received if first_day in r.user_prompt]
    assert not stuck and len(first) == 2
    assert made[0].action == "HOLD" and made[0].error is not None
    assert made[0].error.startswith(f"{DecisionTimeout.__name__}: decision took longer than")
    # the next decision: a and b open (tie-w resolved), each answered 0.65 once
    assert made[1].action == "BET" and made[1].error is None
    assert json.loads(made[1].raw_response or "") == {
        "a": '{"p_yes": 0.65}',
        "b": '{"p_yes": 0.65}',
    }
    assert (made[1].tokens_in, made[1].tokens_out) == (2 * 1200, 2 * 40)
    forecaster = agent.forecaster
    assert isinstance(forecaster, LLMForecaster)
    assert (forecaster.ask_failures, forecaster.parse_failures) == (0, 0)


# -- building --------------------------------------------------------------------------------------


def test_llm_alone_uses_the_default_model() -> None:
    assert llm_forecaster().model == DEFAULT_MODEL
    agent = trader("linear?forecaster=llm")
    assert isinstance(agent.forecaster, LLMForecaster)
    assert agent.forecaster.model == DEFAULT_MODEL


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ARENA_LLM_API_KEY_ENV": "ARENA_TEST_UNSET_KEY"}, "ARENA_TEST_UNSET_KEY is not set"),
        ({"ARENA_LLM_MODE": "replay"}, "mode=replay needs a cassette"),
        ({"ARENA_LLM_MODE": "fetch"}, "ARENA_LLM_MODE: Input should be 'live', 'record' or"),
        (
            {"ARENA_LLM_MODE": "replay", "ARENA_LLM_CASSETTE": "/nonexistent/c.jsonl"},
            "cassette /nonexistent/c.jsonl does not exist",
        ),
    ],
)
def test_bad_connections_are_one_line_errors_at_build(
    env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(StrategyError, match=re.escape(message)) as caught:
        build_strategy(f"sign?forecaster=llm:{MODEL}")
    assert str(caught.value).startswith(f"forecaster llm:{MODEL}: ")
    assert "\n" not in str(caught.value)


def test_the_concurrency_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert llm_forecaster(MODEL).concurrency == Connection().concurrency == 8
    assert LLMForecaster(MODEL, ChatClient(MODEL)).concurrency == 1  # built by hand: in turn
    monkeypatch.setenv("ARENA_LLM_CONCURRENCY", "1")
    assert llm_forecaster(MODEL).concurrency == 1
    monkeypatch.setenv("ARENA_LLM_CONCURRENCY", "32")
    forecaster = trader(f"linear?forecaster=llm:{MODEL}").forecaster
    assert isinstance(forecaster, LLMForecaster) and forecaster.concurrency == 32


@pytest.mark.parametrize("setting", ["x", "0", "-3", "2.5", "4\n4"])
def test_a_bad_concurrency_is_a_one_line_error_at_build(
    setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARENA_LLM_CONCURRENCY", setting)
    with pytest.raises(StrategyError, match="ARENA_LLM_CONCURRENCY: ") as caught:
        build_strategy(f"sign?forecaster=llm:{MODEL}")
    assert str(caught.value).startswith(f"forecaster llm:{MODEL}: ")
    assert "\n" not in str(caught.value)


def test_a_model_echoing_the_price_finds_no_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    """The price is shown to four decimals (a 0.3000, b 0.6000, c 0.4000); a model that answers
    it back off by half a point has an edge of 0.005, under the llm forecaster's default
    ``min_edge`` of 0.01: no bets. With ``min_edge=0`` the same answers bet on all three."""

    def echo(request: Received) -> str:
        price = re.findall(r"Current market price of YES: (\d\.\d{4})\n", request.user_prompt)
        return json.dumps({"p_yes": round(float(price[0]) + 0.005, 4)})

    with FakeLLM(echo) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        quiet = trader(f"sign?forecaster=llm:{MODEL}")
        assert quiet.settings.min_edge == MIN_EDGE == 0.01
        assert not quiet.decide(hand_view()).bets
        eager = trader(f"sign?forecaster=llm:{MODEL}&min_edge=0")
        assert {b.market for b in eager.decide(hand_view()).bets} == {"a", "b", "c"}


SILENT_RUN = """
import os, socket, sys
sys.path.insert(0, sys.argv[1])
from tests.conftest import hand_config, make_hand_tape
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings

silent = socket.socket()
silent.bind(("127.0.0.1", 0))
silent.listen(64)  # connections are taken by the kernel and never answered
os.environ["ARENA_LLM_BASE_URL"] = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
spec = "sign?forecaster=llm:test-model"
settings = RunSettings(cohort=hand_config({"sign": spec}), options=RunOptions(decision_timeout=0.3))
run = CohortRunner(make_hand_tape(), settings).run()
print("decided", run.events, flush=True)
"""


def test_questions_left_in_flight_by_the_time_limit_do_not_keep_the_process_alive(
    tmp_path: Path,
) -> None:
    """A server that takes every connection and never answers: each decision's questions are
    still reading when the limit strikes. The run ends with its decisions recorded as HOLDs,
    and the process exits at once; with a thread pool that joins its workers at exit, it
    waited for reads that had 300 s each to time out."""
    import subprocess
    import sys

    env = {
        **os.environ,
        "ARENA_LLM_CONCURRENCY": "2",
        "ARENA_LLM_API_KEY_ENV": "",
    }
    root = str(Path(__file__).parents[2])
    done = subprocess.run(
        [sys.executable, "-c", SILENT_RUN, root],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a hang detector, not a speed figure: the old pool blocked for minutes
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("decided ")
