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
process sends would run its code here), and it is checked again as an in-process decision is.
In the worker the plugin runs under the run's ``Sandbox`` and ``InProcess`` as it would here, so
its decision, its error text and the model calls of a decision cut short by the time limit
(``strategies.llm.calls``) are what an in-process run records. The driver also enforces the
limit from outside, a little later (``GRACE``): a worker that does not answer by then (its
plugin swallowed the limit) is first asked, on a pipe of its own that a thread of the worker
answers, for the decision cut short with the model calls it made so far (as ``InProcess``
records a timed-out decision), then killed and restarted (and set up again); a worker that dies
is restarted. Either way the decision is a HOLD with the reason recorded, and its calls are kept
whenever that thread answered (``CALLS_WAIT``).

A resumed run's stored model calls (``strategies.llm.resume``) go to each agent's worker with its
setup, and the worker serves them again as the runner does in process: a resumed isolated run
asks the model nothing its log already holds. So does a cassette (``ARENA_LLM_MODE=replay``),
which the worker may not open: the run reads it and hands the worker its answers with the
setup. A recording (``record``) is written here too, from the calls each decision brings back
(``strategies.llm.cassette.Handed``).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import pickle
import pkgutil
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import freezegun
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
from strategies.llm.resume import answering
from strategies.loader import build_strategy

if TYPE_CHECKING:
    from strategies.llm.cassette import CassetteFile, Handed

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


