"""``--isolate``: each agent's code in a worker process of its own, for code you do not trust.

In-process defences (``arena.boundary``) stop accidents and the obvious attacks, but code in the
same interpreter can reach anything (``gc.get_objects()`` finds the tape and the broker). A
worker started by the forkserver (a clean interpreter, not a copy of this one) holds only what
it is sent: the plugin (its spec, or a ready object as pickled bytes), its setup context, and at
each decision the view — the prices of the instant, the agent's cash, shares and positions, and
the price points that arrived since its previous decision, which it adds to a ``Past`` of its
own. The plugin is imported, built, set up and asked in the worker, never here: its import and
constructor run under the same guards and limits as its decisions. The worker learns of a
market when it lists and of its points as they arrive (``ArrivedPast``): nothing it is sent
says how many points a market will have, or which markets will list.

Before any plugin code runs the worker leaves the run's session and process group, ties its life
to the run's (``PR_SET_PDEATHSIG``, and a thread that ends it when its pipe from the run closes),
and confines itself (``arena.boundary.oslimits``: Landlock and a seccomp filter where the kernel
has them, resource limits) before it starts any thread, since Landlock holds only the thread
that asks for it and those started after. So a plugin's ``killpg`` or a Ctrl-C at the terminal
cannot stop the run, no worker outlives a killed run, and nothing it could write is read by
anyone else.

What comes back is bytes in one fixed msgspec schema, never a pickle (unpickling what a hostile
process sends would run its code here; the check that a spec loads, too), read as it arrives,
so half a message costs the run no more than its wait (``_read``), and it is checked again as
an in-process decision is.
In the worker the plugin runs under the run's ``Sandbox`` and ``InProcess`` as it would here, so
its decision, its error text and the model calls of a decision cut short by the time limit
(``strategies.llm.calls``) are what an in-process run records. The driver also enforces the
limit from outside, a little later (``GRACE``): a worker that does not answer by then (its
plugin swallowed the limit) is first asked, on a pipe of its own that a thread of the worker
answers, for the decision cut short with the model calls it made so far (as ``InProcess``
records a timed-out decision), then killed and restarted (and set up again); a worker that dies
is restarted. Either way the decision is a HOLD with the reason recorded, and its calls are kept
whenever that thread answered (``CALLS_WAIT``).

A resumed run's stored model calls (``strategies.llm.resume``) are served again in the worker as
the runner serves them in process: a resumed isolated run asks the model nothing its log already
holds. So are a cassette's (``ARENA_LLM_MODE=replay``), which the worker may not open: the run
reads it. Neither is sent to the worker: each recorded question states the prices of its own
instant, so a worker holding them all, a rule-based agent's too, would hold the future. The
worker's model client asks the run for the one answer it needs, by the question's key, on a
pipe of its own (``Ask``), and the run answers while it waits for the decision or the setup
(``_Asks``): that answer, or none (a cassette's miss, which under ``--on-miss error`` stops the
run whatever the worker then says). A recording (``record``) is written here too, from the
calls each decision brings back (``strategies.llm.cassette.Handed``).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import pickle
import pkgutil
import queue
import selectors
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import freezegun
import freezegun.api
import msgspec
import numpy as np
from freezegun import freeze_time
from freezegun.config import DEFAULT_IGNORE_LIST

from arena.boundary import oslimits
from arena.boundary.agents import InProcess, cut_short
from arena.boundary.checks import capped, checked
from arena.boundary.children import forkserver_running
from arena.boundary.oslimits import Confinement
from arena.boundary.past import ArrivedPast, PastFeed
from arena.boundary.sandbox import INTERRUPTED, Clock, RunInterrupted, Sandbox, error_text
from arena.boundary.views import Views
from ledger.events import BetIntent, ModelCalled, SellIntent
from ledger.rules import RuleSet
from strategies.api import (
    Context,
    Decision,
    MarketMeta,
    RunStopped,
    Strategy,
    StrategyError,
    Trace,
    View,
)
from strategies.llm.calls import current as current_calls
from strategies.llm.calls import stop_current
from strategies.llm.resume import serving, stored_answers
from strategies.loader import build_strategy

if TYPE_CHECKING:
    from strategies.llm.cassette import CassetteFile, Entry, Handed, Kept

SETUP_SECONDS = 60.0
"""The least time a worker gets to answer its setup: it starts a fresh interpreter, imports the
plugin and builds it first, which the per-decision limit is not meant to measure."""

GRACE = 2.0
"""Seconds the driver waits past the limit before it kills a worker: the worker's own timer
strikes at the limit and sends the decision cut short, with its model calls."""

CALLS_WAIT = 1.0
"""Seconds the driver waits, before it kills a worker that has not answered, for the worker's
call-log thread to send the decision's model calls so far."""

