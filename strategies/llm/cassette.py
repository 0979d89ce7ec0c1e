"""Answers kept for replaying offline: a JSON Lines cassette, or a previous run's own log.

``Recorder`` asks the live client and appends every answer, all of its attempts included, to a
JSON Lines file, one question a line: ``{"request": KEY, "model": M, "calls": [ModelCall...]}``.
``Player`` answers from such a file, or from a log (``arena replay``'s database) whose
``ModelCalled`` events hold the same attempts, with no network. Either way a replay logs the
very attempts the recording made (a 402 included), so it reproduces the recording's digest.

A question the recording lacks is, by default, a ``CassetteMiss`` that stops the run with one
line naming the agent, cohort, week and request; ``on_miss=hold`` answers it with a failed call
instead, which the agent turns into a HOLD with the reason (the old behaviour).

A question whose decision ended while it was out (its last attempt cut short or marked, see
``strategies.llm.calls``) is recorded too, when its decision's log closes; replayed, it ends the
decision there (``Aborted``) with the reason the live one had, so a run whose decisions timed
out replays to the same digest, with the same calls, and without asking anything.

Under ``--isolate`` an agent's worker may read no file but the libraries and its plugin's, and
write none but its scratch folder's, so the cassette is the run's to read and write, not the
worker's (``Handed``): for a replay the run reads it once (``Answers``) and the worker's player
asks the run for each answer as its agent asks the question, by the question's key, getting
that answer or none (``Source``). Never the cassette whole: each recorded question states the
prices of its own instant, so a worker holding them all would hold the future. For a recording
the worker asks the model as a live client does, and the run appends each decision's calls, as
they come back, to the cassette (``CassetteFile.append_calls``), the lines ``arena cassette``
would export from the log.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import sqlite3
import threading
import uuid
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from stat import S_ISREG
from typing import Any, NamedTuple, Protocol

import httpx
import msgspec

from ledger.chain import verify_chain
from ledger.errors import LedgerError
from ledger.events import ModelCall, ModelCalled
from ledger.store import EventStore
from strategies.api import RunStopped
from strategies.llm import calls as call_log
from strategies.llm.calls import Aborted, aborted_reason
from strategies.llm.client import (
    Answer,
    ChatClient,
    Completer,
    LLMError,
    Request,
    blank_call,
    read_body,
    request_key,
    system_prompts,
)
from strategies.llm.connection import Connection

SQLITE_MAGIC = b"SQLite format 3\x00"


class CassetteMiss(RunStopped):
    """A replay asked a question its recording holds no answer to."""


def cassette_line(
    request: str, model: str, calls: tuple[ModelCall, ...], decision: str | None = None
) -> str:
    """One recorded question as a line of a cassette file. Encoded as the log encodes, keys in
    the order they came: a message's ``role`` before its ``content``, so a replay logs the
    very bytes the recording did. ``decision`` names the decision it was asked in: the
    questions of one decision are consecutive lines with the same name."""
    entry: dict[str, Any] = {"request": request, "model": model, "calls": list(calls)}
    if decision is not None:
        entry["decision"] = decision
    return msgspec.json.encode(entry).decode() + "\n"


Recorded = tuple[str, tuple[ModelCall, ...], object]
"""A recorded question: its key, its calls, and what names the decision it was asked in
(consecutive questions of one decision share it)."""


class CassetteFile:
    """A cassette being recorded: whole lines appended, one question a line, one writer of
    this process at a time (so every line is whole)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writing = threading.Lock()

    def append(self, questions: Sequence[tuple[ModelCall, ...]]) -> None:
        """One decision's questions (or one question asked outside any decision), each with
        its attempts; a decision of several shares a name, so a replay finds them together.
        A cassette that cannot be written is an ``LLMError`` in one line."""
        if not questions:
            return
        decision = uuid.uuid4().hex[:16] if len(questions) > 1 else None
        lines = [cassette_line(c[-1].request, c[0].model, c, decision) for c in questions]
        try:
            with self._writing, self.path.open("a", encoding="utf-8") as out:
                out.write("".join(lines))
        except OSError as exc:
            raise LLMError(f"cassette {self.path}: cannot write: {exc.strerror or exc}") from None

    def append_calls(self, calls: Sequence[ModelCall]) -> None:
        """A decision's calls as its trace (and so the log) holds them."""
        self.append(list(asked(calls)))


