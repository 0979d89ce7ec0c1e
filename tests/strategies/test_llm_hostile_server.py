"""A server that answers badly on purpose: the key quoted back in every field it can fill and in
every encoding JSON allows, bodies dripped a byte at a time, bodies too big or bombed, numbers
and nesting no log can hold. Each is a recorded failure of that one call, or a scrubbed answer;
none loses a decision's calls, none puts the key in the log or back in a prompt.

Against the fake server of ``llm_server.py`` on 127.0.0.1; no assertion depends on how long
anything took (the drip's end is read from the server's count of the bytes it sent).
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arena.run.runner import CohortRunner
from ledger.events import DecisionMade, ModelCalled
from ledger.store import EventStore
from strategies.llm import client as client_module
from strategies.llm.client import ChatClient, Request, Secret
from strategies.llm.connection import Connection
from strategies.llm.schema import FORECAST_SCHEMA
from tests.conftest import hand_config, make_hand_tape
from tests.llm_server import HOLD, FakeLLM, Reply

KEY_ENV = "ARENA_TEST_LLM_KEY"
KEY = "sk-test-SECRET-0123456789abcdef"
MODEL = "test/model"
QUESTION = Request([{"role": "user", "content": "hi"}], "q", FORECAST_SCHEMA)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    for name in Connection.model_fields:
        monkeypatch.delenv(f"ARENA_LLM_{name.upper()}", raising=False)


@pytest.fixture
def server() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def client(url: str, **settings: Any) -> ChatClient:
    connection = Connection(base_url=url, **({"retries": 0, "backoff": 0.0} | settings))
    return ChatClient(MODEL, connection, api_key=KEY)


def escaped(text: str, backslashes: int = 1) -> str:
    """Every character of ``text`` as a JSON ``\\uXXXX`` escape, under ``backslashes``."""
    return "".join("\\" * backslashes + f"u{ord(c):04x}" for c in text)


def unescaped(text: str) -> list[str]:
    """``text`` and what decoding its escapes once, twice and three times gives."""
    out = [text]
    for _ in range(3):
        try:
            text = text.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError:
            break
        out.append(text)
    return out


def carries_the_key(text: str) -> bool:
    """Whether ``text``, in any decoding of its escapes, holds the key or 8 characters of it
    together (the tests' own texts hold no such piece by chance)."""
    pieces = {KEY[i : i + 8] for i in range(len(KEY) - 7)}
    return any(p in t for t in unescaped(text) for p in pieces)


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


# -- keys ----------------------------------------------------------------------------------------


def test_the_key_planted_in_every_field_never_reaches_the_log_nor_a_reask(
    tmp_path: Path, server: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Week 1: a BET without bets (rejected, so re-asked) whose reasoning carries the key with a
    character JSON-escaped, the thinking and the finish reason the two halves of the key; the
    re-ask answers HOLD with the key fully escaped, and escaped twice. Week 2: a 500 whose
    status line and body quote it, a 200 with an error object quoting it, a 401 (which quotes
    the key it was sent). Recorded into a cassette as well: neither the log, nor the cassette,
    nor any request body the server received holds the key in any encoding."""
    one_escaped = KEY[:5] + "\\u0073" + KEY[6:]  # the "s" of "test"
    server.queue(
        Reply(
            f'{{"action": "BET", "reasoning": "my key is {one_escaped}"}}',
            reasoning="thinking of " + KEY[:14],
            finish_reason=KEY[14:],
        ),
        Reply(f'{{"action": "HOLD", "reasoning": "{escaped(KEY)} and {escaped(KEY, 2)}"}}'),
        Reply(status=500, phrase=f"no {KEY}", body={"error": {"message": f"bad key {KEY}"}}),
        Reply(body={"error": {"message": f"upstream refused {KEY}"}}),
        Reply(status=401),
    )
    cassette = tmp_path / "answers.jsonl"
    monkeypatch.setenv("ARENA_LLM_BASE_URL", server.url)
    monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", KEY_ENV)
    monkeypatch.setenv("ARENA_LLM_RETRIES", "2")
    monkeypatch.setenv("ARENA_LLM_BACKOFF", "0")
    monkeypatch.setenv("ARENA_LLM_MODE", "record")
    monkeypatch.setenv("ARENA_LLM_CASSETTE", str(cassette))
    db = tmp_path / "run.db"
    with EventStore.open(db) as store:
        CohortRunner(make_hand_tape(), hand_config({"llm": f"llm:{MODEL}"})).run(store)
        events = [e for e in store.read() if isinstance(e, DecisionMade | ModelCalled)]
    week1 = [e for e in events if e.week == 1]
    decided = week1[0]
    assert isinstance(decided, DecisionMade) and decided.reasoning == "*** and ***"
    assert isinstance(week1[1], ModelCalled)
    first = week1[1].call
    assert first.answer == '{"action": "BET", "reasoning": "my key is ***"}'
    assert first.reasoning == "thinking of ***" and first.finish_reason == "***"
    assert first.rejected == 'BET needs a non-empty "bets" array'
    week2 = [e.call for e in events if isinstance(e, ModelCalled) and e.week == 2]
    assert [c.status for c in week2] == [500, 200, 401]
    assert [c.error for c in week2] == [
        "HTTP 500: bad key ***",
        "HTTP 200 with an error: upstream refused ***",
        "HTTP 401: Incorrect API key provided: ***",
    ]
    with sqlite3.connect(db) as conn:
        payloads = [row[0] for row in conn.execute("SELECT payload FROM events")]
    stored = [s for p in payloads for s in strings(json.loads(p))]
    stored += [s for line in cassette.read_text().splitlines() for s in strings(json.loads(line))]
    assert stored and not [s for s in stored if carries_the_key(s)]
    sent = [s for r in server.received for s in strings(r.body)]
    assert "my key is ***" in server.received[1].user_prompt  # the re-ask echoes it, scrubbed
    assert not [s for s in sent if carries_the_key(s)]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"a {KEY} b", "a *** b"),
        (f"{KEY[:10]}|{KEY[10:]}", "***|***"),  # split in two, each piece over 8 characters
        (escaped(KEY), "***"),
        (KEY[:2] + "\\\\u002d" + KEY[3:], "***"),  # escaped twice: a JSON answer inside JSON
        ("sk-t", "sk-t"),  # four characters of the key are no key
        (f"x{KEY}{KEY}y", "x***y"),
    ],
)
def test_the_key_is_found_in_any_encoding_and_in_pieces(text: str, kept: str) -> None:
    assert Secret(KEY).scrub(text) == kept


# -- what is sent --------------------------------------------------------------------------------


def test_every_request_asks_llama_cpp_not_to_reuse_its_prompt_cache(server: FakeLLM) -> None:
    """llama.cpp's prompt cache changes the answer to the same request at temperature 0."""
    assert client(server.url).ask(QUESTION).text == HOLD
    body = server.received[0].body
    assert body["cache_prompt"] is False and body["temperature"] == 0


def test_a_server_that_refuses_cache_prompt_is_asked_again_without_it(server: FakeLLM) -> None:
    refused = {"error": {"message": "Unrecognized request argument supplied: cache_prompt"}}
    server.queue(Reply(status=400, body=refused), HOLD, HOLD)
    c = client(server.url)
    answer = c.ask(QUESTION)
    assert answer.text == HOLD and [x.status for x in answer.calls] == [400, 200]
    assert "cache_prompt" not in server.received[1].body and not c.cache_prompt
    c.ask(QUESTION)
    assert "cache_prompt" not in server.received[2].body


# -- bounds --------------------------------------------------------------------------------------


def test_the_timeout_is_per_attempt_against_a_server_dripping_bytes(server: FakeLLM) -> None:
    """Status line, headers and body a byte every 50 ms: each read is quick, so only a
    deadline for the whole attempt ends it; the server sees the client leave before the end."""
    server.queue(Reply(HOLD, drip=0.05))
    answer = client(server.url, timeout=0.3).ask(QUESTION)
    assert answer.error == "no answer within 0.3 s (read timeout)"
    assert server.drip_ended.wait(timeout=60)  # a hang detector, not a figure
    [(sent, size)] = server.dripped
    assert sent < size


@pytest.fixture
def small_bodies(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(client_module, "MAX_BODY", 50_000)
    return 50_000


def answer_body(content: str = HOLD) -> bytes:
    return json.dumps({"choices": [{"message": {"content": content}}]}).encode()


def test_a_body_over_the_cap_is_a_failed_call(server: FakeLLM, small_bodies: int) -> None:
    server.queue(Reply(raw=answer_body("x" * small_bodies)))
    [call] = client(server.url).ask(QUESTION).calls
    assert call.status == 200 and call.error == "the response is over 50,000 bytes: not read"


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compressed_answer_is_read(server: FakeLLM, encoding: str) -> None:
    packed = gzip.compress(answer_body()) if encoding == "gzip" else zlib.compress(answer_body())
    server.queue(Reply(raw=packed, headers={"Content-Encoding": encoding}))
    assert client(server.url).ask(QUESTION).text == HOLD


def test_a_gzip_bomb_is_a_failed_call(server: FakeLLM, small_bodies: int) -> None:
    bomb = gzip.compress(b" " * (100 * small_bodies))  # 5 MB from a few KB
    assert len(bomb) < small_bodies
    server.queue(Reply(raw=bomb, headers={"Content-Encoding": "gzip"}))
    [call] = client(server.url).ask(QUESTION).calls
    assert call.error == "the response decompresses to over 50,000 bytes: not read"


def test_an_encoding_arena_does_not_read_is_a_failed_call(server: FakeLLM) -> None:
    server.queue(Reply(raw=b"\x1b\x00", headers={"Content-Encoding": "br"}))
    [call] = client(server.url).ask(QUESTION).calls
    assert call.error == "the response is encoded as 'br', which arena does not read"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "not JSON arena can read"),
        (b'{"usage": {"prompt_tokens": ' + b"9" * 5_000 + b"}}", "not JSON arena can read"),
    ],
    ids=["nested", "5000-digit"],
)
def test_a_body_python_cannot_read_is_a_failed_call(
    server: FakeLLM, body: bytes, error: str
) -> None:
    server.queue(Reply(raw=body))
    call = client(server.url).ask(QUESTION).last
    assert call.status == 200 and call.error is not None and error in call.error