MAX_ANSWER = 16 * 2**20
"""Bytes read of one answer: a decision cut to the boundary's limits is a few MB at most."""

MAX_ASK = 2**16
"""Bytes read of one ask for a recorded answer: a model's name and a request's key."""

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
    interrupted: bool = False


_REAL_EXIT = os._exit
"""Bound before the sandbox's guards replace it: the pipe watch ends the worker with it."""


_ANSWER = msgspec.json.Decoder(Answer)


class Ask(msgspec.Struct, array_like=True):
    """A worker's ask for one recorded model answer: from the cassette the run replays or from
    a resumed run's stored prefix (``source``), the ``k``-th (from 0) from ``model`` to the
    question whose request key is ``key``. The run serves a cassette's as a player's ``ask``
    does (past the last, the last again) and a stored prefix's as its ``serve`` does (past the
    last, none: the model is asked)."""

    source: Literal["cassette", "stored"]
    model: str
    key: str
    k: Annotated[int, msgspec.Meta(ge=0)]


_ASK = msgspec.msgpack.Decoder(Ask)
_REAL_CLOCK = (freezegun.api.real_monotonic,)
"""The driver's clock for a wait's deadline: freezegun freezes ``time.monotonic`` for the run
and replaces a module's own reference to the real one (not one held in a tuple)."""
_FRAME = struct.Struct("!i")
"""The length before each message, as ``multiprocessing.connection`` frames them."""