class Recorder:
    """Asks the live client and appends each answer to the cassette file.

    Within a decision (a ``CallLog`` is current), a decision's questions are written when it
    ends, as its log holds them: with the parser's rejections, and cut short or marked where
    the decision's end cut in, so a replay from the cassette ends that decision as the live
    one ended. Outside one, each answer is written as it comes. Questions asked concurrently
    are answered concurrently; only the append is one at a time, so every answer is one
    whole line. A replay does not depend on the order of the lines: it finds answers by
    question.
    """

    def __init__(self, inner: ChatClient, path: Path) -> None:
        self.inner = inner
        self.model = inner.model
        self.file = CassetteFile(path)
        self._writing = threading.Lock()
        self._logs: weakref.WeakSet[call_log.CallLog] = weakref.WeakSet()

    def ask(self, request: Request) -> Answer:
        log = call_log.current()
        if log is None:
            answer = self.inner.ask(request)
            self._write([answer.calls])
            return answer
        with self._writing:
            first = log not in self._logs and not log.closed
            if first:
                self._logs.add(log)
        if first:
            log.when_closed(self._write)
        return self.inner.ask(request)

    def _write(self, questions: list[tuple[ModelCall, ...]]) -> None:
        self.file.append([calls for calls in questions if calls[0].model == self.model])

    def abort(self) -> None:
        self.inner.abort()


def _from_file(path: Path) -> Iterator[Recorded]:
    """``(request, calls, decision)`` of each line of a JSON Lines cassette (a line without a
    decision is one of its own); also reads the older ``{"key", "response", "latency_ms"}``
    lines, one successful call each."""
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if "calls" in entry:
                calls = msgspec.convert(entry["calls"], tuple[ModelCall, ...])
                yield entry["request"], calls, entry.get("decision") or object()
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
            yield entry["key"], (call,), object()
        except (ValueError, KeyError, TypeError, msgspec.ValidationError):
            raise LLMError(f"cassette {path}: line {n} is not a recorded answer") from None


def _from_log(path: Path) -> Iterator[tuple[str, tuple[ModelCall, ...], Asked]]:
    """``(request, calls, decision)`` of each question asked in a log (``questions_of``)."""
    try:
        with EventStore.open(path, create=False, readonly=True) as store:
            verify_chain(store)  # answers from an edited log would replay as the run's own
            yield from questions_of(store.read_types(["ModelCalled"]))
    except (LedgerError, sqlite3.Error) as exc:
        raise LLMError(f"cassette {path}: {exc}") from None


Asked = tuple[str, str, int, int]
"""The decision a question was asked in: its cohort, agent, week and instant (a daily agent
decides seven times a week)."""


def asked(calls: Iterable[ModelCall]) -> Iterator[tuple[ModelCall, ...]]:
    """One decision's calls, in the log's order, as questions: a question's attempts follow
    one another, and each asking starts again at attempt 1."""
    pending: list[ModelCall] = []
    for call in calls:
        if pending and call.attempt == 1:
            yield tuple(pending)
            pending = []
        pending.append(call)
    if pending:
        yield tuple(pending)


def questions_of(
    rows: Iterable[tuple[str, object]],
) -> Iterator[tuple[str, tuple[ModelCall, ...], Asked]]:
    """``(request, calls, decision)`` of each question the ``(stream, ModelCalled)`` rows hold,
    in log order (``asked``), where a decision is its cohort, agent, week and instant."""

    def decision(row: tuple[str, object]) -> Asked:
        stream, event = row
        assert isinstance(event, ModelCalled)
        return stream, event.agent, event.week, event.ts

    for made, group in itertools.groupby(rows, key=decision):
        for calls in asked(e.call for _, e in group if isinstance(e, ModelCalled)):
            yield calls[0].request, calls, made


