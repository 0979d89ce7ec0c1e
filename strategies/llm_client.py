"""Talking to an OpenAI-compatible chat-completions endpoint, and recording what it said.

``ChatClient`` is the network half: one POST per question, retried with exponential backoff on
rate limits, server errors and timeouts (never on another 4xx, which would only fail again),
its ``httpx.Client`` or transport handed in from outside so tests plug in a local server.

A cassette is the offline half: ``Recorder`` stores every answer under a hash of the question
(model and messages) in a JSONL file, and ``Player`` answers from that file with no network,
so a recorded run replays with the same events, byte for byte. The cassette keeps the
latency measured at recording time for the same reason.

All three may be asked from several threads at once (the ``llm`` forecaster asks a decision's
questions concurrently): the client shares one ``httpx.Client``, which is thread-safe, and the
recorder and player hold a lock around what they write or count.

The API key lives only in the request header. Any error text that could carry it is scrubbed
before it leaves this module, so it cannot reach the log, a report or a terminal.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
MODES = ("live", "record", "replay")

Message = dict[str, str]
T = TypeVar("T", int, float)


class LLMError(Exception):
    """The model could not be asked or did not answer usably; the message is one line."""


class CassetteMiss(LLMError):
    """A replay asked a question the cassette has no recorded answer for."""


@dataclass(frozen=True, slots=True)
class Completion:
    """One answer: its text, what it cost, and how long it took."""

    text: str
    tokens_in: int | None
    tokens_out: int | None
    cost: float | None
    latency_ms: float
    body: dict[str, Any]


class Completer(Protocol):
    """Anything that answers a chat: the live client, a recorder, a player. One that is
    handed to a forecaster asking concurrently must be safe to call from several threads."""

    def complete(self, messages: Sequence[Message]) -> Completion: ...


def scrub(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` blotted out, on one line."""
    if secret:
        text = text.replace(secret, "***")
    return " ".join(text.split())


def completion_from(body: Any, latency_ms: float) -> Completion:
    """The answer inside a chat-completions body, or an LLMError saying what is missing."""
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        problem = body.get("error") if isinstance(body, dict) else None
        detail = problem.get("message") if isinstance(problem, dict) else problem
        raise LLMError(
            f"the response has no choices[0].message{f': {detail}' if detail else ''}"
        ) from None
    content = message.get("content") if isinstance(message, dict) else None
    usage = body.get("usage") or {}
    return Completion(
        text=content if isinstance(content, str) else "",
        tokens_in=_int(usage.get("prompt_tokens")),
        tokens_out=_int(usage.get("completion_tokens")),
        cost=_float(usage.get("cost")),
        latency_ms=latency_ms,
        body=body,
    )


def total(values: Iterable[T | None]) -> T | None:
    """The sum of what several calls reported (tokens, cost, latency), or None if none did."""
    present = [v for v in values if v is not None]
    return sum(present[1:], present[0]) if present else None


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _float(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x)


class ChatClient:
    """A model behind ``{base_url}/chat/completions``, asked at temperature 0.

    ``sleep`` and ``clock`` are parameters so tests neither wait for backoff nor depend on the
    wall clock. The default clock is bound here, at import: during a replay freezegun replaces
    ``time.perf_counter_ns`` in every module, and latency must be real elapsed time.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        timeout: float = 40.0,
        retries: int = 4,
        backoff: float = 3.0,
        max_tokens: int | None = None,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_tokens = max_tokens
        self._api_key = api_key
        self._client = client
        self._transport = transport
        self._sleep = sleep
        self._clock = clock
        self._opening = threading.Lock()

    def __repr__(self) -> str:
        return f"ChatClient({self.model!r}, url={self.url!r})"  # never the key

    def complete(self, messages: Sequence[Message]) -> Completion:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "temperature": 0}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        headers = {"Content-Type": "application/json", "X-Title": "arena"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self._sleep(self.backoff * 2 ** (attempt - 1))
            started = self._clock()
            try:
                response = self._http().post(
                    self.url, json=body, headers=headers, timeout=self.timeout
                )
            except httpx.TimeoutException:
                problem = f"no answer within {self.timeout:g} s"
                continue
            except httpx.TransportError as exc:
                problem = self._scrub(f"{type(exc).__name__}: {exc}")
                continue
            latency_ms = (self._clock() - started) / 1e6
            status = response.status_code
            if status == 429 or status >= 500:
                problem = f"HTTP {status}"
                continue
            if status >= 400:
                raise LLMError(
                    self._scrub(f"{self.url} answered HTTP {status}: {_reason(response)}")
                )
            try:
                payload = response.json()
            except ValueError:
                raise LLMError(
                    f"{self.url} answered HTTP {status} with a body that is not JSON"
                ) from None
            try:
                return completion_from(payload, latency_ms)
            except LLMError as exc:
                raise LLMError(self._scrub(str(exc))) from None
        raise LLMError(f"{self.url}: {problem} (gave up after {self.retries} retries)")

    def _http(self) -> httpx.Client:
        """Made on first use, so a strategy that is only built (to check its spec) opens nothing."""
        with self._opening:  # two threads asking first must not open two clients
            if self._client is None:
                self._client = httpx.Client(transport=self._transport, timeout=self.timeout)
            return self._client

    def _scrub(self, text: str) -> str:
        return scrub(text, self._api_key)


def _reason(response: httpx.Response) -> str:
    """The error message of a failed call, short: the provider's own words if it sent any."""
    try:
        payload = response.json()
    except ValueError:
        return response.reason_phrase or "no detail"
    error = payload.get("error") if isinstance(payload, dict) else None
    detail = error.get("message") if isinstance(error, dict) else error
    return str(detail or response.reason_phrase or "no detail")[:200]