class Isolated:
    """One agent's code in its own worker process; the same interface as ``InProcess``.

    ``plugin``: the agent's spec (imported and built in the worker), or a ready object
    (benchmarks and tests), sent pickled and unpickled in the worker, under its sandbox.
    ``confinement``: the OS sandbox every worker of the run applies before any plugin code.
    ``stored``: the agent's model calls of a resumed run's stored prefix (``(stream,
    ModelCalled)`` rows, in log order), kept here: its worker asks for each answer its agent
    needs (``Ask``) instead of asking the model what the log holds. So is the connection's
    cassette, if any (``kept_cassette``): the worker is told only its name and mode."""

    def __init__(
        self,
        plugin: str | Strategy,
        past: PastFeed,
        market_facts: tuple[tuple[str, ...], tuple[MarketMeta, ...], RuleSet],
        seconds: float,
        confinement: Confinement,
        stored: Sequence[tuple[str, ModelCalled]] = (),
    ) -> None:
        self.plugin: str | bytes = plugin if isinstance(plugin, str) else pickle.dumps(plugin)
        self.stored = stored_answers(stored)
        self.cassette, self.recording = _cassette()
        self.missed: str | None = None
        """A cassette's miss the worker asked for under ``--on-miss error``: the run stops."""
        self.folders = oslimits.plugin_folders(plugin)
        self.past = past
        self.facts = market_facts
        self.seconds = seconds
        self.confinement = confinement
        self.context: Context | None = None
        self.broken: str | None = None
        self.cut: tuple[Decision, str | None] | None = None
        self.multi = (-1, 0, 1)  # (k, how many of the first k store more than YES, widest)
        self._start()

    def _start(self) -> None:
        context = _context()
        self.scratch = scratch_folder()
        self.conn, child = context.Pipe()
        watched, self.alive = context.Pipe(duplex=False)
        self.side, side = context.Pipe()
        self.asks, asks = _Asks.pipe(self._recorded)
        limits = (self.seconds, self.setup_seconds, self.confinement, self.folders, self.scratch)
        ids, meta, rules = self.facts
        # no market's facts yet: each decision sends those listed since (a rolling cohort's
        # later markets must not be in the worker before they list), and their points since
        self.shown = 0
        self.process = context.Process(
            target=serve,
            args=(child, watched, self.plugin, (ids[:0], meta[:0], rules), limits, side, asks),
            daemon=False,
        )
        self.process.start()
        child.close()
        watched.close()
        side.close()
        asks.close()
        self.since = np.zeros(0, dtype=np.int64)

    @property
    def setup_seconds(self) -> float:
        """The worker's limit on importing and building the plugin (0: none)."""
        return max(self.seconds, SETUP_SECONDS) if self.seconds > 0 else 0.0

    def close(self) -> None:
        self.conn.close()
        self.alive.close()
        self.side.close()
        self.asks.close()
        self.process.kill()
        self.process.join()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _restart(self) -> None:
        self.close()
        self._start()

    def _exchange(
        self, message: tuple[Any, ...], seconds: float
    ) -> tuple[Answer | None, str | None]:
        """``_exchanged``, but a cassette's miss the worker asked for under ``--on-miss error``
        stops the run even if the worker goes on (a plugin may catch the ``CassetteMiss``)."""
        answer, error = self._exchanged(message, seconds)
        missed, self.missed = self.missed, None
        if missed is not None and (answer is None or answer.stopped is None):
            raise RunStopped(missed)
        return answer, error

    def _exchanged(
        self, message: tuple[Any, ...], seconds: float
    ) -> tuple[Answer | None, str | None]:
        """Send, wait at most ``seconds`` (0: no limit) and ``GRACE`` more, answering the
        worker's asks for recorded answers meanwhile, and read the answer; on a timeout or a
        dead worker, restart it and say what happened."""
        end = _deadline(seconds + GRACE if seconds > 0 else None)
        try:
            self.conn.send(message)
            try:
                raw = self._answer_by(end)
            except RunInterrupted as exc:
                if message[0] == "decide":
                    exc.recorded = self._cut_short()
                raise
            if raw is None:
                what = "decision" if message[0] == "decide" else "setup"
                error = (
                    f"DecisionTimeout: {what} took longer than {seconds:g} s "
                    "(its worker was stopped and restarted)"
                )
                if message[0] == "decide":
                    self.cut = self._calls_so_far(error)
                self._restart()
                return None, error
        except (EOFError, OSError):
            self.process.join(5)
            code = self.process.exitcode
            self._restart()
            return None, f"WorkerDied: the agent's worker process ended (exit code {code})"
        try:
            return _ANSWER.decode(raw), None
        except msgspec.DecodeError as exc:
            return None, f"BadAnswer: the agent's worker sent what is not a decision: {exc}"

    def _calls_so_far(self, error: str) -> tuple[Decision, str | None] | None:
        """The decision a worker that will not answer is about to be killed in, cut short as
        in process with the model calls it made so far (``CallLog``: those still out kept as
        aborted for ``error``, or the last one marked), if its call-log thread answers within
        ``CALLS_WAIT``; None if it does not or the decision made no call."""
        try:
            self.side.send(error)
            answer = _ANSWER.decode(_read(self.side, _deadline(CALLS_WAIT)))
        except (OSError, EOFError, msgspec.DecodeError):  # TimeoutError among them
            return None
        if answer.error is not None or answer.stopped is not None or answer.trace is None:
            return None
        return _recheck(answer)

    def _cut_short(self) -> tuple[Decision, str | None] | None:
        """The decision a Ctrl-C cut short, as the worker records it, with the model calls it
        made (told by SIGUSR1, it stops the decision as a Ctrl-C stops one in process), if it
        answers within ``GRACE``; None if it does not."""
        try:
            os.kill(self.process.pid, signal.SIGUSR1)
            raw = self._answer_by(_deadline(GRACE))
            if raw is None:
                return None
            answer = _ANSWER.decode(raw)
        except (OSError, EOFError, msgspec.DecodeError):
            return None
        if answer.error is not None or answer.stopped is not None:
            return None
        return self._kept(_recheck(answer))

    def _answer_by(self, end: float | None) -> bytes | None:
        """The worker's answer, if it comes whole by ``end`` (``_deadline``; None: no limit),
        its asks for recorded answers answered meanwhile; None if it does not."""
        try:
            return _read(self.conn, end) if self.asks.wait(self.conn, end) else None
        except TimeoutError:
            return None

    def _kept(self, outcome: tuple[Decision, str | None]) -> tuple[Decision, str | None]:
        """``outcome``, its model calls appended to the cassette first when the run records
        one (the worker can write no file but its scratch folder's)."""
        trace = outcome[0].trace
        if self.recording is not None and trace is not None:
            self.recording.append_calls(trace.calls)
        return outcome

    def _recorded(self, ask: Ask) -> Entry | None:
        """The one recorded answer a worker asks for, or None; a cassette's miss noted if it
        stops the run."""
        if ask.source == "stored":
            stored = self.stored
            return None if stored is None else stored.entry(ask.model, ask.key, ask.k, False)
        entry = _from_cassette(self.cassette, ask)
        kept = self.cassette
        if entry is None and kept is not None and kept.on_miss == "error" and not self.missed:
            self.missed = (
                f"the recording {kept.handed.path} holds no answer from "
                f"{capped(ask.model, 100)[0]} to request {capped(ask.key, 12)[0]}; record it, "
                "or replay with --on-miss hold"
            )
        return entry

    def _setup(self) -> str | None:
        wait = self.setup_seconds + self.seconds if self.seconds > 0 else 0.0
        handed = None if self.cassette is None else self.cassette.handed
        setup = ("setup", self.context, self.stored is not None, handed)
        answer, error = self._exchange(setup, wait)
        if answer is not None and answer.stopped is not None:
            raise RunStopped(answer.stopped)
        return error if answer is None else answer.error

    def setup(self, context: Context) -> str | None:
        self.context = context
        return self._setup()

    def decide(self, view: View) -> tuple[Decision, str | None]:
        if self.broken:
            return Decision.hold(), self.broken
        markets = view.markets
        k = len(markets)  # those listed: the worker is sent nothing of the others
        since = np.zeros(k, dtype=np.int64)
        since[: self.since.size] = self.since
        delta = self.past.delta(since)
        ids, meta, _ = self.facts
        shape = self.past.layout
        listed = (self.shown, ids[self.shown : k], meta[self.shown : k],
                  shape.widths[self.shown : k], shape.yes_column[self.shown : k])  # fmt: skip
        message = (
            "decide", delta, view.ts, view.week, view.cash, markets.yes, markets.open,
            markets.volume, self._rows(k), view.shares, view.positions, listed,
        )  # fmt: skip
        self.cut = None
        answer, error = self._exchange(message, self.seconds)
        if answer is None:  # a fresh worker took its place: set it up for the next decision
            cut = self.cut  # a killed worker's calls, as its call-log thread sent them
            failed = self._setup()
            self.broken = f"its worker could not be set up again: {failed}" if failed else None
            return self._kept(cut) if cut is not None else (Decision.hold(), error)
        self.since = delta.until
        self.shown = max(self.shown, k)
        if answer.stopped is not None:
            raise RunStopped(answer.stopped)
        if answer.error is not None:
            return Decision.hold(), capped(answer.error)[0]
        return self._kept(_recheck(answer))

    def _rows(self, k: int) -> np.ndarray:
        """Every outcome's price now of the markets that store more than YES among the first
        ``k`` (``AsOf.rows``), to as many columns as the widest of them: a rolling cohort's
        rows of markets not listed yet, and their width, stay here."""
        if self.multi[0] != k:
            shape = self.past.layout
            first = zip(shape.widths[:k], shape.yes_column[:k], strict=True)
            widths = [width for width, side in first if side < 0]
            self.multi = (k, len(widths), max(widths, default=1))
        _, count, width = self.multi
        rows: np.ndarray = self.past.rows
        return rows if count == rows.shape[0] else rows[:count, :width]


