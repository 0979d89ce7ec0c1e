"""Asking an OpenAI-compatible chat-completions endpoint, and keeping every attempt.

``ChatClient.ask`` sends one question and returns an ``Answer``: every HTTP attempt it took, as
the ``ModelCall`` records the log keeps (messages, raw answer, finish reason, reasoning, tokens,
cost, latency, status, error), the last one deciding. It never raises for what a server or the
network does: a 401, a 402, a hang, a dropped connection or a body it cannot read is an answer
whose last attempt has an ``error``, so the caller records it and the run goes on. Each
attempt is also written, as it begins and as it ends, into the current decision's
``strategies.llm.calls.CallLog``, so a decision cut short still keeps it.

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
* any other 4xx, and a body past the bounds below: never; it would only fail again;
* nothing at all once the question's decision has ended (``abort``, or its log stopped): the
  attempt in flight is cut (its socket shut, which also tells llama.cpp to stop generating)
  and ``Aborted`` raised, never a re-send.

Bounds, each a recorded failure of that attempt with the attempt kept: ``timeout`` is the
whole attempt, not each read (a server dripping a byte a second is cut at it: the client's
sockets read against the attempt's deadline); a body over ``MAX_BODY`` bytes, on the wire or
decompressed (a gzip bomb); a body JSON cannot read (nested too deeply, a 5,000-digit number);
token counts beyond ``MAX_COUNT`` and costs that are not a finite number of dollars up to
``MAX_COST``. An answer or reasoning longer than ``MAX_KEPT`` characters is cut to it before it
is kept, and such an answer is not read (its attempt has an ``error``).

The API key lives only in the request header. Every text a server sends that is kept (answer,
reasoning, finish reason, error) is scrubbed of it first (``Secret``), since some providers
quote the key back, in an error or even in an answer: the key as it is, with any characters
JSON-escaped, and any piece of it of ``Secret.PIECE`` characters or more (a key split in two
between the answer and the reasoning).

Every request carries ``"cache_prompt": false``: llama.cpp otherwise reuses the cached state of
an earlier prompt sharing a prefix, and answers the same request at temperature 0 differently
depending on what it was asked before. Other OpenAI-compatible servers ignore the field.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import json
import math
import re
import socket
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpcore
import httpx
import msgspec

from ledger.events import ModelCall
from strategies.llm import calls as call_log
from strategies.llm.calls import Aborted, calls_trace, total
from strategies.llm.connection import Connection
from strategies.llm.resume import stored_answer

__all__ = [
    "Aborted", "Answer", "ChatClient", "Completer", "LLMError", "Request", "Secret",
    "blank_call", "calls_trace", "prompt_digest", "read_body", "request_key", "retry_after",
    "total",
]  # fmt: skip

Message = dict[str, str]


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


def system_prompts(request: Request) -> dict[str, str]:
    """The system prompt of ``request`` by its digest (empty if it has none)."""
    messages = request.messages
    if messages and messages[0].get("role") == "system":
        text = messages[0]["content"]
        return {prompt_digest(text): text}
    return {}


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


_ESCAPED = re.compile(r'\\+(?:u([0-9a-fA-F]{4})|([/"]))')
"""A character as JSON can escape it inside a string, at any depth of escaping."""


class Secret:
    """A key, found in a text however a JSON answer can carry it, and blotted out.

    Found: the key itself; with any of its characters JSON-escaped (``\\u0041`` for ``A``,
    ``\\/`` for ``/``, with as many backslashes as nested encodings add); and any piece of it
    of ``PIECE`` characters or more, so a key split between the answer and the reasoning, or
    cut in two inside one text, leaves at most a few characters of itself in either. A key
    shorter than ``PIECE`` is only found whole. Each stretch found is replaced by ``***``.
    """

    PIECE = 8

    def __init__(self, key: str) -> None:
        self.key = key
        size = min(len(key), self.PIECE)
        self._size = size
        self._pieces = sorted({key[i : i + size] for i in range(len(key) - size + 1)})
        alternatives = "|".join(map(re.escape, self._pieces))
        self._find = re.compile(f"(?=({alternatives}))") if key else None

    def __repr__(self) -> str:
        return "Secret(***)"

    def scrub(self, text: str) -> str:
        """``text`` with every stretch that carries the key, or a piece of it, blotted out."""
        if self._find is None or not text:
            return text
        decoded, starts = _unescaped(text) if "\\" in text else (text, None)
        if not any(piece in decoded for piece in self._pieces):  # the common case, fast
            return text
        spans: list[list[int]] = []
        for match in self._find.finditer(decoded):
            i = match.start()
            if spans and i <= spans[-1][1]:
                spans[-1][1] = i + self._size
            else:
                spans.append([i, i + self._size])
        out, pos = [], 0
        for i, j in spans:
            a, b = (i, j) if starts is None else (starts[i], starts[j])
            out += [text[pos:a], "***"]
            pos = b
        out.append(text[pos:])
        return "".join(out)


def _unescaped(text: str) -> tuple[str, list[int]]:
    """``text`` with JSON's escapes of single characters read, and where in ``text`` each
    character of the result begins (one more entry: the end)."""
    pieces: list[str] = []
    starts: list[int] = []
    pos = 0
    for match in _ESCAPED.finditer(text):
        pieces.append(text[pos : match.start()])
        starts.extend(range(pos, match.start()))
        code, plain = match.groups()
        pieces.append(chr(int(code, 16)) if code else plain)
        starts.append(match.start())
        pos = match.end()
    pieces.append(text[pos:])
    starts.extend(range(pos, len(text) + 1))
    return "".join(pieces), starts


def one_line(text: str) -> str:
    return " ".join(text.split())


MAX_COUNT = 2**53
"""The largest token count read as one: far above any context, and exact as a float."""

MAX_COST = 1e6
"""The largest cost in dollars read as one call's."""


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _float(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x)