def is_log(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


Calls = tuple[ModelCall, ...]
"""One question's calls: its attempts, in order."""

Entry = tuple[Calls, list[Calls] | None]
"""A recorded question's calls and, only when its decision's end cut it short live, the calls of
every question of that decision (a replay's log then holds those instead, see ``Player``)."""


class Source(Protocol):
    """Where a ``Player`` finds recorded answers: ``Answers`` here, or the run an isolated
    worker asks (``arena.boundary.isolated``). Safe to call from several threads."""

    def entry(self, model: str, key: str, k: int, repeat: bool) -> Entry | None:
        """The ``k``-th (from 0) recorded answer from ``model`` to the question ``key``; past
        the last one, the last again if ``repeat``, else None; None when there is none."""


class Answers:
    """Recorded questions by model and key, each key's answers in the order recorded, with the
    decision each was asked in (consecutive questions sharing a name)."""

    def __init__(self, recorded: Iterable[Recorded]) -> None:
        self._by: dict[tuple[str, str], list[tuple[Calls, list[Calls]]]] = {}
        self.questions = 0
        last: object = None
        group: list[tuple[ModelCall, ...]] = []
        for key, calls, decision in recorded:
            if decision != last or not group:
                group, last = [], decision
            group.append(calls)
            self._by.setdefault((calls[0].model, key), []).append((calls, group))
            self.questions += 1

    def entry(self, model: str, key: str, k: int, repeat: bool) -> Entry | None:
        answers = self._by.get((model, key), ())
        if not answers or (k >= len(answers) and not repeat):
            return None
        calls, decision = answers[min(k, len(answers) - 1)]
        return calls, decision if aborted_reason(calls[-1]) is not None else None


class Player:
    """Answers from a recording only. The same question asked twice (two cohorts starting
    alike) gets its recorded answers in order, then the last one again.

    A question whose decision's end cut it short live (``aborted_reason``) ends its decision
    here, and the decision's calls are then the ones recorded for it, whole and in their
    order: a forecaster's questions go out together, and which of them a replay would have
    served before the end is a race, where the recording says what happened.
    """

    def __init__(
        self,
        model: str,
        path: Path,
        *,
        on_miss: str = "error",
        answers: Source | None = None,
    ) -> None:
        """Answers from the file or log at ``path``, or from ``answers`` where given (a
        resumed run's stored prefix, or the run a worker asks; ``path`` then only names
        them). Which answer of a question comes next is counted here."""
        self.model = model
        self.path = path
        self.on_miss = on_miss
        if answers is None:
            answers = Answers((_from_log if is_log(path) else _from_file)(path))
        self._answers = answers
        self._served: dict[str, int] = {}
        self._counting = threading.Lock()

    def _next(self, key: str) -> int:
        with self._counting:
            k = self._served.get(key, 0)
            self._served[key] = k + 1
        return k

    def ask(self, request: Request) -> Answer:
        log = call_log.current()
        if log is not None and log.stopped:
            raise Aborted(log.reason or "the decision has ended")
        key = request_key(self.model, request.messages)
        entry = self._answers.entry(self.model, key, self._next(key), repeat=True)
        if entry is None:
            problem = (
                f"the recording {self.path} holds no answer from {self.model} to request "
                f"{key[:12]} ({request.question})"
            )
            if self.on_miss == "error":
                raise CassetteMiss(f"{problem}; record it, or replay with --on-miss hold")
            blank = blank_call(self.model, request)
            return self._served_as(request, (msgspec.structs.replace(blank, error=problem),))
        return self._serve(request, *entry)

    def serve(self, request: Request) -> Answer | None:
        """The next recorded answer to ``request`` not served yet, or None when there is none
        left (a resumed run then asks the model: the recording ended there)."""
        log = call_log.current()
        if log is not None and log.stopped:
            raise Aborted(log.reason or "the decision has ended")
        key = request_key(self.model, request.messages)
        entry = self._answers.entry(self.model, key, self._next(key), repeat=False)
        return None if entry is None else self._serve(request, *entry)

    def _serve(
        self,
        request: Request,
        calls: tuple[ModelCall, ...],
        decision: list[tuple[ModelCall, ...]] | None,
    ) -> Answer:
        served = tuple(
            msgspec.structs.replace(c, question=request.question, reask=request.reask)
            for c in calls
        )
        return self._served_as(request, served, decision)

    def _served_as(
        self,
        request: Request,
        calls: tuple[ModelCall, ...],
        decision: list[tuple[ModelCall, ...]] | None = None,
    ) -> Answer:
        """``calls`` as the answer, written into the decision's log as the live client wrote
        them; a question its decision's end cut short live ends this decision the same way,
        with the calls recorded for it."""
        log = call_log.current()
        reason = aborted_reason(calls[-1])
        if log is not None:
            prompts = system_prompts(request)
            if reason is not None and decision is not None:
                log.replace(decision, prompts)
            else:
                question = log.question(prompts)
                for call in calls:
                    log.add(question, call)
        if reason is not None:
            if log is not None:
                log.stop(reason)
            raise Aborted(reason)
        return Answer(calls)

    def abort(self) -> None:
        """Nothing is in flight in a replay."""


class Handed(NamedTuple):
    """The cassette of the connection as the run tells a worker that may not open it
    (``--isolate``): its mode and name, and why it cannot be used (the words an agent built in
    process would raise), if so. Never what it holds: the worker asks the run for each answer
    its agent needs (``handing``)."""

    mode: str
    path: str
    error: str | None = None


class Kept(NamedTuple):
    """The cassette as the run keeps it for its workers: what each is told (``handed``), a
    replay's answers, read once, which they ask for one at a time (``answers``), and what a
    question the recording lacks gives (``on_miss``)."""

    handed: Handed
    answers: Answers | None
    on_miss: str


def kept_cassette() -> Kept | None:
    """The cassette the ``ARENA_LLM_*`` connection names, as the run keeps it for its confined
    workers: None when it names none (or a setting is bad, which the worker's agent then says
    in one line, as in process). A replay's cassette is read once in this process, however
    many workers, cohorts or restarts it serves, until it changes."""
    try:
        c = Connection.from_env()
    except ValueError:
        return None
    if c.mode == "live" or not c.cassette:
        return None
    path = Path(c.cassette)
    if c.mode == "record":
        missing = None if path.parent.is_dir() else _no_folder(path)
        return Kept(Handed(c.mode, c.cassette, missing), None, c.on_miss)
    try:
        found = path.stat()
    except OSError:
        found = None
    if found is None or not S_ISREG(found.st_mode):
        return Kept(Handed(c.mode, c.cassette, _no_file(path)), None, c.on_miss)
    stamp = (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
    answers, error = _read_once(c.cassette, stamp)
    return Kept(Handed(c.mode, c.cassette, error), answers, c.on_miss)


@functools.lru_cache(maxsize=1)
def _read_once(path: str, stamp: tuple[int, ...]) -> tuple[Answers | None, str | None]:
    """The answers of the cassette at ``path`` as it was when ``stamp`` (device, inode, size,
    time) was taken, read once; or why they cannot be read."""
    try:
        return Answers((_from_log if is_log(Path(path)) else _from_file)(Path(path))), None
    except (LLMError, ValueError) as exc:  # as an agent built in process words them
        return None, str(exc)
    except OSError as exc:
        return None, f"cassette {path}: cannot read: {exc.strerror}"


_handed: tuple[Handed, Source] | None = None


@contextmanager
def handing(handed: Handed | None, answers: Source) -> Iterator[None]:
    """In a worker, while the block runs: an agent that opens the cassette ``handed`` names
    (``open_completer``) is served from ``answers`` (the run, asked a question at a time), or
    records through the run."""
    global _handed
    before, _handed = _handed, None if handed is None else (handed, answers)
    try:
        yield
    finally:
        _handed = before


def _no_file(path: Path) -> str:
    return f"cassette {path} does not exist"


def _no_folder(path: Path) -> str:
    return f"the folder of cassette {path} does not exist"


def open_completer(
    model: str,
    connection: Connection | None = None,
    *,
    transport: httpx.BaseTransport | None = None,
    **client: Any,
) -> Completer:
    """The live client (``live``), a recorder in front of it (``record``) or a player
    (``replay``), checked before the first question: a missing key or cassette is an LLMError
    when the agent is built, not a failed decision weeks into a run. A replay needs no key.

    In a worker the run handed the cassette to (``handing``), a replay's player asks the run
    for each answer, and a recording is the live client's: the run appends the calls each
    decision brings back (the worker could not write the file)."""
    c = connection or Connection.from_env()
    path = Path(c.cassette) if c.cassette else None
    handed = _handed
    if handed is not None and (handed[0].mode, handed[0].path) != (c.mode, c.cassette):
        handed = None  # another cassette than the run's: the worker may not open it
    if c.mode == "replay":
        assert path is not None
        if handed is not None:
            if handed[0].error is not None:
                raise LLMError(handed[0].error)
            return Player(model, path, on_miss=c.on_miss, answers=handed[1])
        if not path.is_file():
            raise LLMError(_no_file(path))
        return Player(model, path, on_miss=c.on_miss)
    key_env = c.key_env
    api_key = os.environ.get(key_env) if key_env else None
    if key_env and not api_key:
        raise LLMError(f"the environment variable {key_env} is not set")
    live = ChatClient(model, c, api_key=api_key, transport=transport, **client)
    if c.mode == "live":
        return live
    assert path is not None
    if handed is not None:
        if handed[0].error is not None:
            raise LLMError(handed[0].error)
        return live
    if not path.parent.is_dir():
        raise LLMError(_no_folder(path))
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
            for key, calls, decision in _from_log(log):
                named = "/".join(map(str, decision))
                f.write(cassette_line(key, calls[0].model, calls, named))
                n += 1
        partial.replace(out)
    except OSError as exc:
        raise LLMError(f"cassette {out}: cannot write: {exc.strerror or exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    return n
