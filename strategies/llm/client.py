"""Asking an OpenAI-compatible chat-completions endpoint, and keeping every attempt.

``ChatClient.ask`` sends one question and returns an ``Answer``: every HTTP attempt it took, as
the ``ModelCall`` records the log keeps (messages, raw answer, finish reason, reasoning, tokens,
cost, latency, status, error), the last one deciding. It never raises for what a server or the
network does: a 401, a 402, a hang or a dropped connection is an answer whose last attempt has
an ``error``, so the caller records it and the run goes on.

What is tried again, and what is not:

* a 429 (after its ``Retry-After`` if it sent one, else the doubling backoff), a 5xx, a
  connection that could not be made or was dropped, and a 200 whose body is an error object:
  ``retries`` times;
* a read timeout only when ``retry_timeouts`` is set: a slow server is most likely still working
  on the request, and sending it again would queue a second copy behind the first;
* a 400 that blames the structured-output request (its message names the schema, the
  grammar, ``response_format``...): once, at once, without ``response_format``; the client
  then remembers that this server rejects it (``structured`` turns False) and the attempt that
  failed says so;
* any other 4xx: never; it would only fail again.

An answer or reasoning longer than ``MAX_KEPT`` characters is cut to it before it is kept, and
such an answer is not read (its attempt has an ``error``): a server sending megabytes would
otherwise put them into the log with every attempt, and a replay reads the answer the log kept.

The API key lives only in the request header. Every text that is kept (answer, reasoning,
error) is scrubbed of it first, since some providers quote the key back, in an error or even
in an answer.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import httpx
import msgspec

from ledger.events import ModelCall
from strategies.api import Trace
from strategies.llm.connection import Connection

Message = dict[str, str]
T = TypeVar("T", int, float)


class LLMError(Exception):
    """The model cannot be asked at all (a missing key or cassette); the message is one line."""


@dataclass(frozen=True, slots=True)
class Request:
    """One question: the messages, the JSON schema its answer should follow (None: free text),
    what it is about (``question``) and how many times it was asked before (``reask``)."""

    messages: Sequence[Message]
    question: str
    schema: dict[str, Any] | None = None
    reask: int = 0
    max_tokens: int | None = None
    reasoning: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """What asking gave: every attempt, in order; the last one decides."""

    calls: tuple[ModelCall, ...]

    @property
    def last(self) -> ModelCall:
        return self.calls[-1]

    @property
    def text(self) -> str | None:
        """The answer's text, or None when the last attempt failed."""
        return None if self.last.error is not None else (self.last.answer or "")

    @property
    def error(self) -> str | None:
        return self.last.error


class Completer(Protocol):
    """Anything that answers a request: the live client, a recorder, a player. One handed to
    a forecaster asking concurrently must be safe to call from several threads."""

    model: str

    def ask(self, request: Request) -> Answer: ...

    def abort(self) -> None:
        """Give up on whatever is in flight (a decision's time limit struck)."""