def _text(x: Any) -> str | None:
    return x if isinstance(x, str) and x else None


def _shown(x: Any) -> str:
    """A number as a short text for an error message, however long it is."""
    text = repr(x)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text):,} characters)"


def provider_error(payload: Any) -> str | None:
    """The error message of a body that carries one (``{"error": ...}``), else None."""
    problem = payload.get("error") if isinstance(payload, dict) else None
    if problem is None:
        return None
    detail = problem.get("message") if isinstance(problem, dict) else problem
    return str(detail or "unspecified error")[:300]


def read_body(payload: Any) -> dict[str, Any]:
    """The fields of a call that a 200's body gives: answer, finish reason, reasoning, usage;
    ``error`` when the body has no answer or an absurd usage, ``retry`` when that is worth
    asking again for (an error object inside a 200, which OpenRouter sends for upstream
    failures)."""
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
    }
    absurd = []
    for name, key in (("tokens_in", "prompt_tokens"), ("tokens_out", "completion_tokens")):
        count = _int(usage.get(key))
        if count is not None and not 0 <= count <= MAX_COUNT:
            absurd.append(f"usage.{key} is {_shown(count)}")
            count = None
        fields[name] = count
    cost = _float(usage.get("cost"))
    if cost is not None and not (math.isfinite(cost) and 0 <= cost <= MAX_COST):
        absurd.append(f"usage.cost is {_shown(usage.get('cost'))}")
        cost = None
    fields["cost"] = cost
    if finish == "length":
        fields["error"] = "the answer was cut off at max_tokens (finish_reason length)"
    answer, reasoning = fields["answer"], fields["reasoning"]
    if len(answer) > MAX_KEPT:
        fields["answer"] = answer[:MAX_KEPT]
        fields["error"] = f"the answer is {len(answer):,} characters, over {MAX_KEPT:,}: not read"
    if reasoning is not None and len(reasoning) > MAX_KEPT:
        fields["reasoning"] = reasoning[:MAX_KEPT] + f" [cut: {len(reasoning):,} characters in all]"
    if absurd:
        fields["error"] = "the response is not believable: " + "; ".join(absurd)
    return fields


def retry_after(response: httpx.Response, now: Callable[[], float] = time.time) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (a number, or an HTTP date), or None."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is not None:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


