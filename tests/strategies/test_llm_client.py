"""The chat client against a fake server on 127.0.0.1: what it retries, how long it waits, what it
records of each attempt, and that the key never leaves the request header."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from strategies.llm.cassette import Recorder
from strategies.llm.client import ChatClient, Request, retry_after
from strategies.llm.connection import Connection
from strategies.llm.schema import FORECAST_SCHEMA
from tests.llm_server import HOLD, FakeLLM, Reply

MODEL = "test/model"
KEY = "sk-test-SECRET-0123456789abcdef"
QUESTION = Request([{"role": "user", "content": "hi"}], "q", FORECAST_SCHEMA)


@pytest.fixture
def server() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def client(url: str, waits: list[float] | None = None, **settings: Any) -> ChatClient:
    connection = Connection(base_url=url, **({"retries": 2, "backoff": 3.0} | settings))
    sleep = waits.append if waits is not None else (lambda _: None)
    return ChatClient(MODEL, connection, api_key=KEY, sleep=sleep)


def test_server_errors_and_rate_limits_are_retried_with_a_doubling_backoff(
    server: FakeLLM,
) -> None:
    server.queue(Reply(status=500), Reply(status=429), HOLD)
    waits: list[float] = []
    answer = client(server.url, waits).ask(QUESTION)
    assert answer.text == HOLD and waits == [3.0, 6.0] and len(server.received) == 3
    assert [(c.attempt, c.status, c.error) for c in answer.calls] == [
        (1, 500, "HTTP 500: injected 500"),
        (2, 429, "HTTP 429: injected 429"),
        (3, 200, None),
    ]


def test_retry_after_wins_over_the_backoff(server: FakeLLM) -> None:
    server.queue(Reply(status=429, headers={"Retry-After": "17"}), HOLD)
    waits: list[float] = []
    assert client(server.url, waits).ask(QUESTION).text == HOLD and waits == [17.0]


def test_retry_after_may_be_an_http_date() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    value = format_datetime(now + timedelta(seconds=17), usegmt=True)
    response = httpx.Response(429, headers={"Retry-After": value})
    assert retry_after(response, now=now.timestamp) == 17.0
    assert retry_after(httpx.Response(429, headers={"Retry-After": "soon"})) is None
    assert retry_after(httpx.Response(429)) is None


def test_a_retry_after_beyond_max_wait_is_capped(server: FakeLLM) -> None:
    server.queue(Reply(status=429, headers={"Retry-After": "3600"}), HOLD)
    waits: list[float] = []
    client(server.url, waits, max_wait=30).ask(QUESTION)
    assert waits == [30.0]


def test_an_error_inside_a_200_is_retried_like_a_5xx(server: FakeLLM) -> None:
    upstream = {"error": {"message": "upstream provider overloaded", "code": 502}}
    server.queue(Reply(body=upstream), HOLD)
    answer = client(server.url).ask(QUESTION)
    assert answer.text == HOLD
    assert answer.calls[0].error == "HTTP 200 with an error: upstream provider overloaded"


def test_a_400_to_the_schema_turns_structured_output_off_and_is_remembered() -> None:
    with FakeLLM(reject_schema=True) as fake:
        c = client(fake.url, retries=0)
        first = c.ask(QUESTION)
        second = c.ask(QUESTION)
    rejected, plain = first.calls
    assert rejected.status == 400 and rejected.structured
    assert rejected.error == (
        "HTTP 400: response_format is not supported (structured output turned off for this server)"
    )
    assert (plain.status, plain.structured, first.text) == (200, False, HOLD)
    assert [c.structured for c in second.calls] == [False] and not c.structured
    assert ["response_format" in r.body for r in fake.received] == [True, False, False]


def test_unauthorized_is_not_retried_and_the_key_is_scrubbed(server: FakeLLM) -> None:
    server.queue(Reply(status=401))  # its message quotes the key it was sent
    waits: list[float] = []
    c = client(server.url, waits, retries=4)
    answer = c.ask(QUESTION)
    assert answer.error == "HTTP 401: Incorrect API key provided: ***"
    assert len(server.received) == 1 and waits == []
    assert KEY not in repr(c)


def test_a_key_echoed_inside_an_answer_is_scrubbed(server: FakeLLM) -> None:
    server.queue(Reply("ok", echo_key=True, reasoning=f"I saw {KEY}"))
    call = client(server.url).ask(QUESTION).last
    assert call.answer == "ok your header was Bearer ***" and call.reasoning == "I saw ***"


def test_a_read_timeout_is_not_sent_again_unless_asked(server: FakeLLM) -> None:
    server.queue(Reply(stall=0.5))
    answer = client(server.url, timeout=0.1).ask(QUESTION)
    assert answer.error == "no answer within 0.1 s (read timeout)" and len(server.received) == 1
    server.queue(Reply(stall=0.5), HOLD)
    again = client(server.url, timeout=0.1, retry_timeouts=True).ask(QUESTION)
    assert again.text == HOLD and len(again.calls) == 2


def test_a_dropped_connection_is_retried(server: FakeLLM) -> None:
    server.queue(Reply(drop=True), HOLD)
    answer = client(server.url).ask(QUESTION)
    assert answer.text == HOLD and answer.calls[0].status is None
    assert answer.calls[0].error is not None


def test_a_refused_connection_is_retried_then_recorded() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    waits: list[float] = []
    answer = client(f"http://127.0.0.1:{port}/v1", waits, retries=1).ask(QUESTION)
    assert len(answer.calls) == 2 and waits == [3.0]
    assert answer.error is not None and "ConnectError" in answer.error


def test_usage_and_finish_reason_are_recorded(server: FakeLLM) -> None:
    server.queue(Reply("0.4", usage={"prompt_tokens": 31, "completion_tokens": 3}))
    call = client(server.url).ask(QUESTION).last
    assert (call.tokens_in, call.tokens_out, call.cost) == (31, 3, None)
    assert (call.finish_reason, call.status, call.structured) == ("stop", 200, True)
    assert call.latency_ms is not None and call.latency_ms > 0


def test_abort_closes_the_connections_and_the_client_asks_again_afterwards(
    server: FakeLLM,
) -> None:
    c = client(server.url)
    assert c.ask(QUESTION).text == HOLD
    c.abort()
    assert c.ask(QUESTION).text == HOLD and len(server.received) == 2


def test_a_400_for_another_reason_keeps_the_schema_and_is_not_retried(server: FakeLLM) -> None:
    """llama.cpp's answer to a prompt past its context: dropping the schema would not help."""
    too_long = {"error": {"message": "request (9031 tokens) exceeds the available context size"}}
    server.queue(Reply(status=400, body=too_long))
    c = client(server.url)
    answer = c.ask(QUESTION)
    assert answer.error == (
        "HTTP 400: the prompt is longer than the model's context (request (9031 tokens) exceeds "
        "the available context size): show fewer markets (markets=N in the agent spec) or serve "
        "a longer context"
    )
    assert len(server.received) == 1 and c.structured


