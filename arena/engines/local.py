"""``--engine local``: cohorts replayed in a pool of spawned worker processes on this machine.

Each worker loads the tape once (at its start, from the path) and keeps it for every cohort it
runs; each cohort arrives with its plan, made once by the driver. Workers start with one BLAS
thread each (unless the environment already says how many): the workers already fill the cores,
and a BLAS pool per worker on top of them oversubscribes the machine. Training the diffusion
forecaster at forecastbench's sizes in two workers on two cores took 19.5 s each with OpenBLAS's
default threads and 3.5 s with one.

When the driver watches the run (a progress display on a terminal), each worker sends its
cohorts' decisions (``arena.run.pace.DecisionSeen``, in batches) down one pipe that a thread of
the driver reads, telling the driver's watcher of each as it arrives (``Decisions``). A send is
a synchronous write, so every decision of a cohort has reached the pipe before its recording
is sent back, and once every cohort is back the thread reads up to a last message of the
driver's own (``END``) and stops, whoever else may still hold the pipe; nobody watching, there
is no pipe and no thread.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from multiprocessing.reduction import ForkingPickler
from multiprocessing.synchronize import Lock
from pathlib import Path
from typing import Any

from arena.boundary.children import interrupts_held, tracker_running
from arena.boundary.oslimits import die_with_parent
from arena.boundary.sandbox import RunInterrupted
from arena.engines.base import CohortWork, EngineError, Finished
from arena.engines.recorded import RecordedCohort, record_cohort
from arena.run.cohort import CohortConfig
from arena.run.pace import DecisionSeen, Watcher
from arena.run.plan import CohortPlan, PlannedCohort
from arena.run.settings import RunSettings
from replays.bookfile import load_books
from replays.books import Books
from replays.tape import Tape
from replays.tapefile import load_tape

_TAPE: Tape | None = None
"""The tape of a local worker process, loaded once by the pool's initializer."""
_BOOKS: Books | None = None
"""Its order books, if the run has any, loaded once beside it."""
_SENDER: Sender | None = None
"""Where it sends its cohorts' decisions, when the driver watches (``_start_watched_worker``)."""


STOP = signal.SIGTERM
"""How the driver passes a Ctrl-C on to its workers (``_close``). SIGTERM, since Python 3.11's
pool sends it too, to every worker left, as soon as one ends: it must stop a worker the same
way, not kill it in the middle of committing its cut decision."""

STOP_WAIT = 0.5
"""Seconds the driver gives its workers, told to stop, to commit the decisions they cut and
end, before it kills those left: a cut and its commit take milliseconds, and a Ctrl-C must end
the run within a second."""

STOPPED = 130
"""A worker's exit status once it has stopped (as a shell reports a Ctrl-C's end)."""


def _stopped(signum: int, frame: object) -> None:
    """A worker told to stop outside a cohort's guarded run (between cohorts, starting one, or
    ending one) holds nothing unsaved: every decision that asked a model is in its journal
    (``arena.engines.recorded``). It ends at once and quietly (no traceback from the pool's
    loop); inside the guarded run the sandbox cuts the running decision first."""
    os._exit(STOPPED)


def _start_worker(parent: int, path: str, books: str | None) -> None:
    """A pool worker's start: Ctrl-C is the driver's to handle (the worker began with it
    blocked, see ``arena.boundary.children``; ignored now, one pressed meanwhile is dropped) and
    passed on as ``STOP``, the worker dies with the driver, and it loads the tape once."""
    global _TAPE, _BOOKS
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(STOP, _stopped)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    die_with_parent()
    if os.getppid() != parent:  # the driver died before the line above took effect
        os._exit(1)
    _TAPE = load_tape(path)
    _BOOKS = None if books is None else load_books(books)


def _start_watched_worker(sender: Sender, parent: int, path: str, books: str | None) -> None:
    """``_start_worker``, and the decisions of this worker's cohorts sent to the driver. The
    pipe's end arrives inheritable (spawn passes it so), and a plugin's background child (a
    model server started with ``os.system``) would keep it open, and write to it, long after
    the run: it is this process's alone."""
    global _SENDER
    _start_worker(parent, path, books)
    os.set_inheritable(sender.writer.fileno(), False)
    _SENDER = sender