MAX_KEPT = 100_000
"""Characters of an answer or of reasoning kept per attempt: the boundary's cap on a decision's
texts (``arena.boundary.checks.MAX_TEXT``), and over ten times the longest answer the agents ask for
(2,048 tokens)."""

MAX_BODY = 8 * 2**20
"""Bytes of a response read, as sent and once decompressed: an answer and its reasoning at
``MAX_KEPT`` characters each, every character escaped, fit several times over."""

SCHEMA_WORDS = ("response_format", "schema", "grammar", "parser", "structured", "json")
"""Words of a 400 that blames the structured-output request (llama.cpp: "Unable to generate
parser ... JSON schema error"; others name ``response_format``); a 400 for another reason (a
prompt past the context size) is not cured by dropping the schema, and is not retried."""

CONTEXT_WORDS = ("context", "too long", "maximum context", "context_length", "exceed")
"""Words of a 400 that says the prompt does not fit the model (llama.cpp: "the request exceeds
the available context size"; OpenAI: "maximum context length")."""


def _about_the_schema(detail: str) -> bool:
    lowered = detail.lower()
    return not detail.strip() or any(word in lowered for word in SCHEMA_WORDS)


def _about_the_context(detail: str) -> bool:
    lowered = detail.lower()
    return "context" in lowered and any(word in lowered for word in CONTEXT_WORDS)


@dataclass
class _Attempt:
    """What one attempt gave, before it becomes a ModelCall; ``wait`` overrides the backoff."""

    fields: dict[str, Any] = field(default_factory=dict)
    retry: bool = False
    wait: float | None = None
    drop: str | None = None
    """A field of the request the server refused ("response_format", "cache_prompt"): asked
    again at once without it, which is no retry of the server's."""


class _BodyError(Exception):
    """A response past the bounds: too big, bombed, or in an encoding arena does not read."""


def _read_body(response: httpx.Response, deadline: float, now: Callable[[], float]) -> bytes:
    """The body of ``response``, decompressed, within ``MAX_BODY`` bytes and the attempt's
    deadline (checked between chunks too, for transports whose reads do not know it)."""
    chunks, size = [], 0
    for chunk in response.iter_raw():
        size += len(chunk)
        if size > MAX_BODY:
            raise _BodyError(f"the response is over {MAX_BODY:,} bytes: not read")
        chunks.append(chunk)
        if now() > deadline:
            raise httpx.ReadTimeout("the attempt's deadline passed")
    data = b"".join(chunks)
    encodings = [e.strip().lower() for e in response.headers.get("Content-Encoding", "").split(",")]
    for name in reversed([e for e in encodings if e and e != "identity"]):
        data = _decompressed(data, name)
    return data


def _decompressed(data: bytes, encoding: str) -> bytes:
    if encoding in ("gzip", "x-gzip"):
        tries = [16 + zlib.MAX_WBITS]
    elif encoding == "deflate":
        tries = [zlib.MAX_WBITS, -zlib.MAX_WBITS]  # zlib-wrapped as the RFC says, or raw
    else:
        raise _BodyError(f"the response is encoded as {encoding!r}, which arena does not read")
    for wbits in tries:
        inflate = zlib.decompressobj(wbits)
        try:
            out = inflate.decompress(data, MAX_BODY + 1)
        except zlib.error:
            continue
        if len(out) > MAX_BODY or inflate.unconsumed_tail:
            raise _BodyError(f"the response decompresses to over {MAX_BODY:,} bytes: not read")
        return out
    raise _BodyError(f"the response's {encoding} encoding is broken")


