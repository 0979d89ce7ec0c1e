"""Child processes started so that a Ctrl-C never catches one half-started.

A Ctrl-C at the terminal reaches every process of the run's process group, and a Python child
still importing its modules (a spawned pool worker, the forkserver preloading the plugin
boundary) dies of it with a traceback of its own. So children are started with SIGINT blocked
(a child keeps its parent's signal mask) and each ignores it once it runs; the run's own
process gets the Ctrl-C when the block ends. One catch: multiprocessing's resource tracker
unblocks SIGINT as it starts (bpo-33613), so it is started first.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker
from types import FrameType
from typing import Any


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C held back while the block runs, then delivered (once, however many presses).

    Two holds, since either alone leaks. The calling thread's signal mask blocks SIGINT, so
    every child started in the block inherits it blocked. But a mask is one thread's: the
    kernel hands the process's SIGINT to any thread that does not block it (OpenBLAS's, started
    when numpy loads, blocks none), and Python then runs its handler in the main thread all the
    same. With the mask alone, KeyboardInterrupt struck in the middle of spawning a pool worker,
    after its process started and before its start-up data was written: the worker read a closed
    pipe and printed multiprocessing's EOFError trace (10 of 30 Ctrl-Cs), and, not yet among
    the pool's processes, was never killed. So where Ctrl-C raises KeyboardInterrupt (Python's
    own handler, in the main thread) a handler that only notes a press stands in for it until
    the block ends. Another handler is left as it is, with the mask alone: one set on purpose
    (ignored in a pool worker; the sandbox's own while a run is guarded, where ``signal.signal``
    is refused). Nothing is masked where there are no signal masks (Windows)."""
    pressed = False

    def note(signum: int, frame: FrameType | None) -> None:
        nonlocal pressed
        pressed = True

    noting = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if noting:
        signal.signal(signal.SIGINT, note)
    masking = hasattr(signal, "pthread_sigmask")
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if masking else set()
    try:
        yield
    finally:
        if masking:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
        if noting:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            if pressed:
                raise KeyboardInterrupt  # what Python's handler would have raised then


def tracker_running() -> None:
    """multiprocessing's resource tracker started, before any Ctrl-C is held (see above)."""
    if hasattr(resource_tracker, "ensure_running"):  # POSIX only
        resource_tracker.ensure_running()


def forkserver_running(context: Any) -> None:
    """The forkserver of ``context`` started with Ctrl-C held (it ignores SIGINT only once
    its preloading is done); nothing for another start method."""
    if context.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    tracker_running()
    with interrupts_held():
        forkserver.ensure_running()
