"""``--isolate``: each agent's code in a worker process of its own, for code you do not trust.

In-process defences (``arena.boundary``) stop accidents and the obvious attacks, but code in the
same interpreter can reach anything (``gc.get_objects()`` finds the tape and the broker). A
worker started by the forkserver (a clean interpreter, not a copy of this one) holds only what
it is sent: the strategy, its setup context, and at each decision the view — the prices of the
instant, the agent's cash, shares and positions, and the price points that arrived since its
previous decision, which it adds to a ``Past`` of its own. Nothing it could write is read by
anyone else.

What comes back is bytes in one fixed msgspec schema, never a pickle (unpickling what a hostile
process sends would run its code here), and it is checked again as an in-process decision is.
The time limit is enforced from outside: a worker that does not answer in time is killed and
restarted (and set up again), a worker that dies is restarted; either way the decision is a
HOLD with the reason recorded.
"""

from __future__ import annotations

import functools
import multiprocessing
import pkgutil
import signal
import sys
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from typing import Any

import freezegun
import msgspec
import numpy as np
from freezegun import freeze_time
from freezegun.config import DEFAULT_IGNORE_LIST

from arena.boundary.agents import decide_checked, recorded
from arena.boundary.checks import checked
from arena.boundary.past import Layout, PastFeed, PastWriter
from arena.boundary.sandbox import Clock, Sandbox, error_text
from arena.boundary.views import Views
from ledger.events import BetIntent, SellIntent
from ledger.rules import RuleSet
from strategies.api import Context, Decision, MarketMeta, RunStopped, Strategy, Trace, View
from strategies.loader import build_strategy

SETUP_SECONDS = 60.0
"""The least time a worker gets to answer its setup: it starts a fresh interpreter, imports the
plugin and builds it first, which the per-decision limit is not meant to measure."""

MAX_ANSWER = 16 * 2**20
"""Bytes read of one answer: a decision cut to the boundary's limits is a few MB at most."""

_START = "forkserver" if sys.platform.startswith("linux") else "spawn"

WORKER_CLOCK_IGNORES = [
    *(name for name in DEFAULT_IGNORE_LIST if name != "multiprocessing"),
    *(
        f"multiprocessing.{module.name}"
        for module in pkgutil.iter_modules(multiprocessing.__path__)
        if module.name != "process"
    ),
]
"""The modules whose calls get the real time in a worker, as freezegun's default gives them
in-process, but for ``multiprocessing.process``. freezegun hands the real time to any call with
an ignored module among its five nearest frames, and in a worker the process's own ``run``
(``multiprocessing.process``) is the fifth frame from ``decide``: with the default list a plugin
reading ``time.time()`` straight from ``decide`` got the wall clock under ``--isolate`` and the
simulated instant in-process, so the same honest agent logged different bytes."""


class Answer(msgspec.Struct, kw_only=True):
    """What a worker sends back: a checked decision and its note, or why there is none."""

    bets: list[BetIntent] = []
    sells: list[SellIntent] = []
    reasoning: str = ""
    trace: Trace | None = None
    note: str | None = None
    error: str | None = None
    stopped: str | None = None


_ANSWER = msgspec.json.Decoder(Answer)


