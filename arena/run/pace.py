"""How a run keeps pace with the wall clock: committing a slow run's events as they happen, and
telling a watcher (the progress display) about each decision, also from a worker process.

A replay of rule-based agents takes seconds and is written in large batches (one transaction
per ``ledger.stream.FLUSH_EVERY`` events); a model-backed agent takes seconds to minutes per
decision, and a batch written only at the close loses every paid call when the run is killed.
``Pace`` commits what the run recorded once ``every`` seconds of wall clock have passed since
the last commit (a fast run's events every few seconds), and at once after a decision that
asked a model: a commit costs a fraction of a millisecond against the model's seconds, and a
run killed between decisions then loses no answer it paid for (a model answering in 0.4 s,
faster than ``every``, had its last answers asked again on the resume). The batches and
snapshots fall where they always do (``StreamWriter.commit``), so the log is the same bytes
however often it was committed.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ledger.events import ModelCall
from ledger.stream import StreamWriter


@dataclass(frozen=True)
class DecisionSeen:
    """One agent's decision as the run made it, for a watcher (never logged)."""

    cohort: str
    start: str
    """The cohort's start as a person names it (``arena.run.cohort.start_text``): what tells
    apart the lines of two cohorts at the same week in a run of many."""
    agent: str
    week: int
    seconds: float
    """Wall-clock seconds the decision took."""
    calls: int
    """Model calls it made."""
    failures: tuple[str, ...]
    """Why each of its failed calls failed, and why the decision did, one short line each."""


Watcher = Callable[[DecisionSeen], None]


SEND_EVERY = 0.2
"""Seconds a worker's decisions may wait to be sent to the driver together: a fast cohort's
thousands of decisions cost a few sends a second, and a slow one (an LLM agent's) is sent as it
is made, since it comes more than this after the last send."""

Later = Callable[[float, Callable[[], None]], Callable[[], None]]
"""Calls a function once, some seconds from now, from another thread; returns its cancel."""


def later(seconds: float, call: Callable[[], None]) -> Callable[[], None]:
    """``call`` in ``seconds``, on a timer thread that takes no signal. The kernel hands a
    process's signal to any thread that does not block it, and one taken here would not cut
    short the main thread's wait in a system call: the sandbox's time limit (SIGALRM) must
    strike a plugin waiting in one. A thread starts with its creator's mask, so the signals are
    blocked around its start (from its first instruction on, not once it runs)."""
    timer = threading.Timer(seconds, call)
    timer.daemon = True
    masking = hasattr(signal, "pthread_sigmask")  # no signal masks on Windows
    before = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals()) if masking else set()
    try:
        timer.start()
    finally:
        if masking:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
    return timer.cancel


class Batched:
    """A watcher in a worker process (``arena.engines``): each decision is kept and sent on,
    with those kept before it, once ``every`` seconds have passed since the last send; ``flush``
    sends the rest when the cohort ends. ``send`` carries a batch to the driver, which tells its
    own watcher of each decision in order.

    A decision kept is sent ``every`` seconds after the last send even if no other decision
    comes (``later``: a timer thread): the next one may be an LLM agent's, minutes away, and
    the display must not hold a fast decision back until then. Sends, from the timer or from
    the run, take turns (a lock), and ``flush`` cancels the timer.

    ``clock`` is bound at import, as ``Pace``'s is."""

    def __init__(
        self,
        send: Callable[[list[DecisionSeen]], None],
        every: float = SEND_EVERY,
        clock: Callable[[], float] = time.monotonic,
        later: Later = later,
    ) -> None:
        self.send = send
        self.every = every
        self.clock = clock
        self.later = later
        self.kept: list[DecisionSeen] = []
        self.last = clock()
        self._lock = threading.Lock()
        self._cancel: Callable[[], None] | None = None

    def __call__(self, seen: DecisionSeen) -> None:
        with self._lock:
            self.kept.append(seen)
            wait = self.every - (self.clock() - self.last)
            if wait <= 0:
                self._send()
            elif self._cancel is None:
                self._cancel = self.later(wait, self.flush)

    def flush(self) -> None:
        """Send what is kept, if anything (the timer's call too)."""
        with self._lock:
            self._send()

    def _send(self) -> None:
        if self._cancel is not None:
            self._cancel()
            self._cancel = None
        if self.kept:
            self.send(self.kept)
            self.kept = []
        self.last = self.clock()


def failures(calls: tuple[ModelCall, ...], error: str | None) -> tuple[str, ...]:
    """The reasons a decision's calls and the decision itself failed, one short line each."""
    reasons = [c.error or c.rejected for c in calls if c.error or c.rejected]
    if error:
        reasons.append(error)
    return tuple(" ".join(str(r).split())[:80] for r in reasons)


def most_common(counts: Counter[str]) -> str | None:
    """The reason seen most often (the first seen among equals), or None."""
    return counts.most_common(1)[0][0] if counts else None


class Pace:
    """Commits a writer's events once ``every`` seconds have passed since the last commit.

    ``clock`` is bound at import: the replay runs under freezegun's frozen clock, and the
    wall clock must still move."""

    def __init__(
        self, writer: StreamWriter, every: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.writer = writer
        self.every = every
        self.clock = clock
        self.last = clock()

    def tick(self, *, asked: bool = False) -> None:
        """Commit if it is time, or the decision just made ``asked`` a model; never where
        commits wait for the end of a step (``every`` infinite: a stepped replay's)."""
        now = self.clock()
        if now - self.last >= self.every or (asked and self.every < math.inf):
            self.writer.commit()
            self.last = self.clock()