def _context() -> Any:  # typeshed: a BaseContext, which has no Process
    """The start method's context, its forkserver (if any) running and preloaded."""
    context: Any = multiprocessing.get_context(_START)
    if _START == "forkserver":
        context.set_forkserver_preload(["arena.boundary.isolated"])
    forkserver_running(context)
    return context


SCRATCH_PREFIX = "arena-agent-"


def scratch_folder() -> str:
    """A new scratch folder for a worker, named for this process; those left by a process that
    no longer runs (a run killed before it could remove them) are removed first."""
    for stale in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"):
        owner = stale.name.removeprefix(SCRATCH_PREFIX).split("-", 1)[0]
        if owner.isdigit() and not _running(int(owner)):
            shutil.rmtree(stale, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: running
        return True
    return True


def _recheck(answer: Answer) -> tuple[Decision, str | None]:
    """The worker's decision checked again here (a hostile worker may send anything), with
    the note or error the worker's ``InProcess`` recorded for it."""
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
        return Decision.hold(), error_text(exc)
    sent = capped(answer.note)[0] if answer.note else None
    return decision, "; ".join(x for x in (sent, note) if x) or None


# -- the worker ------------------------------------------------------------------------------

Limits = tuple[float, float, Confinement, list[str], str]
"""A worker's decision limit, its build limit, its sandbox, the plugin's folders, its scratch."""


def serve(
    conn: Connection,
    alive: Connection,
    plugin: str | bytes,
    facts: tuple[tuple[str, ...], tuple[MarketMeta, ...], RuleSet],
    limits: Limits,
    side: Connection,
    asks: Connection,
) -> None:
    """The worker: leave the run's session, confine itself, then set up and decide on each
    view sent, until the pipe closes. On ``side`` a thread answers the driver's last request
    before it kills the worker: the running decision cut short, with its model calls. On
    ``asks`` another asks the run for each recorded model answer its agent needs (``_Asker``).

    Ctrl-C reaches the run's process group, which the worker has left; the parent decides what
    it means. The time limit is the worker's own (as in process) and the parent's (past it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    oslimits.own_session()
    seconds, build_seconds, confinement, folders, scratch = limits
    refused = _confine(confinement, folders, scratch)  # before any thread: Landlock holds
    _end_with(alive)  # only the thread that asks for it and those started after
    _answers_for_calls(side)
    asker = _Asker(asks)
    freezegun.configure(default_ignore_list=[*WORKER_CLOCK_IGNORES, "numpy"])  # SCAN_SKIPS
    ids, meta, rules = facts
    widths: tuple[int, ...] = ()
    yes_column: tuple[int, ...] = ()
    past = ArrivedPast()
    sandbox = Sandbox(seconds)
    agent: InProcess | None = None
    views = Views(ids, meta, past.layout, past.history, ["agent"], rules)
    clock: Clock | None = None
    served = False
    encoder = msgspec.json.Encoder()
    deciding = _stops_on_sigusr1(sandbox)
    answered = contextlib.ExitStack()  # a resumed run's stored answers, the cassette, for good
    with sandbox.guarded(), answered:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                return
            if message[0] == "setup":
                context: Context = message[1]
                if not served:  # before any plugin code asks
                    served = True
                    answered.enter_context(serving(asker.source("stored") if message[2] else None))
                    answered.enter_context(_handing(message[3], asker))
                if refused is not None:
                    conn.send_bytes(encoder.encode(Answer(error=refused)))
                    continue
                if agent is None:
                    sandbox.seconds = build_seconds
                    built, error = sandbox.call(_build, plugin)
                    sandbox.seconds = seconds
                    if error is not None:
                        conn.send_bytes(encoder.encode(Answer(error=error)))
                        continue
                    agent = InProcess(built, sandbox)
                frozen_time = freeze_time(datetime.fromtimestamp(context.start, UTC)).start()
                clock = Clock(frozen_time, context.start)
                try:
                    answer = Answer(error=agent.setup(context))
                except RunStopped as exc:
                    answer = Answer(stopped=str(exc))
                conn.send_bytes(encoder.encode(answer))
                continue
            _, delta, ts, week, cash, yes, open_mask, volume, rows, shares, positions, listed = (
                message
            )
            offset, more_ids, more_meta, more_widths, more_yes = listed
            if more_ids:  # markets listed since the last decision (all of them, at the first)
                ids, meta = ids[:offset] + more_ids, meta[:offset] + more_meta
                widths, yes_column = widths[:offset] + more_widths, yes_column[:offset] + more_yes
            past.apply(delta, widths, yes_column)
            if more_ids:
                views = Views(ids, meta, past.layout, past.history, ["agent"], rules)
            assert clock is not None and agent is not None
            clock.move_to(ts)
            views.move_to(ts, yes, open_mask, volume, rows)
            view = views.view(
                "agent", week, cash, np.asarray(shares), functools.partial(tuple, positions)
            )
            try:
                deciding.set()
                try:
                    answer = _answer(*agent.decide(view))
                finally:
                    deciding.clear()
            except RunStopped as exc:
                answer = Answer(stopped=str(exc))
            except RunInterrupted as exc:  # the run's Ctrl-C, told by SIGUSR1
                cut = exc.recorded
                answer = _answer(*cut) if cut is not None else Answer(error=INTERRUPTED)
                answer.interrupted = True
            conn.send_bytes(encoder.encode(answer))


def _stops_on_sigusr1(sandbox: Sandbox) -> threading.Event:
    """SIGUSR1, the run's Ctrl-C passed on (the worker is out of the terminal's reach), stops
    the decision running then as a Ctrl-C stops one in process: its model calls cut short and
    kept (``InProcess``). Set, the event returned says a decision is running; between
    decisions the signal is ignored."""
    deciding = threading.Event()

    def interrupt(signum: int, frame: Any) -> None:
        if deciding.is_set():
            sandbox.interrupted = True
            stop_current(INTERRUPTED)
            raise RunInterrupted()

    signal.signal(signal.SIGUSR1, interrupt)
    return deciding


def _answers_for_calls(side: Connection) -> None:
    """A thread that, asked on ``side`` (the driver will kill the worker: its decision did
    not end, its time limit swallowed), stops the running decision's call log and sends the
    decision cut short with its calls as ``InProcess`` records a timed-out one, so the calls
    made before the kill are in the run's log; an empty answer when no decision is running.
    It runs beside the plugin's code (the GIL switches threads), whatever that code catches."""
    encoder = msgspec.json.Encoder()

    def watch() -> None:
        with contextlib.suppress(OSError, EOFError):
            while True:
                error: str = side.recv()
                log = current_calls()
                if log is None or log.closed:
                    side.send_bytes(encoder.encode(Answer()))
                    continue
                log.stop(error)
                side.send_bytes(encoder.encode(_answer(*cut_short(log, error))))

    threading.Thread(target=watch, name="arena-call-log", daemon=True).start()