def test_absurd_usage_is_a_failed_call_kept_in_the_log(
    tmp_path: Path, server: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Token counts of 2**80 and a 400-digit one, a cost of 1e400 (infinite once read): the
    call fails, with the reason, and it and its decision are in a log that reads back."""
    usage = {"prompt_tokens": 2**80, "completion_tokens": int("9" * 400), "cost": 1e999}
    body = json.dumps({"choices": [{"message": {"content": HOLD}}], "usage": usage})
    server.queue(Reply(raw=body.replace("Infinity", "1e400").encode()))
    monkeypatch.setenv("ARENA_LLM_BASE_URL", server.url)
    monkeypatch.setenv("ARENA_LLM_RETRIES", "0")
    db = tmp_path / "run.db"
    with EventStore.open(db) as store:
        CohortRunner(make_hand_tape(), hand_config({"llm": f"llm:{MODEL}"})).run(store)
        events = [e for e in store.read() if isinstance(e, DecisionMade | ModelCalled)]
    decided, called = events[0], events[1]
    assert isinstance(decided, DecisionMade) and isinstance(called, ModelCalled)
    call = called.call
    assert (call.tokens_in, call.tokens_out, call.cost) == (None, None, None)
    assert call.error is not None and call.error.startswith(
        "the response is not believable: usage.prompt_tokens is 1208925819614629174706176; "
        "usage.completion_tokens is 99999999999999999999...(400 characters); usage.cost is inf"
    )
    assert decided.action == "HOLD" and decided.error == call.error