class Isolated:
    """One agent's code in its own worker process; the same interface as ``InProcess``."""

    def __init__(
        self,
        plugin: str | Strategy,
        past: PastFeed,
        market_facts: tuple[tuple[str, ...], tuple[MarketMeta, ...], RuleSet],
        seconds: float,
    ) -> None:
        self.plugin = plugin
        self.past = past
        self.facts = market_facts
        self.seconds = seconds
        self.context: Context | None = None
        self.broken: str | None = None
        self._start()

    def _start(self) -> None:
        context: Any = multiprocessing.get_context(_START)  # typeshed: a BaseContext, no Process
        if _START == "forkserver":
            context.set_forkserver_preload(["arena.boundary.isolated"])
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=serve, args=(child, self.plugin, self.past.layout, self.facts), daemon=False
        )
        self.process.start()
        child.close()
        self.since = np.zeros(len(self.past.layout.lengths), dtype=np.int64)

    def close(self) -> None:
        self.conn.close()
        self.process.kill()
        self.process.join()

    def _restart(self) -> None:
        self.close()
        self._start()

    def _exchange(
        self, message: tuple[Any, ...], seconds: float
    ) -> tuple[Answer | None, str | None]:
        """Send, wait at most ``seconds`` (0: no limit), read the answer; on a timeout or a dead
        worker, restart it and say what happened."""
        try:
            self.conn.send(message)
            if not self.conn.poll(seconds if seconds > 0 else None):
                self._restart()
                what = "decision" if message[0] == "decide" else "setup"
                return None, (
                    f"DecisionTimeout: {what} took longer than {seconds:g} s "
                    "(its worker was stopped and restarted)"
                )
            raw = self.conn.recv_bytes(MAX_ANSWER)
        except (EOFError, OSError):
            self.process.join(5)
            code = self.process.exitcode
            self._restart()
            return None, f"WorkerDied: the agent's worker process ended (exit code {code})"
        try:
            return _ANSWER.decode(raw), None
        except msgspec.DecodeError as exc:
            return None, f"BadAnswer: the agent's worker sent what is not a decision: {exc}"

    def _setup(self) -> str | None:
        seconds = max(self.seconds, SETUP_SECONDS) if self.seconds > 0 else 0.0
        answer, error = self._exchange(("setup", self.context), seconds)
        if answer is not None and answer.stopped is not None:
            raise RunStopped(answer.stopped)
        return error if answer is None else answer.error

    def setup(self, context: Context) -> str | None:
        self.context = context
        return self._setup()

    def decide(self, view: View) -> tuple[Decision, str | None]:
        if self.broken:
            return Decision.hold(), self.broken
        delta = self.past.delta(self.since)
        markets = view.markets
        message = (
            "decide", delta, view.ts, view.week, view.cash, markets.yes, markets.open,
            markets.volume, self.past.rows, view.shares, view.positions,
        )  # fmt: skip
        answer, error = self._exchange(message, self.seconds)
        if answer is None:  # a fresh worker took its place: set it up for the next decision
            failed = self._setup()
            self.broken = f"its worker could not be set up again: {failed}" if failed else None
            return Decision.hold(), error
        self.since = delta.until
        if answer.stopped is not None:
            raise RunStopped(answer.stopped)
        if answer.error is not None:
            return Decision.hold(), answer.error
        outcome, error = _recheck(answer)
        return recorded(outcome, error)


def _recheck(answer: Answer) -> tuple[tuple[Decision, str | None] | None, str | None]:
    """The worker's decision checked again here: a hostile worker may send anything."""
    try:
        decision, note = checked(
            Decision(
                bets=answer.bets,
                sells=answer.sells,
                reasoning=answer.reasoning,
                trace=answer.trace,
            )
        )
    except (TypeError, ValueError) as exc:
        return None, error_text(exc)
    return (decision, answer.note or note), None


# -- the worker ------------------------------------------------------------------------------


def serve(
    conn: Connection,
    plugin: str | Strategy,
    layout: Layout,
    facts: tuple[tuple[str, ...], tuple[MarketMeta, ...], RuleSet],
) -> None:
    """The worker's loop: set up, then decide on each view sent, until the pipe closes.

    Ctrl-C reaches the whole process group; the parent decides what it means, so the worker
    ignores it. The time limit is the parent's to enforce."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    freezegun.configure(default_ignore_list=WORKER_CLOCK_IGNORES)
    ids, meta, rules = facts
    past = PastWriter(layout)
    sandbox = Sandbox(0.0)
    strategy: Strategy | None = None
    views = Views(ids, meta, layout, past.past.history, ["agent"], rules)
    clock: Clock | None = None
    encoder = msgspec.json.Encoder()
    with sandbox.guarded():
        while True:
            try:
                message = conn.recv()
            except EOFError:
                return
            if message[0] == "setup":
                context: Context = message[1]
                if strategy is None:
                    built, error = sandbox.call(_build, plugin)
                    if error is not None:
                        conn.send_bytes(encoder.encode(Answer(error=error)))
                        continue
                    strategy = built
                frozen_time = freeze_time(datetime.fromtimestamp(context.start, UTC)).start()
                clock = Clock(frozen_time, context.start)
                try:
                    answer = Answer(error=sandbox.call(strategy.setup, context)[1])
                except RunStopped as exc:
                    answer = Answer(stopped=str(exc))
                conn.send_bytes(encoder.encode(answer))
                continue
            _, delta, ts, week, cash, yes, open_mask, volume, rows, shares, positions = message
            past.apply(delta)
            assert clock is not None and strategy is not None
            clock.move_to(ts)
            views.move_to(ts, yes, open_mask, volume, rows)
            view = views.view(
                "agent", week, cash, np.asarray(shares), functools.partial(tuple, positions)
            )
            try:
                answer = _answer(*sandbox.call(decide_checked, strategy, view))
            except RunStopped as exc:
                answer = Answer(stopped=str(exc))
            conn.send_bytes(encoder.encode(answer))


def _build(plugin: str | Strategy) -> Strategy:
    return build_strategy(plugin) if isinstance(plugin, str) else plugin


def _answer(outcome: tuple[Decision, str | None] | None, error: str | None) -> Answer:
    if outcome is None:
        return Answer(error=error)
    decision, note = outcome
    return Answer(
        bets=list(decision.bets),
        sells=list(decision.sells),
        reasoning=decision.reasoning,
        trace=decision.trace,
        note=note,
    )