def _json(data: bytes) -> Any:
    """``data`` as JSON, or None when it is not JSON Python can read (nested too deeply, a
    number of thousands of digits)."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


class _Sockets:
    """The connections a client's requests read from, and each thread's deadline for them.

    Installed as the client's network backend: every read, write and connect is bounded by
    what is left of the current attempt (a drip of one byte a second never lets a per-read
    timeout fire), and ``shut`` shuts every socket at once, which ends reads blocked on a
    server that has not answered (closing a socket from another thread does not).
    """

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self.local = threading.local()
        self.open: weakref.WeakSet[_Stream] = weakref.WeakSet()
        self.lock = threading.Lock()

    def bounded(self, timeout: float | None, late: type[Exception]) -> float | None:
        deadline: float | None = getattr(self.local, "deadline", None)
        if deadline is None:
            return timeout
        left = deadline - self.now()
        if left <= 0:
            raise late("the attempt's deadline passed")
        return left if timeout is None else min(timeout, left)

    def track(self, inner: httpcore.NetworkStream) -> _Stream:
        stream = _Stream(inner, self)
        with self.lock:
            self.open.add(stream)
        return stream

    def shut(self) -> None:
        with self.lock:
            streams = list(self.open)
        for stream in streams:
            sock = stream.get_extra_info("socket")
            if isinstance(sock, socket.socket):
                with contextlib.suppress(OSError):  # already closed
                    sock.shutdown(socket.SHUT_RDWR)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend, sockets: _Sockets) -> None:
        self.inner = inner
        self.sockets = sockets

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = self.sockets.bounded(timeout, httpcore.ConnectTimeout)
        inner = self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return self.sockets.track(inner)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        timeout = self.sockets.bounded(timeout, httpcore.ConnectTimeout)
        return self.sockets.track(self.inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, sockets: _Sockets) -> None:
        self.inner = inner
        self.sockets = sockets

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, self.sockets.bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, self.sockets.bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        timeout = self.sockets.bounded(timeout, httpcore.ConnectTimeout)
        return self.sockets.track(self.inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


def _guard(client: httpx.Client, sockets: _Sockets) -> None:
    """Route ``client``'s default transport (and any proxy's, from the environment) through
    ``sockets``. Reaches into httpx's transports (``_pool``, its network backend), as httpx
    offers no public way to give its default transport a backend; where the layout differs,
    the attempt's deadline is still checked between the chunks of a body."""
    transports = [client._transport, *client._mounts.values()]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        inner = getattr(pool, "_network_backend", None)
        if isinstance(inner, httpcore.NetworkBackend) and not isinstance(inner, _Backend):
            pool._network_backend = _Backend(inner, sockets)  # type: ignore[union-attr]


