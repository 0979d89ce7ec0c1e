"""A replay stepped while it runs: the runner in a child process, moved on by request.

``arena step --tape …`` must not run strategies in the process that draws the screen: the
runner freezes the clock (freezegun patches ``time`` for the whole process) and guards the
process against plugins (``arena.boundary.sandbox.Sandbox``), neither of which a terminal UI
survives. So the replay runs in a child process of its own, exactly as ``arena replay`` runs a
cohort (``CohortRunner.steps`` into the same store, every step committed before it is reported),
and waits on a pipe. The parent asks it to "advance until" a kind of step (the next decision,
resolution or the close); the child walks the runner's steps to the first of those kinds and
sends that ``Step`` as the runner yielded it (its kind, instant and the stream's version
after it). The parent never sees the runner's state: it reads the log up to that version, and
the screen is a projection of what it read.

Quitting between steps leaves the log as an interrupted ``arena replay`` would: every step
reported has been committed, so ``arena replay`` with the same options resumes it (checking
the stored prefix event by event) and ends with the same digest as an uninterrupted run.

A child that dies (killed, out of memory, a plugin that ended the process in a way the
sandbox could not stop) closes its end of the pipe; the parent reports that as a one-line
``LiveError`` instead of waiting for an answer that will never come.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.errors import ArenaError
from arena.run.cohort import CohortConfig
from arena.run.settings import RunSettings
from ledger.events import Event

if TYPE_CHECKING:  # unpickled from the child: the runner's module is imported on the first step
    from arena.run.runner import Step

KINDS = ("open", "decision", "mark", "resolution", "stop", "close")


class LiveError(ArenaError):
    """The live replay cannot go on: it failed to start, stopped with an error, or died."""


@dataclass(frozen=True)
class Request:
    """What the child is asked to do: walk to the first step whose kind is in ``until``
    (``()`` stops the child)."""

    until: tuple[str, ...]


def _serve(
    conn: Connection,
    tape_path: str,
    settings: RunSettings,
    db: str,
    output: str | None,
    books_path: str | None = None,
) -> None:
    """The child: build the runner (a bad tape or agent is the first answer), then walk its
    steps on request. Any error ends the child after it has been sent as a line. With
    ``output``, what the plugins print goes to that file instead of the terminal, where it
    would scribble over the screen."""
    if output is not None:
        _divert(output)
    from ledger.anchor import write_head
    from ledger.store import EventStore
    from replays.bookfile import load_books
    from replays.tapefile import load_tape

    try:
        from arena.run.runner import CohortRunner

        tape = load_tape(tape_path)
        books = load_books(books_path) if books_path is not None else None
        runner = CohortRunner(tape, settings, books=books)
        with EventStore.open(db) as store:
            steps = runner.steps(store, flush_each_step=True)
            conn.send(("ready", runner.cohort, list(settings.cohort.agents)))
            _walk(conn, steps)
            write_head(store)  # as replay_cohorts leaves it, closed or cut short
    except (KeyboardInterrupt, BrokenPipeError, EOFError):
        return
    except Exception as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        with contextlib.suppress(BrokenPipeError, OSError):
            conn.send(("error", message))


def _divert(output: str) -> None:
    """Point this process's stdout and stderr (the descriptors, so C code's writes too) at
    ``output``, appended to."""
    import os
    import sys

    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
        os.dup2(fd, stream.fileno())
    os.close(fd)


def _walk(conn: Connection, steps: Iterator[Step]) -> None:
    """Answer each request with the first step of the kinds asked for (or the close), the
    ``Step`` itself; the runner has committed every event up to its version."""
    while True:
        request: Request = conn.recv()
        if not request.until:
            return
        for step in steps:
            if step.kind in request.until or step.kind == "close":
                conn.send(("step", step))
                break
        else:
            return
        if step.kind == "close":
            for _ in steps:  # let the runner finish (its closing snapshot) before the head
                pass
            conn.recv()  # the parent's goodbye
            return


class LiveRun:
    """The parent's handle on the child: start it, move it on, stop it."""

    def __init__(
        self,
        tape_path: Path,
        settings: RunSettings | CohortConfig,
        db: Path,
        output: Path | None = None,
        books_path: Path | None = None,
    ) -> None:
        """Start the replay's process; ``output`` takes what its plugins print (the screen
        owns the terminal); ``books_path`` the order books its orders meet, if any."""
        if isinstance(settings, CohortConfig):
            settings = RunSettings(cohort=settings)
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve,
            args=(
                child,
                str(tape_path),
                settings,
                str(db),
                str(output) if output else None,
                str(books_path) if books_path else None,
            ),
            name="arena-step-replay",
            # not a daemon: a daemonic process may start none, and --isolate runs each agent
            # in a worker of the replay's process ("daemonic processes are not allowed to
            # have children"). Stopped at exit instead, before multiprocessing would wait
            # for it (atexit runs the later registration first); a parent that dies closes
            # the pipe, and the child ends on that.
            daemon=False,
        )
        self._process.start()
        atexit.register(self.stop)
        child.close()  # the child's end lives in the child alone, so its death closes the pipe
        self.db = db
        self.step: Step | None = None
        """The last step the replay reported (None before the first)."""
        _, self.cohort, self.agents = self._answer("ready")

    @property
    def version(self) -> int:
        """The stream's version after the last step reported: every event up to it is in
        the log."""
        return self.step.version if self.step is not None else 0

    @property
    def closed(self) -> bool:
        return self.step is not None and self.step.kind == "close"

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def advance(self, *until: str) -> Step:
        """Run the replay to the next step of one of these kinds (or its close) and return
        that step (after the close, the close again); LiveError if it stopped with an error
        or died."""
        if self.step is not None and self.step.kind == "close":
            return self.step
        unknown = set(until) - set(KINDS)
        if unknown or not until:
            raise ValueError(f"no step kind {sorted(unknown)}; kinds are {', '.join(KINDS)}")
        self._send(Request(tuple(until)))
        step: Step = self._answer("step")[1]
        self.step = step
        return step

    def stop(self) -> None:
        """End the child between steps (the log holds every reported step) and wait for it."""
        atexit.unregister(self.stop)
        if self._process.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                self._conn.send(Request(()))
            self._process.join(timeout=30)
        if self._process.is_alive():  # a plugin that will not let go
            self._process.kill()
            self._process.join()
        self._conn.close()

    def kill(self) -> None:
        """End the child now, in the middle of a step: what it committed stays, a half-written
        batch never does (each append is one transaction)."""
        if self._process.is_alive():
            self._process.kill()

    def _send(self, request: Request) -> None:
        try:
            self._conn.send(request)
        except (BrokenPipeError, OSError):
            raise LiveError(self._died()) from None

    def _answer(self, expected: str) -> tuple[Any, ...]:
        try:
            answer: tuple[Any, ...] = self._conn.recv()
        except (EOFError, OSError):
            raise LiveError(self._died()) from None
        if answer[0] == "error":
            self._process.join(timeout=30)
            raise LiveError(answer[1])
        assert answer[0] == expected, answer
        return answer

    def _died(self) -> str:
        self._process.join(timeout=5)
        code = self._process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return (
            f"the replay process died ({how}) after version {self.version}; "
            "the log holds every step shown, and 'arena replay' with the same options resumes it"
        )


class LogTail:
    """The cohort's stream read forward: each call returns the events after the last one read,
    up to a version, with their links checked; the place is kept (seq and version), so a step
    costs its own events, not the log's."""

    def __init__(self, db: Path, cohort: str) -> None:
        self.db = db
        self.cohort = cohort
        self.version = 0
        self._seq = 0

    def read(self, upto: int) -> list[Event]:
        from ledger.chain import check_links
        from ledger.store import EventStore

        if upto <= self.version:
            return []
        with EventStore.open(self.db, readonly=True) as store:
            check_links(store, self.cohort, after_version=self.version)
            out: list[Event] = []
            for seq, _, version, event in store.read_with_seq(self.cohort, self._seq):
                if version > upto:
                    break
                out.append(event)
                self._seq, self.version = seq, version
            return out
