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
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker
from typing import Any


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C held back while the block runs, then delivered. Nothing is held where there are
    no signal masks (Windows)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


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