class ChatClient:
    """A model behind ``{base_url}/chat/completions``, asked at temperature 0.

    ``sleep`` and ``clock`` are parameters so tests neither wait for backoff nor depend on the
    wall clock. The default clocks are bound here, at import: during a replay freezegun
    replaces ``time.perf_counter_ns`` and ``time.monotonic`` in every module, and latency and
    deadlines must be real elapsed time.
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
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.connection = connection or Connection()
        self.url = self.connection.base_url.rstrip("/") + "/chat/completions"
        self.structured = self.connection.structured
        self.cache_prompt = True
        """Send ``"cache_prompt": false``; turned off for good by a server that refuses it."""
        self._api_key = api_key
        self._secret = Secret(api_key or "")
        self._transport = transport
        self._sleep = sleep
        self._clock = clock
        self._now = now
        self._sockets = _Sockets(now)
        self._client: httpx.Client | None = None
        self._opening = threading.Lock()
        self._generation = 0

    def __repr__(self) -> str:
        return f"ChatClient({self.model!r}, url={self.url!r})"  # never the key

    def ask(self, request: Request) -> Answer:
        stored = stored_answer(self.model, request)  # a resumed run's answer, paid for already
        if stored is not None:
            return stored
        c = self.connection
        log = call_log.current()
        generation = self._generation
        blank = blank_call(self.model, request)
        question = log.question(system_prompts(request)) if log is not None else 0
        headers = {
            "Content-Type": "application/json",
            "X-Title": "arena",
            "Accept-Encoding": "gzip, deflate",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        calls: list[ModelCall] = []
        retried = 0
        while True:
            if self._generation != generation:
                raise Aborted("the question was given up (the client was aborted)")
            structured = self.structured and request.schema is not None
            body = self._body(request, structured)
            attempt = msgspec.structs.replace(blank, attempt=len(calls) + 1, structured=structured)
            entry = log.begin(question, attempt) if log is not None else None
            started = self._clock()
            outcome = self._attempt(body, headers)
            cut = self._generation != generation or (log is not None and log.stopped)
            if cut and outcome.fields.get("status") is None:
                # the decision ended while this was out: its log keeps it as cut short
                raise Aborted("the question's decision ended while it was in flight")
            if outcome.drop == "response_format":
                self.structured = False  # remembered: this server rejects response_format
            elif outcome.drop == "cache_prompt":
                self.cache_prompt = False
            fields = dict(outcome.fields)
            fields["latency_ms"] = round((self._clock() - started) / 1e6, 3)
            call = self._scrubbed(msgspec.structs.replace(attempt, **fields))
            calls.append(call)
            if entry is not None and log is not None:
                log.finish(entry, call)
            if cut:
                raise Aborted("the question's decision ended")
            if outcome.drop is not None:
                continue
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
        if self.cache_prompt:
            body["cache_prompt"] = False
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
        deadline = self._now() + c.timeout
        self._sockets.local.deadline = deadline
        status: int | None = None
        try:
            with self._http().stream("POST", self.url, json=body, headers=headers) as response:
                status = response.status_code
                data = _read_body(response, deadline, self._now)
        except httpx.ConnectTimeout:
            return _Attempt({"error": f"could not connect within {c.connect_timeout:g} s"}, True)
        except httpx.TimeoutException:
            error = (
                f"no answer within {c.timeout:g} s (read timeout)"
                if status is None
                else f"the answer was still arriving after {c.timeout:g} s (cut)"
            )
            return _Attempt({"error": error}, c.retry_timeouts)
        except httpx.TransportError as exc:  # refused, reset, dropped mid-answer
            return _Attempt({"error": f"{type(exc).__name__}: {exc or 'connection failed'}"}, True)
        except _BodyError as exc:
            return _Attempt({"status": status, "error": str(exc)})
        finally:
            self._sockets.local.deadline = None
        payload = _json(data)
        if status == 200:
            if payload is None:
                error = "HTTP 200 with a body that is not JSON arena can read"
                return _Attempt({"status": status, "error": error}, True)
            fields = read_body(payload)
            retry = bool(fields.pop("retry", False))
            return _Attempt({"status": status, **fields}, retry)
        detail = provider_error(payload) or response.reason_phrase or "no detail"
        fields = {"status": status, "error": f"HTTP {status}: {detail}"}
        if status == 429:
            return _Attempt(fields, True, retry_after(response))
        if status >= 500:
            return _Attempt(fields, True)
        if status == 400 and "cache_prompt" in body and "cache_prompt" in detail:
            fields["error"] += " (cache_prompt no longer sent to this server)"
            return _Attempt(fields, drop="cache_prompt")
        if status == 400 and "response_format" in body and _about_the_schema(detail):
            fields["error"] += " (structured output turned off for this server)"
            return _Attempt(fields, drop="response_format")
        if status == 400 and _about_the_context(detail):
            fields["error"] = (
                f"HTTP 400: the prompt is longer than the model's context ({detail}): show "
                "fewer markets (markets=N in the agent spec) or serve a longer context"
            )
        return _Attempt(fields)

    def _scrubbed(self, call: ModelCall) -> ModelCall:
        """``call`` with the key blotted out of every text a server sent, and its error on one
        line."""
        changes = {}
        for name in ("answer", "reasoning", "finish_reason", "error"):
            value = getattr(call, name)
            if isinstance(value, str):
                clean = self._secret.scrub(value)
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
                _guard(self._client, self._sockets)
            return self._client

    def abort(self) -> None:
        """Give up every question in flight now: their sockets shut (the server sees the
        client leave; llama.cpp stops generating) and the connections closed, so a decision's
        questions end at once instead of holding the server. Questions begun before this are
        never sent again; the next question opens a fresh client."""
        with self._opening:
            self._generation += 1
            client, self._client = self._client, None
        self._sockets.shut()
        if client is not None:
            client.close()
