"""Ctrl-C held while children start: held in fact, even where another thread takes the signal."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from arena.boundary.children import interrupts_held


@pytest.fixture
def open_thread() -> Iterator[None]:
    """A thread that does not block SIGINT, as OpenBLAS's do once numpy has loaded: the kernel
    hands it a SIGINT sent to the process while the main thread blocks the signal."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    yield
    stop.set()
    thread.join()


@pytest.fixture
def caught() -> Iterator[int]:
    """A pipe that the interpreter's C-level handler writes each signal's number to as it
    catches it, in whichever thread: its read end, to wait on until a SIGINT has been taken."""
    reader, writer = os.pipe()
    os.set_blocking(writer, False)
    previous = signal.set_wakeup_fd(writer)
    yield reader
    signal.set_wakeup_fd(previous)
    os.close(reader)
    os.close(writer)


def test_a_ctrl_c_another_thread_takes_is_held_until_the_block_ends(
    open_thread: None, caught: int
) -> None:
    """Before the fix the main thread's mask alone held nothing here: Python runs its handler in
    the main thread whichever thread took the signal, so KeyboardInterrupt struck inside the
    block (in a pool's start, between a worker's spawn and the write of its start-up data)."""
    ran = []
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)  # to the process, as the terminal sends it
        assert os.read(caught, 1) == bytes([signal.SIGINT])  # taken, by the other thread
        for _ in range(1000):  # the main thread passes points where Python runs handlers
            pass
        ran.append("the block, to its end")
    assert ran == ["the block, to its end"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nothing_is_delivered_when_nothing_was_pressed(open_thread: None) -> None:
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, ())
