"""Answers kept for replaying offline: a JSON Lines cassette, or a previous run's own log.

``Recorder`` asks the live client and appends every answer, all of its attempts included, to a
JSON Lines file, one question a line: ``{"request": KEY, "model": M, "calls": [ModelCall...]}``.
``Player`` answers from such a file, or from a log (``arena replay``'s database) whose
``ModelCalled`` events hold the same attempts, with no network. Either way a replay logs the
very attempts the recording made (a 402 included), so it reproduces the recording's digest.

A question the recording lacks is, by default, a ``CassetteMiss`` that stops the run with one
line naming the agent, cohort, week and request; ``on_miss=hold`` answers it with a failed call
instead, which the agent turns into a HOLD with the reason (the old behaviour).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec

from ledger.chain import verify_chain
from ledger.errors import LedgerError
from ledger.events import ModelCall, ModelCalled
from ledger.store import EventStore
from strategies.api import RunStopped
from strategies.llm.client import (
    Answer,
    ChatClient,
    Completer,
    LLMError,
    Request,
    blank_call,
    read_body,
    request_key,
)
from strategies.llm.connection import Connection

SQLITE_MAGIC = b"SQLite format 3\x00"


class CassetteMiss(RunStopped):
    """A replay asked a question its recording holds no answer to."""


def cassette_line(request: str, model: str, calls: tuple[ModelCall, ...]) -> str:
    """One recorded question as a line of a cassette file. Encoded as the log encodes, keys in
    the order they came: a message's ``role`` before its ``content``, so a replay logs the
    very bytes the recording did."""
    entry = {"request": request, "model": model, "calls": list(calls)}
    return msgspec.json.encode(entry).decode() + "\n"


class Recorder:
    """Asks the live client and appends each answer to the cassette file.

    Questions asked concurrently are answered concurrently; only the append is one at a time,
    so every answer is one whole line. Lines follow the order answers arrive in, which a
    replay does not depend on: it finds answers by question.
    """

    def __init__(self, inner: ChatClient, path: Path) -> None:
        self.inner = inner
        self.model = inner.model
        self.path = path
        self._writing = threading.Lock()

    def ask(self, request: Request) -> Answer:
        answer = self.inner.ask(request)
        line = cassette_line(answer.last.request, self.model, answer.calls)
        with self._writing, self.path.open("a", encoding="utf-8") as out:
            out.write(line)
        return answer

    def abort(self) -> None:
        self.inner.abort()


def _from_file(path: Path) -> Iterator[tuple[str, tuple[ModelCall, ...]]]:
    """``(request, calls)`` of each line of a JSON Lines cassette; also reads the older
    ``{"key", "response", "latency_ms"}`` lines, one successful call each."""
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if "calls" in entry:
                calls = msgspec.convert(entry["calls"], tuple[ModelCall, ...])
                yield entry["request"], calls
                continue
            fields = {k: v for k, v in read_body(entry["response"]).items() if k != "retry"}
            call = ModelCall(
                model=entry["model"],
                question="",
                request=entry["key"],
                status=200,
                latency_ms=float(entry.get("latency_ms") or 0.0),
                **fields,
            )
            yield entry["key"], (call,)
        except (ValueError, KeyError, TypeError, msgspec.ValidationError):
            raise LLMError(f"cassette {path}: line {n} is not a recorded answer") from None


def _from_log(path: Path) -> Iterator[tuple[str, tuple[ModelCall, ...]]]:
    """``(request, calls)`` of each question asked in a log: a question's attempts follow one
    another, and each asking starts again at attempt 1."""
    try:
        with EventStore.open(path, create=False, readonly=True) as store:
            verify_chain(store)  # answers from an edited log would replay as the run's own
            pending: list[ModelCall] = []
            for _, event in store.read_types(["ModelCalled"]):
                assert isinstance(event, ModelCalled)
                if event.call.attempt == 1 and pending:
                    yield pending[0].request, tuple(pending)
                    pending = []
                pending.append(event.call)
            if pending:
                yield pending[0].request, tuple(pending)
    except (LedgerError, sqlite3.Error) as exc:
        raise LLMError(f"cassette {path}: {exc}") from None


def is_log(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


class Player:
    """Answers from a recording only. The same question asked twice (two cohorts starting
    alike) gets its recorded answers in order, then the last one again."""

    def __init__(self, model: str, path: Path, *, on_miss: str = "error") -> None:
        self.model = model
        self.path = path
        self.on_miss = on_miss
        self._answers: dict[str, list[tuple[ModelCall, ...]]] = {}
        self._served: dict[str, int] = {}
        self._counting = threading.Lock()
        for key, calls in (_from_log if is_log(path) else _from_file)(path):
            if calls[0].model == model:
                self._answers.setdefault(key, []).append(calls)

    def ask(self, request: Request) -> Answer:
        key = request_key(self.model, request.messages)
        answers = self._answers.get(key)
        if not answers:
            problem = (
                f"the recording {self.path} holds no answer from {self.model} to request "
                f"{key[:12]} ({request.question})"
            )
            if self.on_miss == "error":
                raise CassetteMiss(f"{problem}; record it, or replay with --on-miss hold")
            blank = blank_call(self.model, request)
            return Answer((msgspec.structs.replace(blank, error=problem),))
        with self._counting:
            k = self._served.get(key, 0)
            self._served[key] = k + 1
        calls = answers[min(k, len(answers) - 1)]
        return Answer(
            tuple(
                msgspec.structs.replace(c, question=request.question, reask=request.reask)
                for c in calls
            )
        )

    def abort(self) -> None:
        """Nothing is in flight in a replay."""


def open_completer(
    model: str,
    connection: Connection | None = None,
    *,
    transport: httpx.BaseTransport | None = None,
    **client: Any,
) -> Completer:
    """The live client (``live``), a recorder in front of it (``record``) or a player
    (``replay``), checked before the first question: a missing key or cassette is an LLMError
    when the agent is built, not a failed decision weeks into a run. A replay needs no key."""
    c = connection or Connection.from_env()
    path = Path(c.cassette) if c.cassette else None
    if c.mode == "replay":
        assert path is not None
        if not path.is_file():
            raise LLMError(f"cassette {path} does not exist")
        return Player(model, path, on_miss=c.on_miss)
    key_env = c.key_env
    api_key = os.environ.get(key_env) if key_env else None
    if key_env and not api_key:
        raise LLMError(f"the environment variable {key_env} is not set")
    live = ChatClient(model, c, api_key=api_key, transport=transport, **client)
    if c.mode == "live":
        return live
    assert path is not None
    if not path.parent.is_dir():
        raise LLMError(f"the folder of cassette {path} does not exist")
    return Recorder(live, path)


def export_cassette(log: Path, out: Path) -> int:
    """Every question a log's ``ModelCalled`` events hold, written as a JSON Lines cassette;
    returns how many questions. OUT is written whole or not at all: it was opened (emptied)
    before the log was read, so ``arena cassette run.db run.db`` emptied the log."""
    if out.exists() and out.samefile(log):
        raise LLMError(f"cassette {out}: is the log itself; name another file")
    n = 0
    partial = out.with_name(f".{out.name}.partial")  # a failed export leaves no half cassette
    try:
        with partial.open("w", encoding="utf-8") as f:
            for key, calls in _from_log(log):
                f.write(cassette_line(key, calls[0].model, calls))
                n += 1
        partial.replace(out)
    except OSError as exc:
        raise LLMError(f"cassette {out}: cannot write: {exc.strerror or exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    return n