def _end_with(alive: Connection) -> None:
    """A thread that ends the worker when the run's end of ``alive`` closes (the run ended,
    however: a killed run closes it too), whatever the plugin is doing."""

    def watch() -> None:
        with contextlib.suppress(OSError):
            alive.poll(None)
        _REAL_EXIT(0)

    threading.Thread(target=watch, name="arena-run-watch", daemon=True).start()


def _confine(confinement: Confinement, folders: list[str], scratch: str) -> str | None:
    """The worker in its scratch folder and under its OS sandbox; why not, if it cannot be."""
    with contextlib.suppress(OSError):
        os.chdir(scratch)
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch
    try:
        oslimits.confine(confinement, folders, scratch)
    except OSError as exc:
        return (
            f"ConfinementError: the agent's sandbox could not be put in place "
            f"({confinement.summary()}): {exc}"
        )
    return None


def _cassette() -> tuple[Kept | None, CassetteFile | None]:
    """The cassette as the run keeps it for its workers (``strategies.llm.cassette.
    kept_cassette``), and the file this process appends each decision's calls to when the run
    records one. The cassette machinery (httpx: a seventh of a second) is imported only when
    the environment names a cassette, as every mode but ``live`` must."""
    if not os.environ.get("ARENA_LLM_CASSETTE"):
        return None, None
    from strategies.llm.cassette import CassetteFile, kept_cassette

    kept = kept_cassette()
    handed = None if kept is None else kept.handed
    if handed is None or handed.mode != "record" or handed.error is not None:
        return kept, None
    return kept, CassetteFile(Path(handed.path))


