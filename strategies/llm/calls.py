"""A decision's model calls as they happen, kept where the plugin boundary can read them however
the decision ends.

A decision that times out, fails or is interrupted never returns its ``Trace``, and the calls
it made would be lost with it: the cost undercounted, and a replay of the log with no answer
for them. So the boundary (``arena.boundary.agents``) hands each decision a ``CallLog``
(``recording``) and the completers write into it as they go: the live client one entry per HTTP
attempt, opened before the request is sent and finished when its outcome is known; a cassette
player each recorded attempt it serves. When the decision ends the boundary closes the log, and
an attempt still open then is kept as a failed call whose ``error`` is ``aborted: `` and the
reason (``aborted: DecisionTimeout: decision took longer than 3 s``). When the time limit or a
Ctrl-C struck with no attempt open (in a backoff wait, or in the agent's own code), the last
call is marked so instead (``aborted: REASON | after: ...``): either way a replay that serves
the marked call ends its decision there, as the live one ended, rather than asking anything.

A log told to stop (``stop``: one attribute store, which the sandbox's signal handlers do before
raising) or closed refuses new attempts with ``Aborted``: a question still running on a worker
thread after its decision ended is never sent again. Worker threads find the log of the
decision that started them (``bound``), not the one current when they run.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from ledger.events import ModelCall
from strategies.api import Trace

T = TypeVar("T", int, float)
R = TypeVar("R")

ABORTED = "aborted: "
"""How the ``error`` of a call its decision's end cut short begins; nothing a server sends
can begin an error so (the client's own errors begin ``HTTP``, a name, ``no answer``...)."""

AFTER = " | after: "
"""Between the reason and what the call had given, in a call marked after it finished."""


class Aborted(Exception):
    """The decision this question belongs to has ended; in a replay, it ended here live."""


def first_line(text: str) -> str:
    """The first line of an error text, on its own, as a reason."""
    line = text.strip().splitlines()[0] if text.strip() else "the decision ended"
    return " ".join(line.split()).replace(AFTER.strip(), "/")[:500]


def aborted_reason(call: ModelCall) -> str | None:
    """Why ``call``'s decision ended while it was out (the reason ``close`` wrote), or None when
    it is no such call."""
    error = call.error
    if error is None or not error.startswith(ABORTED):
        return None
    return error[len(ABORTED) :].split(AFTER, 1)[0]


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


@dataclass(eq=False, slots=True)
class Entry:
    """One attempt: the call record before anything came back (``blank``), when it began (a
    real clock's nanoseconds), and the record it ended with."""

    ask: int
    blank: ModelCall
    started: int
    call: ModelCall | None = None


class CallLog:
    """One decision's calls, in the order their questions were first asked.

    ``clock`` is bound at import, as the client's: under a replay's frozen clock the latency
    of an attempt cut short must still be real time.
    """

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.reason: str | None = None
        self.closed = False
        self.prompts: dict[str, str] = {}
        self._entries: list[Entry] = []
        self._replaced = False
        self._lock = threading.Lock()
        self._asks = itertools.count()
        self._clock = clock
        self._when_closed: list[Callable[[list[tuple[ModelCall, ...]]], None]] = []

    @property
    def stopped(self) -> bool:
        return self.closed or self.reason is not None

    def stop(self, reason: str) -> None:
        """Refuse new attempts from now on, for ``reason`` (the first one given is kept). Safe
        from a signal handler: it takes no lock."""
        if self.reason is None:
            self.reason = first_line(reason)

    def question(self, prompts: Mapping[str, str] | None = None) -> int:
        """A number for a new question, whose system prompt ``prompts`` names by digest."""
        if prompts:
            self.prompts.update(prompts)
        return next(self._asks)

    def begin(self, ask: int, blank: ModelCall) -> Entry:
        """An attempt about to be sent; ``Aborted`` if the decision has ended."""
        if self.stopped:
            raise Aborted(self.reason or "the decision has ended")
        entry = Entry(ask, blank, self._clock())
        self._entries.append(entry)
        return entry

    def finish(self, entry: Entry, call: ModelCall) -> None:
        """``entry`` ended as ``call``; too late, if the log already closed it as aborted."""
        with self._lock:
            if entry.call is None:
                entry.call = call

    def add(self, ask: int, call: ModelCall) -> None:
        """A whole attempt at once (a replay's), unless the log is closed or replaced."""
        with self._lock:
            if not (self.closed or self._replaced):
                self._entries.append(Entry(ask, call, 0, call))

    def replace(
        self, questions: Sequence[tuple[ModelCall, ...]], prompts: Mapping[str, str]
    ) -> None:
        """The decision's calls are ``questions``, whole, in this order (a replay of a decision
        cut short: what its recording holds); nothing is added after."""
        with self._lock:
            if self.closed:
                return
            self._entries = [Entry(k, c, 0, c) for k, calls in enumerate(questions) for c in calls]
            self.prompts.update(prompts)
            self._replaced = True

    def reject(self, call: ModelCall, problem: str) -> ModelCall:
        """``call`` with the parser's ``rejected`` reason, here and as returned."""
        rejected = msgspec.structs.replace(call, rejected=problem)
        with self._lock:
            for entry in reversed(self._entries):
                if entry.call is call:
                    entry.call = rejected
                    break
        return rejected

    def when_closed(self, then: Callable[[list[tuple[ModelCall, ...]]], None]) -> None:
        """Call ``then`` with the questions (``questions``) once the log is closed."""
        with self._lock:
            if not self.closed:
                self._when_closed.append(then)
                return
        then(self.questions())

    def close(self, reason: str, *, mark_last: bool = False) -> tuple[ModelCall, ...]:
        """Every call, once the decision has ended: those still open kept as cut short for
        ``reason`` (the one ``stop`` was given wins); with ``mark_last`` and none open, the
        last call marked so. Later attempts are refused, later finishes ignored."""
        with self._lock:
            if not self.closed:
                self.closed = True
                if self._entries:  # a decision that asked nothing has nothing to cut
                    self._cut(self.reason or first_line(reason), mark_last)
            callbacks, self._when_closed = self._when_closed, []
        if callbacks:
            questions = self.questions()
            for then in callbacks:
                then(questions)
        return self.calls() if self._entries else ()

    def _cut(self, reason: str, mark_last: bool) -> None:
        now, cut = self._clock(), False
        for entry in self._entries:
            if entry.call is None:
                latency = round((now - entry.started) / 1e6, 3)
                entry.call = msgspec.structs.replace(
                    entry.blank, error=ABORTED + reason, latency_ms=latency
                )
                cut = True
            elif aborted_reason(entry.call) is not None:
                cut = True
        if mark_last and not cut and self._entries:
            last = self._ordered()[-1]
            assert last.call is not None
            before = last.call.error or "the answer came, but the decision ended before it was used"
            last.call = msgspec.structs.replace(last.call, error=ABORTED + reason + AFTER + before)

    def _ordered(self) -> list[Entry]:
        return sorted(self._entries, key=lambda e: e.ask)  # stable: attempts in the order made

    def calls(self) -> tuple[ModelCall, ...]:
        """The calls so far that have an outcome, each question's attempts together."""
        return tuple(e.call for e in self._ordered() if e.call is not None)

    def questions(self) -> list[tuple[ModelCall, ...]]:
        """The calls grouped by question, in the order questions were asked."""
        out: dict[int, list[ModelCall]] = {}
        for e in self._ordered():
            if e.call is not None:
                out.setdefault(e.ask, []).append(e.call)
        return [tuple(calls) for calls in out.values()]

    def trace(self, error: str | None) -> Trace | None:
        """The trace of a decision that ended without returning one: these calls, their usage
        and the system prompts they name; None when it made none."""
        calls = self.calls()
        if not calls:
            return None
        answered = [c.answer for c in calls if c.answer is not None]
        named = {c.system for c in calls}
        return calls_trace(
            calls[-1].model,
            calls,
            raw_response=answered[-1] if answered else None,
            retries=max(c.reask for c in calls),
            error=error,
            prompts={d: t for d, t in self.prompts.items() if d in named},
        )


_current: CallLog | None = None
_bound = threading.local()
_UNBOUND = object()


def current() -> CallLog | None:
    """The log of the decision this thread works for: the one a worker was bound to, else the
    one the boundary set (None outside a decision, as in a test calling ``decide`` itself)."""
    log = getattr(_bound, "log", _UNBOUND)
    return _current if log is _UNBOUND else log  # type: ignore[return-value]


@contextmanager
def recording(log: CallLog) -> Iterator[CallLog]:
    """``log`` is the current decision's while the block runs."""
    global _current
    previous, _current = _current, log
    try:
        yield log
    finally:
        _current = previous


def stop_current(reason: str) -> None:
    """Stop the current decision's log, if there is one (see ``CallLog.stop``)."""
    log = current()
    if log is not None:
        log.stop(reason)


def reject(call: ModelCall, problem: str) -> ModelCall:
    """``call`` rejected by the parser for ``problem``, in the current decision's log too."""
    log = current()
    if log is None:
        return msgspec.structs.replace(call, rejected=problem)
    return log.reject(call, problem)


def bound(work: Callable[..., R]) -> Callable[..., R]:
    """``work`` that, on whichever thread runs it, records into the log current now."""
    log = current()

    def run(*args: Any, **kwargs: Any) -> R:
        _bound.log = log
        try:
            return work(*args, **kwargs)
        finally:
            del _bound.log

    return run