def _local_worker(settings: RunSettings, plan: CohortPlan) -> RecordedCohort:
    """One cohort; told to stop (``STOP``) while it runs, the worker ends once the decision
    it cut is committed, rather than take the pool's next cohort."""
    assert _TAPE is not None, "the pool's initializer loads the tape"
    try:
        return record_cohort(_TAPE, settings, plan, _BOOKS, _SENDER, stop=STOP)
    except RunInterrupted:
        os._exit(STOPPED)


@dataclass(frozen=True)
class Sender:
    """A worker's end of the pipe to the driver's ``Decisions``: a batch of decisions a message.
    The lock, shared by every worker, keeps each message whole (a pipe write of more than 4 KiB
    is not atomic, and a batch may be longer)."""

    writer: Connection
    lock: Lock

    def __call__(self, batch: list[DecisionSeen]) -> None:
        with self.lock:
            self.writer.send(batch)


END = b"arena: no more decisions"
"""What the driver writes down the pipe once the workers are done with it. Every decision of a
cohort is in the pipe before its recording comes back, so once every cohort is back, every
decision is before this message, and the reading thread stops at it. The end of the pipe alone
is not enough: it comes only when every process holding the writing end has closed it, and a
plugin's background child may hold it for ever (``_start_watched_worker`` keeps it from those
it can)."""


class Decisions:
    """The driver's end: a thread reads each batch the workers send and tells ``watch`` of
    every decision in it, in order (from that thread, one call at a time).

    The thread reads until ``close`` writes ``END`` or the pipe ends, whatever it is told or
    fails to read, so no worker ever waits on a full pipe (holding the lock every worker needs
    to send) while the driver lives: a message that is not a batch of decisions is dropped,
    and a ``watch`` that raises is told nothing more, its error set on ``failed``, which ends
    the run at once (``LocalEngine.run``)."""

    def __init__(self, context: SpawnContext, watch: Watcher) -> None:
        reader, writer = context.Pipe(duplex=False)
        self.sender = Sender(writer, context.Lock())
        self.failed: Future[None] = Future()
        self._watch = watch
        self._told = True
        self._thread = threading.Thread(
            target=self._read, args=(reader,), name="arena-decisions", daemon=True
        )
        self._thread.start()

    def _read(self, reader: Connection) -> None:
        with reader:
            while True:
                try:
                    message = reader.recv_bytes()
                except (EOFError, OSError):  # every writer closed (a killed one mid-message too)
                    return
                if message == END:
                    return
                for seen in _decoded(message):
                    if not self._told or self.failed.done():
                        break
                    try:
                        self._watch(seen)
                    except Exception as exc:
                        self.failed.set_exception(exc)

    def close(self, finished: bool) -> None:
        """Close this process's end for writing, once the workers have ended. ``finished``
        (every cohort back): write ``END`` first, wait for the thread to tell every decision
        before it, and raise what ``watch`` raised. Otherwise (an error, a Ctrl-C, a ``watch``
        that raised) tell nothing more and wait for nothing: the thread, a daemon, ends with
        the pipe (a killed worker may have left half a message, which ``END`` would only
        complete)."""
        self._told = finished
        with self.sender.writer as writer:
            if finished and self._thread.is_alive():  # it drains the pipe: the write goes in
                writer.send_bytes(END)
        if finished:
            self._thread.join()
            if self.failed.done():
                self.failed.result()


def _decoded(message: bytes) -> list[DecisionSeen]:
    """A batch of decisions, or none where ``message`` is not one."""
    try:
        batch = ForkingPickler.loads(message)
    except Exception:
        return []
    if isinstance(batch, list) and all(isinstance(seen, DecisionSeen) for seen in batch):
        return batch
    return []