# -- cassettes -----------------------------------------------------------------------------------


def request_key(model: str, messages: Sequence[Message]) -> str:
    """The cassette key of a question: a hash of the model and the exact messages."""
    canonical = json.dumps(
        {"model": model, "messages": list(messages)}, sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class Recorder:
    """Asks the live client and appends each answer to the cassette file.

    Questions asked concurrently are answered concurrently; only the append is one at a time,
    so every answer is one whole line. Lines follow the order answers arrive in, which a
    replay does not depend on: it finds answers by question.
    """

    def __init__(self, inner: ChatClient, path: Path) -> None:
        self.inner = inner
        self.path = path
        self._writing = threading.Lock()

    def complete(self, messages: Sequence[Message]) -> Completion:
        completion = self.inner.complete(messages)
        entry = {
            "key": request_key(self.inner.model, messages),
            "model": self.inner.model,
            "latency_ms": completion.latency_ms,
            "response": completion.body,
        }
        line = json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n"
        with self._writing, self.path.open("a", encoding="utf-8") as out:
            out.write(line)
        return completion


class Player:
    """Answers from a cassette file only; a question it has not recorded is a CassetteMiss.

    The same question asked twice (two cohorts starting alike) gets its recorded answers in
    order, then the last one again.
    """

    def __init__(self, model: str, path: Path) -> None:
        self.model = model
        self.path = path
        self._answers: dict[str, list[dict[str, Any]]] = {}
        self._served: dict[str, int] = {}
        self._counting = threading.Lock()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                self._answers.setdefault(entry["key"], []).append(entry)
            except (ValueError, KeyError, TypeError):
                raise LLMError(f"cassette {path}: line {n} is not a recorded answer") from None

    def complete(self, messages: Sequence[Message]) -> Completion:
        key = request_key(self.model, messages)
        answers = self._answers.get(key)
        if not answers:
            raise CassetteMiss(
                f"cassette {self.path} has no answer from {self.model} for request {key[:12]} "
                "(record it with mode=record)"
            )
        with self._counting:
            k = self._served.get(key, 0)
            self._served[key] = k + 1
        entry = answers[min(k, len(answers) - 1)]
        return completion_from(entry["response"], float(entry.get("latency_ms") or 0.0))


def open_completer(
    model: str,
    *,
    mode: str = "live",
    cassette: str | Path | None = None,
    api_key_env: str | None = None,
    base_url: str = DEFAULT_BASE_URL,
    timeout: float = 40.0,
    retries: int = 4,
    backoff: float = 3.0,
    max_tokens: int | None = None,
    client: httpx.Client | None = None,
    transport: httpx.BaseTransport | None = None,
) -> Completer:
    """The live client (``live``), a recorder in front of it (``record``) or a player
    (``replay``), checked before the first question: a missing key or cassette is an LLMError
    when the agent is built, not a failed decision weeks into a run. A replay needs no key."""
    if mode not in MODES:
        raise LLMError(f"mode must be live, record or replay (got {mode!r})")
    path = Path(cassette) if cassette else None
    if mode != "live" and path is None:
        raise LLMError(f"mode={mode} needs a cassette file")
    if mode == "replay":
        assert path is not None
        if not path.is_file():
            raise LLMError(f"cassette {path} does not exist")
        return Player(model, path)
    api_key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not api_key:
        raise LLMError(f"the environment variable {api_key_env} is not set")
    live = ChatClient(
        model,
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        retries=retries,
        backoff=backoff,
        max_tokens=max_tokens,
        client=client,
        transport=transport,
    )
    if path is None:
        return live
    if not path.parent.is_dir():
        raise LLMError(f"the folder of cassette {path} does not exist")
    return Recorder(live, path)