def _handing(handed: Handed | None, asker: _Asker) -> contextlib.AbstractContextManager[None]:
    """In the worker: ``handed`` is the cassette its agents open (``handing``), whose answers
    it asks the run for."""
    if handed is None:
        return contextlib.nullcontext()
    from strategies.llm.cassette import handing

    return handing(handed, asker.source("cassette"))


def _deadline(seconds: float | None) -> float | None:
    """The real clock's reading ``seconds`` from now (None: no limit)."""
    return None if seconds is None else _REAL_CLOCK[0]() + seconds


def _read(conn: Connection, end: float | None) -> bytes:
    """One message from a worker (framed as ``multiprocessing.connection`` frames it), read
    as it arrives until ``end`` (``_deadline``; None: no limit): a worker that stops half way
    through one costs the run its wait, never a hang. ``TimeoutError`` past ``end``,
    ``EOFError`` when the worker's end closes, ``OSError`` for one over ``MAX_ANSWER``."""
    with selectors.DefaultSelector() as selector:
        selector.register(conn, selectors.EVENT_READ)

        def take(n: int) -> bytes:
            got = bytearray()
            while len(got) < n:
                left = None if end is None else max(0.0, end - _REAL_CLOCK[0]())
                if not selector.select(left):
                    raise TimeoutError
                chunk = os.read(conn.fileno(), min(n - len(got), 2**20))
                if not chunk:
                    raise EOFError
                got += chunk
            return bytes(got)

        (size,) = _FRAME.unpack(take(_FRAME.size))
        if size == -1:  # the frame of a message over 2 GiB
            (size,) = struct.unpack("!Q", take(8))
        if not 0 <= size <= MAX_ANSWER:
            raise OSError(f"a message of {size:,} bytes, over {MAX_ANSWER:,}")
        return take(size)


def _from_cassette(kept: Kept | None, ask: Ask) -> Entry | None:
    """The answer a worker asks for from the cassette a replay reads, as a player's ``ask``
    serves it, or None."""
    if kept is None or kept.answers is None or ask.source != "cassette":
        return None
    return kept.answers.entry(ask.model, ask.key, ask.k, True)