class Isolated:
    """One agent's code in its own worker process; the same interface as ``InProcess``.

    ``plugin``: the agent's spec (imported and built in the worker), or a ready object
    (benchmarks and tests), sent pickled and unpickled in the worker, under its sandbox.
    ``confinement``: the OS sandbox every worker of the run applies before any plugin code.
    ``stored``: the agent's model calls of a resumed run's stored prefix (``(stream,
    ModelCalled)`` rows, in log order), sent with the setup: its worker serves them again
    (``strategies.llm.resume.answering``) instead of asking the model what the log holds.
    The connection's cassette, if any, is handed over with them (``handed_cassette``)."""

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
        self.stored = list(stored)
        self.cassette, self.recording = _cassette()
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
        limits = (self.seconds, self.setup_seconds, self.confinement, self.folders, self.scratch)
        ids, meta, rules = self.facts
        # no market's facts yet: each decision sends those listed since (a rolling cohort's
        # later markets must not be in the worker before they list), and their points since
        self.shown = 0
        self.process = context.Process(
            target=serve,
            args=(child, watched, self.plugin, (ids[:0], meta[:0], rules), limits, side),
            daemon=False,
        )
        self.process.start()
        child.close()
        watched.close()
        side.close()
        self.since = np.zeros(0, dtype=np.int64)

    @property
    def setup_seconds(self) -> float:
        """The worker's limit on importing and building the plugin (0: none)."""
        return max(self.seconds, SETUP_SECONDS) if self.seconds > 0 else 0.0

    def close(self) -> None:
        self.conn.close()
        self.alive.close()
        self.side.close()
        self.process.kill()
        self.process.join()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _restart(self) -> None:
        self.close()
        self._start()

    def _exchange(
        self, message: tuple[Any, ...], seconds: float
    ) -> tuple[Answer | None, str | None]:
        """Send, wait at most ``seconds`` (0: no limit) and ``GRACE`` more, read the answer; on
        a timeout or a dead worker, restart it and say what happened."""
        try:
            self.conn.send(message)
            try:
                ready = self.conn.poll(seconds + GRACE if seconds > 0 else None)
            except RunInterrupted as exc:
                if message[0] == "decide":
                    exc.recorded = self._cut_short()
                raise
            if not ready:
                what = "decision" if message[0] == "decide" else "setup"
                error = (
                    f"DecisionTimeout: {what} took longer than {seconds:g} s "
                    "(its worker was stopped and restarted)"
                )
                if message[0] == "decide":
                    self.cut = self._calls_so_far(error)
                self._restart()
                return None, error
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

    def _calls_so_far(self, error: str) -> tuple[Decision, str | None] | None:
        """The decision a worker that will not answer is about to be killed in, cut short as
        in process with the model calls it made so far (``CallLog``: those still out kept as
        aborted for ``error``, or the last one marked), if its call-log thread answers within
        ``CALLS_WAIT``; None if it does not or the decision made no call."""
        try:
            self.side.send(error)
            if not self.side.poll(CALLS_WAIT):
                return None
            answer = _ANSWER.decode(self.side.recv_bytes(MAX_ANSWER))
        except (OSError, EOFError, msgspec.DecodeError):
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
            if not self.conn.poll(GRACE):
                return None
            answer = _ANSWER.decode(self.conn.recv_bytes(MAX_ANSWER))
        except (OSError, EOFError, msgspec.DecodeError):
            return None
        if answer.error is not None or answer.stopped is not None:
            return None
        return self._kept(_recheck(answer))

    def _kept(self, outcome: tuple[Decision, str | None]) -> tuple[Decision, str | None]:
        """``outcome``, its model calls appended to the cassette first when the run records
        one (the worker can write no file but its scratch folder's)."""
        trace = outcome[0].trace
        if self.recording is not None and trace is not None:
            self.recording.append_calls(trace.calls)
        return outcome

    def _setup(self) -> str | None:
        wait = self.setup_seconds + self.seconds if self.seconds > 0 else 0.0
        answer, error = self._exchange(("setup", self.context, self.stored, self.cassette), wait)
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
    side: Connection | None = None,
) -> None:
    """The worker: leave the run's session, confine itself, then set up and decide on each
    view sent, until the pipe closes. On ``side`` a thread answers the driver's last request
    before it kills the worker: the running decision cut short, with its model calls.

    Ctrl-C reaches the run's process group, which the worker has left; the parent decides what
    it means. The time limit is the worker's own (as in process) and the parent's (past it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    oslimits.own_session()
    seconds, build_seconds, confinement, folders, scratch = limits
    refused = _confine(confinement, folders, scratch)  # before any thread: Landlock holds
    _end_with(alive)  # only the thread that asks for it and those started after
    if side is not None:
        _answers_for_calls(side)
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
    serving = contextlib.ExitStack()  # a resumed run's stored answers and the cassette, for good
    with sandbox.guarded(), serving:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                return
            if message[0] == "setup":
                context: Context = message[1]
                if not served:  # before any plugin code, so none can see them
                    served = True
                    serving.enter_context(answering(message[2]))
                    serving.enter_context(_handing(message[3]))
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


def _cassette() -> tuple[Handed | None, CassetteFile | None]:
    """The cassette a worker is handed (``strategies.llm.cassette.handed_cassette``), and the
    file this process appends each decision's calls to when the run records one. The
    cassette machinery (httpx: a seventh of a second) is imported only when the environment
    names a cassette, as every mode but ``live`` must."""
    if not os.environ.get("ARENA_LLM_CASSETTE"):
        return None, None
    from strategies.llm.cassette import CassetteFile, handed_cassette

    handed = handed_cassette()
    if handed is None or handed.mode != "record" or handed.error is not None:
        return handed, None
    return handed, CassetteFile(Path(handed.path))


def _handing(handed: Handed | None) -> contextlib.AbstractContextManager[None]:
    """In the worker: ``handed`` is the cassette its agents open (``handing``)."""
    if handed is None:
        return contextlib.nullcontext()
    from strategies.llm.cassette import handing

    return handing(handed)


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


def _probe(spec: str) -> str | None:
    """What building ``spec`` in an isolated worker says: None, or its error."""
    context = _context()
    scratch = scratch_folder()
    conn, child = context.Pipe()
    watched, alive = context.Pipe(duplex=False)
    limits = (SETUP_SECONDS, SETUP_SECONDS, oslimits.plan(), oslimits.plugin_folders(spec), scratch)
    handed = _cassette()[0]
    process = context.Process(
        target=_try, args=(child, watched, spec, limits, handed), daemon=False
    )
    process.start()
    child.close()
    watched.close()
    try:
        if not conn.poll(SETUP_SECONDS + GRACE):
            return f"{spec}: it took longer than {SETUP_SECONDS:g} s to load"
        error: str | None = conn.recv()
        return error
    except (EOFError, OSError):
        process.join(5)
        return f"{spec}: its worker process ended while loading it (exit code {process.exitcode})"
    finally:
        conn.close()
        alive.close()
        process.kill()
        process.join()
        shutil.rmtree(scratch, ignore_errors=True)


def _try(
    conn: Connection, alive: Connection, spec: str, limits: Limits, handed: Handed | None
) -> None:
    """The probe's worker: as ``serve`` starts, then builds the plugin once (handed the
    cassette, as ``serve`` is) and says how."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    oslimits.own_session()
    seconds, _, confinement, folders, scratch = limits
    refused = _confine(confinement, folders, scratch)  # before the thread, as in ``serve``
    _end_with(alive)
    if refused is not None:
        conn.send(refused)
        return
    sandbox = Sandbox(seconds)
    with sandbox.guarded(), _handing(handed):
        conn.send(sandbox.call(build_strategy, spec)[1])


def isolation_notice(isolate: bool) -> str | None:
    """One line saying what ``--isolate`` cannot enforce on this machine (the same words its
    cohorts' openings record), or None when it enforces everything or is not asked for."""
    confinement = oslimits.plan()
    if not isolate or confinement.complete:
        return None
    return f"--isolate on this machine: {confinement.summary()}"