@dataclass
class LocalEngine:
    """``jobs`` spawned worker processes on this machine. With one job (or one cohort)
    ``arena.engines.driver`` runs the cohort in its own process instead, writing the log directly:
    nothing to gain from a worker, and a large cohort's events are never all held at once."""

    jobs: int = 1

    @property
    def in_process(self) -> bool:
        return self.jobs <= 1

    def run(
        self, work: CohortWork, cohorts: Sequence[PlannedCohort], watch: Watcher | None = None
    ) -> Iterator[Finished]:
        """The cohorts in a pool of spawned workers. Left early (an error, a Ctrl-C once or
        twice, or a ``watch`` that raised), the workers are told to stop, each committing the
        decision it cut to its journal, and killed if they have not ended within
        ``STOP_WAIT`` (``_close``): their cohorts reach the log only through the driver, so
        the log stays a resumable prefix. ``watch`` is told of each decision, from a thread of
        this process (``Decisions``)."""
        context = multiprocessing.get_context("spawn")
        pool: ProcessPoolExecutor | None = None
        decisions: Decisions | None = None
        done = False
        try:
            tracker_running()
            with one_blas_thread_per_worker(), interrupts_held():
                start: Callable[[int, str, str | None], None] = _start_worker
                if watch is not None:
                    decisions = Decisions(context, watch)
                    start = partial(_start_watched_worker, decisions.sender)
                pool = ProcessPoolExecutor(
                    max_workers=min(self.jobs, len(cohorts)),
                    mp_context=context,
                    initializer=start,
                    initargs=(os.getpid(), str(work.source.path), _path(work.source.books_path)),
                )
                futures: dict[Future[RecordedCohort], int] = {
                    pool.submit(_local_worker, work.settings(cohort), cohort.plan): k
                    for k, cohort in enumerate(cohorts)
                }  # every worker is spawned here, with Ctrl-C blocked
            failed = None if decisions is None else decisions.failed
            for future in _completed(futures, failed):
                k = futures[future]
                yield k, partial(_recording, future, cohorts[k].config)
            done = True
        finally:
            if pool is not None:
                with interrupts_held():
                    _close(pool, done)
            if decisions is not None:
                decisions.close(done)


def _completed(
    futures: Collection[Future[RecordedCohort]], failed: Future[None] | None
) -> Iterator[Future[RecordedCohort]]:
    """Each of ``futures`` as it completes (``as_completed``), or the error of ``failed`` as
    soon as it has one: a watcher that raised ends the run then, not once every cohort is
    done."""
    pending = set(futures)
    stop: set[Future[Any]] = set() if failed is None else {failed}
    while pending:
        ready, _ = wait(pending | stop, return_when=FIRST_COMPLETED)
        if failed is not None and failed.done():
            failed.result()
        for future in ready:
            pending.discard(future)
            yield future


def _close(pool: ProcessPoolExecutor, done: bool) -> None:
    """The pool shut down, its threads ended (none is left for the interpreter's exit to wait
    on, where a second Ctrl-C printed a traceback). When a cohort is still out its workers are
    told to stop (``STOP``: each cuts its running decision and commits it, calls and all, as a
    Ctrl-C does in process) and given ``STOP_WAIT`` to end; those left are killed, and nothing
    is cancelled (Python 3.11's pool reports a cancelled task of a broken pool with a
    traceback). Killed at once, as before, a worker lost the call it had out and, with it, its
    answer, which the resumed run asked again. A worker killed while it sent its result leaves
    half a message in the results pipe, which the pool's thread would wait on for ever (5 hangs
    in 30 Ctrl-Cs): this process's own end for writing to it is closed, so with the workers
    dead the read ends (EOF), the pool sees itself broken and its thread stops."""
    if not done:
        processes = list((getattr(pool, "_processes", None) or {}).values())
        for process in processes:
            with contextlib.suppress(OSError):  # ended meanwhile
                os.kill(process.pid, STOP)
        deadline = time.monotonic() + STOP_WAIT
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in processes:
            if process.is_alive():
                process.kill()
        for process in processes:
            process.join(5)
        writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
        if writer is not None:
            writer.close()
    pool.shutdown(wait=True)


def _path(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _recording(future: Future[RecordedCohort], config: CohortConfig) -> RecordedCohort:
    """A worker's recording; a pool whose process died (killed by a signal: a plugin's native
    code crashing Python, or the kernel out of memory) as one line, not the pool's traceback."""
    try:
        return future.result()
    except BrokenProcessPool:
        raise EngineError(
            f"a worker process died abruptly before the cohort from {config.start:%Y-%m-%d} "
            "finished (a plugin's native code crashed Python, or memory ran out); the cohorts "
            "before it are in the log and the same command resumes there; --isolate runs each "
            "agent in a process of its own, where a crash is that agent's recorded error"
        ) from None


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def one_blas_thread_per_worker() -> Iterator[None]:
    """Spawned workers inherit the environment as it is when they start, and BLAS reads it
    once, when numpy loads; so set it around the pool's life and put it back after."""
    unset = [name for name in BLAS_THREAD_VARIABLES if name not in os.environ]
    for name in unset:
        os.environ[name] = "1"
    try:
        yield
    finally:
        for name in unset:
            os.environ.pop(name, None)