class _Asks:
    """The run's end of a worker's pipe for recorded model answers (``Ask``), read and written
    only as far as it goes without waiting, while the run waits for the worker (``wait``): a
    worker that stops half way through an ask, sends garbage or never reads its answer costs
    the run at most the time it would wait anyway, never a hang. One answer is out at a time:
    until it is written whole, nothing more is read."""

    def __init__(self, end: socket.socket, answer: Callable[[Ask], Entry | None]) -> None:
        end.setblocking(False)
        self.end = end
        self.answer = answer
        self.inbox = bytearray()
        self.outbox = bytearray()
        self.open = True

    @classmethod
    def pipe(cls, answer: Callable[[Ask], Entry | None]) -> tuple[_Asks, Connection]:
        """The run's end, answering with ``answer``, and the worker's (a ``Connection``)."""
        ours, theirs = socket.socketpair()
        return cls(ours, answer), Connection(theirs.detach())

    def close(self) -> None:
        self.end.close()

    def wait(self, conn: Connection, end: float | None) -> bool:
        """Whether ``conn`` has something to read by ``end`` (``_deadline``; None: no limit),
        the worker's asks answered meanwhile."""
        clock = _REAL_CLOCK[0]
        with selectors.DefaultSelector() as selector:
            selector.register(conn, selectors.EVENT_READ)
            watched = 0
            while True:
                wanted = self._wanted()
                if wanted != watched:
                    if watched:
                        selector.unregister(self.end)
                    if wanted:
                        selector.register(self.end, wanted)
                    watched = wanted
                left = None if end is None else max(0.0, end - clock())
                ready = selector.select(left)
                if any(key.fileobj is conn for key, _ in ready):
                    return True
                if not ready and left == 0.0:
                    return False
                for _, events in ready:
                    self._pump(events)

    def _wanted(self) -> int:
        if not self.open:
            return 0
        return selectors.EVENT_WRITE if self.outbox else selectors.EVENT_READ

    def _pump(self, events: int) -> None:
        """Write what the socket takes of the answer out, or read what has come and answer
        each ask that is whole; a closed or broken pipe is let be (the worker's end is near)."""
        try:
            if events & selectors.EVENT_WRITE:
                del self.outbox[: self.end.send(self.outbox)]
            elif events & selectors.EVENT_READ:
                data = self.end.recv(MAX_ASK)
                if not data:
                    self.open = False
                self.inbox += data
            self._answer_whole()
        except BlockingIOError:
            pass
        except OSError:
            self.open = False

    def _answer_whole(self) -> None:
        while self.open and not self.outbox and len(self.inbox) >= _FRAME.size:
            (size,) = _FRAME.unpack_from(self.inbox)
            if not 0 <= size <= MAX_ASK:
                self.open = False  # not an ask: nothing more is read from this worker
                return
            if len(self.inbox) < _FRAME.size + size:
                return
            raw = bytes(self.inbox[_FRAME.size : _FRAME.size + size])
            del self.inbox[: _FRAME.size + size]
            try:
                ask = _ASK.decode(raw)
            except msgspec.DecodeError:
                self.open = False
                return
            reply = pickle.dumps(self.answer(ask), protocol=pickle.HIGHEST_PROTOCOL)
            self.outbox += _FRAME.pack(len(reply)) + reply
            del self.outbox[: self.end.send(self.outbox)]


class _Asker:
    """In the worker: the run asked for recorded model answers, one ask at a time, by a thread
    of its own. The asking code (a plugin's decision, on the main thread) waits for its answer
    and may be stopped while it waits (the time limit, a Ctrl-C): the thread still reads the
    whole answer, to no one, so the next ask never reads half of one."""

    def __init__(self, conn: Connection) -> None:
        self._asks: queue.SimpleQueue[tuple[Ask, queue.SimpleQueue[Entry | None]]]
        self._asks = queue.SimpleQueue()
        threading.Thread(target=self._ask, args=(conn,), name="arena-asks", daemon=True).start()

    def _ask(self, conn: Connection) -> None:
        encoder = msgspec.msgpack.Encoder()
        with contextlib.suppress(OSError, EOFError):
            while True:
                ask, answer = self._asks.get()
                conn.send_bytes(encoder.encode(ask))
                answer.put(pickle.loads(conn.recv_bytes()))  # the run's bytes, not the plugin's

    def source(self, which: Literal["cassette", "stored"]) -> _Asked:
        return _Asked(self, which)

    def ask(self, ask: Ask) -> Entry | None:
        answer: queue.SimpleQueue[Entry | None] = queue.SimpleQueue()
        self._asks.put((ask, answer))
        return answer.get()