def test_a_recorded_cassette_never_holds_the_key(server: FakeLLM, tmp_path: Path) -> None:
    server.queue(Reply(status=401), Reply("ok", echo_key=True, reasoning=f"I saw {KEY}"))
    path = tmp_path / "answers.jsonl"
    recorder = Recorder(client(server.url, retries=0), path)
    recorder.ask(QUESTION)
    recorder.ask(QUESTION)
    text = path.read_text()
    assert KEY not in text and "SECRET" not in text
    assert text.count("***") == 3  # the 401's message, the answer, the reasoning


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [{"message": None, "finish_reason": "stop"}]},
        {"choices": [{"message": "a bare string", "finish_reason": "stop"}]},
        {"choices": [{"message": ["a", "list"]}]},
        {"choices": [None]},
        {"choices": None},
        {"choices": []},
    ],
    ids=["null", "string", "list", "null-choice", "null-choices", "no-choices"],
)
def test_a_200_without_a_message_object_is_a_recorded_failed_call(
    server: FakeLLM, body: dict[str, Any]
) -> None:
    """Garbage in a 200 is the call's error, not an exception that loses the transcript."""
    server.queue(Reply(body=body))
    answer = client(server.url).ask(QUESTION)
    assert [(c.status, c.error) for c in answer.calls] == [
        (200, "the response has no choices[0].message")
    ]
    assert len(server.received) == 1


def test_an_answer_too_long_to_keep_is_cut_and_not_read(server: FakeLLM) -> None:
    """Megabytes from a server would go into the log with every attempt; a replay reads what
    the log kept, so the cut answer must not be read live either."""
    server.queue(Reply(content="7" * 150_000, reasoning="r" * 120_000))
    answer = client(server.url).ask(QUESTION)
    (call,) = answer.calls
    assert call.answer == "7" * 100_000 and answer.text is None
    assert call.error == "the answer is 150,000 characters, over 100,000: not read"
    assert call.reasoning == "r" * 100_000 + " [cut: 120,000 characters in all]"
    assert len(server.received) == 1


def test_an_answer_of_exactly_the_limit_is_read(server: FakeLLM) -> None:
    server.queue(Reply(content="7" * 100_000))
    assert client(server.url).ask(QUESTION).text == "7" * 100_000