def request_key(model: str, messages: Sequence[Message]) -> str:
    """The cassette key of a question: a hash of the model and the exact messages."""
    canonical = json.dumps(
        {"model": model, "messages": list(messages)}, sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def prompt_digest(text: str) -> str:
    """The name of a system prompt in the log: 16 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def blank_call(model: str, request: Request) -> ModelCall:
    """The call record of ``request`` before anything was sent: model, question, messages."""
    messages = list(request.messages)
    system = None
    if messages and messages[0].get("role") == "system":
        system = prompt_digest(messages[0]["content"])
        messages = messages[1:]
    return ModelCall(
        model=model,
        question=request.question,
        request=request_key(model, request.messages),
        reask=request.reask,
        system=system,
        messages=messages,
    )


def total(values: Iterable[T | None]) -> T | None:
    """The sum of what several calls reported (tokens, cost, latency), or None if none did."""
    present = [v for v in values if v is not None]
    return sum(present[1:], present[0]) if present else None


def calls_trace(model: str, calls: Sequence[ModelCall], **fields: Any) -> Trace:
    """A decision's trace over ``calls``: usage summed over every attempt, in the order
    given, and the attempts themselves for the transcript; ``fields`` add the rest."""
    return Trace(
        model=model,
        tokens_in=total(c.tokens_in for c in calls),
        tokens_out=total(c.tokens_out for c in calls),
        cost=total(c.cost for c in calls),
        latency_ms=total(c.latency_ms for c in calls),
        calls=tuple(calls),
        **fields,
    )


def scrub(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` blotted out."""
    return text.replace(secret, "***") if secret else text


def one_line(text: str) -> str:
    return " ".join(text.split())


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _float(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x)


def _text(x: Any) -> str | None:
    return x if isinstance(x, str) and x else None


def provider_error(payload: Any) -> str | None:
    """The error message of a body that carries one (``{"error": ...}``), else None."""
    problem = payload.get("error") if isinstance(payload, dict) else None
    if problem is None:
        return None
    detail = problem.get("message") if isinstance(problem, dict) else problem
    return str(detail or "unspecified error")[:300]


def read_body(payload: Any) -> dict[str, Any]:
    """The fields of a call that a 200's body gives: answer, finish reason, reasoning, usage;
    ``error`` when the body has no answer, ``retry`` when that is worth asking again for (an
    error object inside a 200, which OpenRouter sends for upstream failures)."""
    try:
        choice = payload["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        message = None
    if not isinstance(message, dict):  # absent, null, or a bare string: no answer to read
        problem = provider_error(payload)
        if problem is not None:
            return {"error": f"HTTP 200 with an error: {problem}", "retry": True}
        return {"error": "the response has no choices[0].message", "retry": False}
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    content = message.get("content")
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    fields: dict[str, Any] = {
        "answer": content if isinstance(content, str) else "",
        "finish_reason": _text(finish),
        "reasoning": _text(reasoning),
        "tokens_in": _int(usage.get("prompt_tokens")),
        "tokens_out": _int(usage.get("completion_tokens")),
        "cost": _float(usage.get("cost")),
    }
    if finish == "length":
        fields["error"] = "the answer was cut off at max_tokens (finish_reason length)"
    answer, reasoning = fields["answer"], fields["reasoning"]
    if len(answer) > MAX_KEPT:
        fields["answer"] = answer[:MAX_KEPT]
        fields["error"] = f"the answer is {len(answer):,} characters, over {MAX_KEPT:,}: not read"
    if reasoning is not None and len(reasoning) > MAX_KEPT:
        fields["reasoning"] = reasoning[:MAX_KEPT] + f" [cut: {len(reasoning):,} characters in all]"
    return fields


def retry_after(response: httpx.Response, now: Callable[[], float] = time.time) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (a number, or an HTTP date), or None."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


MAX_KEPT = 100_000
"""Characters of an answer or of reasoning kept per attempt: the boundary's cap on a decision's
texts (``arena.boundary.checks.MAX_TEXT``), and over ten times the longest answer the agents ask for
(2,048 tokens)."""

SCHEMA_WORDS = ("response_format", "schema", "grammar", "parser", "structured", "json")
"""Words of a 400 that blames the structured-output request (llama.cpp: "Unable to generate
parser ... JSON schema error"; others name ``response_format``); a 400 for another reason (a
prompt past the context size) is not cured by dropping the schema, and is not retried."""


def _about_the_schema(detail: str) -> bool:
    lowered = detail.lower()
    return not detail.strip() or any(word in lowered for word in SCHEMA_WORDS)


@dataclass
class _Attempt:
    """What one attempt gave, before it becomes a ModelCall; ``wait`` overrides the backoff."""

    fields: dict[str, Any] = field(default_factory=dict)
    retry: bool = False
    wait: float | None = None
    drop_schema: bool = False


class ChatClient:
    """A model behind ``{base_url}/chat/completions``, asked at temperature 0.

    ``sleep`` and ``clock`` are parameters so tests neither wait for backoff nor depend on the
    wall clock. The default clock is bound here, at import: during a replay freezegun replaces
    ``time.perf_counter_ns`` in every module, and latency must be real elapsed time.
    """

    def __init__(
        self,
        model: str,
        connection: Connection | None = None,
        *,
        api_key: str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.model = model
        self.connection = connection or Connection()
        self.url = self.connection.base_url.rstrip("/") + "/chat/completions"
        self.structured = self.connection.structured
        self._api_key = api_key
        self._transport = transport
        self._sleep = sleep
        self._clock = clock
        self._client: httpx.Client | None = None
        self._opening = threading.Lock()

    def __repr__(self) -> str:
        return f"ChatClient({self.model!r}, url={self.url!r})"  # never the key

    def ask(self, request: Request) -> Answer:
        c = self.connection
        blank = blank_call(self.model, request)
        headers = {"Content-Type": "application/json", "X-Title": "arena"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        calls: list[ModelCall] = []
        retried = 0
        while True:
            structured = self.structured and request.schema is not None
            body = self._body(request, structured)
            started = self._clock()
            outcome = self._attempt(body, headers)
            if outcome.drop_schema and structured:
                self.structured = False  # remembered: this server rejects response_format
            fields = {k: v for k, v in outcome.fields.items() if k != "retry"}
            fields["latency_ms"] = round((self._clock() - started) / 1e6, 3)
            calls.append(
                self._scrubbed(
                    msgspec.structs.replace(
                        blank, attempt=len(calls) + 1, structured=structured, **fields
                    )
                )
            )
            if outcome.drop_schema and structured:
                continue  # asked again without the schema, which is no retry of the server's
            if not outcome.retry or retried >= c.retries:
                return Answer(tuple(calls))
            wait = outcome.wait if outcome.wait is not None else c.backoff * 2**retried
            retried += 1
            self._sleep(min(wait, c.max_wait))

    def _body(self, request: Request, structured: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(request.messages),
            "temperature": 0,
        }
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.reasoning:
            body["reasoning"] = request.reasoning
        if structured:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "strict": False, "schema": request.schema},
            }
        return body

    def _attempt(self, body: dict[str, Any], headers: dict[str, str]) -> _Attempt:
        c = self.connection
        try:
            response = self._http().post(self.url, json=body, headers=headers)
        except httpx.ConnectTimeout:
            return _Attempt({"error": f"could not connect within {c.connect_timeout:g} s"}, True)
        except httpx.TimeoutException:
            return _Attempt(
                {"error": f"no answer within {c.timeout:g} s (read timeout)"}, c.retry_timeouts
            )
        except httpx.TransportError as exc:  # refused, reset, dropped mid-answer
            return _Attempt({"error": f"{type(exc).__name__}: {exc or 'connection failed'}"}, True)
        status = response.status_code
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if status == 200:
            if payload is None:
                return _Attempt({"status": status, "error": "HTTP 200 with a body not JSON"}, True)
            fields = read_body(payload)
            return _Attempt({"status": status, **fields}, bool(fields.get("retry")))
        detail = provider_error(payload) or response.reason_phrase or "no detail"
        fields = {"status": status, "error": f"HTTP {status}: {detail}"}
        if status == 429:
            return _Attempt(fields, True, retry_after(response))
        if status >= 500:
            return _Attempt(fields, True)
        if status == 400 and "response_format" in body and _about_the_schema(detail):
            fields["error"] += " (structured output turned off for this server)"
            return _Attempt(fields, drop_schema=True)
        return _Attempt(fields)

    def _scrubbed(self, call: ModelCall) -> ModelCall:
        """``call`` with the key blotted out of every text kept, and its error on one line."""
        changes = {}
        for name in ("answer", "reasoning", "error"):
            value = getattr(call, name)
            if isinstance(value, str):
                clean = scrub(value, self._api_key)
                clean = one_line(clean) if name == "error" else clean
                if clean != value:
                    changes[name] = clean
        return msgspec.structs.replace(call, **changes) if changes else call

    def _http(self) -> httpx.Client:
        """Made on first use, so a strategy that is only built (to check its spec) opens nothing."""
        with self._opening:  # two threads asking first must not open two clients
            if self._client is None:
                c = self.connection
                self._client = httpx.Client(
                    transport=self._transport,
                    timeout=httpx.Timeout(c.timeout, connect=c.connect_timeout),
                    limits=httpx.Limits(max_connections=max(c.concurrency, 1) + 2),
                )
            return self._client

    def abort(self) -> None:
        """Close every connection now, so requests still in flight (a decision's questions
        after its time limit struck) end at once instead of holding the server; the next
        question opens a fresh client."""
        with self._opening:
            client, self._client = self._client, None
        if client is not None:
            client.close()