class _Asked:
    """The answers a worker's ``Player`` finds (``strategies.llm.cassette.Source``): each asked
    of the run as it is needed. ``repeat`` is the run's to decide (see ``Ask``)."""

    def __init__(self, asker: _Asker, which: Literal["cassette", "stored"]) -> None:
        self._asker = asker
        self._which: Literal["cassette", "stored"] = which

    def entry(self, model: str, key: str, k: int, repeat: bool) -> Entry | None:
        return self._asker.ask(Ask(self._which, model, key, k))


def _build(plugin: str | bytes) -> Strategy:
    if isinstance(plugin, str):
        return build_strategy(plugin)
    built = pickle.loads(plugin)  # the run's own bytes (a ready object), never the worker's
    if not isinstance(built, Strategy):
        raise TypeError(f"{type(built).__name__} is not a Strategy")
    return built


def _answer(decision: Decision, note: str | None) -> Answer:
    return Answer(
        bets=list(decision.bets),
        sells=list(decision.sells),
        reasoning=decision.reasoning,
        trace=decision.trace,
        note=note,
    )


# -- a spec checked before a run, where its code runs --------------------------------------------


def check_spec(spec: str, isolate: bool) -> None:
    """Fail fast on a spec that does not build, before any cohort starts: with ``isolate`` in
    a worker confined as the run's will be, so the plugin's import and constructor never run
    in this process; else here, under the sandbox's guards and a time limit of
    ``SETUP_SECONDS`` (an ``os._exit`` or an endless loop at import is then an error, not the
    end or the hang of the command). ``StrategyError`` in one line if it fails."""
    if isolate:
        error = _probe(spec)
    else:
        sandbox = Sandbox(SETUP_SECONDS)
        with sandbox.guarded():
            error = sandbox.call(build_strategy, spec)[1]
    if error is not None:
        raise StrategyError(error.splitlines()[0].removeprefix("StrategyError: "))


_SAID: msgspec.json.Decoder[str | None] = msgspec.json.Decoder(str | None)
"""A probe's outcome: None, or why the spec does not build."""


def _probe(spec: str) -> str | None:
    """What building ``spec`` in an isolated worker says: None, or its error."""
    context = _context()
    scratch = scratch_folder()
    conn, child = context.Pipe()
    watched, alive = context.Pipe(duplex=False)
    limits = (SETUP_SECONDS, SETUP_SECONDS, oslimits.plan(), oslimits.plugin_folders(spec), scratch)
    kept = _cassette()[0]
    handed = None if kept is None else kept.handed
    asks, theirs = _Asks.pipe(lambda ask: _from_cassette(kept, ask))
    process = context.Process(
        target=_try, args=(child, watched, spec, limits, handed, theirs), daemon=False
    )
    process.start()
    child.close()
    watched.close()
    theirs.close()
    end = _deadline(SETUP_SECONDS + GRACE)
    try:
        if not asks.wait(conn, end):
            raise TimeoutError
        return _SAID.decode(_read(conn, end))  # never a pickle: the plugin's bytes
    except TimeoutError:
        return f"{spec}: it took longer than {SETUP_SECONDS:g} s to load"
    except (EOFError, OSError):
        process.join(5)
        return f"{spec}: its worker process ended while loading it (exit code {process.exitcode})"
    except msgspec.DecodeError:
        return f"{spec}: its worker sent what is not a load's outcome"
    finally:
        conn.close()
        alive.close()
        asks.close()
        process.kill()
        process.join()
        shutil.rmtree(scratch, ignore_errors=True)


def _try(
    conn: Connection,
    alive: Connection,
    spec: str,
    limits: Limits,
    handed: Handed | None,
    asks: Connection,
) -> None:
    """The probe's worker: as ``serve`` starts, then builds the plugin once (handed the
    cassette, as ``serve`` is) and says how."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    oslimits.own_session()
    seconds, _, confinement, folders, scratch = limits
    refused = _confine(confinement, folders, scratch)  # before the threads, as in ``serve``
    _end_with(alive)
    if refused is not None:
        conn.send_bytes(msgspec.json.encode(refused))
        return
    sandbox = Sandbox(seconds)
    with sandbox.guarded(), _handing(handed, _Asker(asks)):
        conn.send_bytes(msgspec.json.encode(sandbox.call(build_strategy, spec)[1]))


def isolation_notice(isolate: bool) -> str | None:
    """One line saying what ``--isolate`` cannot enforce on this machine (the same words its
    cohorts' openings record), or None when it enforces everything or is not asked for."""
    confinement = oslimits.plan()
    if not isolate or confinement.complete:
        return None
    return f"--isolate on this machine: {confinement.summary()}"
